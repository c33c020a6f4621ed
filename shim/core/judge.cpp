// tmaguard core: judging one launch (rules, then generic descriptor checks).
#include "tmaguard/judge.h"

#include "tmaguard/descriptor_checks.h"

namespace tmaguard {

Judgement judge_launch(const RuleSet& rules, const std::vector<int>& which, std::string_view kernel,
                       const std::vector<TensorMapParam>& maps, const Arch& arch, const std::vector<bool>* known_clean) {
  Judgement j;
  if (!which.empty()) evaluate_rules(rules, which, kernel, maps, j.findings, &j.not_checkable);
  for (std::size_t i = 0; i < maps.size(); ++i) {
    if (known_clean && i < known_clean->size() && (*known_clean)[i]) continue;
    if (unjudged_template(maps[i])) continue;  // every dim 1, rewritten on the device before use: no layout to judge
    check_descriptor(kernel, maps[i], arch, j.findings);
  }
  return j;
}

bool has_errors(const std::vector<Finding>& findings) {
  for (const Finding& f : findings)
    if (f.severity == Severity::kError) return true;
  return false;
}

}  // namespace tmaguard
