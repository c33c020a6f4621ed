// Running a test client with tmaguard preloaded (client_run.h).
#include "client_run.h"

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

std::vector<json> ClientRun::events(const std::string& e) const {
  std::vector<json> v;
  for (const auto& r : records)
    if (r.value("event", "") == e) v.push_back(r);
  return v;
}

namespace {

std::string log_path() {
  static int n = 0;
  return "/tmp/tmaguard_test_" + std::to_string(getpid()) + "_" + std::to_string(n++) + ".log";
}

}  // namespace

ClientRun run_client(std::vector<std::string> args, std::map<std::string, std::string> env, bool linked, bool json_log,
                     const ProcessOptions& opt) {
  args.insert(args.begin(), linked ? TG_CLIENT_LINKED : TG_CLIENT);
  return run_preloaded(std::move(args), std::move(env), json_log, opt);
}

ClientRun run_preloaded(std::vector<std::string> args, std::map<std::string, std::string> env, bool json_log,
                        const ProcessOptions& opt) {
  const std::string log = log_path();
  std::map<std::string, std::string> e = {{"LD_PRELOAD", TG_LIB}, {"LD_LIBRARY_PATH", TG_FAKE_DIR},
                                          {"TMAGUARD_LOG", log},  {"TMAGUARD_LOG_FORMAT", json_log ? "json" : "text"},
                                          {"RANK", ""},           {"LOCAL_RANK", ""},
                                          {"TMAGUARD_MODE", ""}};
  for (const auto& [k, v] : env) e[k] = v;
  ClientRun r;
  r.p = run_process(args, e, opt);
  // In JSON mode every line tmaguard writes to stderr is a record: the tests read its notices as the text they say
  // ("tmaguard: " + message), and keep the raw lines (err_json).
  if (json_log) {
    r.err_json = r.p.err;
    std::istringstream err(r.p.err);
    std::string text;
    for (std::string line; std::getline(err, line);) {
      const json j = json::parse(line, nullptr, false);
      text += (j.is_object() && j.contains("message") ? "tmaguard: " + j["message"].get<std::string>() : line) + "\n";
    }
    r.p.err = text;
  }
  std::ifstream in(log);
  std::stringstream ss;
  ss << in.rdbuf();
  r.log_text = ss.str();
  std::istringstream lines(r.log_text);
  for (std::string line; std::getline(lines, line);)
    if (json_log && !line.empty()) {
      json j = json::parse(line, nullptr, false);
      r.records.push_back(j.is_discarded() ? json{{"event", "unparsable"}, {"line", line}} : j);
    }
  std::remove(log.c_str());
  const auto pos = r.p.out.find("RESULT ");
  if (pos != std::string::npos)
    std::sscanf(r.p.out.c_str() + pos, "RESULT ok=%d failed=%d ran=%d via=%d", &r.ok, &r.failed, &r.ran, &r.via);
  return r;
}

std::string describe(const ClientRun& r) {
  return "exit=" + std::to_string(r.p.code) + " signal=" + std::to_string(r.p.signal) +
         (r.p.timed_out ? " TIMED OUT (killed)" : "") + "\nstdout:\n" + r.p.out + "\nstderr:\n" + r.p.err + "\nlog:\n" +
         r.log_text;
}

std::string write_file(const std::string& name, const std::string& text) {
  const std::string path = "/tmp/tmaguard_rules_" + std::to_string(getpid()) + "_" + name;
  std::ofstream(path) << text;
  return path;
}

std::string temp_dir(const std::string& tag) {
  const std::filesystem::path d =
      std::filesystem::temp_directory_path() / ("tmaguard_" + tag + "_" + std::to_string(getpid()));
  std::filesystem::remove_all(d);
  std::filesystem::create_directories(d);
  return d.string();
}

std::string read_all(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}
