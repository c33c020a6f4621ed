// tmaguard core: parsing TMAGUARD_* variables into a Config (the caller reads the environment, once).
#include "tmaguard/config.h"

#include <fmt/format.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>
#include <toml++/toml.h>

#include "tmaguard/launch.h"

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

namespace {

std::string_view trim(std::string_view v) {
  const auto space = [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; };
  while (!v.empty() && space(v.front())) v.remove_prefix(1);
  while (!v.empty() && space(v.back())) v.remove_suffix(1);
  return v;
}

std::string lower(std::string_view v) {
  std::string s(v);
  for (char& c : s)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return s;
}

// A decimal number in [lo, hi], or nullopt.
std::optional<uint64_t> number_in(std::string_view v, uint64_t lo, uint64_t hi) {
  const std::string_view t = trim(v);
  if (t.empty() || t.size() > 18 || !std::all_of(t.begin(), t.end(), [](char ch) { return ch >= '0' && ch <= '9'; }))
    return std::nullopt;
  const uint64_t n = std::stoull(std::string(t));
  if (n < lo || n > hi) return std::nullopt;
  return n;
}

// ---- the flag types of flags.inc. Each knows the values it takes (values(), for help and the reference table),
// whether it names a file (ignored in a secure-execution process), and how to read a value into its Config member:
// read() returns "" when it took the value, else what is wrong with it ("is not one of ...").

template <typename T>
struct Choice {
  const char* name;
  T value;
};
// A value among `choices` (any case, surrounding spaces ignored); `spellings` are other words for some of them, taken
// but not listed.
template <typename T, std::size_t N>
std::string read_choice(const Choice<T> (&choices)[N], std::string_view raw, T& out,
                        const Choice<T>* spellings = nullptr, std::size_t n_spellings = 0) {
  const std::string v = lower(trim(raw));
  for (const Choice<T>& c : choices)
    if (v == c.name) return out = c.value, "";
  for (std::size_t i = 0; i < n_spellings; ++i)
    if (v == spellings[i].name) return out = spellings[i].value, "";
  std::string names;
  for (const Choice<T>& c : choices) names += (names.empty() ? "" : ", ") + std::string(c.name);
  return "is not one of " + names;
}
template <typename T, std::size_t N>
std::string show_choice(const Choice<T> (&choices)[N], const T& value) {
  for (const Choice<T>& c : choices)
    if (c.value == value) return c.name;
  return "";
}
// Entries joined as the variable writes them.
template <typename T, typename Show>
std::string show_list(const std::vector<T>& items, char separator, Show&& show) {
  std::string s;
  for (const T& item : items) s += (s.empty() ? "" : std::string(1, separator)) + show(item);
  return s;
}
template <typename T, std::size_t N>
std::string choice_values(const Choice<T> (&choices)[N]) {
  std::string s;
  for (const Choice<T>& c : choices) s += (s.empty() ? "" : "|") + std::string(c.name);
  return s;
}

struct ModeFlag {
  static constexpr Choice<Mode> kChoices[] = {{"abort", Mode::kAbort},
                                              {"reject", Mode::kReject},
                                              {"log", Mode::kLog},
                                              {"inspect", Mode::kInspect},
                                              {"off", Mode::kOff}};
  static constexpr bool kNamesFile = false;
  static std::string values() { return choice_values(kChoices); }
  static std::string read(std::string_view v, Mode& out) { return read_choice(kChoices, v, out); }
  static std::string show(Mode v) { return show_choice(kChoices, v); }
};
struct FormatFlag {
  static constexpr Choice<LogFormat> kChoices[] = {{"text", LogFormat::kText}, {"json", LogFormat::kJson}};
  static constexpr bool kNamesFile = false;
  static std::string values() { return choice_values(kChoices); }
  static std::string read(std::string_view v, LogFormat& out) { return read_choice(kChoices, v, out); }
  static std::string show(LogFormat v) { return show_choice(kChoices, v); }
};
struct StackFlag {
  static constexpr Choice<StackMode> kChoices[] = {
      {"all", StackMode::kAll}, {"native", StackMode::kNative}, {"python", StackMode::kPython}, {"off", StackMode::kOff}};
  static constexpr bool kNamesFile = false;
  static std::string values() { return choice_values(kChoices); }
  static std::string read(std::string_view v, StackMode& out) { return read_choice(kChoices, v, out); }
  static std::string show(StackMode v) { return show_choice(kChoices, v); }
};
struct OnRulesErrorFlag {  // continue_on_rules_error
  static constexpr Choice<bool> kChoices[] = {{"stop", false}, {"continue", true}};
  static constexpr bool kNamesFile = false;
  static std::string values() { return choice_values(kChoices); }
  static std::string read(std::string_view v, bool& out) { return read_choice(kChoices, v, out); }
  static std::string show(bool v) { return show_choice(kChoices, v); }
};
struct RepairFlag {  // repair_large_tensor_flag
  static constexpr Choice<bool> kChoices[] = {{"off", false}, {"large-tensor-flag", true}};
  static constexpr bool kNamesFile = false;
  static std::string values() { return choice_values(kChoices); }
  static std::string read(std::string_view v, bool& out) { return read_choice(kChoices, v, out); }
  static std::string show(bool v) { return show_choice(kChoices, v); }
};
struct SwitchFlag {
  static constexpr Choice<bool> kChoices[] = {{"on", true}, {"off", false}};
  static constexpr Choice<bool> kSpellings[] = {{"true", true}, {"yes", true}, {"1", true},
                                                {"false", false}, {"no", false}, {"0", false}};
  static constexpr bool kNamesFile = false;
  static std::string values() { return choice_values(kChoices); }
  static std::string read(std::string_view v, bool& out) { return read_choice(kChoices, v, out, kSpellings, 6); }
  static std::string show(bool v) { return show_choice(kChoices, v); }
};
struct PathFlag {
  static constexpr bool kNamesFile = true;
  static std::string values() { return "PATH"; }
  static std::string read(std::string_view v, std::string& out) { return out = std::string(v), ""; }
  static std::string show(const std::string& v) { return v; }
};
struct PathListFlag {
  static constexpr bool kNamesFile = true;
  static std::string values() { return "FILE[:FILE...]"; }
  static std::string show(const std::vector<std::string>& v) {
    return show_list(v, ':', [](const std::string& f) { return f; });
  }
  static std::string read(std::string_view v, std::vector<std::string>& out) {
    for (std::size_t start = 0; start <= v.size();) {
      const std::size_t end = std::min(v.find(':', start), v.size());
      if (trim(v.substr(start, end - start)).empty())
        return "has an empty file name (files are separated by ':'; a file name cannot hold one)";
      out.emplace_back(v.substr(start, end - start));
      start = end + 1;
    }
    return "";
  }
};
struct AuditFlag {  // launches of each kernel audited
  static constexpr bool kNamesFile = false;
  static std::string values() { return "N|all|off"; }
  static std::string show(uint64_t v) { return v == 0 ? "off" : v == kAuditEveryLaunch ? "all" : std::to_string(v); }
  static std::string read(std::string_view raw, uint64_t& out) {
    const std::string v = lower(trim(raw));
    if (v == "off") return out = 0, "";
    if (v == "all") return out = kAuditEveryLaunch, "";
    if (const auto n = number_in(v, 0, 999999999999999999ULL)) return out = *n, "";
    return "is not one of a number, all, off";
  }
};
struct SecondsFlag {
  static constexpr bool kNamesFile = false;
  static std::string values() { return "SECONDS"; }
  static std::string show(uint64_t v) { return std::to_string(v); }
  static std::string read(std::string_view v, uint64_t& out) {
    if (const auto n = number_in(v, 0, 86400)) return out = *n, "";
    return "is not a whole number of seconds from 0 to 86400";
  }
};
struct PathPatternFlag {  // a path with % sequences, checked now so that a bad one stops the job at start
  static constexpr bool kNamesFile = true;
  static std::string values() { return "PATH"; }
  static std::string read(std::string_view v, std::string& out) {
    if (std::string why = path_pattern_error(v); !why.empty()) return why;
    return out = std::string(v), "";
  }
  static std::string show(const std::string& v) { return v; }
};
struct SuppressFlag {
  static constexpr bool kNamesFile = false;
  static std::string values() { return "RULE[@KERNEL_GLOB][,...]"; }
  static std::string show(const std::vector<Suppression>& v) {
    return show_list(v, ',',
                     [](const Suppression& e) { return e.rule + (e.kernel_glob.empty() ? "" : "@" + e.kernel_glob); });
  }
  static std::string read(std::string_view v, std::vector<Suppression>& out) {
    for (std::size_t start = 0; start <= v.size();) {
      const std::size_t end = std::min(v.find(',', start), v.size());
      const std::string_view entry = trim(v.substr(start, end - start));
      start = end + 1;
      const std::size_t at = entry.find('@');
      Suppression s{std::string(trim(entry.substr(0, at))),
                    at == std::string_view::npos ? std::string() : std::string(trim(entry.substr(at + 1)))};
      const bool id_ok = !s.rule.empty() && std::all_of(s.rule.begin(), s.rule.end(), [](char c) {
        return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-';
      });
      if (!id_ok)
        return fmt::format("has an entry '{}' that is not RULE[@KERNEL_GLOB] (a finding id: lower case, digits, '-')",
                           entry);
      if (at != std::string_view::npos && s.kernel_glob.empty())
        return fmt::format("has an entry '{}' with no kernel glob after '@'", entry);
      out.push_back(std::move(s));
    }
    return "";
  }
};
struct ReadBytesFlag {
  static constexpr bool kNamesFile = false;
  static std::string values() { return "BYTES"; }
  static std::string show(uint64_t v) { return std::to_string(v); }
  static std::string read(std::string_view v, uint64_t& out) {
    if (const auto n = number_in(v, 64, kDeviceReadMaxBytes); n && *n % 64 == 0) return out = *n, "";
    return fmt::format("is not a multiple of 64 from 64 to {}", kDeviceReadMaxBytes);
  }
};

// One row of flags.inc, typed: its type reads a value straight into its member.
struct FlagRow {
  FlagInfo info;
  bool names_file;
  std::string (*read)(std::string_view value, Config& into);
};
const std::vector<FlagRow>& rows() {
  // Never destroyed: tmaguard's own threads (the device audit's worker) may read it while the process exits.
  static const std::vector<FlagRow>& v = *new std::vector<FlagRow>{
#define TG_FLAG(name, member, type, value, unset, help)                                               \
  {{#name, type::values(), type::show(value), unset, help}, type::kNamesFile,                          \
   [](std::string_view v, Config& c) { return type::read(v, c.member); }},
#include "tmaguard/flags.inc"
#undef TG_FLAG
  };
  return v;
}

}  // namespace

const std::vector<RankVariable>& rank_variables() {
  // Never destroyed: tmaguard's own threads (the device audit's worker) may read it while the process exits.
  static const std::vector<RankVariable>& v = *new std::vector<RankVariable>{
      {"RANK", "LOCAL_RANK", "torchrun (torch.distributed)"},
      {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "Open MPI (mpirun)"},
      {"PMIX_RANK", "PMIX_LOCAL_RANK", "PMIx"},
      {"PMI_RANK", "MPI_LOCALRANKID", "MPICH (Hydra)"},
      {"SLURM_PROCID", "SLURM_LOCALID", "Slurm (srun)"},
  };
  return v;
}

const std::vector<FlagInfo>& flags() {
  // Never destroyed: tmaguard's own threads (the device audit's worker) may read it while the process exits.
  static const std::vector<FlagInfo>& v = *new std::vector<FlagInfo>([] {
    std::vector<FlagInfo> out;
    for (const FlagRow& r : rows()) out.push_back(r.info);
    return out;
  }());
  return v;
}

std::string flags_markdown_table() {
  std::string s = "| variable | values (default) | meaning |\n| --- | --- | --- |\n";
  for (const FlagRow& r : rows()) {
    std::string values;  // a pipe inside a table cell must be escaped, even in code
    for (char c : r.info.values) values += c == '|' ? std::string("\\|") : std::string(1, c);
    s += fmt::format("| `{}` | `{}` ({}) | {} |\n", r.info.name, values, r.info.fallback(), r.info.help);
  }
  return s;
}

std::string flags_text() {
  std::string s;
  for (const FlagRow& r : rows())
    s += fmt::format("  {}={}  (default: {})\n      {}\n", r.info.name, r.info.values, r.info.fallback(), r.info.help);
  return s;
}

namespace {

// Edits (insert, delete, replace a character) from a to b: how a misspelled variable is told from another one.
std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diag = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

}  // namespace

std::vector<std::string> misspelled_variables(const std::vector<std::string>& names) {
  std::vector<std::string> out;
  for (const std::string& n : names) {
    std::string upper = n;
    for (char& c : upper)
      if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
    if (upper.rfind("TMAGUARD", 0) != 0) continue;  // TMAGUARD_mode and TMAGUARDMODE are looked at too
    if (std::any_of(std::begin(kCommandVariables), std::end(kCommandVariables), [&](const char* c) { return n == c; }))
      continue;
    const FlagRow* closest = nullptr;
    std::size_t best = 3;  // two edits at most: TMAGUARD_RULE, TMAGUARD_LOGFORMAT, TMAGUARD_MODES, TMAGUARDMODE
    bool known = false;
    for (const FlagRow& row : rows()) {
      if (n == row.info.name) known = true;
      const std::size_t d = edit_distance(upper, row.info.name);  // case apart: TMAGUARD_mode is one edit away
      if (d < best) best = d, closest = &row;
    }
    if (!known && closest)
      out.push_back(fmt::format("warning: {} is not a tmaguard variable and is ignored (did you mean {}?{})", n,
                                closest->info.name, upper == closest->info.name ? " names are case-sensitive" : ""));
  }
  return out;
}

namespace {

// Where the job says who this process is: its rank and local rank (the first launcher variable set) and job id.
void read_identity(const EnvLookup& env, Config& c) {
  for (const RankVariable& v : rank_variables()) {
    const char* g = env(v.global);
    const char* l = env(v.local);
    if (c.rank.empty() && g && !trim(g).empty()) {
      c.rank = std::string(trim(g));
      c.rank_from = v.global;
    }
    if (c.local_rank.empty() && l && !trim(l).empty()) {
      c.local_rank = std::string(trim(l));
      if (c.rank_from.empty()) c.rank_from = v.local;
    }
  }
  for (const char* j : {"SLURM_JOB_ID", "TORCHELASTIC_RUN_ID"}) {
    const char* v = env(j);
    if (v && !trim(v).empty()) {
      c.job_id = std::string(trim(v));
      c.job_from = j;
      break;
    }
  }
}

// Every variable read_identity() reads.
std::vector<const char*> identity_variables() {
  std::vector<const char*> v;
  for (const RankVariable& r : rank_variables()) v.insert(v.end(), {r.global, r.local});
  v.insert(v.end(), {"SLURM_JOB_ID", "TORCHELASTIC_RUN_ID"});
  return v;
}

// A rank or job id that a path pattern cannot take as it is (a '/', "..", a character outside [A-Za-z0-9._+-]): %r
// and %j expand to it with those characters replaced, and the notice says so.
void unsafe_identity_notices(const Config& c, std::vector<std::string>& notices) {
  const auto say = [&](const std::string& value, const std::string& from, const char* seq) {
    if (value.empty() || path_field(value) == value) return;
    notices.push_back(fmt::format("{}='{}' is not a plain name: {} in a log or metrics path expands to '{}' (a '/', "
                                  "'..' or other character a path must not take from a variable, replaced with '_')",
                                  from, value, seq, path_field(value)));
  };
  say(c.rank, c.rank_from, "%r");
  say(c.job_id, c.job_from, "%j");
}

}  // namespace

ConfigResult parse_config(const EnvLookup& env, bool secure_execution, const std::vector<std::string>* names,
                          const ConfigFile* file) {
  ConfigResult r;
  if (names)
    for (std::string& m : misspelled_variables(*names)) r.notices.push_back(std::move(m));
  if (file)
    for (const std::string& e : file->errors) r.errors.push_back(e);
  auto from_file = [&](const char* name) -> const char* {
    if (!file) return nullptr;
    for (const auto& [k, v] : file->values)
      if (k == name) return v.c_str();
    return nullptr;
  };
  std::vector<std::string> ignored;
  for (const FlagRow& row : rows()) {
    const char* raw = env(row.info.name);
    std::string source = "environment";
    if (raw && !trim(raw).empty() && secure_execution && row.names_file) {  // named by a less privileged user
      ignored.push_back(row.info.name);
      raw = nullptr;
    }
    if (!raw || trim(raw).empty()) {  // unset or empty: the file's, else the default
      raw = from_file(row.info.name);
      source = file ? "config file " + file->path : "";
    }
    if (!raw || trim(raw).empty()) {
      r.config.sources.push_back({row.info.name, row.info.fallback(), "default"});
      continue;
    }
    r.config.sources.push_back({row.info.name, raw, source});
    if (const std::string why = row.read(raw, r.config); !why.empty())
      r.errors.push_back(source == "environment" ? fmt::format("{}='{}' {}", row.info.name, raw, why)
                                                 : fmt::format("{}: {}='{}' {}", file->path, row.info.name, raw, why));
  }
  if (secure_execution) {
    // Named by a less privileged user: never part of a path this process creates, nor of what it writes.
    for (const char* name : identity_variables())
      if (const char* v = env(name); v && !trim(v).empty()) ignored.push_back(name);
  } else {
    read_identity(env, r.config);
    unsafe_identity_notices(r.config, r.notices);
  }
  if (!ignored.empty())
    r.notices.push_back(fmt::format("secure-execution process (setuid or similar): {} ignored; reports go to stderr, "
                                    "built-in rules only",
                                    fmt::join(ignored, ", ")));
  return r;
}

std::string path_pattern_error(std::string_view pattern) {
  for (std::size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] != '%') continue;
    if (i + 1 == pattern.size()) return "ends with a '%' (write %% for a percent sign)";
    const char c = pattern[++i];
    if (c != 'p' && c != 'h' && c != 'r' && c != 'j' && c != '%')
      return fmt::format("has '%{}', which is not one of %p (pid), %h (host), %r (rank), %j (job id), %%", c);
  }
  return "";
}

