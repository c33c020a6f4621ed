// tmaguard: the built-in check run on every tensor-map parameter. Pure: decoded bytes in, findings out.
// Kernel-specific rules (the FA4 guard among them) live in rules.h.
#pragma once

#include <string_view>
#include <vector>

#include "tmaguard/finding.h"
#include "tmaguard/launch.h"

namespace tmaguard {

//! Generic sanity of one decoded descriptor: what the real driver would have refused to encode.
void check_descriptor(std::string_view kernel, const TensorMapParam& map, std::vector<Finding>& out);

}  // namespace tmaguard
