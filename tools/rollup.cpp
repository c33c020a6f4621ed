// tmaguard-tool report: reads JSON-lines logs of any mode, record by record, into a roll-up (rollup.h). Field names
// come from the record schema's one table (tmaguard/record_fields.inc, through tmaguard::field), as the library
// writes them.
#include "rollup.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <tuple>

#include "tmaguard/launch.h"
#include "tmaguard/records.h"
#include "tmaguard_version.h"

namespace tmaguard_tool {

using nlohmann::json;
namespace field = tmaguard::field;

namespace {

// The bidi controls that reorder what a terminal shows (U+202A-U+202E, U+2066-U+2069, U+200E, U+200F, U+061C):
// the code point when `s` starts with one's UTF-8, else 0.
uint32_t bidi_control(std::string_view s) {
  if (s.size() >= 2 && static_cast<unsigned char>(s[0]) == 0xd8 && static_cast<unsigned char>(s[1]) == 0x9c)
    return 0x061c;
  if (s.size() < 3 || static_cast<unsigned char>(s[0]) != 0xe2) return 0;
  const auto b1 = static_cast<unsigned char>(s[1]), b2 = static_cast<unsigned char>(s[2]);
  const uint32_t cp = 0x2000u | ((b1 & 0x3fu) << 6) | (b2 & 0x3fu);
  const bool is = (cp >= 0x202a && cp <= 0x202e) || (cp >= 0x2066 && cp <= 0x2069) || cp == 0x200e || cp == 0x200f;
  return is && (b1 & 0xc0) == 0x80 && (b2 & 0xc0) == 0x80 ? cp : 0;
}

}  // namespace

const std::string& this_build() {
  static const std::string b = fmt::format("tmaguard {} (git {})", TMAGUARD_VERSION, TMAGUARD_REVISION);
  return b;
}

std::string printable(std::string_view s) {
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (const uint32_t cp = bidi_control(s.substr(i))) {
      out += fmt::format("\\u{:04x}", cp);
      i += cp == 0x061c ? 1 : 2;
      continue;
    }
    const auto c = static_cast<unsigned char>(s[i]);
    const bool c1 = c == 0xc2 && i + 1 < s.size() && static_cast<unsigned char>(s[i + 1]) >= 0x80 &&
                    static_cast<unsigned char>(s[i + 1]) <= 0x9f;
    if (c < 0x20 || c == 0x7f) {
      out += fmt::format("\\x{:02x}", c);
    } else if (c1) {
      out += fmt::format("\\x{:02x}", static_cast<unsigned char>(s[++i]));
    } else {
      out += s[i];
    }
  }
  return out;
}

