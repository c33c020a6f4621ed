// tmaguard core: the rule language's parser (TOML via toml++) with line-accurate validation, and rule-set merging.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <toml++/toml.h>
#include <algorithm>
#include <cstdlib>
#include <set>
#include <unordered_map>

#include "rules_model.h"

namespace tmaguard {
namespace {

const char* type_name(const toml::node& n) {
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

class Parser {
 public:
  explicit Parser(std::string_view source) : source_(source) {}
  std::vector<std::string> errors;

  void error(const toml::node* n, const std::string& what) {
    const auto line = n ? n->source().begin.line : 0;
    errors.push_back(fmt::format("{}:{}: {}", source_, line, what));
  }

  bool keys_known(const toml::table& t, const std::vector<const char*>& known, const std::string& where) {
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

  std::optional<Severity> severity(const toml::table& t, const std::string& where) {
    const auto s = str(t, "severity", where, false);
    if (!s) return std::nullopt;
    if (*s == "error") return Severity::kError;
    if (*s == "warning") return Severity::kWarning;
    error(t.get("severity"), fmt::format("severity '{}' in {} is not one of error, warning", *s, where));
    return std::nullopt;
  }

  // The keys a check kind reads for itself, with errors that carry the check's file and line.
  class Keys : public CheckKeys {
   public:
    Keys(Parser& p, const toml::table& t, const std::string& where) : p_(p), t_(t), where_(where) {}
    std::optional<std::vector<std::string>> names(const char* key, bool (*known)(std::string_view),
                                                  const char* what) override {
      const toml::node* n = t_.get(key);
      const toml::array* arr = n ? n->as_array() : nullptr;
      if (!arr) {
        p_.error(n ? n : &t_, fmt::format("{} needs '{}', an array of strings", where_, key));
        return std::nullopt;
      }
      std::vector<std::string> out;
      bool ok = true;
      for (const auto& e : *arr) {
        if (!e.is_string()) {
          p_.error(&e, fmt::format("'{}' in {} must hold strings", key, where_));
          ok = false;
          continue;
        }
        const std::string v(*e.value<std::string_view>());
        if (!known(v)) {
          p_.error(&e, fmt::format("'{}' in {} is not a known {}", v, where_, what));
          ok = false;
        }
        out.push_back(v);
      }
      return ok ? std::optional(out) : std::nullopt;
    }
    std::optional<int64_t> optional_integer(const char* key, bool (*ok)(int64_t), const char* requirement) override {
      if (!t_.get(key)) return std::nullopt;
      return integer(key, ok, requirement);
    }
    std::optional<int64_t> integer(const char* key, bool (*ok)(int64_t), const char* requirement) override {
      const auto v = p_.integer(t_, key, where_);
      if (v && ok(*v)) return v;
      p_.error(t_.get(key) ? t_.get(key) : &t_, fmt::format("{} needs {}", where_, requirement));
      return std::nullopt;
    }

   private:
    Parser& p_;
    const toml::table& t_;
    const std::string& where_;
  };

  // A check's maps (`a` and `b`, or `map`), each a name of [rule.maps], with its position there.
  void check_maps(const toml::table& c, const Rule& r, const std::string& where, Check& ch) {
    int at = -1;  // the position in [rule.maps] of the last name `named` read
    auto named = [&](const toml::node* node, const std::string& m) {
      const auto it = std::find_if(r.maps.begin(), r.maps.end(), [&](const MapRef& x) { return x.name == m; });
      if (it == r.maps.end())
        error(node, fmt::format("{} refers to map '{}', which [rule.maps] does not name", where, m));
      at = it == r.maps.end() ? -1 : static_cast<int>(it - r.maps.begin());
      return m;
    };
    auto need_map = [&](const char* key) -> std::string {
      at = -1;
      const auto m = str(c, key, where, true);
      return m ? named(c.get(key), *m) : std::string();
    };
    auto add_b = [&](std::string name) {
      ch.b.push_back(std::move(name));
      ch.b_at.push_back(at);
    };
    if (ch.kind->pair) {
      ch.a = need_map("a");
      ch.a_at = at;
      const toml::node* b = c.get("b");
      if (const toml::array* arr = b ? b->as_array() : nullptr) {
        for (const auto& e : *arr) {
          if (e.is_string())
            add_b(named(&e, std::string(*e.value<std::string_view>())));
          else
            error(&e, fmt::format("'b' in {} must name maps (strings)", where));
        }
        if (arr->empty()) error(b, fmt::format("'b' in {} names no map", where));
      } else {
        add_b(need_map("b"));
      }
    } else {
      ch.a = need_map("map");
      ch.a_at = at;
    }
  }

  // A [[rule.check]] (`judged` = true: it may carry its own id, severity and hint) or a [[rule.require]] /
  // [[rule.when]] entry (identification or applicability: no id, severity or hint of its own).
  std::optional<Check> parse_check(const toml::table& c, const Rule& r, const std::string& where, bool judged) {
    const auto kind_name = str(c, "kind", where, true);
    if (!kind_name) return std::nullopt;
    const CheckKind* kind = find_check_kind(*kind_name);
    if (!kind) {
      std::vector<std::string> names;
      for (const CheckKind& k : check_kinds()) names.emplace_back(k.name);
      error(c.get("kind"),
            fmt::format("unknown check kind '{}' in {} (known: {})", *kind_name, where, fmt::join(names, ", ")));
      return std::nullopt;
    }
    std::vector<const char*> known = {"kind"};
    if (judged) known.insert(known.end(), {"id", "severity", "hint"});
    if (kind->pair)
      known.insert(known.end(), {"a", "b"});
    else
      known.push_back("map");
    known.insert(known.end(), kind->keys.begin(), kind->keys.end());
    keys_known(c, known, where);
    Check ch;
    ch.kind = kind;
    check_maps(c, r, where, ch);
    Keys keys(*this, c, where);
    kind->parse(keys, ch);
    if (judged) {
      if (const auto id = str(c, "id", where, false)) ch.id = *id;
      ch.severity = severity(c, where);
      if (const auto h = str(c, "hint", where, false)) ch.hint = *h;
    }
    return ch;
  }

  // One of [[rule.check]], [[rule.require]], [[rule.when]].
  void parse_checks(const toml::table& t, const char* key, const Rule& r, const std::string& where, bool judged,
                    std::vector<Check>& out) {
    const toml::node* n = t.get(key);
    if (!n) return;
    const toml::array* arr = n->as_array();
    if (!arr) {
      error(n, fmt::format("'{}' in {} must be an array of tables ([[rule.{}]])", key, where, key));
      return;
    }
    int i = 0;
    for (const auto& e : *arr) {
      ++i;
      const toml::table* ct = e.as_table();
      if (!ct) {
        error(&e, fmt::format("'{}' entries in {} must be tables", key, where));
        continue;
      }
      if (auto ch = parse_check(*ct, r, fmt::format("{} {} #{}", where, key, i), judged)) out.push_back(std::move(*ch));
    }
  }

  // "N", "N+OFFSET" or either followed by "->AT" (a map in device memory AT bytes past the address the parameter,
  // or the 8-byte word OFFSET bytes into it, holds) of a "param:" place: what is wrong with it (empty when it can name
  // a map). A place that can never hold a map is refused here, so that check-rules says so instead of the rule
  // silently never applying.
  static std::string parse_place(std::string_view spec, MapRef& m) {
    const std::size_t arrow = spec.find("->");
    const bool device = arrow != std::string_view::npos;
    const std::string_view param = spec.substr(0, arrow), at = device ? spec.substr(arrow + 2) : "0";
    const std::size_t plus = param.find('+');
    const std::string_view num = param.substr(0, plus),
                           off = plus == std::string_view::npos ? "0" : param.substr(plus + 1);
    auto digits = [](std::string_view d, std::size_t most) {
      return !d.empty() && d.size() <= most &&
             std::all_of(d.begin(), d.end(), [](char c) { return c >= '0' && c <= '9'; });
    };
    if (!digits(num, 5) || !digits(off, 5) || !digits(at, 7))
      return "is not \"param:N\", \"param:N+OFFSET\" or either followed by \"->AT\" (decimal numbers, N and OFFSET "
             "of at most 5 digits, AT of at most 7, no spaces or signs)";
    const long index = std::stol(std::string(num)), offset = std::stol(std::string(off));
    const long long at_bytes = std::stoll(std::string(at));
    if (index > kMaxParamIndex)
      return fmt::format("names parameter {}, past any kernel's (the {}-byte parameter space holds at most {} "
                         "parameters)",
                         index, kParamSpaceBytes, kMaxParamIndex + 1);
    if (device) {
      if (offset % 8 != 0)
        return fmt::format("names offset {}, not a multiple of 8: a pointer inside a parameter sits at a multiple of 8 "
                           "from its start",
                           offset);
      if (offset + 8 > kParamSpaceBytes)
        return fmt::format("names offset {}: a pointer there ends past the {}-byte parameter space", offset,
                           kParamSpaceBytes);
      if (at_bytes % 16 != 0)
        return fmt::format("names {} bytes past the pointer, not a multiple of 16: a CUtensorMap in device memory is "
                           "at least 16-byte aligned",
                           at_bytes);
      if (at_bytes + static_cast<long long>(kTensorMapBytes) > static_cast<long long>(kDeviceReadMaxBytes))
        return fmt::format("names {} bytes past the pointer: tmaguard reads at most {} bytes there "
                           "(TMAGUARD_DEVICE_READ_BYTES), so a 128-byte map there is never seen",
                           at_bytes, kDeviceReadMaxBytes);
      m.place = MapPlace::device(static_cast<uint32_t>(index), static_cast<uint32_t>(offset),
                                 static_cast<uint32_t>(at_bytes));
      return "";
    }
    if (offset % 64 != 0)
      return fmt::format("names offset {}, not a multiple of 64: a CUtensorMap inside a parameter sits at a multiple "
                         "of 64 from its start",
                         offset);
    if (offset + static_cast<long>(kTensorMapBytes) > kParamSpaceBytes)
      return fmt::format("names offset {}: a 128-byte map there ends past the {}-byte parameter space", offset,
                         kParamSpaceBytes);
    m.place = MapPlace{static_cast<uint32_t>(index), static_cast<uint32_t>(offset)};
    return "";
  }

  void parse_maps(const toml::node* n, Rule& r, const std::string& where) {
    const toml::table* mt = n->as_table();
    if (!mt) {
      error(n, fmt::format("'maps' in {} must be a table of name = order", where));
      return;
    }
    for (const auto& [k, v] : *mt) {
      MapRef m;
      m.name = std::string(k.str());
      if (v.is_integer()) {
        m.order = *v.value<int64_t>();
        const int64_t most = r.expect_map_count.empty()
                                 ? -1
                                 : *std::max_element(r.expect_map_count.begin(), r.expect_map_count.end());
        if (r.map_count && (m.order >= *r.map_count || m.order < -*r.map_count))
          error(&v, fmt::format("map '{}' = {} in {} cannot exist with map_count = {}", m.name, m.order, where,
                                *r.map_count));
        else if (!r.map_count && most >= 0 && (m.order >= most || m.order < -most))
          error(&v, fmt::format("map '{}' = {} in {} cannot exist with expect_map_count's largest count, {}", m.name,
                                m.order, where, most));
        else if (m.order > kMaxParamIndex || m.order < -kMaxParamIndex - 1)
          error(&v, fmt::format("map '{}' = {} in {} is past any launch's maps (a kernel has at most {} parameters)",
                                m.name, m.order, where, kMaxParamIndex + 1));
      } else if (v.is_string() && v.value<std::string_view>()->rfind("param:", 0) == 0) {
        // "param:N" (a 128-byte parameter), "param:N+OFFSET" (a map OFFSET bytes into parameter N), either with
        // "->AT" (a map in device memory AT bytes past the address there).
        const std::string_view text = *v.value<std::string_view>();
        if (const std::string why = parse_place(text.substr(6), m); !why.empty()) {
          error(&v, fmt::format("map '{}' in {}: \"{}\" {}", m.name, where, text, why));
          continue;
        }
      } else {
        error(&v, fmt::format("map '{}' in {} must be an order among tensor maps (integer, negative from the end) "
                              "or \"param:N\" (\"param:N+OFFSET\", \"param:N->AT\")",
                              m.name, where));
        continue;
      }
      r.maps.push_back(std::move(m));
    }
  }

  void parse_rule(const toml::table& t, int index, RuleSet& out) {
    std::string where = fmt::format("rule #{}", index + 1);
    Rule r;
    if (const auto id = str(t, "id", where, true)) {
      r.id = *id;
      where = fmt::format("rule '{}'", r.id);
    }
    keys_known(t,
               {"id", "kernel", "kernel_glob", "kernel_regex", "map_count", "expect_map_count", "severity", "action",
                "hint", "maps", "when", "require", "signature_id", "not_checkable", "not_checkable_message", "check",
                "replaces_builtin", "stores"},
               where);
    if (const toml::node* n = t.get("replaces_builtin")) {
      if (n->is_boolean())
        r.replaces_builtin = *n->value<bool>();
      else
        error(n, fmt::format("'replaces_builtin' in {} must be true or false, got {}", where, type_name(*n)));
    }
    parse_matchers(t, r, where);
    parse_counts(t, r, where);
    parse_policy(t, r, where);
    parse_body(t, r, where);
    check_consistent(t, r, where);
    out.rules.push_back(std::move(r));
  }

  // kernel, kernel_glob or kernel_regex: exactly one, naming something.
  void parse_matchers(const toml::table& t, Rule& r, const std::string& where) {
    int matchers = 0;
    if (const auto s = str(t, "kernel", where, false)) r.substring = *s, ++matchers;
    if (const auto g = str(t, "kernel_glob", where, false)) {
      r.glob = *g, ++matchers;
      r.pattern = compile_kernel_glob(*g);
    }
    if (const auto re = str(t, "kernel_regex", where, false)) {
      ++matchers;
      r.regex = *re;
      std::string why;
      r.pattern = compile_kernel_regex(*re, &why);
      if (!r.pattern) error(t.get("kernel_regex"), fmt::format("bad kernel_regex '{}' in {}: {}", *re, where, why));
    }
    if (matchers != 1) error(&t, fmt::format("{} needs exactly one of kernel, kernel_glob, kernel_regex", where));
    for (const char* key : {"kernel", "kernel_glob", "kernel_regex"})
      if (const toml::node* k = t.get(key); k && k->value<std::string_view>() && k->value<std::string_view>()->empty())
        error(k, fmt::format("{} = \"\" in {} names no kernel: give a substring, glob or regex of kernel names", key,
                             where));
  }

  void parse_counts(const toml::table& t, Rule& r, const std::string& where) {
    r.map_count = integer(t, "map_count", where);
    if (const toml::node* n = t.get("expect_map_count")) {
      const toml::array* arr = n->as_array();
      if (!arr) {
        error(n, fmt::format("'expect_map_count' in {} must be an array of integers", where));
      } else {
        for (const auto& e : *arr) {
          if (e.is_integer())
            r.expect_map_count.push_back(*e.value<int64_t>());
          else
            error(&e, fmt::format("'expect_map_count' in {} must hold integers", where));
        }
      }
    }
  }

  void parse_policy(const toml::table& t, Rule& r, const std::string& where) {
    if (const auto s = severity(t, where)) r.severity = *s;
    if (const auto a = str(t, "action", where, false)) {
      if (const std::optional<Action> act = rule_action(*a))
        r.action = act;
      else
        error(t.get("action"), fmt::format("action '{}' in {} is not one of abort, reject, log", *a, where));
    }
    if (const auto h = str(t, "hint", where, false)) r.hint = *h;
  }

  // maps, when, require, check, and what a rule says when its kernel cannot be checked.
  void parse_body(const toml::table& t, Rule& r, const std::string& where) {
    if (const toml::node* n = t.get("maps")) parse_maps(n, r, where);
    parse_checks(t, "when", r, where, false, r.when);
    parse_checks(t, "require", r, where, false, r.require);
    parse_checks(t, "check", r, where, true, r.checks);
    if (const auto s = str(t, "signature_id", where, false)) r.signature_id = *s;
    if (!r.require.empty() && r.signature_id.empty()) r.signature_id = r.id + "-unrecognized-signature";
    if (const auto nc = str(t, "not_checkable", where, false)) r.not_checkable = *nc;
    if (const auto m = str(t, "not_checkable_message", where, false)) r.not_checkable_message = *m;
    if (const toml::node* n = t.get("stores")) parse_stores(*n, r, where);
  }

  // stores = ["dK", "dV"]: the maps the kernel writes through with TMA stores, each one of the rule's maps.
  void parse_stores(const toml::node& n, Rule& r, const std::string& where) {
    const toml::array* arr = n.as_array();
    if (!arr) return error(&n, fmt::format("'stores' in {} must be an array of the rule's map names", where));
    for (const auto& e : *arr) {
      const std::optional<std::string_view> name = e.value<std::string_view>();
      if (!e.is_string())
        error(&e, fmt::format("'stores' in {} must hold map names (strings), got {}", where, type_name(e)));
      else if (std::none_of(r.maps.begin(), r.maps.end(), [&](const MapRef& m) { return m.name == *name; }))
        error(&e, fmt::format("'stores' in {} names '{}', which is none of the rule's [rule.maps]", where, *name));
      else
        r.stores.emplace_back(*name);
    }
  }

  // What no single key shows: combinations a rule cannot have.
  void check_consistent(const toml::table& t, Rule& r, const std::string& where) {
    if (!r.not_checkable_message.empty() && r.not_checkable.empty())
      error(t.get("not_checkable_message"), fmt::format("{} has a not_checkable_message but no not_checkable", where));
    if (!r.not_checkable.empty() && !r.checks.empty())
      error(&t, fmt::format("{} is not_checkable: it cannot also have [[rule.check]] entries", where));
    // A rule judges either the maps in a launch's parameters or the maps read back from device memory after a
    // kernel: those are judged apart, later, and have no order or count of their own.
    const auto on_device = [](const MapRef& m) { return m.place && m.place->on_device(); };
    r.device = std::any_of(r.maps.begin(), r.maps.end(), on_device);
    if (r.device && !std::all_of(r.maps.begin(), r.maps.end(), on_device))
      error(t.get("maps"), fmt::format("{} names maps in device memory (\"param:N->AT\") and maps in the parameters: "
                                       "the two are judged at different times, so a rule names one kind only",
                                       where));
    if (r.device && (r.map_count || !r.expect_map_count.empty()))
      error(&t, fmt::format("{} names maps in device memory: map_count and expect_map_count count the maps in a "
                            "launch's parameters and cannot be used with them",
                            where));
    if (r.checks.empty() && r.expect_map_count.empty() && r.not_checkable.empty() && r.stores.empty())
      error(&t, fmt::format("{} has no [[rule.check]], no expect_map_count, no not_checkable and no stores: it can "
                            "never report anything",
                            where));
  }

 private:
  std::string_view source_;
};

}  // namespace

RulesResult parse_rules(std::string_view text, std::string_view source) {
  RulesResult res;
  auto set = std::make_shared<RuleSet>();
  Parser p(source);
  // Rule files are ASCII. The gate also keeps toml++ 3.3 (Debian's) away from its Unicode whitespace classifier,
  // which reaches __builtin_unreachable on some non-ASCII input (found by tests/fuzz/fuzz_rules.cpp).
  int line = 1;
  for (const char ch : text) {
    const auto c = static_cast<unsigned char>(ch);
    if (c == '\n') ++line;
    if (c >= 0x80 || (c < 0x20 && c != '\n' && c != '\r' && c != '\t')) {
      res.errors.push_back(
          fmt::format("{}:{}: byte 0x{:02x} is not allowed: rule files are plain ASCII text", source, line, c));
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
          if (const toml::table* t = e.as_table())
            p.parse_rule(*t, i, *set);
          else
            p.error(&e, "'rule' entries must be tables ([[rule]])");
          ++i;
        }
      }
    }
    if (set->rules.empty() && p.errors.empty())  // an empty file (a truncated copy, a template) guards nothing
      p.errors.push_back(fmt::format("{}: no [[rule]] in it: a rules file that guards nothing is a mistake", source));
    std::set<std::string> ids;
    for (const Rule& r : set->rules)
      if (!r.id.empty() && !ids.insert(r.id).second)
        p.errors.push_back(fmt::format("{}: rule id '{}' is defined twice", source, r.id));
  } catch (const toml::parse_error& e) {
    p.errors.push_back(fmt::format("{}:{}: TOML syntax: {}", source, e.source().begin.line, e.description()));
  }
  res.errors = std::move(p.errors);
  if (res.errors.empty()) res.rules = std::move(set);
  return res;
}

std::shared_ptr<const RuleSet> merge_rules(const std::vector<std::shared_ptr<const RuleSet>>& sets) {
  auto out = std::make_shared<RuleSet>();
  std::unordered_map<std::string, std::size_t> where;  // id -> index in out->rules: linear in the number of rules
  for (const auto& s : sets) {
    if (!s) continue;
    for (const Rule& r : s->rules) {
      const auto it = where.find(r.id);
      if (it != where.end()) {
        out->rules[it->second] = r;
      } else {
        where.emplace(r.id, out->rules.size());
        out->rules.push_back(r);
      }
    }
  }
  return out;
}

std::size_t rule_count(const RuleSet& rules) { return rules.rules.size(); }

std::vector<std::string> describe_rules(const RuleSet& rules) {
  std::vector<std::string> out;
  for (const Rule& r : rules.rules) {
    const std::string matcher = !r.substring.empty() ? fmt::format("kernel contains '{}'", r.substring)
                                : !r.glob.empty()     ? fmt::format("kernel_glob '{}'", r.glob)
                                                      : fmt::format("kernel_regex '{}'", r.regex);
    std::vector<std::string> maps;
    for (const MapRef& m : r.maps) {
      maps.push_back(m.place ? fmt::format("{} = param {}", m.name, to_string(*m.place))
                             : fmt::format("{} = map {}", m.name, m.order));
    }
    std::string line = fmt::format("rule '{}': {}", r.id, matcher);
    if (r.map_count) line += fmt::format(", {} maps", *r.map_count);
    if (!maps.empty()) line += fmt::format("; {}", fmt::join(maps, ", "));
    if (!r.checks.empty()) line += fmt::format("; {} check(s)", r.checks.size());
    if (!r.stores.empty()) line += fmt::format("; stores {}", fmt::join(r.stores, ", "));
    if (!r.not_checkable.empty()) line += fmt::format("; not checkable: {}", r.not_checkable);
    out.push_back(std::move(line));
  }
  return out;
}

}  // namespace tmaguard
