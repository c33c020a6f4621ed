// tmaguard-tool: offline helpers. `check-rules FILE...` validates rule files exactly as the library does at start
// (exit 1 on any error); `report LOG...` turns JSON-lines logs of any mode into a readable summary (kernels and
// their tensor maps, violations by rule and rank, launch counts by process); `version [--library PATH]` names this
// build and the build of a libtmaguard.so (from the marker the library carries); `env` prints the TMAGUARD_*
// variables (flags.inc); `find-maps FILE --address A` lists the tensor maps in a dump of device memory (the windows
// the device audit would take for maps, in any encoder's form).
#include <CLI/CLI.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <iterator>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "tmaguard/config.h"
#include "tmaguard/launch.h"
#include "tmaguard/report.h"
#include "tmaguard/rules.h"
#include "tmaguard_version.h"

namespace {

const std::string kThisBuild = fmt::format("tmaguard {} (git {})", TMAGUARD_VERSION, TMAGUARD_REVISION);

// The library's "@(#)tmaguard VERSION REVISION" marker, read from the file (never loaded: loading it would start
// nothing, but a library of another build could be anything).
int version(const std::string& library) {
  std::cout << kThisBuild << "\n";
  if (library.empty()) return 0;
  std::ifstream in(library, std::ios::binary);
  if (!in) {
    std::cout << fmt::format("library: {}: cannot be read\n", library);
    return 1;
  }
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::string tag = "@(#)tmaguard ";
  const std::size_t at = bytes.find(tag);
  if (at == std::string::npos) {
    std::cout << fmt::format("library: {}: not a tmaguard library of version 0.2.0 or later (no version marker)\n",
                             library);
    return 1;
  }
  const std::size_t end = bytes.find('\0', at);
  std::istringstream fields(bytes.substr(at + tag.size(), end - at - tag.size()));
  std::string ver, rev;
  fields >> ver >> rev;
  const std::string lib_build = fmt::format("tmaguard {} (git {})", ver, rev);
  std::cout << fmt::format("library: {}: {}\n", library, lib_build);
  if (lib_build != kThisBuild) {
    std::cout << "warning: the library and this helper come from different builds\n";
    return 1;
  }
  return 0;
}

int check_rules(const std::vector<std::string>& files, bool show_builtin) {
  if (show_builtin) {
    std::cout << tmaguard::builtin_rules_text();
    return 0;
  }
  int bad = 0;
  for (const std::string& f : files) {
    const tmaguard::RulesResult r = tmaguard::load_rules_file(f);
    for (const std::string& e : r.errors) std::cerr << e << "\n";
    if (!r.errors.empty()) {
      ++bad;
      continue;
    }
    std::cout << fmt::format("{}: {} rules OK\n", f, tmaguard::rule_count(*r.rules));
    for (const std::string& n : r.notices) std::cout << "  note: " << n << "\n";
    for (const std::string& line : tmaguard::describe_rules(*r.rules)) std::cout << "  " << line << "\n";
  }
  return bad ? 1 : 0;
}

// A map's place as an inspect record gives it ("7", "0+1152": tmaguard::to_string's spelling).
std::string where(const nlohmann::json& m) {
  const int index = m.value("param_index", -1);
  if (index < 0) return "?";
  return tmaguard::to_string(tmaguard::MapPlace{static_cast<uint32_t>(index), m.value("param_offset", 0u)});
}

std::string short_name(const std::string& k) {
  return k.size() > 90 ? k.substr(0, 60) + "..." + k.substr(k.size() - 27) : k;
}

// The Unicode formatting characters that reorder what a terminal shows (bidi embeddings, overrides, isolates, marks:
// U+202A-U+202E, U+2066-U+2069, U+200E, U+200F, U+061C): their code point when `s` starts with one's UTF-8, else 0.
uint32_t bidi_control(std::string_view s) {
  if (s.size() >= 2 && static_cast<unsigned char>(s[0]) == 0xd8 && static_cast<unsigned char>(s[1]) == 0x9c)
    return 0x061c;
  if (s.size() < 3 || static_cast<unsigned char>(s[0]) != 0xe2) return 0;
  const auto b1 = static_cast<unsigned char>(s[1]), b2 = static_cast<unsigned char>(s[2]);
  const uint32_t cp = 0x2000u | ((b1 & 0x3fu) << 6) | (b2 & 0x3fu);
  const bool is = (cp >= 0x202a && cp <= 0x202e) || (cp >= 0x2066 && cp <= 0x2069) || cp == 0x200e || cp == 0x200f;
  return is && (b1 & 0xc0) == 0x80 && (b2 & 0xc0) == 0x80 ? cp : 0;
}

// A string from a log, safe to print: control characters (ESC, BEL, BS, DEL, the C1 controls) as \xNN and the
// bidi controls as \uNNNN, so that a kernel, rule, rank or host name in someone's log cannot drive the reader's
// terminal or make one name look like another.
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

// Where a finding's launch came from, as one string: the innermost Python frame ("file:line function"), else the
// innermost native frame ("symbol (module)" or "module+offset"); "" when the record carries no call site.
template <typename Text>
std::string call_site(const nlohmann::json& j, const Text& text) {
  if (const auto py = j.find("python_stack"); py != j.end() && py->is_array() && !py->empty() && (*py)[0].is_object()) {
    const auto& f = (*py)[0];
    const auto line = f.find("line");
    return fmt::format("{}:{} {}", text(f, "file", "?"), line != f.end() && line->is_number() ? line->dump() : "?",
                       text(f, "function", "?"));
  }
  if (const auto st = j.find("stack"); st != j.end() && st->is_array() && !st->empty() && (*st)[0].is_object()) {
    const auto& f = (*st)[0];
    std::string module = text(f, "module", "?");
    module = module.substr(module.find_last_of('/') == std::string::npos ? 0 : module.find_last_of('/') + 1);
    const std::string symbol = text(f, "symbol", "");
    return symbol.empty() ? module + "+" + text(f, "offset", "?") : symbol + " (" + module + ")";
  }
  return "";
}

// One record as one line of text (and its hint), for `report --records`: what a JSON log says, read as a person would.
template <typename Text>
void print_record(const nlohmann::json& j, const Text& text) {
  const std::string ev = text(j, "event", "?");
  const std::string who = fmt::format("[pid {} rank {}]", j.value("pid", 0L), text(j, "rank", "-"));
  if (ev == "violation" || ev == "warning") {
    std::cout << fmt::format("{} {} {} [{}] action={} kernel={} tensor={} param={}: expected {}; observed {}\n", who,
                             ev, text(j, "rule", "?"), text(j, "severity", "?"), text(j, "action", "?"),
                             short_name(text(j, "kernel", "?")), text(j, "tensor", "?"), where(j),
                             text(j, "expected", "?"), text(j, "observed", "?"));
    if (const std::string hint = text(j, "hint", ""); !hint.empty()) std::cout << "    hint: " << hint << "\n";
  } else if (ev == "summary") {
    auto n = [&](const char* key) { return j.value(key, 0ULL); };
    std::string v;
    if (const auto it = j.find("violations"); it != j.end() && it->is_object())
      for (const auto& [rule, count] : it->items())
        v += fmt::format("{}{} x{}", v.empty() ? "" : ", ", printable(rule), count.is_number() ? count.dump() : "?");
    std::cout << fmt::format("{} summary: {} launches seen, {} checked, {} tensor maps decoded; violations: {}\n", who,
                             n("launches_seen"), n("launches_checked"), n("tensor_maps_decoded"),
                             v.empty() ? "none" : v);
  } else if (ev != "inspect" && ev != "census") {
    std::cout << fmt::format("{} {}: {}\n", who, ev, text(j, "message", ""));
  }
}

int report(const std::vector<std::string>& files, bool records) {
  using nlohmann::json;
  struct KernelRow {
    std::set<std::string> layouts;
    std::size_t maps = 0;
  };
  std::map<std::string, KernelRow> kernels;
  struct CensusRow {
    uint64_t launches = 0;
    int in_params = 0, in_structs = 0, templates = 0, large_without = 0;
    uint64_t windows = 0;  // 64-byte-aligned 128-byte windows inside the large parameters: the places searched
  };
  std::map<std::string, CensusRow> census;
  using Who = std::tuple<std::string, std::string, std::string>;  // (rule, rank, host)
  std::map<Who, uint64_t> violations;                              // -> reports
  std::map<std::string, std::set<std::string>> violation_kernels;
  std::map<std::string, uint64_t> notices;
  // Findings by where their launch came from: the innermost Python frame, else the innermost native frame.
  std::map<std::string, std::pair<uint64_t, std::set<std::string>>> sites;  // -> (records, rules)
  std::map<Who, uint64_t> occurrences;  // from the summaries: repeats included
  uint64_t launches = 0, checked = 0, decoded = 0, processes = 0, lines = 0, bad_lines = 0, mistyped = 0;
  // A record's field as tmaguard writes it, or the fallback when it is missing or of another type (a hostile or
  // damaged log): a report never stops on one record.
  auto text = [](const json& j, const char* key, const char* fallback) {
    const auto it = j.find(key);
    return printable(it != j.end() && it->is_string() ? it->get<std::string>() : std::string(fallback));
  };
  auto count = [](const json& j, const char* key) -> uint64_t {
    const auto it = j.find(key);
    return it != j.end() && it->is_number_unsigned() ? it->get<uint64_t>() : 0;
  };
  std::map<std::string, uint64_t> writers;  // "tmaguard 0.2.0 (git ...)" -> processes
  for (const std::string& f : files) {
    std::ifstream in(f);
    if (!in) {
      std::cerr << f << ": cannot read the log\n";
      return 2;
    }
    std::string line;
    int n = 0;
    while (std::getline(in, line)) {
      ++n;
      if (line.empty()) continue;
      ++lines;
      json j = json::parse(line, nullptr, false);
      if (j.is_discarded() || !j.is_object()) {
        if (bad_lines++ == 0)
          std::cerr << fmt::format("{}:{}: not a JSON record (was the log written with TMAGUARD_LOG_FORMAT=json?)\n", f,
                                   n);
        continue;
      }
      try {
        const std::string ev = text(j, "event", "");
        const std::string rank = text(j, "rank", "-");
        const std::string host = text(j, "host", "-");
        if (records) print_record(j, text);
        if (ev == "inspect") {
          const std::string kernel = text(j, "kernel", "?");
          const json& list = j.at("tensor_maps");
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
          KernelRow& k = kernels[kernel];
          k.maps = std::max<std::size_t>(k.maps, list.size());
          k.layouts.insert(layout);
        } else if (ev == "census") {
          int without = 0;
          uint64_t windows = 0;
          for (const auto& p : j.at("large_params")) {
            if (p.value("maps", 0) == 0) ++without;
            const uint64_t size = p.value("size", 0ULL);
            if (size >= 128) windows += (size - 128) / 64 + 1;
          }
          const int in_params = j.value("maps_in_params", 0), in_structs = j.value("maps_in_structs", 0),
                    templates = j.value("template_maps", 0);
          CensusRow& c = census[text(j, "kernel", "?")];
          c.launches += count(j, "launches");
          c.in_params = std::max(c.in_params, in_params);
          c.in_structs = std::max(c.in_structs, in_structs);
          c.templates = std::max(c.templates, templates);
          c.large_without = std::max(c.large_without, without);
          c.windows = std::max(c.windows, windows);
        } else if (ev == "violation" || ev == "warning") {
          const std::string rule = text(j, "rule", "?");
          ++violations[{rule, rank, host}];
          violation_kernels[rule].insert(text(j, "kernel", "?"));
          if (const std::string site = call_site(j, text); !site.empty()) {
            ++sites[site].first;
            sites[site].second.insert(rule);
          }
        } else if (ev == "summary") {
          std::vector<std::pair<std::string, uint64_t>> counts;
          if (const auto v = j.find("violations"); v != j.end() && v->is_object())
            for (const auto& [rule, n] : v->items()) counts.emplace_back(printable(rule), n.get<uint64_t>());
          ++processes;
          ++writers[j.contains("tmaguard_version")
                        ? fmt::format("tmaguard {} (git {})", text(j, "tmaguard_version", "?"),
                                      text(j, "tmaguard_revision", "?"))
                        : std::string("tmaguard before 0.2.0 (no version in its summary)")];
          launches += count(j, "launches_seen");
          checked += count(j, "launches_checked");
          decoded += count(j, "tensor_maps_decoded");
          for (const auto& [rule, n] : counts) occurrences[{rule, rank, host}] += n;
        } else {
          ++notices[ev];
        }
      } catch (const json::exception&) {  // a record whose fields are not of the types tmaguard writes
        if (mistyped++ == 0)
          std::cerr << fmt::format("{}:{}: a record whose fields are not of the types tmaguard writes; skipped\n", f,
                                   n);
      }
    }
  }
  std::string by;
  for (const auto& [who, n] : writers) by += fmt::format("{}{} [{} process{}]", by.empty() ? "" : ", ", who, n,
                                                          n == 1 ? "" : "es");
  std::cout << fmt::format("report by {}; logs written by {}\n", kThisBuild,
                           by.empty() ? std::string("unknown (no summary record)") : by);
  std::cout << fmt::format(
      "{} records from {} file(s); {} process summaries: {} launches seen, {} checked, {} tensor maps decoded\n",
      lines - bad_lines - mistyped, files.size(), processes, launches, checked, decoded);
  if (bad_lines || mistyped)
    std::cout << fmt::format("skipped: {} line(s) that are not JSON records, {} record(s) of another shape\n",
                             bad_lines, mistyped);
  if (!violations.empty()) {
    std::cout << fmt::format("\n{:<34} {:>6} {:<16} {:>8} {:>12}  kernel\n", "violations by rule", "rank", "host",
                             "reports", "occurrences");
    for (const auto& [key, count] : violations) {
      const auto& [rule, rank, host] = key;
      const auto& ks = violation_kernels[rule];
      const auto occ = occurrences.find(key);
      std::cout << fmt::format("{:<34} {:>6} {:<16} {:>8} {:>12}  {}{}\n", rule, rank, host, count,
                               occ == occurrences.end() ? std::string("-") : std::to_string(occ->second),
                               short_name(*ks.begin()), ks.size() > 1 ? fmt::format(" (+{} more)", ks.size() - 1) : "");
    }
  }
  if (!sites.empty()) {
    std::cout << fmt::format("\n{:>8}  {:<60} {}\n", "records", "by call site (innermost Python frame, else native)",
                             "rules");
    for (const auto& [site, v] : sites) {
      std::string rules;
      for (const std::string& r : v.second) rules += (rules.empty() ? "" : ", ") + r;
      std::cout << fmt::format("{:>8}  {:<60} {}\n", v.first, site, rules);
    }
  }
  if (!census.empty()) {
    uint64_t all = 0, readable = 0, windows = 0, struct_maps = 0;
    for (const auto& [name, c] : census) {
      all += c.launches;
      if (c.in_params + c.in_structs > c.templates) readable += c.launches;
      windows += c.windows;
      struct_maps += c.in_structs;
    }
    std::cout << fmt::format("\ncoverage: {} of {} launches had tensor maps tmaguard could read ({} kernels)\n", readable,
                             all, census.size());
    std::cout << fmt::format("searched: {} candidate windows inside parameters over 128 bytes; {} held tensor maps\n",
                             windows, struct_maps);
    std::cout << fmt::format("  {:>9} {:>14} {:>16} {:>10} {:>21} {:>9}  kernel\n", "launches", "maps in 128 B",
                             "maps in structs", "templates", "large params, no map", "windows");
    std::vector<std::pair<std::string, CensusRow>> rows(census.begin(), census.end());
    std::sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a.second.launches > b.second.launches; });
    for (const auto& [name, c] : rows)
      std::cout << fmt::format("  {:>9} {:>14} {:>16} {:>10} {:>21} {:>9}  {}\n", c.launches, c.in_params,
                               c.in_structs, c.templates, c.large_without, c.windows, short_name(name));
  }
  if (!kernels.empty()) {
    std::cout << "\nkernels (inspect records; dims in tensor-map order, dim 0 innermost):\n";
    for (const auto& [name, k] : kernels) {
      std::cout << fmt::format("  {}  ({} tensor maps, {} layout(s))\n", short_name(name), k.maps, k.layouts.size());
      int i = 0;
      for (const auto& l : k.layouts) std::cout << fmt::format("    layout {}:{}\n", ++i, l);
    }
  }
  for (const auto& [ev, n] : notices) std::cout << fmt::format("\n{} '{}' record(s)\n", n, ev);
  return bad_lines || mistyped ? 1 : 0;
}

