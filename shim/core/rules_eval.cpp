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
#include <stdexcept>

#include "rules_model.h"

namespace tmaguard {
namespace {

// The map a name refers to on this launch, or -1 when the launch has no such map. Order counts the launch's maps
// only (a place a rule names that held no map when the kernel was searched is not one of them).
int resolve(const MapRef& m, const std::vector<TensorMapParam>& maps) {
  const auto n = static_cast<int64_t>(maps.size());
  if (m.place) {
    for (int64_t i = 0; i < n; ++i)
      if (maps[static_cast<std::size_t>(i)].place == *m.place) return static_cast<int>(i);
    return -1;
  }
  const auto counted = std::count_if(maps.begin(), maps.end(), [](const TensorMapParam& x) { return !x.named_only; });
  int64_t want = m.order < 0 ? counted + m.order : m.order;
  if (want < 0 || want >= counted) return -1;
  for (int64_t i = 0; i < n; ++i)
    if (!maps[static_cast<std::size_t>(i)].named_only && want-- == 0) return static_cast<int>(i);
  return -1;
}

// One launch's maps as the rules see them: each map, and the view its checks judge (a ragged map is judged as the
// tensor under it: its extra modes and shifted address are the idiom's own), made once per launch.
struct LaunchMaps {
  const std::vector<TensorMapParam>& maps;
  std::vector<TensorMapView> judged;

  explicit LaunchMaps(const std::vector<TensorMapParam>& m) : maps(m), judged(m.size()) {
    for (std::size_t i = 0; i < m.size(); ++i)
      if (m[i].decoded.ok()) judged[i] = judged_view(m[i].decoded.view);
  }
};

// Which launch map each of a rule's maps is (by its position in [rule.maps]; -1: none).
struct Named {
  const Rule& r;
  std::vector<int> at;  // parallel to r.maps

  // The position in r.maps of a check's map `name` (`hint`: the parser's, when set).
  int position(const std::string& name, int hint) const {
    if (hint >= 0) return hint;
    for (std::size_t i = 0; i < r.maps.size(); ++i)
      if (r.maps[i].name == name) return static_cast<int>(i);
    throw std::out_of_range("rule " + r.id + " names no map " + name);
  }
  int map_of(const std::string& name, int hint) const { return at[static_cast<std::size_t>(position(name, hint))]; }
};

struct Evaluation {
  const Check* check;
  std::string_view b;                   // the map compared with (pair kinds), one evaluation per name in check.b
  const TensorMapParam* undecodable;    // a map of the check that is no tensor map (nullptr: both decoded)
  std::optional<CheckFailure> failure;  // set when the check does not hold
  bool template_named = false;          // a map of the check is a template: not evaluated
  int ai = -1, bi = -1;                 // the launch maps it was evaluated on (bi -1: a single-map kind)
};

// Evaluates a check against every map it names in `b` (once for single-map kinds), handing each evaluation to
// `f` until it returns false.
template <typename F>
void evaluate(const Check& c, const Named& named, const LaunchMaps& lm, F&& f) {
  static const std::vector<std::string>& kNoB = *new std::vector<std::string>{""};  // never destroyed
  const std::vector<std::string>& bs = c.kind->pair ? c.b : kNoB;
  // A check of several b's is evaluated against one of them at a time; what it says when it fails names that one
  // (a copy of the check with that b alone, made only then: an evaluation reads no name).
  std::optional<Check> one_b;
  const int ai = named.map_of(c.a, c.a_at);
  const TensorMapParam* a = &lm.maps[static_cast<std::size_t>(ai)];
  for (std::size_t k = 0; k < bs.size(); ++k) {
    const std::string& bn = bs[k];
    const int bi = bn.empty() ? -1 : named.map_of(bn, k < c.b_at.size() ? c.b_at[k] : -1);
    const TensorMapParam* b = bi < 0 ? nullptr : &lm.maps[static_cast<std::size_t>(bi)];
    Evaluation e{&c, bn, nullptr, std::nullopt, false, ai, bi};
    if (unjudged_template(*a) || (b && unjudged_template(*b))) {
      e.template_named = true;
    } else if (!a->decoded.ok()) {
      e.undecodable = a;
    } else if (b && !b->decoded.ok()) {
      e.undecodable = b;
    } else {
      const TensorMapView& av = lm.judged[static_cast<std::size_t>(ai)];
      const TensorMapView* bv = b ? &lm.judged[static_cast<std::size_t>(bi)] : nullptr;
      e.failure = c.kind->evaluate(c, av, bv);
      if (e.failure && bs.size() > 1) {
        if (!one_b) one_b.emplace(c).b.resize(1);
        one_b->b[0] = bn;
        e.failure = c.kind->evaluate(*one_b, av, bv);
      }
    }
    if (!f(e)) return;
  }
}

// One rule against one launch, step by step: each step returns false when the rule stops there (a finding written or
// the rule not applying).
struct RuleRun {
  const Rule& r;
  std::string_view kernel;
  const LaunchMaps& lm;
  const std::vector<TensorMapParam>& maps;
  std::vector<Finding>& out;
  Named named;

