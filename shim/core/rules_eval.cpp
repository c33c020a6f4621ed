// tmaguard core: evaluation of the rules that apply to a kernel on one launch's decoded tensor maps.
//
// A rule is evaluated in this order, and each step can end it:
//   expect_map_count  any other number of maps is a finding of its own
//   map_count         the rule applies only to launches with this many maps
//   [rule.maps]       a name the launch has no map for makes the rule not apply
//   [[rule.when]]     every entry must hold, else the rule does not apply (silently)
//   [[rule.require]]  the kernel's signature: if one entry fails, one warning (signature_id) says which, no checks
//   not_checkable     the rule reports its reason (counted, said once) instead of checking
//   [[rule.check]]    in order; once a map fails one check its later checks are skipped (the first cause wins)
// A check that names a template map inside a structure (launch.h: unjudged_template) is not evaluated: in `when`
// the rule then does not apply, in `require` and `check` that entry is passed over, silently.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <map>
#include <set>

#include "rules_model.h"

namespace tmaguard {
namespace {

// The map a name refers to on this launch, or nullptr when the launch has no such map. Order counts the launch's
// maps only (a place a rule names that held no map when the kernel was searched is not one of them).
const TensorMapParam* resolve(const MapRef& m, const std::vector<TensorMapParam>& maps) {
  if (m.place) {
    for (const auto& x : maps)
      if (x.place == *m.place) return &x;
    return nullptr;
  }
  std::vector<const TensorMapParam*> counted;
  for (const auto& x : maps)
    if (!x.named_only) counted.push_back(&x);
  const auto n = static_cast<int64_t>(counted.size());
  const int64_t i = m.order < 0 ? n + m.order : m.order;
  return (i >= 0 && i < n) ? counted[static_cast<std::size_t>(i)] : nullptr;
}

struct Evaluation {
  const Check* check;
  std::string b;                        // the map compared with (pair kinds), one evaluation per name in check.b
  const TensorMapParam* undecodable;    // a map of the check that is no tensor map (nullptr: both decoded)
  std::optional<CheckFailure> failure;  // set when the check does not hold
  bool template_named = false;          // a map of the check is a template: not evaluated
};

// Evaluates a check against every map it names in `b` (once for single-map kinds).
std::vector<Evaluation> evaluate(const Check& c, const std::map<std::string, const TensorMapParam*>& named) {
  std::vector<Evaluation> out;
  const TensorMapParam* a = named.at(c.a);
  static const std::vector<std::string>& kNoB = *new std::vector<std::string>{""};  // never destroyed
  const std::vector<std::string>& bs = c.kind->pair ? c.b : kNoB;
  out.reserve(bs.size());
  std::optional<Check> one_b;  // a check of several b's, evaluated against one of them at a time (copied once)
  if (bs.size() > 1) one_b.emplace(c).b.resize(1);
  for (const std::string& bn : bs) {
    const TensorMapParam* b = bn.empty() ? nullptr : named.at(bn);
    Evaluation e{&c, bn, nullptr, std::nullopt};
    if (unjudged_template(*a) || (b && unjudged_template(*b))) {
      e.template_named = true;
      out.push_back(std::move(e));
      continue;
    }
    if (!a->decoded.ok())
      e.undecodable = a;
    else if (b && !b->decoded.ok())
      e.undecodable = b;
    if (!e.undecodable) {
      if (one_b) one_b->b[0] = bn;
      const Check& one = one_b ? *one_b : c;
      // A ragged map is judged as the tensor under it (its extra modes and shifted address are the idiom's own).
      const TensorMapView av = judged_view(a->decoded.view);
      const TensorMapView bv = b ? judged_view(b->decoded.view) : TensorMapView{};
      e.failure = c.kind->evaluate(one, av, b ? &bv : nullptr);
    }
    out.push_back(std::move(e));
  }
  return out;
}

// One rule against one launch, step by step: each step returns false when the rule stops there (a finding written or
// the rule not applying).
struct RuleRun {
  const Rule& r;
  std::string_view kernel;
  const std::vector<TensorMapParam>& maps;
  std::vector<Finding>& out;
  std::map<std::string, const TensorMapParam*> named;