namespace {

// A record's field as tmaguard writes it, or the fallback when it is missing or of another type (a hostile or
// damaged log): a report never stops on one record.
std::string text(const json& j, const char* key, const char* fallback) {
  const auto it = j.find(key);
  return printable(it != j.end() && it->is_string() ? it->get<std::string>() : std::string(fallback));
}
uint64_t count(const json& j, const char* key) {
  const auto it = j.find(key);
  return it != j.end() && it->is_number_unsigned() ? it->get<uint64_t>() : 0;
}
// The rank: an integer (schema 1), a string (logs before it), or "-" when absent.
std::string rank_of(const json& j) {
  const auto it = j.find(field::kRank);
  if (it == j.end()) return "-";
  if (it->is_number_integer()) return std::to_string(it->get<long long>());
  return it->is_string() ? printable(it->get<std::string>()) : "-";
}
std::string pid_of(const json& j) {
  const auto it = j.find(field::kPid);
  return it != j.end() && it->is_number_integer() ? std::to_string(it->get<long long>()) : "?";
}

// A map's place as an inspect record gives it ("7", "0+1152": tmaguard::to_string's spelling).
std::string where(const json& m) {
  const int index = m.value(field::kParamIndex, -1);
  if (index < 0) return "?";
  return tmaguard::to_string(tmaguard::MapPlace{static_cast<uint32_t>(index), m.value(field::kParamOffset, 0u)});
}

std::string short_name(const std::string& k) {
  return k.size() > 90 ? k.substr(0, 60) + "..." + k.substr(k.size() - 27) : k;
}

// Where a finding's launch came from, as one string: the innermost Python frame ("file:line function"), else the
// innermost native frame ("symbol (module)" or "module+offset"); "" when the record carries no call site.
std::string call_site(const json& j) {
  if (const auto py = j.find(field::kPythonStack); py != j.end() && py->is_array() && !py->empty() &&
                                                    (*py)[0].is_object()) {
    const auto& f = (*py)[0];
    const auto line = f.find("line");
    return fmt::format("{}:{} {}", text(f, "file", "?"), line != f.end() && line->is_number() ? line->dump() : "?",
                       text(f, "function", "?"));
  }
  if (const auto st = j.find(field::kStack); st != j.end() && st->is_array() && !st->empty() && (*st)[0].is_object()) {
    const auto& f = (*st)[0];
    std::string module = text(f, "module", "?");
    module = module.substr(module.find_last_of('/') == std::string::npos ? 0 : module.find_last_of('/') + 1);
    const std::string symbol = text(f, "symbol", "");
    return symbol.empty() ? module + "+" + text(f, "offset", "?") : symbol + " (" + module + ")";
  }
  return "";
}

std::string counted(const json& j, const char* key) {
  std::string v;
  if (const auto it = j.find(key); it != j.end() && it->is_object())
    for (const auto& [rule, n] : it->items())
      v += fmt::format("{}{} x{}", v.empty() ? "" : ", ", printable(rule), n.is_number() ? n.dump() : "?");
  return v.empty() ? "none" : v;
}

// One record as one line of text (and its hint), for `report --records`: what a JSON log says, read as a person would.
void print_record(const json& j) {
  const std::string ev = text(j, field::kEvent, "?");
  const std::string who = fmt::format("[pid {} rank {}]", pid_of(j), rank_of(j));
  if (ev == "violation" || ev == "warning") {
    std::cout << fmt::format("{} {} {} [{}] action={} kernel={} tensor={} param={}: expected {}; observed {}\n", who,
                             ev, text(j, field::kRule, "?"), text(j, field::kSeverity, "?"),
                             text(j, field::kAction, "?"), short_name(text(j, field::kKernel, "?")),
                             text(j, field::kTensor, "?"), where(j), text(j, field::kExpected, "?"),
                             text(j, field::kObserved, "?"));
    if (const std::string hint = text(j, field::kHint, ""); !hint.empty()) std::cout << "    hint: " << hint << "\n";
  } else if (ev == "summary") {
    std::cout << fmt::format("{} summary{}: {} launches seen, {} checked, {} tensor maps decoded; violations: {}\n", who,
                             j.value(field::kFinal, true) ? "" : " (so far)", count(j, field::kLaunchesSeen),
                             count(j, field::kLaunchesChecked), count(j, field::kMapsDecoded),
                             counted(j, field::kViolations));
  } else if (ev == "start") {
    std::cout << fmt::format("{} start: {}\n", who, text(j, field::kBody, ""));
  } else if (ev != "inspect" && ev != "census") {
    std::cout << fmt::format("{} {}: {}\n", who, ev, text(j, field::kMessage, ""));
  }
}

using Counts = std::map<std::string, uint64_t>;
Counts counts_of(const json& j, const char* key) {
  Counts out;
  if (const auto v = j.find(key); v != j.end() && v->is_object())
    for (const auto& [k, n] : v->items()) out[printable(k)] = n.get<uint64_t>();  // throws on a wrong type: skipped
  return out;
}

// What one process left: its start record, its latest summary (summaries are cumulative: the latest counts), whether
// that one was final.
struct Process {
  std::string host, pid, rank, job;
  bool started = false, summarized = false, final = false;
  bool armed = false;  // it used CUDA (a summary, a finding or a notice): only then does a missing final summary
                       // mean counts were lost (a process that never called CUDA writes its start record alone)
  uint64_t launches = 0, checked = 0, decoded = 0;
  Counts errors, warnings, suppressed;
  std::string writer;
};

struct KernelRow {
  std::set<std::string> layouts;
  std::size_t maps = 0;
};
struct CensusRow {
  uint64_t launches = 0;
  int in_params = 0, in_structs = 0, templates = 0, large_without = 0;
  uint64_t windows = 0;  // 64-byte-aligned 128-byte windows inside the large parameters: the places searched
};

class Rollup {
 public:
  // One record (throws json::exception on a record of another shape: the caller skips and counts it).
  void add(const json& j) {
    const std::string ev = text(j, field::kEvent, "");
    if (ev == "inspect") add_inspect(j);
    else if (ev == "census") add_census(j);
    else if (ev == "violation" || ev == "warning") add_finding(j, ev == "violation");
    else if (ev == "summary") add_summary(j);
    else if (ev == "start") process(j).started = true;
    else {
      ++notices_[ev];
      process(j).armed = true;
    }
  }
  bool has(const std::string& level) const {
    if (level.empty()) return false;
    bool errors = false, warnings = false;
    for (const auto& [key, row] : findings_) (row.error ? errors : warnings) = true;
    for (const auto& [k, p] : processes_) errors |= !p.errors.empty(), warnings |= !p.warnings.empty();
    return errors || (level == "warning" && warnings);
  }
  void print_text(std::size_t files, uint64_t records, uint64_t bad_lines, uint64_t mistyped) const;
  json to_json(const std::vector<std::string>& files, uint64_t records, uint64_t bad_lines, uint64_t mistyped) const;