  RuleRun(const Rule& rule, std::string_view k, const LaunchMaps& l, std::vector<Finding>& o)
      : r(rule), kernel(k), lm(l), maps(l.maps), out(o), named{rule, std::vector<int>(rule.maps.size(), -1)} {}

  // The launch map a check's `a` is.
  const TensorMapParam* map_a(const Check& c) const {
    return &maps[static_cast<std::size_t>(named.map_of(c.a, c.a_at))];
  }
  // The name of the map an evaluation found undecodable: `a`'s or the `b` it was evaluated against.
  std::string undecodable_name(const Check& c, const Evaluation& e) const {
    return e.undecodable == map_a(c) ? c.a : std::string(e.b);
  }

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
      f.launch_unchecked = true;
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
    f.launch_unchecked = true;
    out.push_back(std::move(f));
  }

  bool name_maps() {
    for (std::size_t i = 0; i < r.maps.size(); ++i) {
      const MapRef& m = r.maps[i];
      const int at = resolve(m, maps);
      const TensorMapParam* p = at < 0 ? nullptr : &maps[static_cast<std::size_t>(at)];
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
        f.launch_unchecked = true;
        out.push_back(std::move(f));
        return false;
      }
      named.at[i] = at;
    }
    return true;
  }

  bool when_holds() const {
    bool holds = true;
    for (const Check& c : r.when) {
      evaluate(c, named, lm, [&](const Evaluation& e) {
        holds = !e.template_named && !e.undecodable && !e.failure;
        return holds;
      });
      if (!holds) return false;
    }
    return true;
  }

  bool signature_met() {
    std::vector<std::string> unmet;
    for (const Check& c : r.require) {
      evaluate(c, named, lm, [&](const Evaluation& e) {
        if (e.undecodable) {  // said once per map, however many entries name it
          const std::string line =
              fmt::format("{} is not a tensor map ({})", undecodable_name(c, e), e.undecodable->decoded.not_a_map);
          if (std::find(unmet.begin(), unmet.end(), line) == unmet.end()) unmet.push_back(line);
        } else if (e.failure) {
          unmet.push_back(fmt::format("{}: {}", e.failure->expected, e.failure->observed));
        }
        return true;
      });
    }
    if (unmet.empty()) return true;
    Finding f = finding(r.signature_id, Severity::kWarning, "kernel", nullptr, "");
    f.expected = fmt::format("the tensor maps of the kernel signature rule '{}' describes", r.id);
    f.observed = fmt::format("not met: {}", fmt::join(unmet, "; "));
    f.hint =
        "a kernel version or configuration this rule does not know: its layouts were not judged (no error). "
        "Report the kernel name and this record to tmaguard";
    f.launch_unchecked = true;
    out.push_back(std::move(f));
    return false;
  }