std::string path_field(std::string_view value) {
  std::string out;
  for (const char c : value) {
    const bool plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
                       c == '_' || c == '.' || c == '+';
    out += plain ? c : '_';
  }
  if (out.find_first_not_of('.') == std::string::npos || out.find("..") != std::string::npos)
    for (char& c : out)
      if (c == '.') c = '_';
  return out;
}

std::string expand_path(std::string_view pattern, const PathContext& ctx) {
  std::string out;
  for (std::size_t i = 0; i < pattern.size(); ++i) {
    const char n = i + 1 < pattern.size() ? pattern[i + 1] : 0;
    if (pattern[i] != '%' || (n != 'p' && n != 'h' && n != 'r' && n != 'j' && n != '%')) {
      out += pattern[i];
      continue;
    }
    ++i;
    if (n == 'p') out += std::to_string(ctx.pid);
    else if (n == 'h') out += ctx.host.empty() ? std::string("x") : path_field(ctx.host.substr(0, ctx.host.find('.')));
    else if (n == 'r') out += ctx.rank.empty() ? std::string("x") : path_field(ctx.rank);
    else if (n == 'j') out += ctx.job.empty() ? std::string("x") : path_field(ctx.job);
    else out += '%';
  }
  return out;
}

std::string expand_log_path(std::string_view pattern, long pid) {
  PathContext c;
  c.pid = pid;
  return expand_path(pattern, c);
}

