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
#include "tmaguard/records.h"
#include "tmaguard/rules.h"
#include "tmaguard_version.h"
#include "rollup.h"

namespace {


// The library's "@(#)tmaguard VERSION REVISION" marker, read from the file (never loaded: loading it would start
// nothing, but a library of another build could be anything).
int version(const std::string& library) {
  std::cout << tmaguard_tool::this_build() << "\n";
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
  if (lib_build != tmaguard_tool::this_build()) {
    std::cout << "warning: the library and this helper come from different builds\n";
    return 1;
  }
  return 0;
}

int check_rules(const std::vector<std::string>& files, bool show_builtin, bool source) {
  if (show_builtin && source) {
    std::cout << tmaguard::builtin_rules_text();
    return 0;
  }
  if (show_builtin) {
    const tmaguard::RulesResult r = tmaguard::parse_rules(tmaguard::builtin_rules_text(), "built-in");
    if (!r.rules) return 1;
    std::cout << fmt::format("built-in rules ({}; --source prints their TOML):\n", tmaguard::rule_count(*r.rules));
    for (const std::string& line : tmaguard::describe_rules(*r.rules)) std::cout << "  " << line << "\n";
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
    if (e.rfind(std::string(tmaguard::kVariable.mode) + "=", 0) == 0) {
      std::cerr << "tmaguard: " << e << "\n";
      return 78;
    }
  std::cout << tmaguard::to_string(r.config.mode) << "\n";
  return 0;
}

// Every subcommand's options, filled by CLI11.
struct Options {
  std::vector<std::string> rule_files, logs;
  bool builtin = false, source = false;
  tmaguard_tool::ReportOptions report;
  std::string library;
  bool markdown = false;
  std::string dump, address = "0";
  bool as_json = false;
};

struct Commands {
  CLI::App* check_rules;
  CLI::App* report;
  CLI::App* version;
  CLI::App* env;
  CLI::App* findings;
  CLI::App* schema;
  CLI::App* mode;
  CLI::App* find_maps;
};

Commands add_commands(CLI::App& app, Options& o) {
  Commands c{};
  c.check_rules = app.add_subcommand("check-rules", "validate rule files as the library does at start");
  c.check_rules->add_option("files", o.rule_files, "TOML rule files");
  c.check_rules->add_flag("--builtin", o.builtin,
                          "list the built-in rules compiled into the library (the FlashAttention-4 presets)");
  c.check_rules->add_flag("--source", o.source, "with --builtin: print their TOML, file by file");
  c.report = app.add_subcommand("report", "summarize JSON-lines logs (any mode, any number of processes and hosts)");
  c.report->add_option("logs", o.logs, "log files written with TMAGUARD_LOG_FORMAT=json");
  c.report->add_flag("--records", o.report.records, "also print every record as a line of text, in the order of the logs");
  c.report->add_flag("--json", o.report.json, "one JSON document: totals by rule, severity, rank, host and call site, "
                                              "the files read, lines skipped, processes without a final summary or a "
                                              "start record");
  c.report->add_option("--fail-on", o.report.fail_on, "exit 1 when the logs hold a finding of this severity or above")
      ->check(CLI::IsMember({"error", "warning"}));
  c.version = app.add_subcommand("version", "this build's version and git revision, and a library's");
  c.version->add_option("--library", o.library, "a libtmaguard.so to identify");
  c.env = app.add_subcommand("env", "the TMAGUARD_* environment variables: values, defaults, meaning");
  c.env->add_flag("--markdown", o.markdown, "as the reference table of docs/reference.md");
  c.findings = app.add_subcommand("findings", "every finding id: severity and meaning (Markdown)");
  c.schema = app.add_subcommand("schema", "every field of a JSON record: type, which records carry it (Markdown)");
  c.mode = app.add_subcommand("mode", "the mode this environment puts the library in, read by the library's own parser "
                                      "(the tmaguard command asks it, so the two never disagree)");
  c.find_maps = app.add_subcommand("find-maps", "list the tensor maps in a dump of device memory");
  c.find_maps->add_option("file", o.dump, "bytes copied from device memory")->required();
  c.find_maps->add_option("--address", o.address,
                          "the device address the dump starts at (maps sit at 64-byte-aligned ones)");
  c.find_maps->add_flag("--json", o.as_json, "one JSON object per map");
  return c;
}

int print(const std::string& text) {
  std::cout << text;
  return 0;
}

int run_report(const Options& o) {
  if (o.logs.empty()) {
    std::cerr << "usage: tmaguard report [--records] [--json] [--fail-on error|warning] LOG.jsonl...\n"
                 "  summarizes logs written with TMAGUARD_LOG_FORMAT=json (any mode, any number of processes and\n"
                 "  ranks): findings by rule, rank and host; coverage and kernels from inspect mode; who wrote them;\n"
                 "  processes that started but left no final summary. --records also prints every record as a line\n"
                 "  of text; --json prints one JSON document; --fail-on exits 1 when such a finding is there.\n";
    return 2;
  }
  return tmaguard_tool::report(o.logs, o.report);
}

int run(const Commands& c, const Options& o) {
  if (c.find_maps->parsed()) return find_maps(o.dump, o.address, o.as_json);
  if (c.version->parsed()) return version(o.library);
  if (c.env->parsed()) return print(o.markdown ? tmaguard::flags_markdown_table() : tmaguard::flags_text());
  if (c.findings->parsed()) return print(tmaguard::findings_markdown_table());
  if (c.mode->parsed()) return mode_in_environment();
  if (c.schema->parsed()) return print(tmaguard::record_fields_markdown_table());
  if (c.check_rules->parsed()) {
    if (o.rule_files.empty() && !o.builtin) {
      std::cerr << "check-rules: give one or more rule files (or --builtin)\n";
      return 2;
    }
    return check_rules(o.rule_files, o.builtin, o.source);
  }
  return run_report(o);
}

}  // namespace

int main(int argc, char** argv) {
  // Users reach these commands through `tmaguard`, so help and usage name it, not this internal binary.
  CLI::App app{"tmaguard: validate rule files and summarize tmaguard logs", "tmaguard"};
  app.require_subcommand(1);
  Options o;
  const Commands c = add_commands(app, o);
  CLI11_PARSE(app, argc, argv);
  return run(c, o);
}