 private:
  struct FindingRow {
    bool error = false;
    uint64_t reports = 0;
    std::set<std::string> kernels;
  };
  using Who = std::tuple<std::string, std::string, std::string>;  // (rule, rank, host)

  Process& process(const json& j) {
    const std::string host = text(j, field::kHost, "-"), pid = pid_of(j), job = text(j, field::kJobId, "");
    Process& p = processes_[host + "\x1f" + pid + "\x1f" + job];
    p.host = host, p.pid = pid, p.rank = rank_of(j), p.job = job;
    return p;
  }
  void add_finding(const json& j, bool error) {
    const std::string rule = text(j, field::kRule, "?"), rank = rank_of(j), host = text(j, field::kHost, "-");
    process(j).armed = true;
    FindingRow& row = findings_[{rule, rank, host}];
    row.error = error;
    ++row.reports;
    if (row.kernels.size() < 8) row.kernels.insert(text(j, field::kKernel, "?"));
    ++by_rank_[rank];
    ++by_host_[host];
    if (const std::string site = call_site(j); !site.empty()) {
      ++sites_[site].first;
      sites_[site].second.insert(rule);
    }
  }
  void add_summary(const json& j) {
    Counts errors = counts_of(j, field::kViolations), warnings = counts_of(j, field::kWarnings),
           suppressed = counts_of(j, field::kSuppressed);
    Process& p = process(j);
    p.summarized = p.armed = true;
    p.final = j.value(field::kFinal, true);  // logs before the schema had only the exit summary
    p.launches = count(j, field::kLaunchesSeen);
    p.checked = count(j, field::kLaunchesChecked);
    p.decoded = count(j, field::kMapsDecoded);
    p.errors = std::move(errors), p.warnings = std::move(warnings), p.suppressed = std::move(suppressed);
    p.writer = j.contains(field::kVersion) ? fmt::format("tmaguard {} (git {})", text(j, field::kVersion, "?"),
                                                         text(j, field::kRevision, "?"))
                                           : std::string("tmaguard before 0.2.0 (no version in its summary)");
  }
  void add_inspect(const json& j) {
    const json& list = j.at(field::kTensorMaps);
    std::string layout;
    for (const auto& m : list) {
      if (m.contains("tensor_map")) {
        const auto& t = m.at("tensor_map");
        layout += fmt::format("\n      param {:<6} {} dims {} strides {} box {} swizzle {}{}", where(m),
                              text(t, "dtype", "?"), t.at("dims").dump(), t.at("strides_bytes").dump(),
                              t.contains("box") ? t.at("box").dump() : "-", text(t, "swizzle", "?"),
                              m.value("template", false) ? " (template)" : "");
      } else {
        layout += fmt::format("\n      param {:<6} not a tensor map", where(m));
      }
    }
    KernelRow& k = kernels_[text(j, field::kKernel, "?")];
    k.maps = std::max<std::size_t>(k.maps, list.size());
    k.layouts.insert(layout);
  }
  void add_census(const json& j) {
    int without = 0;
    uint64_t windows = 0;
    for (const auto& p : j.at(field::kLargeParams)) {
      if (p.value("maps", 0) == 0) ++without;
      const uint64_t size = p.value("size", 0ULL);
      if (size >= 128) windows += (size - 128) / 64 + 1;
    }
    CensusRow& c = census_[text(j, field::kKernel, "?")];
    c.launches += count(j, field::kLaunches);
    c.in_params = std::max(c.in_params, j.value(field::kMapsInParams, 0));
    c.in_structs = std::max(c.in_structs, j.value(field::kMapsInStructs, 0));
    c.templates = std::max(c.templates, j.value(field::kTemplateMaps, 0));
    c.large_without = std::max(c.large_without, without);
    c.windows = std::max(c.windows, windows);
  }
  // Occurrences (repeats included) of a rule at a rank and host, from the latest summary of each process.
  uint64_t occurrences(const Who& who, bool error) const {
    uint64_t n = 0;
    for (const auto& [k, p] : processes_)
      if (p.rank == std::get<1>(who) && p.host == std::get<2>(who)) {
        const Counts& c = error ? p.errors : p.warnings;
        if (const auto it = c.find(std::get<0>(who)); it != c.end()) n += it->second;
      }
    return n;
  }
  void print_findings() const;
  void print_processes() const;
  void print_census() const;

