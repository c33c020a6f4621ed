// tmaguard: everything tmaguard says about one launch. Pure: kernel name and decoded maps in, findings out.
#pragma once

#include <string_view>
#include <vector>

#include "tmaguard/checks.h"
#include "tmaguard/finding.h"
#include "tmaguard/launch.h"
#include "tmaguard/rules.h"

namespace tmaguard {

//! What tmaguard says about one launch.
struct Judgement {
  std::vector<Finding> findings;
  std::vector<NotCheckable> not_checkable;  // rules that recognise the launch but cannot check it
};

//! The kernel's own rules (`which`, from rules_for_kernel), then the generic descriptor check of every map, with
//! the architecture policy of checks.h for the GPU the launch runs on. `known_clean`, when given, marks maps whose
//! bytes already passed the generic check (it depends on the bytes alone): they are not checked again.
Judgement judge_launch(const RuleSet& rules, const std::vector<int>& which, std::string_view kernel,
                       const std::vector<TensorMapParam>& maps, const Arch& arch,
                       const std::vector<bool>* known_clean = nullptr);

//! True when any finding is error-severity (a launch with none is remembered as clean).
bool has_errors(const std::vector<Finding>& findings);

}  // namespace tmaguard