  Finding finding(const std::string& id, std::optional<Severity> sev, const std::string& tensor,
                  const TensorMapParam* m, const std::string& hint) const {
    Finding f = make_finding(id.empty() ? r.id : id, sev.value_or(r.severity), kernel, tensor, m);
    f.action = r.action;
    f.hint = hint.empty() ? r.hint : hint;
    return f;
  }

  bool map_count_matches() {
    const auto n = static_cast<int64_t>(maps.size());
    if (!r.expect_map_count.empty() &&
        std::find(r.expect_map_count.begin(), r.expect_map_count.end(), n) == r.expect_map_count.end()) {
      Finding f = finding("", std::nullopt, "kernel", nullptr, "");
      f.expected = fmt::format("{} tensor-map parameters", fmt::join(r.expect_map_count, " or "));
      f.observed = fmt::format("{} tensor-map parameters", n);
      out.push_back(std::move(f));
      return false;
    }
    return !r.map_count || *r.map_count == n;
  }

  // An order past the launch's maps: the rule never applies to this kernel's launches. Said (once per rule and
  // kernel: the reporter's dedupe), never silent.
  void say_missing(const MapRef& m) {
    const auto counted = std::count_if(maps.begin(), maps.end(), [](const TensorMapParam& x) { return !x.named_only; });
    Finding f = finding(finding_id(FindingId::kRuleMapMissing, r.id), Severity::kWarning, m.name, nullptr, "");
    f.expected = fmt::format("map '{}' = {} among the launch's tensor maps", m.name, m.order);
    f.observed = fmt::format("the launch has {} tensor map(s)", counted);
    f.hint = "the rule was not applied to this kernel: fix its map order (tmaguard inspect shows a launch's maps), "
             "or narrow its kernel matcher or map_count to the launches it is for";
    out.push_back(std::move(f));
  }

  bool name_maps() {
    for (const MapRef& m : r.maps) {
      const TensorMapParam* p = resolve(m, maps);
      if (!p && !m.place) {
        say_missing(m);
        return false;
      }
      if (!p) return false;
      // A place named by parameter that holds no map on this launch: said (once per rule, kernel and place, by the
      // reporter's dedupe), and the rule does not apply.
      if (m.place && !p->decoded.ok() && !unjudged_template(*p)) {
        Finding f = finding(finding_id(FindingId::kRuleMapUndecodable, r.id), Severity::kWarning, m.name, p, "");
        f.expected = fmt::format("'{}' (param {}) is a tensor map", m.name, to_string(*m.place));
        f.observed = p->decoded.not_a_map;
        f.hint = "the place this rule names holds no tensor map on this launch; the rule was not applied";
        out.push_back(std::move(f));
        return false;
      }
      named[m.name] = p;
    }
    return true;
  }

  bool when_holds() const {
    for (const Check& c : r.when)
      for (const Evaluation& e : evaluate(c, named))
        if (e.template_named || e.undecodable || e.failure) return false;
    return true;
  }

  bool signature_met() {
    std::vector<std::string> unmet;
    for (const Check& c : r.require) {
      for (const Evaluation& e : evaluate(c, named)) {
        if (e.undecodable) {  // said once per map, however many entries name it
          const std::string line = fmt::format("{} is not a tensor map ({})", e.undecodable == named.at(c.a) ? c.a : e.b,
                                               e.undecodable->decoded.not_a_map);
          if (std::find(unmet.begin(), unmet.end(), line) == unmet.end()) unmet.push_back(line);
        } else if (e.failure)
          unmet.push_back(fmt::format("{}: {}", e.failure->expected, e.failure->observed));
      }
    }
    if (unmet.empty()) return true;
    Finding f = finding(r.signature_id, Severity::kWarning, "kernel", nullptr, "");
    f.expected = fmt::format("the tensor maps of the kernel signature rule '{}' describes", r.id);
    f.observed = fmt::format("not met: {}", fmt::join(unmet, "; "));
    f.hint =
        "a kernel version or configuration this rule does not know: its layouts were not judged (no error). "
        "Report the kernel name and this record to tmaguard";
    out.push_back(std::move(f));
    return false;
  }

