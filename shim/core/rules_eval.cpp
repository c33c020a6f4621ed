// tmaguard core: evaluation of the rules that apply to a kernel on one launch's decoded tensor maps.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <map>
#include <set>

#include "rules_model.h"

namespace tmaguard {
namespace {

// The map a name refers to on this launch, or nullptr when the launch has no such map.
const TensorMapParam* resolve(const MapRef& m, const std::vector<TensorMapParam>& maps) {
  const auto n = static_cast<int64_t>(maps.size());
  if (m.by_param) {
    for (const auto& x : maps)
      if (x.param_index == m.index) return &x;
    return nullptr;
  }
  const int64_t i = m.index < 0 ? n + m.index : m.index;
  return (i >= 0 && i < n) ? &maps[static_cast<std::size_t>(i)] : nullptr;
}

void evaluate_rule(const Rule& r, std::string_view kernel, const std::vector<TensorMapParam>& maps,
                   std::vector<Finding>& out) {
  const auto n = static_cast<int64_t>(maps.size());
  auto finding = [&](const std::string& id, std::optional<Severity> sev, const std::string& tensor,
                     const TensorMapParam* m, const std::string& hint) {
    Finding f = make_finding(id.empty() ? r.id : id, sev.value_or(r.severity), kernel, tensor, m);
    f.action = r.action;
    f.hint = hint.empty() ? r.hint : hint;
    return f;
  };
  if (!r.expect_map_count.empty() &&
      std::find(r.expect_map_count.begin(), r.expect_map_count.end(), n) == r.expect_map_count.end()) {
    Finding f = finding("", std::nullopt, "kernel", nullptr, "");
    f.expected = fmt::format("{} tensor-map parameters", fmt::join(r.expect_map_count, " or "));
    f.observed = fmt::format("{} tensor-map parameters", n);
    out.push_back(std::move(f));
    return;
  }
  if (r.map_count && *r.map_count != n) return;
  // Names to maps; a reference past this launch's maps makes the rule not apply.
  std::map<std::string, const TensorMapParam*> named;
  for (const MapRef& m : r.maps) {
    const TensorMapParam* p = resolve(m, maps);
    if (!p) return;
    named[m.name] = p;
  }
  std::set<std::string> failed;  // after a map fails one check, its later checks are skipped (first cause wins)
  for (const Check& c : r.checks) {
    if (failed.count(c.a)) continue;
    const TensorMapParam* a = named[c.a];
    const TensorMapParam* b = c.b.empty() ? nullptr : named[c.b];
    if (!a->decoded.ok() || (b && !b->decoded.ok())) {
      const TensorMapParam* bad = a->decoded.ok() ? b : a;
      const std::string& name = bad == a ? c.a : c.b;
      Finding f = finding(r.id + "-map-undecodable", Severity::kWarning, name, bad, "");
      f.expected = fmt::format("'{}' is a tensor map", name);
      f.observed = bad->decoded.not_a_map;
      f.hint = "the kernel's parameters do not match what this rule expects";
      failed.insert(c.a);
      out.push_back(std::move(f));
      continue;
    }
    const std::optional<CheckFailure> fail = c.kind->evaluate(c, a->decoded.view, b ? &b->decoded.view : nullptr);
    if (!fail) continue;
    failed.insert(c.a);
    Finding f = finding(c.id, c.severity, c.a, a, c.hint);
    f.expected = fail->expected;
    f.observed = fail->observed;
    out.push_back(std::move(f));
  }
}

}  // namespace

void evaluate_rules(const RuleSet& rules, const std::vector<int>& which, std::string_view kernel,
                    const std::vector<TensorMapParam>& maps, std::vector<Finding>& out) {
  for (int ri : which) evaluate_rule(rules.rules[static_cast<std::size_t>(ri)], kernel, maps, out);
}

}  // namespace tmaguard
