// tmaguard core: which rules apply to a kernel (substring, glob or regex on the mangled and the demangled name).
#include <cxxabi.h>
#include <fnmatch.h>

#include <cstdlib>
#include <regex>

#include "rules_model.h"

namespace tmaguard {

struct KernelPattern {
  std::regex regex;
};

std::shared_ptr<const KernelPattern> compile_kernel_regex(std::string_view regex, std::string* error) {
  try {
    auto p = std::make_shared<KernelPattern>();
    p->regex = std::regex(std::string(regex), std::regex::ECMAScript | std::regex::optimize);
    return p;
  } catch (const std::regex_error& e) {
    if (error) *error = e.what();
    return nullptr;
  }
}

namespace {

std::string demangled(std::string_view name) {
  int status = 0;
  char* d = abi::__cxa_demangle(std::string(name).c_str(), nullptr, nullptr, &status);
  std::string out = (status == 0 && d) ? d : "";
  std::free(d);
  return out;
}

bool matches(const Rule& r, std::string_view name) {
  if (!r.substring.empty()) return name.find(r.substring) != std::string_view::npos;
  const std::string s(name);
  if (!r.glob.empty()) return fnmatch(r.glob.c_str(), s.c_str(), 0) == 0;
  return r.pattern && std::regex_search(s, r.pattern->regex);
}

}  // namespace

std::vector<int> rules_for_kernel(const RuleSet& rules, std::string_view name) {
  std::vector<int> out;
  std::string plain;  // demangled, computed only if a rule needs it
  bool plain_done = false;
  for (std::size_t i = 0; i < rules.rules.size(); ++i) {
    const Rule& r = rules.rules[i];
    bool hit = matches(r, name);
    if (!hit) {
      if (!plain_done) plain = demangled(name), plain_done = true;
      hit = !plain.empty() && matches(r, plain);
    }
    if (hit) out.push_back(static_cast<int>(i));
  }
  return out;
}

}  // namespace tmaguard
