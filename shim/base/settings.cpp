// tmaguard shim: the TMAGUARD_* environment, read once.
#include "base/settings.h"

#include <sys/auxv.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace tmaguard {
namespace {
std::atomic<const ConfigResult*> g_settings{nullptr};
}  // namespace

const ConfigResult& settings() {
  if (const ConfigResult* s = g_settings.load(std::memory_order_acquire)) return *s;
  // In a secure-execution process (setuid, setgid, capabilities) the environment belongs to a less privileged user:
  // a log path, a rules file or a driver named there is not followed (parse_config says so).
  const bool secure = getauxval(AT_SECURE) != 0;
  std::vector<std::string> names;  // every TMAGUARD_ variable's name, for the misspellings parse_config says
  for (char** e = environ; e && *e; ++e)
    if (const char* eq = std::strchr(*e, '='); eq && std::strncmp(*e, "TMAGUARD_", 9) == 0)
      names.emplace_back(static_cast<const char*>(*e), eq);
  auto* fresh = new ConfigResult(parse_config([](const char* n) { return std::getenv(n); }, secure, &names));
  const ConfigResult* expected = nullptr;
  if (g_settings.compare_exchange_strong(expected, fresh, std::memory_order_acq_rel)) return *fresh;
  delete fresh;  // another thread read it first: the same environment
  return *expected;
}

}  // namespace tmaguard
