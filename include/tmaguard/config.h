// tmaguard: configuration from TMAGUARD_* variables. Pure: the caller supplies the lookup (tests pass a map).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace tmaguard {

enum class Mode { kAbort, kReject, kLog, kInspect, kOff };
enum class LogFormat { kText, kJson };
//! Which call stacks a reported finding carries (TMAGUARD_STACK).
enum class StackMode { kOff, kNative, kPython, kAll };
const char* to_string(Mode m);

//! One TMAGUARD_SUPPRESS entry: findings of `rule` (on kernels whose name matches `kernel_glob`, any when empty).
struct Suppression {
  std::string rule;
  std::string kernel_glob;
};

//! The settings in force. The members the TMAGUARD_* variables set are declared by their rows in flags.inc, with
//! their defaults (a member per row, named in its second column); the rest come from the job's launcher.
struct Config {
#define TG_FLAG(name, member, type, value, unset, help) std::decay_t<decltype(value)> member = value;
#include "tmaguard/flags.inc"
#undef TG_FLAG
  std::string rank;        // the process's global rank from its launcher (rank_variables(): the first one set)
  std::string local_rank;  // its rank on this node, likewise
  std::string rank_from;   // which variable gave `rank` (or `local_rank` when only that is set)
  std::string job_id;                    // SLURM_JOB_ID, else TORCHELASTIC_RUN_ID (empty: none)
  std::string job_from;                  // which variable gave it
  //! Each setting's value as given (the default's spelling when none was) and where it came from: "environment",
  //! "config file PATH" or "default".
  struct Source {
    std::string name, value, from;
  };
  std::vector<Source> sources;
};
//! TMAGUARD_DEVICE_AUDIT=all.
inline constexpr uint64_t kAuditEveryLaunch = ~uint64_t{0};

struct ConfigResult {
  Config config;
  std::vector<std::string> errors;   // one line each, naming the variable and the bad value: the job must stop
  std::vector<std::string> notices;  // one line each: said once, the job goes on
};

//! The TMAGUARD_* variables (flags.inc): name, the values its type takes, its default, one line of help.
struct FlagInfo {
  const char* name;
  std::string values;
  std::string default_value;  // the default as a user would write it; "" when it is empty
  const char* unset;          // what an empty default means ("stderr", "none"); "" when the default is a value
  const char* help;
  //! The default as the help and the reference show it.
  std::string fallback() const { return default_value.empty() ? unset : default_value; }
};
const std::vector<FlagInfo>& flags();
//! Each variable's name by its Config member (kVariable.config_file is "TMAGUARD_CONFIG"): code that names a
//! variable takes the name from here, so that flags.inc stays the one table of them.
struct VariableNames {
#define TG_FLAG(name, member, type, value, unset, help) const char* member = #name;
#include "tmaguard/flags.inc"
#undef TG_FLAG
};
inline constexpr VariableNames kVariable{};
//! The tmaguard command's own variables (scripts/tmaguard), which a job it starts inherits: no setting of the
//! library, and no misspelling of one (TMAGUARD_LIB is two edits from TMAGUARD_LOG).
inline constexpr const char* kCommandVariables[] = {"TMAGUARD_LIB", "TMAGUARD_TOOL", "TMAGUARD_BIN"};
//! The reference table of the variables (docs/reference.md), in Markdown.
std::string flags_markdown_table();
//! The same, as plain text for a terminal (`tmaguard --help`).
std::string flags_text();

//! Where a process's rank comes from, in order of precedence (the first one set wins): the launcher-specific
//! variables before Slurm's, because torchrun and mpirun under srun set both and theirs is the job's rank.
struct RankVariable {
  const char* global;  // the process's rank in the job
  const char* local;   // its rank on its node
  const char* launcher;
};
const std::vector<RankVariable>& rank_variables();

using EnvLookup = std::function<const char*(const char*)>;

//! The settings a config file holds, by variable name (TMAGUARD_MODE for `mode = "log"`), as strings (an array of
//! strings joined the way the variable writes it: ':' for rules, ',' for suppress), with one line per problem.
struct ConfigFile {
  std::string path;
  std::vector<std::pair<std::string, std::string>> values;
  std::vector<std::string> errors;
};
//! Reads a config file (TOML; at most 1 MiB, a regular file). `must_exist`: a file the user named; the default file
//! (/etc/tmaguard/tmaguard.toml) may be absent.
ConfigFile load_config_file(const std::string& path, bool must_exist);
//! The default config file.
inline constexpr const char* kDefaultConfigFile = "/etc/tmaguard/tmaguard.toml";
//! Reads every variable of flags.inc. Values are matched without regard to case or surrounding spaces; an empty
//! value means the default; a value that is none of a variable's choices is an error (the job must stop). In a
//! secure-execution process (setuid and the like: `secure_execution`) the variables that name files (the log, rule
//! files, the driver) come from a less privileged user and are ignored, with a notice; the guard stays on.
//! `names`, when given: every variable in the environment, so that one spelled like a tmaguard variable but not one
//! (TMAGUARD_RULE for TMAGUARD_RULES) is said, not ignored in silence (a notice, as the sanitizers warn about unknown
//! flags). Other TMAGUARD_* names (the scripts' own) are not looked at.
//! `file`, when given: the config file's settings, taken where the environment has none.
ConfigResult parse_config(const EnvLookup& env, bool secure_execution = false,
                          const std::vector<std::string>* names = nullptr, const ConfigFile* file = nullptr);
//! The notices misspelled variables draw (parse_config's, for `names`).
std::vector<std::string> misspelled_variables(const std::vector<std::string>& names);

//! What a path pattern's % sequences stand for.
struct PathContext {
  long pid = 0;
  std::string host;  // as `hostname` prints it, up to the first dot
  std::string rank;  // empty: "x"
  std::string job;   // empty: "x"
};
//! Expands %p (pid), %h (host), %r (rank), %j (job id) and %% (a percent sign), each field through path_field();
//! anything else is left as it is (path_pattern_error says so first).
std::string expand_path(std::string_view pattern, const PathContext& ctx);
//! A host, rank or job id as a path takes it: characters outside [A-Za-z0-9._+-] become '_', and so do the dots of a
//! value that holds ".." or is only dots, so that an expanded field never names another directory.
std::string path_field(std::string_view value);
//! What is wrong with a pattern ("" when nothing): an unknown % sequence, or a % at the end.
std::string path_pattern_error(std::string_view pattern);
//! expand_path with the pid alone (host, rank and job unknown: "x").
std::string expand_log_path(std::string_view pattern, long pid);

}  // namespace tmaguard