  // One evaluation of a check: a finding when its map is no tensor map or the check fails (false: the map failed,
  // its later evaluations are skipped).
  bool judge(const Check& c, const Evaluation& e) {
    if (e.undecodable) {
      const std::string name = undecodable_name(c, e);
      Finding f =
          finding(finding_id(FindingId::kRuleMapUndecodable, r.id), Severity::kWarning, name, e.undecodable, "");
      f.expected = fmt::format("'{}' is a tensor map", name);
      f.observed = e.undecodable->decoded.not_a_map;
      f.hint = "the kernel's parameters do not match what this rule expects";
      out.push_back(std::move(f));
      return false;
    }
    if (!e.failure) return true;
    const bool on_b = e.failure->on_b && e.bi >= 0;
    Finding f = finding(c.id, c.severity, on_b ? std::string(e.b) : c.a,
                        on_b ? &lm.maps[static_cast<std::size_t>(e.bi)] : map_a(c), c.hint);
    f.expected = e.failure->expected;
    f.observed = e.failure->observed;
    out.push_back(std::move(f));
    return false;
  }

  // Each evaluation of `list`'s entries that read addresses (address_asks), the maps it names as evaluate() resolves
  // them; false when one names a map that is no tensor map. One that names a template is passed over, as in the full
  // evaluation.
  bool collect_address_asks(const std::vector<Check>& list, std::vector<AddressAsk>& out) const {
    bool decoded = true;
    for (const Check& c : list) {
      if (c.kind->address_free) continue;
      evaluate(c, named, lm, [&](const Evaluation& e) {
        if (e.undecodable) decoded = false;
        else if (!e.template_named) out.push_back({&c, e.ai, e.bi});
        return decoded;
      });
      if (!decoded) return false;
    }
    return true;
  }

  void run_checks() {
    // After a map fails one check, its later checks are skipped (first cause wins): by position in [rule.maps].
    std::vector<bool> failed(r.maps.size(), false);
    for (const Check& c : r.checks) {
      const auto a_pos = static_cast<std::size_t>(named.position(c.a, c.a_at));
      if (failed[a_pos]) continue;
      evaluate(c, named, lm, [&](const Evaluation& e) {
        if (judge(c, e)) return true;
        failed[a_pos] = true;
        return false;
      });
    }
  }
};

void evaluate_rule(const Rule& r, std::string_view kernel, const LaunchMaps& maps, std::vector<Finding>& out,
                   std::vector<NotCheckable>* not_checkable) {
  RuleRun run(r, kernel, maps, out);
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
  const LaunchMaps lm(maps);
  for (int ri : which) {
    const Rule& r = rules.rules[static_cast<std::size_t>(ri)];
    if (r.stores.empty()) continue;
    RuleRun run(r, "", lm, unused);
    if (!run.map_count_matches() || !run.name_maps() || !run.when_holds() || !run.signature_met()) continue;
    for (const std::string& name : r.stores) stored[static_cast<std::size_t>(run.named.map_of(name, -1))] = true;
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

bool address_asks(const RuleSet& rules, const std::vector<int>& which, const std::vector<TensorMapParam>& maps,
                  std::vector<AddressAsk>& out) {
  std::vector<Finding> said;  // anything the steps before the checks say: then the launch was not clean
  const LaunchMaps lm(maps);
  for (int ri : which) {
    const Rule& r = rules.rules[static_cast<std::size_t>(ri)];
    // Whether the rule applies must not hang on addresses: this launch's answer stands for the next only then.
    if (!std::all_of(r.when.begin(), r.when.end(), [](const Check& c) { return c.kind->address_free; })) return false;
    RuleRun run(r, "", lm, said);
    if (!run.map_count_matches() || !run.name_maps() || !run.when_holds()) {
      if (!said.empty()) return false;
      continue;  // it does not apply, and will not on a launch whose maps only moved
    }
    if (!r.not_checkable.empty()) return false;
    if (!run.collect_address_asks(r.require, out) || !run.collect_address_asks(r.checks, out)) return false;
  }
  return said.empty();
}

void evaluate_rules(const RuleSet& rules, const std::vector<int>& which, std::string_view kernel,
                    const std::vector<TensorMapParam>& maps, std::vector<Finding>& out,
                    std::vector<NotCheckable>* not_checkable) {
  if (which.empty()) return;
  const LaunchMaps lm(maps);
  for (int ri : which) evaluate_rule(rules.rules[static_cast<std::size_t>(ri)], kernel, lm, out, not_checkable);
}

}  // namespace tmaguard
