// What the rooms' tests launch and read back: a launch as a wrapper sees it, and the summary's counts by rule.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "kernels/launch_view.h"

namespace tmaguard {

//! A one-block launch of `f` with these parameters, as a launch wrapper sees it.
inline LaunchView launch_of(CUfunction f, void** params) {
  LaunchView v;
  v.f = f;
  v.geom = {1, 1, 1, 128, 1, 1};
  v.kernel_params = params;
  return v;
}

//! How many findings of `rule` one of a summary's tables (violations_by_rule, warnings_by_rule) counts.
inline uint64_t count_of(const std::map<std::string, uint64_t>& by_rule, const std::string& rule) {
  const auto it = by_rule.find(rule);
  return it == by_rule.end() ? 0 : it->second;
}

}  // namespace tmaguard
