// tmaguard core: which rules apply to a kernel (substring, glob or regex on the mangled and the demangled name).
//
// Patterns run on PCRE2 with bounded work: every pattern is compiled with automatic callouts, and a match gets a
// budget of callouts (one fires each time the matcher reaches a pattern item, backtracking and new start positions
// included), beside PCRE2's own match and heap limits. PCRE2's match limit alone does not count backtracking inside
// a single-character repeat: "......+$..." on a 29,000-character name took 7.5 s under it (found by
// tests/fuzz/fuzz_match.cpp). So a pathological kernel_regex ("(a+)+$") or a templated C++ kernel name of 40,000
// characters costs bounded time and no stack, and a match that runs out counts as no match (and is said). Globs
// are translated to anchored patterns and share the same bounds (glibc's fnmatch backtracks on many '*').
#define PCRE2_CODE_UNIT_WIDTH 8
#include <cxxabi.h>
#include <fmt/format.h>
#include <pcre2.h>

#include <cstdlib>

#include "rules_model.h"

namespace tmaguard {
namespace {

constexpr uint32_t kMatchLimit = 1000000;            // PCRE2's own limit on internal match() calls
constexpr uint64_t kCalloutBudget = 4000000;         // pattern items visited per match: tens of milliseconds at worst
constexpr uint32_t kHeapLimitKiB = 16 * 1024;        // backtracking memory per match
constexpr std::size_t kMaxDemangledInput = 1 << 16;  // longer names are matched mangled only

}  // namespace

struct KernelPattern {
  pcre2_code* code = nullptr;
  ~KernelPattern() { pcre2_code_free(code); }
};

namespace {

std::shared_ptr<const KernelPattern> compile(const std::string& pattern, std::string* error) {
  int code = 0;
  PCRE2_SIZE offset = 0;
  pcre2_code* re = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(), PCRE2_AUTO_CALLOUT,
                                 &code, &offset, nullptr);
  if (!re) {
    if (error) {
      PCRE2_UCHAR msg[256];
      pcre2_get_error_message(code, msg, sizeof msg);
      *error = fmt::format("{} at offset {}", reinterpret_cast<const char*>(msg), offset);
    }
    return nullptr;
  }
  auto p = std::make_shared<KernelPattern>();
  p->code = re;
  return p;
}

// fnmatch(3) without flags: '*' any run of characters, '?' one, [...] a set ([!...] or [^...] negated), '\' escapes.
std::string glob_to_regex(std::string_view g) {
  std::string re = "^(?s:";
  auto literal = [&](char c) {
    if (!std::isalnum(static_cast<unsigned char>(c))) re += '\\';
    re += c;
  };
  for (std::size_t i = 0; i < g.size(); ++i) {
    const char c = g[i];
    if (c == '*') {
      re += ".*";
    } else if (c == '?') {
      re += '.';
    } else if (c == '\\' && i + 1 < g.size()) {
      literal(g[++i]);
    } else if (c == '[') {
      std::size_t j = i + 1;
      if (j < g.size() && (g[j] == '!' || g[j] == '^')) ++j;
      if (j < g.size() && g[j] == ']') ++j;
      while (j < g.size() && g[j] != ']') ++j;
      if (j >= g.size()) {  // no closing bracket: a literal '['
        literal(c);
        continue;
      }
      re += '[';
      std::size_t k = i + 1;
      if (g[k] == '!' || g[k] == '^') {
        re += '^';
        ++k;
      }
      for (std::size_t first = k; k < j; ++k) {
        const char m = g[k];
        if (m == '-' && k != first && k + 1 != j)
          re += '-';
        else if (std::isalnum(static_cast<unsigned char>(m)))
          re += m;
        else
          re += '\\', re += m;
      }
      re += ']';
      i = j;
    } else {
      literal(c);
    }
  }
  return re + ")$";
}

std::string demangled(std::string_view name) {
  if (name.size() > kMaxDemangledInput || name.rfind("_Z", 0) != 0) return "";
  int status = 0;
  char* d = abi::__cxa_demangle(std::string(name).c_str(), nullptr, nullptr, &status);
  std::string out = (status == 0 && d) ? d : "";
  std::free(d);
  return out;
}

int spend(pcre2_callout_block*, void* budget) {
  auto* left = static_cast<uint64_t*>(budget);
  return (*left)-- == 0 ? PCRE2_ERROR_CALLOUT : 0;  // negative: abandon the whole match
}

// 1 match, 0 no match, -1 a limit was reached (counts as no match).
int search(const KernelPattern& p, std::string_view name) {
  pcre2_match_context* mc = pcre2_match_context_create(nullptr);
  pcre2_match_data* md = pcre2_match_data_create_from_pattern(p.code, nullptr);
  if (!mc || !md) {
    pcre2_match_context_free(mc);
    pcre2_match_data_free(md);
    return -1;
  }
  uint64_t budget = kCalloutBudget;
  pcre2_set_match_limit(mc, kMatchLimit);
  pcre2_set_heap_limit(mc, kHeapLimitKiB);
  pcre2_set_callout(mc, spend, &budget);
  const int rc = pcre2_match(p.code, reinterpret_cast<PCRE2_SPTR>(name.data()), name.size(), 0, 0, md, mc);
  pcre2_match_data_free(md);
  pcre2_match_context_free(mc);
  if (rc >= 0) return 1;
  return rc == PCRE2_ERROR_NOMATCH ? 0 : -1;
}

bool digit(char c) { return c >= '0' && c <= '9'; }

// `kernel = "...Sm90"` names that class, not ...Sm900: a match whose first (last) character is a digit must not have
// a digit before (after) it in the name.
bool contains_bounded(std::string_view name, std::string_view sub) {
  for (std::size_t at = name.find(sub); at != std::string_view::npos; at = name.find(sub, at + 1)) {
    const std::size_t end = at + sub.size();
    const bool open_left = !digit(sub.front()) || at == 0 || !digit(name[at - 1]);
    const bool open_right = !digit(sub.back()) || end == name.size() || !digit(name[end]);
    if (open_left && open_right) return true;
  }
  return false;
}

int matches(const Rule& r, std::string_view name) {
  if (!r.substring.empty()) return contains_bounded(name, r.substring);
  return r.pattern ? search(*r.pattern, name) : 0;
}

}  // namespace

std::shared_ptr<const KernelPattern> compile_kernel_regex(std::string_view regex, std::string* error) {
  return compile(std::string(regex), error);
}

std::shared_ptr<const KernelPattern> compile_kernel_glob(std::string_view glob) {
  return compile(glob_to_regex(glob), nullptr);
}

std::vector<int> rules_for_kernel(const RuleSet& rules, std::string_view name, std::vector<std::string>* notes) {
  std::vector<int> out;
  std::string plain;  // demangled, computed only if a rule needs it
  bool plain_done = false;
  for (std::size_t i = 0; i < rules.rules.size(); ++i) {
    const Rule& r = rules.rules[i];
    int hit = matches(r, name);
    if (hit == 0) {
      if (!plain_done) plain = demangled(name), plain_done = true;
      if (!plain.empty()) hit = matches(r, plain);
    }
    if (hit < 0 && notes)
      notes->push_back(
          fmt::format("rule '{}': its kernel pattern reached the match limit on a kernel name of {} "
                      "characters and counts as not matching it",
                      r.id, name.size()));
    if (hit > 0) out.push_back(static_cast<int>(i));
  }
  return out;
}

}  // namespace tmaguard
