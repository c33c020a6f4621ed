// tmaguard core (internal): the parsed form of a rule file, shared by the parser, the matcher and the evaluator.
//
// How to add a check kind: add one row to kCheckKinds in check_kinds.cpp (its name, whether it compares two maps,
// the extra keys it reads and how, its evaluation, and whether that evaluation is free of the maps' global
// addresses), then document it in rules.h and in docs/rules.md#rules-for-any-kernel (its table of kinds).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tmaguard/finding.h"
#include "tmaguard/rules.h"
#include "tmaguard/tensormap.h"

namespace tmaguard {

struct CheckKind;

//! One [[rule.check]], [[rule.require]] or [[rule.when]] entry.
struct Check {
  const CheckKind* kind = nullptr;
  std::string id;              // empty: the rule's id
  std::string a;               // the map checked (`a`, or `map` for single-map kinds)
  std::vector<std::string> b;  // pair kinds: the map(s) it is compared with (`b`: a name or an array of names)
  int a_at = -1;               // `a`'s position in the rule's maps (set by the parser; -1: looked up by name)
  std::vector<int> b_at;       // each of `b`'s (parallel to b)
  std::optional<Severity> severity;
  std::string hint;
  std::vector<std::string> allowed;  // dtype / swizzle names
  uint64_t number = 0;               // rank / alignment bytes / dimension index
  uint64_t number_b = 0;             // same_dim: the dimension index in b
};

//! What a check says when it does not hold: both one sentence, in the user's words. `on_b`: the map at fault is b, not
//! a (both_innermost, when the dims tell that b is the transposed one): the finding names b.
struct CheckFailure {
  std::string expected, observed;
  bool on_b = false;
};

//! Reads a check's own keys for its kind (the parser implements it; errors carry file and line).
class CheckKeys {
 public:
  virtual ~CheckKeys() = default;
  //! The string array under `key`, validated against `known(value)`; nullopt (after an error) when absent or bad.
  virtual std::optional<std::vector<std::string>> names(const char* key, bool (*known)(std::string_view),
                                                        const char* what) = 0;
  //! The integer under `key` when it satisfies `ok`, else nullopt after an error saying `requirement`.
  virtual std::optional<int64_t> integer(const char* key, bool (*ok)(int64_t), const char* requirement) = 0;
  //! The same for a key that may be absent (nullopt without an error then).
  virtual std::optional<int64_t> optional_integer(const char* key, bool (*ok)(int64_t), const char* requirement) = 0;
};

//! A check kind: one row of kCheckKinds.
struct CheckKind {
  const char* name;
  bool pair;                      // compares two maps (keys a, b); otherwise one (key map)
  std::vector<const char*> keys;  // its own keys besides kind, a/b or map, id, severity, hint
  //! Reads its own keys into `c`; false when one is missing or bad (already reported through `k`).
  bool (*parse)(CheckKeys& k, Check& c);
  //! nullopt when the check holds; else what was expected and what was found.
  std::optional<CheckFailure> (*evaluate)(const Check& c, const TensorMapView& a, const TensorMapView* b);
  //! True when the evaluation never reads a map's global address (nor its byte range): then maps that differ in
  //! their addresses alone get the same answer, and a launch whose maps only moved need not ask it again
  //! (judge.h: MovedMaps). False, the safe default, re-asks it on every launch with new maps.
  bool address_free = false;
};

//! Every check kind, in the order the documentation lists them.
const std::vector<CheckKind>& check_kinds();
const CheckKind* find_check_kind(std::string_view name);

//! One evaluation of a rule entry that reads addresses (CheckKind::address_free false): the entry, its map `a` and
//! the map `b` it is compared with (-1: a single-map kind), as indices into the launch's maps.
struct AddressAsk {
  const Check* check;
  int a, b;
};
//! Every such evaluation that the rules of `which` that apply to this launch make in their require and check entries
//! (MovedMaps). False when the launch's answer could hang on addresses another way: a rule whose `when` reads them,
//! something said before the checks, a map an entry names that is no tensor map, a rule that is not checkable.
bool address_asks(const RuleSet& rules, const std::vector<int>& which, const std::vector<TensorMapParam>& maps,
                  std::vector<AddressAsk>& out);

struct MapRef {
  std::string name;
  int64_t order = 0;              // order among the launch's maps (negative from the end), when `place` is not set
  std::optional<MapPlace> place;  // "param:N", "param:N+OFFSET" or "param:N->AT": the map at that place
};

//! A compiled kernel_glob / kernel_regex (rules_match.cpp).
struct KernelPattern;
//! Compiles a kernel_regex (PCRE2 syntax); nullptr with `error` set when it is not a valid expression.
std::shared_ptr<const KernelPattern> compile_kernel_regex(std::string_view regex, std::string* error);
//! Compiles a kernel_glob (fnmatch syntax, matched whole).
std::shared_ptr<const KernelPattern> compile_kernel_glob(std::string_view glob);

struct Rule {
  std::string id;
  std::string substring, glob, regex;            // exactly one is set (the kernel matcher)
  std::shared_ptr<const KernelPattern> pattern;  // compiled kernel_glob / kernel_regex
  std::optional<int64_t> map_count;
  std::vector<int64_t> expect_map_count;
  Severity severity = Severity::kError;
  std::optional<Action> action;  // the rule's `action` key; none: the mode's
  std::string hint;
  std::vector<MapRef> maps;
  std::vector<Check> when;            // all must hold for the rule to apply (else it is silent)
  std::vector<Check> require;         // the kernel's signature: if one fails, one warning (signature_id), no checks
  std::string signature_id;           // the id of that warning
  std::string not_checkable;          // when set, an applying rule reports this reason instead of checking
  std::string not_checkable_message;  // said once per process
  std::vector<Check> checks;
  std::vector<std::string> stores;  // the maps the kernel writes through with TMA stores (judged against tensors)
  bool replaces_builtin = false;  // replaces_builtin = true: its id is a built-in rule's, replaced on purpose
  bool device = false;  // its maps are in device memory ("param:N->AT"): judged on maps read back after a kernel
};

}  // namespace tmaguard

struct tmaguard::RuleSet {
  std::vector<Rule> rules;
};
