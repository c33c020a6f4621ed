// tmaguard core: the rule language (TOML via toml++): parsing with line-accurate validation, kernel matching,
// and evaluation of checks on decoded tensor maps.
#include "tmaguard/rules.h"

#include <cxxabi.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <fnmatch.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <optional>
#include <regex>
#include <set>
#include <toml++/toml.h>

namespace tmaguard {

namespace {

enum class CheckKind { kSameInnermost, kSameDims, kSameStrides, kDtype, kSwizzle, kRank, kAlignment,
                       kStridesIncreasing, kNoOverlap };
struct KindInfo {
  const char* name;
  CheckKind kind;
  bool pair;  // takes a, b (else map)
};
constexpr KindInfo kKinds[] = {
    {"same_innermost", CheckKind::kSameInnermost, true}, {"same_dims", CheckKind::kSameDims, true},
    {"same_strides", CheckKind::kSameStrides, true},     {"dtype", CheckKind::kDtype, false},
    {"swizzle", CheckKind::kSwizzle, false},             {"rank", CheckKind::kRank, false},
    {"alignment", CheckKind::kAlignment, false},         {"strides_increasing", CheckKind::kStridesIncreasing, false},
    {"no_overlap", CheckKind::kNoOverlap, true},
};

struct Check {
  CheckKind kind;
  std::string id, a, b;  // for single-map kinds the map is in `a`
  std::optional<Severity> severity;
  std::string hint;
  std::vector<std::string> allowed;
  uint64_t number = 0;  // rank / alignment bytes
};

struct MapRef {
  std::string name;
  bool by_param = false;
  int64_t index = 0;  // order among maps (negative from the end) or parameter index
};

struct Rule {
  std::string id;
  std::string substring, glob;
  std::shared_ptr<std::regex> regex;
  std::optional<int64_t> map_count;
  std::vector<int64_t> expect_map_count;
  Severity severity = Severity::kError;
  std::string action, hint;
  std::vector<MapRef> maps;
  std::vector<Check> checks;
};

}  // namespace

struct RuleSet {
  std::vector<Rule> rules;
};

namespace {

class Parser {
 public:
  Parser(std::string_view source) : source_(source) {}
  std::vector<std::string> errors;

  void error(const toml::node* n, const std::string& what) {
    const auto line = n ? n->source().begin.line : 0;
    errors.push_back(fmt::format("{}:{}: {}", source_, line, what));
  }

  bool keys_known(const toml::table& t, std::initializer_list<const char*> known, const std::string& where) {
    bool ok = true;
    for (const auto& kv : t) {
      const std::string_view key = kv.first.str();
      if (std::none_of(known.begin(), known.end(), [&](const char* x) { return key == x; })) {
        error(&kv.second, fmt::format("unknown key '{}' in {} (known: {})", key, where, fmt::join(known, ", ")));
        ok = false;
      }
    }
    return ok;
  }

  std::optional<std::string> str(const toml::table& t, const char* key, const std::string& where, bool required) {
    const toml::node* n = t.get(key);
    if (!n) {
      if (required) error(&t, fmt::format("{} needs '{}'", where, key));
      return std::nullopt;
    }
    if (!n->is_string()) {
      error(n, fmt::format("'{}' in {} must be a string, got {}", key, where, type_name(*n)));
      return std::nullopt;
    }
    return std::string(*n->value<std::string_view>());
  }

  std::optional<int64_t> integer(const toml::table& t, const char* key, const std::string& where) {
    const toml::node* n = t.get(key);
    if (!n) return std::nullopt;
    if (!n->is_integer()) {
      error(n, fmt::format("'{}' in {} must be an integer, got {}", key, where, type_name(*n)));
      return std::nullopt;
    }
    return *n->value<int64_t>();
  }

