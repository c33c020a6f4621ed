// tmaguard core: parsing TMAGUARD_* variables into a Config (the caller reads the environment, once).
#include "tmaguard/config.h"

#include <fmt/format.h>

#include <algorithm>

namespace tmaguard {

const char* to_string(Mode m) {
  switch (m) {
    case Mode::kAbort: return "abort";
    case Mode::kReject: return "reject";
    case Mode::kLog: return "log";
    case Mode::kInspect: return "inspect";
    default: return "off";
  }
}

ConfigResult parse_config(const EnvLookup& env) {
  ConfigResult r;
  auto get = [&](const char* name) -> std::string_view {
    const char* v = env(name);
    return v ? std::string_view(v) : std::string_view();
  };
  if (const auto m = get("TMAGUARD_MODE"); !m.empty()) {
    if (m == "abort")
      r.config.mode = Mode::kAbort;
    else if (m == "reject")
      r.config.mode = Mode::kReject;
    else if (m == "log")
      r.config.mode = Mode::kLog;
    else if (m == "inspect")
      r.config.mode = Mode::kInspect;
    else if (m == "off")
      r.config.mode = Mode::kOff;
    else
      r.errors.push_back(fmt::format("TMAGUARD_MODE='{}' is not one of abort, reject, log, inspect, off", m));
  }
  if (const auto f = get("TMAGUARD_LOG_FORMAT"); !f.empty()) {
    if (f == "text")
      r.config.format = LogFormat::kText;
    else if (f == "json")
      r.config.format = LogFormat::kJson;
    else
      r.errors.push_back(fmt::format("TMAGUARD_LOG_FORMAT='{}' is not one of text, json", f));
  }
  if (const char* p = env("TMAGUARD_LOG")) {
    if (*p == '\0')
      r.errors.push_back("TMAGUARD_LOG is set but empty (unset it to log to stderr)");
    else
      r.config.log_path = p;
  }
  if (const char* l = env("TMAGUARD_LIBCUDA"); l && *l == '\0')
    r.errors.push_back("TMAGUARD_LIBCUDA is set but empty (unset it to use libcuda.so.1)");
  if (const auto rules = get("TMAGUARD_RULES"); !rules.empty()) {
    std::size_t start = 0;
    while (start <= rules.size()) {
      const std::size_t end = std::min(rules.find(':', start), rules.size());
      if (end > start) r.config.rules_files.emplace_back(rules.substr(start, end - start));
      start = end + 1;
    }
  }
  if (const auto b = get("TMAGUARD_BUILTIN_RULES"); !b.empty()) {
    if (b == "on")
      r.config.builtin_rules = true;
    else if (b == "off")
      r.config.builtin_rules = false;
    else
      r.errors.push_back(fmt::format("TMAGUARD_BUILTIN_RULES='{}' is not one of on, off", b));
  }
  if (const auto c = get("TMAGUARD_RULES_ON_ERROR"); !c.empty()) {
    if (c == "stop")
      r.config.continue_on_rules_error = false;
    else if (c == "continue")
      r.config.continue_on_rules_error = true;
    else
      r.errors.push_back(fmt::format("TMAGUARD_RULES_ON_ERROR='{}' is not one of stop, continue", c));
  }
  if (const auto rank = get("RANK"); !rank.empty())
    r.config.rank = std::string(rank);
  else if (const auto local = get("LOCAL_RANK"); !local.empty())
    r.config.rank = std::string(local);
  return r;
}

std::string expand_log_path(std::string_view pattern, long pid) {
  std::string out;
  for (std::size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] == '%' && i + 1 < pattern.size() && pattern[i + 1] == 'p') {
      out += std::to_string(pid);
      ++i;
    } else {
      out += pattern[i];
    }
  }
  return out;
}

}  // namespace tmaguard