namespace {
// A config file's value as the variable would hold it: a string, an integer, a boolean, or an array of strings
// joined the way the variable separates them.
std::optional<std::string> file_value(const toml::node& n, char separator) {
  if (const auto* s = n.as_string()) return std::string(s->get());
  if (const auto* i = n.as_integer()) return std::to_string(i->get());
  if (const auto* b = n.as_boolean()) return std::string(b->get() ? "on" : "off");
  if (const auto* a = n.as_array()) {
    std::string out;
    for (const auto& e : *a) {
      if (!e.is_string()) return std::nullopt;
      out += (out.empty() ? "" : std::string(1, separator)) + std::string(*e.value<std::string_view>());
    }
    return out;
  }
  return std::nullopt;
}
}  // namespace

ConfigFile load_config_file(const std::string& path, bool must_exist) {
  ConfigFile f;
  f.path = path;
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) {
    if (must_exist || errno != ENOENT)
      f.errors.push_back(fmt::format("{}: cannot read the config file ({})", path, std::strerror(errno)));
    return f;
  }
  struct stat st {};
  std::string text;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size > (1 << 20)) {
    f.errors.push_back(fmt::format("{}: not a regular file of at most 1 MiB", path));
  } else {
    text.resize(static_cast<std::size_t>(st.st_size));
    std::size_t got = 0;
    for (ssize_t n; got < text.size() && (n = ::read(fd, text.data() + got, text.size() - got)) > 0;)
      got += static_cast<std::size_t>(n);
    text.resize(got);
  }
  ::close(fd);
  if (!f.errors.empty()) return f;
  if (std::any_of(text.begin(), text.end(), [](char c) { return static_cast<unsigned char>(c) >= 0x80; })) {
    f.errors.push_back(fmt::format("{}: a config file is plain ASCII text", path));
    return f;
  }
  try {
    const toml::table doc = toml::parse(text, path);
    for (const auto& [key, node] : doc) {
      std::string name = "TMAGUARD_";
      for (const char c : key.str()) name += static_cast<char>(c >= 'a' && c <= 'z' ? c - 'a' + 'A' : c);
      const bool known = std::any_of(rows().begin(), rows().end(), [&](const FlagRow& r) {
        return name == r.info.name && name != kVariable.config_file;
      });
      if (!known) {
        f.errors.push_back(fmt::format("{}:{}: unknown setting '{}' (the settings are the TMAGUARD_ variables' names "
                                       "in lower case without TMAGUARD_: mode, log, log_format, ...)",
                                       path, node.source().begin.line, key.str()));
        continue;
      }
      const auto v = file_value(node, name == kVariable.rules_files ? ':' : ',');
      if (!v)
        f.errors.push_back(fmt::format("{}:{}: '{}' must be a string, a number, true/false or an array of strings",
                                       path, node.source().begin.line, key.str()));
      else
        f.values.emplace_back(name, *v);
    }
  } catch (const toml::parse_error& e) {
    f.errors.push_back(fmt::format("{}:{}: TOML syntax: {}", path, e.source().begin.line, e.description()));
  }
  return f;
}

}  // namespace tmaguard