  static const char* type_name(const toml::node& n) {
    switch (n.type()) {
      case toml::node_type::string: return "a string";
      case toml::node_type::integer: return "an integer";
      case toml::node_type::floating_point: return "a float";
      case toml::node_type::boolean: return "a boolean";
      case toml::node_type::array: return "an array";
      case toml::node_type::table: return "a table";
      default: return "a date/time";
    }
  }

  std::optional<Severity> severity(const toml::table& t, const std::string& where) {
    const auto s = str(t, "severity", where, false);
    if (!s) return std::nullopt;
    if (*s == "error") return Severity::kError;
    if (*s == "warning") return Severity::kWarning;
    error(t.get("severity"), fmt::format("severity '{}' in {} is not one of error, warning", *s, where));
    return std::nullopt;
  }

  void parse_check(const toml::table& c, Rule& r, const std::string& where) {
    keys_known(c, {"kind", "a", "b", "map", "allowed", "equals", "bytes", "id", "severity", "hint"}, where);
    Check ch;
    const auto kind = str(c, "kind", where, true);
    if (!kind) return;
    const KindInfo* info = nullptr;
    for (const auto& k : kKinds)
      if (*kind == k.name) info = &k;
    if (!info) {
      std::vector<std::string> names;
      for (const auto& k : kKinds) names.emplace_back(k.name);
      error(c.get("kind"), fmt::format("unknown check kind '{}' in {} (known: {})", *kind, where, fmt::join(names, ", ")));
      return;
    }
    ch.kind = info->kind;
    auto need_map = [&](const char* key) -> std::string {
      const auto m = str(c, key, where, true);
      if (!m) return {};
      if (std::none_of(r.maps.begin(), r.maps.end(), [&](const MapRef& x) { return x.name == *m; }))
        error(c.get(key), fmt::format("{} refers to map '{}', which [rule.maps] does not name", where, *m));
      return *m;
    };
    if (info->pair) {
      ch.a = need_map("a");
      ch.b = need_map("b");
    } else {
      ch.a = need_map("map");
    }
    if (ch.kind == CheckKind::kDtype || ch.kind == CheckKind::kSwizzle) {
      const toml::node* n = c.get("allowed");
      const toml::array* arr = n ? n->as_array() : nullptr;
      if (!arr) {
        error(n ? n : &c, fmt::format("{} needs 'allowed', an array of strings", where));
      } else {
        for (const auto& e : *arr) {
          if (!e.is_string()) {
            error(&e, fmt::format("'allowed' in {} must hold strings", where));
            continue;
          }
          const std::string v(*e.value<std::string_view>());
          bool known = false;
          if (ch.kind == CheckKind::kDtype) {
            for (int t = 0; t < 16; ++t) known |= v == to_string(static_cast<DataType>(t));
          } else {
            for (uint32_t s = 0; s < 7; ++s) known |= v == swizzle_name(s);
          }
          if (!known) error(&e, fmt::format("'{}' in {} is not a known {}", v, where, ch.kind == CheckKind::kDtype ? "data type (e.g. bfloat16, float16, float32, uint8)" : "swizzle (none, 32B, 64B, 128B, ...)"));
          ch.allowed.push_back(v);
        }
      }
    }
    if (ch.kind == CheckKind::kRank) {
      const auto v = integer(c, "equals", where);
      if (!v || *v < 1 || *v > 5) error(c.get("equals") ? c.get("equals") : &c, fmt::format("{} needs 'equals' = 1..5", where));
      else ch.number = static_cast<uint64_t>(*v);
    }
    if (ch.kind == CheckKind::kAlignment) {
      const auto v = integer(c, "bytes", where);
      if (!v || *v < 1 || (*v & (*v - 1))) error(c.get("bytes") ? c.get("bytes") : &c, fmt::format("{} needs 'bytes', a power of two", where));
      else ch.number = static_cast<uint64_t>(*v);
    }
    if (const auto id = str(c, "id", where, false)) ch.id = *id;
    ch.severity = severity(c, where);
    if (const auto h = str(c, "hint", where, false)) ch.hint = *h;
    r.checks.push_back(std::move(ch));
  }

