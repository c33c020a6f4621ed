// tmaguard core: parsing TMAGUARD_* variables into a Config (the caller reads the environment, once).
#include "tmaguard/config.h"

#include <fmt/format.h>

#include <algorithm>
#include <optional>

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

enum class FlagId {
#define TG_FLAG(name, values, fallback, help) name,
#include "tmaguard/flags.inc"
#undef TG_FLAG
};

struct FlagRow {
  FlagId id;
  FlagInfo info;
};
const FlagRow kFlags[] = {
#define TG_FLAG(name, values, fallback, help) {FlagId::name, {#name, values, fallback, help}},
#include "tmaguard/flags.inc"
#undef TG_FLAG
};

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

// The choice a value names ("" when none): a choice itself, or a spelling of on/off.
std::string choice_of(const FlagInfo& f, std::string_view value) {
  std::string v = lower(trim(value));
  if (std::string_view(f.values) == "on|off") {
    if (v == "true" || v == "yes" || v == "1") v = "on";
    if (v == "false" || v == "no" || v == "0") v = "off";
  }
  const bool number = !v.empty() && v.size() <= 18 && std::all_of(v.begin(), v.end(), [](char c) {
    return c >= '0' && c <= '9';
  });
  std::string_view choices = f.values;
  while (!choices.empty()) {
    const std::size_t bar = std::min(choices.find('|'), choices.size());
    if (choices.substr(0, bar) == v || (choices.substr(0, bar) == "N" && number)) return v;
    choices.remove_prefix(std::min(bar + 1, choices.size()));
  }
  return "";
}

bool is_choice(const FlagInfo& f) { return std::string_view(f.values).find('|') != std::string_view::npos; }
// A variable that names a file (the log, rule files, the driver): ignored in a secure-execution process.
bool names_file(const FlagInfo& f) {
  const std::string_view v = f.values;
  return !is_choice(f) && (v.find("PATH") != std::string_view::npos || v.find("FILE") != std::string_view::npos);
}

// A decimal number in [lo, hi], or nullopt.
std::optional<uint64_t> number_in(const std::string& v, uint64_t lo, uint64_t hi) {
  const std::string_view t = trim(v);
  if (t.empty() || t.size() > 18 || !std::all_of(t.begin(), t.end(), [](char ch) { return ch >= '0' && ch <= '9'; }))
    return std::nullopt;
  const uint64_t n = std::stoull(std::string(t));
  if (n < lo || n > hi) return std::nullopt;
  return n;
}

// One variable's value (choices already matched and lower-cased; free values as given, but never empty). Returns
// what is wrong with a value a choice list cannot judge (a number out of range), or "".
std::string apply(FlagId id, const std::string& v, Config& c) {
  switch (id) {
    case FlagId::TMAGUARD_DEVICE_AUDIT:
      c.device_audit = v == "off" ? 0 : v == "all" ? kAuditEveryLaunch : std::stoull(v);
      break;
    case FlagId::TMAGUARD_DEVICE_READ_BYTES:
      if (const auto n = number_in(v, 64, kDeviceReadMaxBytes); n && *n % 64 == 0)
        c.device_read_bytes = *n;
      else
        return fmt::format("TMAGUARD_DEVICE_READ_BYTES='{}' is not a multiple of 64 from 64 to {}", v,
                           kDeviceReadMaxBytes);
      break;
    case FlagId::TMAGUARD_MODE:
      c.mode = v == "reject" ? Mode::kReject
               : v == "log" ? Mode::kLog
               : v == "inspect" ? Mode::kInspect
               : v == "off" ? Mode::kOff
                            : Mode::kAbort;
      break;
    case FlagId::TMAGUARD_LOG: c.log_path = v; break;
    case FlagId::TMAGUARD_LOG_FORMAT: c.format = v == "json" ? LogFormat::kJson : LogFormat::kText; break;
    case FlagId::TMAGUARD_RULES: {
      std::size_t start = 0;
      while (start <= v.size()) {
        const std::size_t end = std::min(v.find(':', start), v.size());
        if (end == start || trim(std::string_view(v).substr(start, end - start)).empty())
          return fmt::format("TMAGUARD_RULES='{}' has an empty file name (files are separated by ':'; a file name "
                             "cannot hold one)",
                             v);
        c.rules_files.push_back(v.substr(start, end - start));
        start = end + 1;
      }
      break;
    }
    case FlagId::TMAGUARD_BUILTIN_RULES: c.builtin_rules = v == "on"; break;
    case FlagId::TMAGUARD_RULES_ON_ERROR: c.continue_on_rules_error = v == "continue"; break;
    case FlagId::TMAGUARD_LIBCUDA: break;  // read by the driver layer itself (config.h); validated here
  }
  return "";
}

}  // namespace