  void run_checks() {
    std::set<std::string> failed;  // after a map fails one check, its later checks are skipped (first cause wins)
    for (const Check& c : r.checks) {
      for (const Evaluation& e : evaluate(c, named)) {
        if (failed.count(c.a)) break;
        if (e.undecodable) {
          const std::string& name = e.undecodable == named.at(c.a) ? c.a : e.b;
          Finding f =
              finding(finding_id(FindingId::kRuleMapUndecodable, r.id), Severity::kWarning, name, e.undecodable, "");
          f.expected = fmt::format("'{}' is a tensor map", name);
          f.observed = e.undecodable->decoded.not_a_map;
          f.hint = "the kernel's parameters do not match what this rule expects";
          failed.insert(c.a);
          out.push_back(std::move(f));
          continue;
        }
        if (!e.failure) continue;
        failed.insert(c.a);
        Finding f = finding(c.id, c.severity, c.a, named.at(c.a), c.hint);
        f.expected = e.failure->expected;
        f.observed = e.failure->observed;
        out.push_back(std::move(f));
      }
    }
  }
};

void evaluate_rule(const Rule& r, std::string_view kernel, const std::vector<TensorMapParam>& maps,
                   std::vector<Finding>& out, std::vector<NotCheckable>* not_checkable) {
  RuleRun run{r, kernel, maps, out, {}};
  if (!run.map_count_matches() || !run.name_maps() || !run.when_holds() || !run.signature_met()) return;
  if (!r.not_checkable.empty()) {
    if (not_checkable) not_checkable->push_back({r.not_checkable, r.not_checkable_message});
    return;
  }
  run.run_checks();
}

}  // namespace

std::vector<bool> stored_maps(const RuleSet& rules, const std::vector<int>& which,
                              const std::vector<TensorMapParam>& maps) {
  std::vector<bool> stored(maps.size(), false);
  std::vector<Finding> unused;  // what the rules say is reported by evaluate_rules; here only whether they apply
  for (int ri : which) {
    const Rule& r = rules.rules[static_cast<std::size_t>(ri)];
    if (r.stores.empty()) continue;
    RuleRun run{r, "", maps, unused, {}};
    if (!run.map_count_matches() || !run.name_maps() || !run.when_holds() || !run.signature_met()) continue;
    for (const std::string& name : r.stores)
      stored[static_cast<std::size_t>(run.named.at(name) - maps.data())] = true;
  }
  return stored;
}

std::vector<ReportedId> reported_ids(const RuleSet& rules) {
  std::vector<ReportedId> out;
  auto add = [&](const std::string& id, Severity s) {
    if (std::none_of(out.begin(), out.end(), [&](const ReportedId& x) { return x.id == id && x.severity == s; }))
      out.push_back({id, s});
  };
  for (const Rule& r : rules.rules) {
    if (!r.expect_map_count.empty()) add(r.id, r.severity);
    if (!r.require.empty()) add(r.signature_id, Severity::kWarning);
    if (!r.not_checkable.empty()) continue;
    for (const Check& c : r.checks) add(c.id.empty() ? r.id : c.id, c.severity.value_or(r.severity));
  }
  return out;
}

std::vector<NamedPlace> named_places(const RuleSet& rules, const std::vector<int>& which) {
  std::vector<NamedPlace> out;
  for (int ri : which) {
    const Rule& r = rules.rules[static_cast<std::size_t>(ri)];
    for (const MapRef& m : r.maps)
      if (m.place && !m.place->on_device()) out.push_back({r.id, m.name, *m.place});
  }
  return out;
}

std::vector<int> rules_on(const RuleSet& rules, const std::vector<int>& which, bool device) {
  std::vector<int> out;
  for (int ri : which)
    if (rules.rules[static_cast<std::size_t>(ri)].device == device) out.push_back(ri);
  return out;
}

void evaluate_rules(const RuleSet& rules, const std::vector<int>& which, std::string_view kernel,
                    const std::vector<TensorMapParam>& maps, std::vector<Finding>& out,
                    std::vector<NotCheckable>* not_checkable) {
  for (int ri : which) evaluate_rule(rules.rules[static_cast<std::size_t>(ri)], kernel, maps, out, not_checkable);
}

}  // namespace tmaguard