  void parse_rule(const toml::table& t, int index, RuleSet& out) {
    std::string where = fmt::format("rule #{}", index + 1);
    Rule r;
    if (const auto id = str(t, "id", where, true)) {
      r.id = *id;
      where = fmt::format("rule '{}'", r.id);
    }
    keys_known(t, {"id", "kernel", "kernel_glob", "kernel_regex", "map_count", "expect_map_count", "severity", "action",
                   "hint", "maps", "check"}, where);
    int matchers = 0;
    if (const auto s = str(t, "kernel", where, false)) r.substring = *s, ++matchers;
    if (const auto g = str(t, "kernel_glob", where, false)) r.glob = *g, ++matchers;
    if (const auto re = str(t, "kernel_regex", where, false)) {
      ++matchers;
      try {
        r.regex = std::make_shared<std::regex>(*re, std::regex::ECMAScript | std::regex::optimize);
      } catch (const std::regex_error& e) {
        error(t.get("kernel_regex"), fmt::format("bad kernel_regex '{}' in {}: {}", *re, where, e.what()));
      }
    }
    if (matchers != 1) error(&t, fmt::format("{} needs exactly one of kernel, kernel_glob, kernel_regex", where));
    r.map_count = integer(t, "map_count", where);
    if (const toml::node* n = t.get("expect_map_count")) {
      const toml::array* arr = n->as_array();
      if (!arr) error(n, fmt::format("'expect_map_count' in {} must be an array of integers", where));
      else
        for (const auto& e : *arr) {
          if (e.is_integer()) r.expect_map_count.push_back(*e.value<int64_t>());
          else error(&e, fmt::format("'expect_map_count' in {} must hold integers", where));
        }
    }
    if (const auto s = severity(t, where)) r.severity = *s;
    if (const auto a = str(t, "action", where, false)) {
      if (*a == "abort" || *a == "reject" || *a == "log") r.action = *a;
      else error(t.get("action"), fmt::format("action '{}' in {} is not one of abort, reject, log", *a, where));
    }
    if (const auto h = str(t, "hint", where, false)) r.hint = *h;
    if (const toml::node* n = t.get("maps")) {
      const toml::table* mt = n->as_table();
      if (!mt) {
        error(n, fmt::format("'maps' in {} must be a table of name = order", where));
      } else {
        for (const auto& [k, v] : *mt) {
          MapRef m;
          m.name = std::string(k.str());
          if (v.is_integer()) {
            m.index = *v.value<int64_t>();
            if (r.map_count && (m.index >= *r.map_count || m.index < -*r.map_count))
              error(&v, fmt::format("map '{}' = {} in {} cannot exist with map_count = {}", m.name, m.index, where, *r.map_count));
          } else if (v.is_string() && v.value<std::string_view>()->rfind("param:", 0) == 0) {
            m.by_param = true;
            char* end = nullptr;
            const std::string num(v.value<std::string_view>()->substr(6));
            m.index = std::strtoll(num.c_str(), &end, 10);
            if (num.empty() || *end || m.index < 0) error(&v, fmt::format("map '{}' in {}: \"param:N\" needs a parameter index N >= 0", m.name, where));
          } else {
            error(&v, fmt::format("map '{}' in {} must be an order among tensor maps (integer, negative from the end) or \"param:N\"", m.name, where));
            continue;
          }
          r.maps.push_back(std::move(m));
        }
      }
    }
    if (const toml::node* n = t.get("check")) {
      const toml::array* arr = n->as_array();
      if (!arr) {
        error(n, fmt::format("'check' in {} must be an array of tables ([[rule.check]])", where));
      } else {
        int i = 0;
        for (const auto& e : *arr) {
          ++i;
          if (const toml::table* ct = e.as_table()) parse_check(*ct, r, fmt::format("{} check #{}", where, i));
          else error(&e, fmt::format("'check' entries in {} must be tables", where));
        }
      }
    }
    if (r.checks.empty() && r.expect_map_count.empty())
      error(&t, fmt::format("{} has no [[rule.check]] and no expect_map_count: it can never report anything", where));
    out.rules.push_back(std::move(r));
  }