const std::vector<RankVariable>& rank_variables() {
  static const std::vector<RankVariable> v = {
      {"RANK", "LOCAL_RANK", "torchrun (torch.distributed)"},
      {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "Open MPI (mpirun)"},
      {"PMIX_RANK", "PMIX_LOCAL_RANK", "PMIx"},
      {"PMI_RANK", "MPI_LOCALRANKID", "MPICH (Hydra)"},
      {"SLURM_PROCID", "SLURM_LOCALID", "Slurm (srun)"},
  };
  return v;
}

const std::vector<FlagInfo>& flags() {
  static const std::vector<FlagInfo> v = [] {
    std::vector<FlagInfo> out;
    for (const FlagRow& r : kFlags) out.push_back(r.info);
    return out;
  }();
  return v;
}

std::string flags_markdown_table() {
  std::string s = "| variable | values (default) | meaning |\n| --- | --- | --- |\n";
  for (const FlagRow& r : kFlags) {
    std::string values;  // a pipe inside a table cell must be escaped, even in code
    for (const char* c = r.info.values; *c; ++c) values += *c == '|' ? std::string("\\|") : std::string(1, *c);
    s += fmt::format("| `{}` | `{}` ({}) | {} |\n", r.info.name, values, r.info.fallback, r.info.help);
  }
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
  // The tmaguard command's own variables (scripts/tmaguard), which a job it starts inherits: not the library's, and
  // not misspellings (TMAGUARD_LIB is two edits from TMAGUARD_LOG).
  static const char* const kCommandVariables[] = {"TMAGUARD_LIB", "TMAGUARD_TOOL", "TMAGUARD_BIN"};
  std::vector<std::string> out;
  for (const std::string& n : names) {
    if (n.rfind("TMAGUARD_", 0) != 0) continue;
    if (std::any_of(std::begin(kCommandVariables), std::end(kCommandVariables), [&](const char* c) { return n == c; }))
      continue;
    const FlagRow* closest = nullptr;
    std::size_t best = 3;  // two edits at most: TMAGUARD_RULE, TMAGUARD_LOGFORMAT, TMAGUARD_MODES
    bool known = false;
    for (const FlagRow& row : kFlags) {
      if (n == row.info.name) known = true;
      const std::size_t d = edit_distance(n, row.info.name);
      if (d < best) best = d, closest = &row;
    }
    if (!known && closest)
      out.push_back(fmt::format("warning: {} is not a tmaguard variable and is ignored (did you mean {}?)", n,
                                closest->info.name));
  }
  return out;
}

ConfigResult parse_config(const EnvLookup& env, bool secure_execution, const std::vector<std::string>* names) {
  ConfigResult r;
  if (names)
    for (std::string& m : misspelled_variables(*names)) r.notices.push_back(std::move(m));
  std::vector<std::string> ignored;
  for (const FlagRow& row : kFlags) {
    const char* raw = env(row.info.name);
    if (!raw || trim(raw).empty()) continue;  // unset or empty: the default
    if (!is_choice(row.info)) {
      if (secure_execution && names_file(row.info)) {  // named by a less privileged user: never opened or written
        ignored.push_back(row.info.name);
        continue;
      }
      if (std::string why = apply(row.id, raw, r.config); !why.empty()) r.errors.push_back(std::move(why));
      continue;
    }
    const std::string v = choice_of(row.info, raw);
    if (v.empty()) {
      std::string choices;
      for (std::string_view rest = row.info.values; !rest.empty();) {
        const std::size_t bar = std::min(rest.find('|'), rest.size());
        const std::string_view one = rest.substr(0, bar);
        choices += (choices.empty() ? "" : ", ") + std::string(one == "N" ? std::string_view("a number") : one);
        rest.remove_prefix(std::min(bar + 1, rest.size()));
      }
      r.errors.push_back(fmt::format("{}='{}' is not one of {}", row.info.name, raw, choices));
      continue;
    }
    if (std::string why = apply(row.id, v, r.config); !why.empty()) r.errors.push_back(std::move(why));
  }
  if (!ignored.empty()) {
    std::string names;
    for (const std::string& n : ignored) names += (names.empty() ? "" : ", ") + n;
    r.notices.push_back(fmt::format("secure-execution process (setuid or similar): {} ignored; reports go to stderr, "
                                    "built-in rules only",
                                    names));
  }
  for (const RankVariable& v : rank_variables()) {
    const char* g = env(v.global);
    const char* l = env(v.local);
    if (r.config.rank.empty() && g && !trim(g).empty()) {
      r.config.rank = std::string(trim(g));
      r.config.rank_from = v.global;
    }
    if (r.config.local_rank.empty() && l && !trim(l).empty()) {
      r.config.local_rank = std::string(trim(l));
      if (r.config.rank_from.empty()) r.config.rank_from = v.local;
    }
  }
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
