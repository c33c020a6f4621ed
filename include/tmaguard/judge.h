// tmaguard: everything tmaguard says about one launch. Pure: kernel name and decoded maps in, findings out.
#pragma once

#include <string_view>
#include <vector>

#include "tmaguard/finding.h"
#include "tmaguard/launch.h"
#include "tmaguard/rules.h"

namespace tmaguard {

//! The kernel's own rules (`which`, from rules_for_kernel), then the generic descriptor check of every map.
std::vector<Finding> judge_launch(const RuleSet& rules, const std::vector<int>& which, std::string_view kernel,
                                  const std::vector<TensorMapParam>& maps);

//! True when any finding is error-severity (a launch with none is remembered as clean).
bool has_errors(const std::vector<Finding>& findings);

}  // namespace tmaguard