 private:
  std::string_view source_;
};

std::string dims_str(const TensorMapView& v) {
  return fmt::format("{{{}}}", fmt::join(v.dims.begin(), v.dims.begin() + v.rank, ","));
}
std::string strides_str(const TensorMapView& v) {
  return fmt::format("{{{}}}", fmt::join(v.strides.begin(), v.strides.begin() + (v.rank ? v.rank - 1 : 0), ","));
}

std::string demangled(std::string_view name) {
  int status = 0;
  char* d = abi::__cxa_demangle(std::string(name).c_str(), nullptr, nullptr, &status);
  std::string out = (status == 0 && d) ? d : "";
  std::free(d);
  return out;
}

}  // namespace

RulesResult parse_rules(std::string_view text, std::string_view source) {
  RulesResult res;
  auto set = std::make_shared<RuleSet>();
  Parser p(source);
  // Rule files are ASCII. The gate also keeps toml++ 3.3 (Debian's) away from its Unicode whitespace classifier,
  // which reaches __builtin_unreachable on some non-ASCII input (found by tests/fuzz/fuzz_rules.cpp).
  int line = 1;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c == '\n') ++line;
    if (c >= 0x80 || (c < 0x20 && c != '\n' && c != '\r' && c != '\t')) {
      res.errors.push_back(fmt::format("{}:{}: byte 0x{:02x} is not allowed: rule files are plain ASCII text", source, line, c));
      return res;
    }
  }
  try {
    const toml::table doc = toml::parse(text, source);
    p.keys_known(doc, {"rule"}, "the file");
    if (const toml::node* n = doc.get("rule")) {
      const toml::array* arr = n->as_array();
      if (!arr) {
        p.error(n, "'rule' must be an array of tables ([[rule]])");
      } else {
        int i = 0;
        for (const auto& e : *arr) {
          if (const toml::table* t = e.as_table()) p.parse_rule(*t, i, *set);
          else p.error(&e, "'rule' entries must be tables ([[rule]])");
          ++i;
        }
      }
    }
    std::set<std::string> ids;
    for (const Rule& r : set->rules)
      if (!r.id.empty() && !ids.insert(r.id).second) p.errors.push_back(fmt::format("{}: rule id '{}' is defined twice", source, r.id));
  } catch (const toml::parse_error& e) {
    p.errors.push_back(fmt::format("{}:{}: TOML syntax: {}", source, e.source().begin.line, e.description()));
  }
  res.errors = std::move(p.errors);
  if (res.errors.empty()) res.rules = std::move(set);
  return res;
}

std::shared_ptr<const RuleSet> merge_rules(const std::vector<std::shared_ptr<const RuleSet>>& sets) {
  auto out = std::make_shared<RuleSet>();
  for (const auto& s : sets) {
    if (!s) continue;
    for (const Rule& r : s->rules) {
      auto it = std::find_if(out->rules.begin(), out->rules.end(), [&](const Rule& x) { return x.id == r.id; });
      if (it != out->rules.end()) *it = r;
      else out->rules.push_back(r);
    }
  }
  return out;
}

std::size_t rule_count(const RuleSet& rules) { return rules.rules.size(); }

std::vector<int> rules_for_kernel(const RuleSet& rules, std::string_view name) {
  std::vector<int> out;
  std::string plain;  // demangled, computed only if a glob/regex needs it
  bool plain_done = false;
  auto names = [&]() -> std::vector<std::string_view> {
    if (!plain_done) plain = demangled(name), plain_done = true;
    if (plain.empty()) return {name};
    return {name, plain};
  };
  for (std::size_t i = 0; i < rules.rules.size(); ++i) {
    const Rule& r = rules.rules[i];
    bool hit = false;
    for (std::string_view n : names()) {
      const std::string s(n);
      if (!r.substring.empty()) hit |= n.find(r.substring) != std::string_view::npos;
      else if (!r.glob.empty()) hit |= fnmatch(r.glob.c_str(), s.c_str(), 0) == 0;
      else if (r.regex) hit |= std::regex_search(s, *r.regex);
    }
    if (hit) out.push_back(static_cast<int>(i));
  }
  return out;
}