  std::map<Who, FindingRow> findings_;
  std::map<std::string, Process> processes_;
  std::map<std::string, uint64_t> by_rank_, by_host_, notices_;
  std::map<std::string, std::pair<uint64_t, std::set<std::string>>> sites_;  // -> (records, rules)
  std::map<std::string, KernelRow> kernels_;
  std::map<std::string, CensusRow> census_;
};

void Rollup::print_findings() const {
  if (!findings_.empty()) {
    std::cout << fmt::format("\n{:<34} {:>6} {:<16} {:>8} {:>12}  kernel\n", "findings by rule", "rank", "host",
                             "reports", "occurrences");
    for (const auto& [key, row] : findings_) {
      const auto& [rule, rank, host] = key;
      const uint64_t occ = occurrences(key, row.error);
      std::cout << fmt::format("{:<34} {:>6} {:<16} {:>8} {:>12}  {}{}\n", rule, rank, host, row.reports,
                               occ ? std::to_string(occ) : std::string("-"), short_name(*row.kernels.begin()),
                               row.kernels.size() > 1 ? fmt::format(" (+{} more)", row.kernels.size() - 1) : "");
    }
  }
  if (!sites_.empty()) {
    std::cout << fmt::format("\n{:>8}  {:<60} {}\n", "records", "by call site (innermost Python frame, else native)",
                             "rules");
    for (const auto& [site, v] : sites_) {
      std::string rules;
      for (const std::string& r : v.second) rules += (rules.empty() ? "" : ", ") + r;
      std::cout << fmt::format("{:>8}  {:<60} {}\n", v.first, site, rules);
    }
  }
}

void Rollup::print_processes() const {
  std::vector<std::string> killed, unstarted;
  Counts suppressed;
  uint64_t idle = 0;
  for (const auto& [k, p] : processes_) {
    const std::string name = fmt::format("{} pid {} rank {}", p.host, p.pid, p.rank);
    if (p.armed && !p.final) killed.push_back(name);
    if (!p.started) unstarted.push_back(name);
    if (p.started && !p.armed) ++idle;
    for (const auto& [rule, n] : p.suppressed) suppressed[rule] += n;
  }
  for (const auto& [rule, n] : suppressed) std::cout << fmt::format("suppressed: {} x{}\n", rule, n);
  if (!killed.empty()) {
    std::cout << fmt::format("\n{} process(es) used CUDA but left no final summary (killed, or still running):\n",
                             killed.size());
    for (const std::string& n : killed) std::cout << "  " << n << "\n";
  }
  if (idle)
    std::cout << fmt::format("{} process(es) wrote their start record alone (never called CUDA, or ended first)\n",
                             idle);
  if (!unstarted.empty() && processes_.size() != unstarted.size())
    std::cout << fmt::format("\n{} process(es) left no start record (an older tmaguard, or a lost line)\n",
                             unstarted.size());
}

void Rollup::print_census() const {
  if (!census_.empty()) {
    uint64_t all = 0, readable = 0, windows = 0, struct_maps = 0;
    for (const auto& [name, c] : census_) {
      all += c.launches;
      if (c.in_params + c.in_structs > c.templates) readable += c.launches;
      windows += c.windows;
      struct_maps += c.in_structs;
    }
    std::cout << fmt::format("\ncoverage: {} of {} launches had tensor maps tmaguard could read ({} kernels)\n", readable,
                             all, census_.size());
    std::cout << fmt::format("searched: {} candidate windows inside parameters over 128 bytes; {} held tensor maps\n",
                             windows, struct_maps);
    std::cout << fmt::format("  {:>9} {:>14} {:>16} {:>10} {:>21} {:>9}  kernel\n", "launches", "maps in 128 B",
                             "maps in structs", "templates", "large params, no map", "windows");
    std::vector<std::pair<std::string, CensusRow>> rows(census_.begin(), census_.end());
    std::sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a.second.launches > b.second.launches; });
    for (const auto& [name, c] : rows)
      std::cout << fmt::format("  {:>9} {:>14} {:>16} {:>10} {:>21} {:>9}  {}\n", c.launches, c.in_params,
                               c.in_structs, c.templates, c.large_without, c.windows, short_name(name));
  }
  if (!kernels_.empty()) {
    std::cout << "\nkernels (inspect records; dims in tensor-map order, dim 0 innermost):\n";
    for (const auto& [name, k] : kernels_) {
      std::cout << fmt::format("  {}  ({} tensor maps, {} layout(s))\n", short_name(name), k.maps, k.layouts.size());
      int i = 0;
      for (const auto& l : k.layouts) std::cout << fmt::format("    layout {}:{}\n", ++i, l);
    }
  }
}