// The maps in a file of bytes copied from device address `address` (e.g. a buffer dumped with cuMemcpyDtoH): one
// line each, text or JSON. Exit 0 with or without maps; 1 when the file cannot be read.
int find_maps(const std::string& file, const std::string& address_text, bool json) {
  uint64_t address = 0;
  try {
    std::size_t used = 0;
    address = std::stoull(address_text, &used, 0);
    if (used != address_text.size()) throw std::invalid_argument("trailing characters");
  } catch (const std::exception&) {
    std::cerr << fmt::format("find-maps: --address {}: not a number (give the device address the dump starts at, "
                             "e.g. 0x7f0000000000)\n",
                             address_text);
    return 2;
  }
  std::ifstream in(file, std::ios::binary);
  if (!in) {
    std::cerr << fmt::format("find-maps: {}: cannot be read\n", file);
    return 1;
  }
  const std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto found = tmaguard::find_device_maps(bytes.data(), bytes.size(), address);
  for (const tmaguard::DeviceWindow& w : found) {
    const auto fmt_ = json ? tmaguard::LogFormat::kJson : tmaguard::LogFormat::kText;
    const std::string map = tmaguard::render_map(w.decoded.view, fmt_);
    if (json)
      std::cout << fmt::format(R"({{"offset":{},"map_address":"0x{:x}","tensor_map":{}}})", w.at, address + w.at, map)
                << "\n";
    else
      std::cout << fmt::format("offset {} (0x{:x}): {}\n", w.at, address + w.at, map);
  }
  if (!json)
    std::cout << fmt::format("{} tensor map(s) in {} bytes from 0x{:x}\n", found.size(), bytes.size(), address);
  return 0;
}