void evaluate_rules(const RuleSet& rules, const std::vector<int>& which, std::string_view kernel,
                    const std::vector<TensorMapParam>& maps, std::vector<Finding>& out) {
  const auto n = static_cast<int64_t>(maps.size());
  for (int ri : which) {
    const Rule& r = rules.rules[static_cast<std::size_t>(ri)];
    auto base = [&](const std::string& id, std::optional<Severity> sev, const std::string& tensor,
                    const TensorMapParam* m, const std::string& hint) {
      Finding f;
      f.rule = id.empty() ? r.id : id;
      f.severity = sev.value_or(r.severity);
      f.kernel = std::string(kernel);
      f.tensor = tensor;
      f.action = r.action;
      f.hint = hint.empty() ? r.hint : hint;
      if (m) {
        f.param_index = m->param_index;
        if (m->decoded.ok()) f.tensor_map = m->decoded.view;
      }
      return f;
    };
    if (!r.expect_map_count.empty() &&
        std::find(r.expect_map_count.begin(), r.expect_map_count.end(), n) == r.expect_map_count.end()) {
      Finding f = base("", std::nullopt, "kernel", nullptr, "");
      f.expected = fmt::format("{} tensor-map parameters", fmt::join(r.expect_map_count, " or "));
      f.observed = fmt::format("{} tensor-map parameters", n);
      out.push_back(std::move(f));
      continue;
    }
    if (r.map_count && *r.map_count != n) continue;
    // Resolve names to parameters; a reference past this launch's maps makes the rule not apply.
    std::map<std::string, const TensorMapParam*> named;
    bool resolvable = true;
    for (const MapRef& m : r.maps) {
      const TensorMapParam* p = nullptr;
      if (m.by_param) {
        for (const auto& x : maps)
          if (x.param_index == m.index) p = &x;
      } else {
        const int64_t i = m.index < 0 ? n + m.index : m.index;
        if (i >= 0 && i < n) p = &maps[static_cast<std::size_t>(i)];
      }
      if (!p) resolvable = false;
      named[m.name] = p;
    }
    if (!resolvable) continue;
    std::set<std::string> failed;  // after a map fails one check, its later checks are skipped (first cause wins)
    for (const Check& c : r.checks) {
      if (failed.count(c.a)) continue;
      const TensorMapParam* a = named[c.a];
      const TensorMapParam* b = c.b.empty() ? nullptr : named[c.b];
      if (!a->decoded.ok() || (b && !b->decoded.ok())) {
        const TensorMapParam* bad = a->decoded.ok() ? b : a;
        Finding f = base(r.id + "-map-undecodable", Severity::kWarning, bad == a ? c.a : c.b, bad, "");
        f.expected = fmt::format("'{}' is a tensor map", bad == a ? c.a : c.b);
        f.observed = bad->decoded.not_a_map;
        f.hint = "the kernel's parameters do not match what this rule expects";
        failed.insert(c.a);
        out.push_back(std::move(f));
        continue;
      }
      const TensorMapView& av = a->decoded.view;
      std::string expected, observed;
      switch (c.kind) {
        case CheckKind::kSameInnermost:
          if (av.dims[0] != b->decoded.view.dims[0]) {
            const TensorMapView& bv = b->decoded.view;
            expected = fmt::format("{} K-major: innermost dimension (dim 0) equal to {}'s dim 0 = {}", c.a, c.b, bv.dims[0]);
            observed = fmt::format("{} dim 0 = {} ({} dims {}, {} dims {}){}", c.a, av.dims[0], c.a, dims_str(av), c.b,
                                   dims_str(bv),
                                   av.rank > 1 && av.dims[1] == bv.dims[0]
                                       ? fmt::format(": {} is transposed (MN-major; its contiguous dim is {}'s dim 1)", c.a, c.b)
                                       : "");
          }
          break;
        case CheckKind::kSameDims:
          if (av.rank != b->decoded.view.rank || av.dims != b->decoded.view.dims) {
            expected = fmt::format("{} has the dims of {} = {}", c.a, c.b, dims_str(b->decoded.view));
            observed = fmt::format("{} dims {}", c.a, dims_str(av));
          }
          break;
        case CheckKind::kSameStrides:
          if (av.rank != b->decoded.view.rank || av.strides != b->decoded.view.strides) {
            expected = fmt::format("{} has the byte strides of {} = {}", c.a, c.b, strides_str(b->decoded.view));
            observed = fmt::format("{} strides {}", c.a, strides_str(av));
          }
          break;
        case CheckKind::kDtype:
          if (std::find(c.allowed.begin(), c.allowed.end(), to_string(av.dtype)) == c.allowed.end()) {
            expected = fmt::format("{} is {}", c.a, fmt::join(c.allowed, " or "));
            observed = fmt::format("{} is {}", c.a, to_string(av.dtype));
          }
          break;
        case CheckKind::kSwizzle:
          if (std::find(c.allowed.begin(), c.allowed.end(), swizzle_name(av.swizzle)) == c.allowed.end()) {
            expected = fmt::format("{} swizzle {}", c.a, fmt::join(c.allowed, " or "));
            observed = fmt::format("{} swizzle {}", c.a, swizzle_name(av.swizzle));
          }
          break;
        case CheckKind::kRank:
          if (av.rank != c.number) {
            expected = fmt::format("{} has rank {}", c.a, c.number);
            observed = fmt::format("{} has rank {}", c.a, av.rank);
          }
          break;
        case CheckKind::kAlignment:
          if (av.address % c.number) {
            expected = fmt::format("{}'s global address is a multiple of {} bytes", c.a, c.number);
            observed = fmt::format("address 0x{:x} (offset {} from a {}-byte boundary)", av.address, av.address % c.number, c.number);
          }
          break;
        case CheckKind::kStridesIncreasing: {
          const uint64_t es = static_cast<uint64_t>(element_size(av.dtype));
          uint64_t prev = av.dims[0] * es;
          for (uint32_t i = 0; i + 1 < av.rank && expected.empty(); ++i) {
            if (av.strides[i] < prev) {
              expected = fmt::format("{}'s rows do not overlap: stride of dim {} >= extent of the dims inside it = {} bytes", c.a, i + 1, prev);
              observed = fmt::format("stride of dim {} = {} bytes (strides {}, dims {})", i + 1, av.strides[i], strides_str(av), dims_str(av));
            }
            prev = av.strides[i] * av.dims[i + 1];
          }
          break;
        }
        case CheckKind::kNoOverlap: {
          const TensorMapView& bv = b->decoded.view;
          const uint64_t a0 = av.address, a1 = a0 + footprint_bytes(av.encode_args()), b0 = bv.address,
                         b1 = b0 + footprint_bytes(bv.encode_args());
          if (a0 < b1 && b0 < a1) {
            expected = fmt::format("{} and {} do not share memory", c.a, c.b);
            observed = fmt::format("{} spans [0x{:x}, 0x{:x}) and {} spans [0x{:x}, 0x{:x})", c.a, a0, a1, c.b, b0, b1);
          }
          break;
        }
      }
      if (expected.empty()) continue;
      failed.insert(c.a);
      Finding f = base(c.id, c.severity, c.a, a, c.hint);
      f.expected = std::move(expected);
      f.observed = std::move(observed);
      out.push_back(std::move(f));
    }
  }
}

}  // namespace tmaguard