void Rollup::print_text(std::size_t files, uint64_t records, uint64_t bad_lines, uint64_t mistyped) const {
  std::map<std::string, uint64_t> writers;
  uint64_t launches = 0, checked = 0, decoded = 0, summaries = 0;
  for (const auto& [k, p] : processes_) {
    if (!p.summarized) continue;
    ++summaries;
    ++writers[p.writer];
    launches += p.launches, checked += p.checked, decoded += p.decoded;
  }
  std::string by;
  for (const auto& [who, n] : writers)
    by += fmt::format("{}{} [{} process{}]", by.empty() ? "" : ", ", who, n, n == 1 ? "" : "es");
  std::cout << fmt::format("report by {}; logs written by {}\n", this_build(),
                           by.empty() ? std::string("unknown (no summary record)") : by);
  std::cout << fmt::format(
      "{} records from {} file(s); {} process summaries: {} launches seen, {} checked, {} tensor maps decoded\n",
      records, files, summaries, launches, checked, decoded);
  if (bad_lines || mistyped)
    std::cout << fmt::format("skipped: {} line(s) that are not JSON records, {} record(s) of another shape\n",
                             bad_lines, mistyped);
  print_findings();
  print_processes();
  print_census();
  for (const auto& [ev, n] : notices_) std::cout << fmt::format("\n{} '{}' record(s)\n", n, ev);
}

