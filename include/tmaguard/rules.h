// tmaguard: user rules for any kernel's tensor maps, from TOML. Pure: text in, rule set or errors out; evaluation
// is a function of (kernel name, decoded maps). The built-in FlashAttention-4 guard is a rule file too
// (rules/fa4_*.toml, compiled in). docs/rules.md#rules-for-any-kernel documents the language; in short:
//
// A rule file is a list of [[rule]] tables. A rule names its kernels (kernel = substring, kernel_glob, or
// kernel_regex in PCRE2 syntax; mangled or demangled names), optionally the launches it applies to (map_count), and
// its maps under [rule.maps] (name = order among the launch's tensor maps, negative from the end, or "param:N" /
// "param:N+OFFSET" for a parameter or a map inside one, "param:N->AT" for a map in device memory AT bytes past the
// address parameter N holds). Then, in the order they are evaluated:
//   expect_map_count = [..]  any other number of maps is a finding of its own
//   [[rule.when]]            conditions for the rule to apply (else it is silent)
//   [[rule.require]]         the kernel's signature; if one fails: one warning (signature_id) saying which, no checks
//   not_checkable = "..."    the launch is recognised but cannot be checked: counted, said once (not_checkable_message)
//   stores = [..]            the maps the kernel writes through with TMA stores (judged against declared tensors:
//                            map-store-spill, tensor_match.h)
//   [[rule.check]]           the judgments, each with an optional id, severity (error, warning) and hint
// when/require/check entries share the check kinds of check_kinds.cpp (kind = "...", a and b, or map):
// same_innermost, same_dims, same_strides, same_address, distinct_address, permutation_of, dims_extend,
// same_outer_dims, same_dim (dim, dim_b), same_dtype (a, b; b may list several maps); dtype, swizzle, encoder (map,
// allowed = [..]); rank (map, equals); alignment (map, bytes); strides_increasing (map); no_overlap (a, b);
// disjoint_elements (a, b); has_dim_of (a, b, dim); innermost_shared, both_innermost (a, b: two operands contracted
// over one dim). A rule with the id of a built-in rule replaces it only with replaces_builtin = true.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tmaguard/descriptor_checks.h"
#include "tmaguard/finding.h"

namespace tmaguard {

struct RuleSet;  // opaque: parsed and validated rules

struct RulesResult {
  std::shared_ptr<const RuleSet> rules;  // null when errors is not empty
  std::vector<std::string> errors;       // "FILE:LINE: what is wrong", one line each
  std::vector<std::string> notices;      // what the file changes besides adding rules (a built-in rule it replaces)
};

//! Parses and validates rule text. `source` names it in messages (a path, or "built-in").
RulesResult parse_rules(std::string_view text, std::string_view source);
//! The largest rules file read (a generated file of 300,000 rules is about 20 MiB).
inline constexpr uint64_t kMaxRulesFileBytes = 64ULL << 20;
//! Reads and parses a rules file: what the library does at start for each TMAGUARD_RULES entry and what
//! `tmaguard check-rules` does, so the two can never disagree. Only a regular file of at most kMaxRulesFileBytes
//! is read; anything else (unreadable, a directory, a device, a FIFO, too large) is one error naming it. A rule whose
//! id is a built-in rule's replaces that rule only with `replaces_builtin = true` (a notice says so); without it the
//! file is in error, since the replacement would switch the built-in check off in silence.
RulesResult load_rules_file(const std::string& path);
//! The ids of the built-in rules (rule ids, not finding ids).
const std::vector<std::string>& builtin_rule_ids();
//! Several rule sets into one; a later rule with the same id replaces an earlier one (user rules override presets).
std::shared_ptr<const RuleSet> merge_rules(const std::vector<std::shared_ptr<const RuleSet>>& sets);
//! The built-in preset (the FA4 SM100 backward guard).
std::string_view builtin_rules_text();

//! Indices of the rules whose kernel matcher accepts this name (computed once per kernel). Patterns run with match
//! limits; a pattern that reaches one counts as not matching, and `notes` (when given) gets a sentence saying so.
std::vector<int> rules_for_kernel(const RuleSet& rules, std::string_view kernel_name,
                                  std::vector<std::string>* notes = nullptr);
//! A place a rule names by parameter ("param:N" or "param:N+OFFSET"): read on every launch of the kernels the rule
//! applies to, whatever a search of the parameters found.
struct NamedPlace {
  std::string rule, map;
  MapPlace place;
};
std::vector<NamedPlace> named_places(const RuleSet& rules, const std::vector<int>& which);
//! The rules of `which` that judge maps read back from device memory (they name "param:N->AT" places) when `device`,
//! else the others: the two kinds are evaluated apart (a launch's parameters at the launch, device maps after it).
std::vector<int> rules_on(const RuleSet& rules, const std::vector<int>& which, bool device);
//! Runs the given rules on one launch's tensor-map parameters.
void evaluate_rules(const RuleSet& rules, const std::vector<int>& which, std::string_view kernel,
                    const std::vector<TensorMapParam>& maps, std::vector<Finding>& out,
                    std::vector<NotCheckable>* not_checkable = nullptr);
//! Which of the launch's maps the rules of `which` that apply to it (map count, maps, when and signature) name in
//! `stores`: the maps the kernel writes through with TMA stores, judged for map-store-spill against declared tensors.
std::vector<bool> stored_maps(const RuleSet& rules, const std::vector<int>& which,
                              const std::vector<TensorMapParam>& maps);
//! Every finding id the rules can report, with its severity (expect_map_count rules, signature warnings, checks), in
//! rule order, each once. Besides these, any rule can report its `<id>-map-missing` and `<id>-map-undecodable`
//! warnings (findings.inc).
struct ReportedId {
  std::string id;
  Severity severity;
};
std::vector<ReportedId> reported_ids(const RuleSet& rules);
//! The names of every check kind of the rule language, in the order docs/rules.md#rules-for-any-kernel
//! lists them.
std::vector<std::string> check_kind_names();
std::size_t rule_count(const RuleSet& rules);
//! One line per rule: its id, kernel matcher and how it addresses its maps ("D = map -1", "D = param 0+1152"), for
//! check-rules.
std::vector<std::string> describe_rules(const RuleSet& rules);

}  // namespace tmaguard
