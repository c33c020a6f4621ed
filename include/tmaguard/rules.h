// tmaguard: user rules for any kernel's tensor maps, from TOML. Pure: text in, rule set or errors out; evaluation
// is a function of (kernel name, decoded maps). The built-in FlashAttention-4 guard is a rule file too
// (rules/fa4_sm100_bwd.toml, compiled in).
//
// A rule file is a list of [[rule]] tables:
//   [[rule]]
//   id = "gemm-epilogue-d-layout"          # stable kebab-case id (findings use it unless a check names its own)
//   kernel = "sm90_gemm"                   # substring of the kernel name; or kernel_glob / kernel_regex; mangled or
//   demangled map_count = 3                          # optional: the rule applies only to launches with this many
//   tensor maps expect_map_count = [3, 4]              # optional: any other count is a finding of its own severity =
//   "error"                     # error (default) or warning action = "reject"                      # optional override
//   of TMAGUARD_MODE for this rule's errors hint = "allocate D like C"             # optional, printed with every
//   finding [rule.maps]                            # names: order among tensor maps (negative counts from the end) or
//   "param:N" C = 1 D = -1
//   [[rule.check]]                         # one or more; kinds below
//   kind = "same_innermost"  a = "D"  b = "C"       # D.dims[0] == C.dims[0] (K-major vs MN-major)
// Check kinds: same_innermost, same_dims, same_strides (a, b); dtype, swizzle (map, allowed = [..]);
// rank (map, equals); alignment (map, bytes); strides_increasing (map); no_overlap (a, b). Each check may carry
// its own id, severity and hint.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tmaguard/checks.h"
#include "tmaguard/finding.h"

namespace tmaguard {

struct RuleSet;  // opaque: parsed and validated rules

struct RulesResult {
  std::shared_ptr<const RuleSet> rules;  // null when errors is not empty
  std::vector<std::string> errors;       // "FILE:LINE: what is wrong", one line each
};

//! Parses and validates rule text. `source` names it in messages (a path, or "built-in").
RulesResult parse_rules(std::string_view text, std::string_view source);
//! The largest rules file read (a generated file of 300,000 rules is about 20 MiB).
inline constexpr uint64_t kMaxRulesFileBytes = 64ULL << 20;
//! Reads and parses a rules file: what the library does at start for each TMAGUARD_RULES entry and what
//! `tmaguard check-rules` does, so the two can never disagree. Only a regular file of at most kMaxRulesFileBytes
//! is read; anything else (unreadable, a directory, a device, a FIFO, too large) is one error naming it.
RulesResult load_rules_file(const std::string& path);
//! Several rule sets into one; a later rule with the same id replaces an earlier one (user rules override presets).
std::shared_ptr<const RuleSet> merge_rules(const std::vector<std::shared_ptr<const RuleSet>>& sets);
//! The built-in preset (the FA4 SM100 backward guard).
std::string_view builtin_rules_text();

//! Indices of the rules whose kernel matcher accepts this name (computed once per kernel). Patterns run with match
//! limits; a pattern that reaches one counts as not matching, and `notes` (when given) gets a sentence saying so.
std::vector<int> rules_for_kernel(const RuleSet& rules, std::string_view kernel_name,
                                  std::vector<std::string>* notes = nullptr);
//! Runs the given rules on one launch's tensor-map parameters.
void evaluate_rules(const RuleSet& rules, const std::vector<int>& which, std::string_view kernel,
                    const std::vector<TensorMapParam>& maps, std::vector<Finding>& out);
std::size_t rule_count(const RuleSet& rules);

}  // namespace tmaguard