json Rollup::to_json(const std::vector<std::string>& files, uint64_t records, uint64_t bad_lines,
                     uint64_t mistyped) const {
  json by_rule = json::object(), by_severity = {{"error", {{"reports", 0}, {"occurrences", 0}}},
                                                {"warning", {{"reports", 0}, {"occurrences", 0}}}};
  for (const auto& [key, row] : findings_) {
    const auto& [rule, rank, host] = key;
    json& r = by_rule[rule];
    r["severity"] = row.error ? "error" : "warning";
    r["reports"] = r.value("reports", 0ULL) + row.reports;
    by_severity[row.error ? "error" : "warning"]["reports"] =
        by_severity[row.error ? "error" : "warning"]["reports"].get<uint64_t>() + row.reports;
  }
  json suppressed = json::object(), killed = json::array(), unstarted = json::array();
  uint64_t started = 0, finals = 0, idle = 0, launches = 0, checked = 0, decoded = 0;
  for (const auto& [k, p] : processes_) {
    for (const auto& [counts, severity] :
         {std::pair<const Counts*, const char*>{&p.errors, "error"}, std::pair<const Counts*, const char*>{&p.warnings, "warning"}})
      for (const auto& [rule, n] : *counts) {
        json& r = by_rule[rule];
        r["severity"] = severity;
        r["occurrences"] = r.value("occurrences", 0ULL) + n;
        by_severity[severity]["occurrences"] = by_severity[severity]["occurrences"].get<uint64_t>() + n;
      }
    for (const auto& [rule, n] : p.suppressed) suppressed[rule] = suppressed.value(rule, 0ULL) + n;
    const json who = {{"host", p.host}, {"pid", p.pid}, {"rank", p.rank}, {"job", p.job}};
    if (p.armed && !p.final) killed.push_back(who);
    if (!p.started) unstarted.push_back(who);
    started += p.started, finals += p.final, idle += p.started && !p.armed;
    launches += p.launches, checked += p.checked, decoded += p.decoded;
  }
  json sites = json::object();
  for (const auto& [site, v] : sites_) sites[site] = v.first;
  return {{"report_by", this_build()},
          {"files", files},
          {"records", records},
          {"lines_skipped", bad_lines + mistyped},
          {"launches", {{"seen", launches}, {"checked", checked}, {"tensor_maps_decoded", decoded}}},
          {"by_rule", by_rule},
          {"by_severity", by_severity},
          {"by_rank", by_rank_},
          {"by_host", by_host_},
          {"by_call_site", sites},
          {"suppressed", suppressed},
          {"processes",
           {{"seen", processes_.size()},
            {"started", started},
            {"final_summaries", finals},
            {"start_record_only", idle},
            {"no_final_summary", killed},
            {"no_start_record", unstarted}}},
          {"notices", notices_}};
}

}  // namespace

namespace {
// The logs named: files as they are, and every *.jsonl in a directory named (a job's log directory), sorted.
std::vector<std::string> log_files(const std::vector<std::string>& named) {
  std::vector<std::string> out;
  for (const std::string& n : named) {
    std::error_code ec;
    if (!std::filesystem::is_directory(n, ec)) {
      out.push_back(n);
      continue;
    }
    std::vector<std::string> in_dir;
    for (const auto& e : std::filesystem::directory_iterator(n, ec))
      if (e.path().extension() == ".jsonl") in_dir.push_back(e.path().string());
    std::sort(in_dir.begin(), in_dir.end());
    out.insert(out.end(), in_dir.begin(), in_dir.end());
  }
  return out;
}
}  // namespace

int report(const std::vector<std::string>& named, const ReportOptions& opt) {
  Rollup rollup;
  uint64_t lines = 0, bad_lines = 0, mistyped = 0;
  const std::vector<std::string> files = log_files(named);
  for (const std::string& f : files) {
    std::ifstream in(f);
    if (!in) {
      std::cerr << f << ": cannot read the log\n";
      return 2;
    }
    std::string line;
    for (int n = 1; std::getline(in, line); ++n) {
      if (line.empty()) continue;
      ++lines;
      const json j = json::parse(line, nullptr, false);
      if (j.is_discarded() || !j.is_object()) {
        if (bad_lines++ == 0)
          std::cerr << fmt::format("{}:{}: not a JSON record (was the log written with TMAGUARD_LOG_FORMAT=json?)\n", f,
                                   n);
        continue;
      }
      try {
        if (opt.records) print_record(j);
        rollup.add(j);
      } catch (const json::exception&) {  // a record whose fields are not of the types tmaguard writes
        if (mistyped++ == 0)
          std::cerr << fmt::format("{}:{}: a record whose fields are not of the types tmaguard writes; skipped\n", f,
                                   n);
      }
    }
  }
  const uint64_t records = lines - bad_lines - mistyped;
  if (opt.json)
    std::cout << rollup.to_json(files, records, bad_lines, mistyped).dump(2, ' ', false, json::error_handler_t::replace)
              << "\n";
  else
    rollup.print_text(files.size(), records, bad_lines, mistyped);
  if (rollup.has(opt.fail_on)) {
    if (!opt.json) std::cout << fmt::format("\nfail-on {}: the logs hold such findings\n", opt.fail_on);
    return 1;
  }
  return bad_lines || mistyped ? 1 : 0;
}

}  // namespace tmaguard_tool
