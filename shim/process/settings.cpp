// tmaguard shim: the TMAGUARD_* environment, read once.
#include "process/settings.h"

#include <sys/auxv.h>
#include <limits.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <strings.h>
#include <string>
#include <vector>

namespace tmaguard {
namespace {
std::atomic<const ConfigResult*> g_settings{nullptr};
char g_load_directory[PATH_MAX];  // the working directory when the library was loaded ("" when unknown)

// A log path that names a file relative to the working directory (not stderr, not a descriptor by name).
bool named_at_load(const std::string& path) {
  return !path.empty() && path[0] != '/' && path != "stderr";
}
std::string from_load_directory(const std::string& path) {
  if (path.empty() || path[0] == '/' || !g_load_directory[0]) return path;
  return std::string(g_load_directory) + "/" + path;
}
}  // namespace

void note_load_directory() {
  if (!getcwd(g_load_directory, sizeof g_load_directory)) g_load_directory[0] = 0;
}

const ConfigResult& settings() {
  if (const ConfigResult* s = g_settings.load(std::memory_order_acquire)) return *s;
  // In a secure-execution process (setuid, setgid, capabilities) the environment belongs to a less privileged user:
  // a log path, a rules file or a driver named there is not followed (parse_config says so).
  const bool secure = getauxval(AT_SECURE) != 0;
  std::vector<std::string> names;  // every TMAGUARD_ variable's name, for the misspellings parse_config says
  for (char** e = environ; e && *e; ++e)  // any case, with or without the underscore: TMAGUARD_mode, TMAGUARDMODE
    if (const char* eq = std::strchr(*e, '='); eq && strncasecmp(*e, "TMAGUARD", 8) == 0)
      names.emplace_back(static_cast<const char*>(*e), eq);
  // The config file first (its settings are taken where the environment has none): the one TMAGUARD_CONFIG names
  // (it must exist), else the default one when there is one. In a secure-execution process only the default (root's).
  const char* named = secure ? nullptr : std::getenv(kVariable.config_file);
  const bool given = named && *named;
  ConfigFile file = load_config_file(given ? from_load_directory(named) : kDefaultConfigFile, given);
  const bool have_file = given || !file.values.empty() || !file.errors.empty();
  auto* fresh = new ConfigResult(
      parse_config([](const char* n) { return std::getenv(n); }, secure, &names, have_file ? &file : nullptr));

  // Relative paths name files where the process started, not where it is when it first calls CUDA: a job that changes
  // its directory first (Hydra does) must still find its rules file and write its log where it was started.
  for (std::string& f : fresh->config.rules_files) f = from_load_directory(f);
  if (named_at_load(fresh->config.log_path)) fresh->config.log_path = from_load_directory(fresh->config.log_path);
  if (named_at_load(fresh->config.metrics_dir))
    fresh->config.metrics_dir = from_load_directory(fresh->config.metrics_dir);
  const ConfigResult* expected = nullptr;
  if (g_settings.compare_exchange_strong(expected, fresh, std::memory_order_acq_rel)) return *fresh;
  delete fresh;  // another thread read it first: the same environment
  return *expected;
}

}  // namespace tmaguard