// The mode the library would run in under this environment: the same parser (parse_config) on the same variables.
// A value the library would stop on is said (exit 78, as the job would).
int mode_in_environment() {
  const tmaguard::ConfigResult r = tmaguard::parse_config([](const char* n) { return std::getenv(n); });
  for (const std::string& e : r.errors)
    if (e.rfind("TMAGUARD_MODE=", 0) == 0) {
      std::cerr << "tmaguard: " << e << "\n";
      return 78;
    }
  std::cout << tmaguard::to_string(r.config.mode) << "\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"tmaguard-tool: validate rule files and summarize tmaguard logs"};
  app.require_subcommand(1);
  std::vector<std::string> rule_files, logs;
  bool builtin = false;
  auto* cr = app.add_subcommand("check-rules", "validate rule files as the library does at start");
  cr->add_option("files", rule_files, "TOML rule files");
  cr->add_flag("--builtin", builtin, "print the built-in preset (FA4 SM100 backward)");
  bool records = false;
  auto* rp = app.add_subcommand("report", "summarize JSON-lines logs (any mode)");
  rp->add_option("logs", logs, "log files written with TMAGUARD_LOG_FORMAT=json");
  rp->add_flag("--records", records, "also print every record as a line of text, in the order of the logs");
  std::string library;
  auto* vp = app.add_subcommand("version", "this build's version and git revision, and a library's");
  vp->add_option("--library", library, "a libtmaguard.so to identify");
  bool markdown = false;
  auto* ep = app.add_subcommand("env", "the TMAGUARD_* environment variables: values, defaults, meaning");
  ep->add_flag("--markdown", markdown, "as the reference table of docs/reference.md");
  auto* idp = app.add_subcommand("findings", "every finding id: severity and meaning (Markdown)");
  auto* mp = app.add_subcommand("mode", "the mode this environment puts the library in, read by the library's own parser "
                                        "(the tmaguard command asks it, so the two never disagree)");
  std::string dump, address = "0";
  bool as_json = false;
  auto* fp = app.add_subcommand("find-maps", "list the tensor maps in a dump of device memory");
  fp->add_option("file", dump, "bytes copied from device memory")->required();
  fp->add_option("--address", address, "the device address the dump starts at (maps sit at 64-byte-aligned ones)");
  fp->add_flag("--json", as_json, "one JSON object per map");
  CLI11_PARSE(app, argc, argv);
  if (fp->parsed()) return find_maps(dump, address, as_json);
  if (vp->parsed()) return version(library);
  if (ep->parsed()) {
    std::cout << (markdown ? tmaguard::flags_markdown_table() : tmaguard::flags_text());
    return 0;
  }
  if (idp->parsed()) {
    std::cout << tmaguard::findings_markdown_table();
    return 0;
  }
  if (mp->parsed()) return mode_in_environment();
  if (cr->parsed()) {
    if (rule_files.empty() && !builtin) {
      std::cerr << "check-rules: give one or more rule files (or --builtin)\n";
      return 2;
    }
    return check_rules(rule_files, builtin);
  }
  if (logs.empty()) {
    std::cerr << "usage: tmaguard report [--records] LOG.jsonl...\n"
                 "  summarizes logs written with TMAGUARD_LOG_FORMAT=json (any mode, any number of processes and\n"
                 "  ranks): violations by rule, rank and host; coverage and kernels from inspect mode; who wrote them.\n"
                 "  --records also prints every record as a line of text.\n";
    return 2;
  }
  return report(logs, records);
}
