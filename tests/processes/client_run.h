// Running a test client with libtmaguard.so preloaded and reading what a user would: exit status, launch counts,
// the log. Shared by the process tests (test_*.cpp in this folder).
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "process.h"

using nlohmann::json;

struct ClientRun {
  ProcessResult p;
  std::vector<json> records;
  std::string log_text;
  std::string err_json;  // stderr as written, in JSON mode (p.err holds its notices as text)
  int ran = -1, ok = -1, failed = -1, via = -1;

  std::vector<json> events(const std::string& e) const;
};

//! Runs tg_client (or tg_client_linked) with ARGS, tmaguard preloaded and a fresh JSON (or text) log.
ClientRun run_client(std::vector<std::string> args, std::map<std::string, std::string> env = {}, bool linked = false,
                     bool json_log = true, const ProcessOptions& opt = {});
//! Runs any program (argv) with tmaguard preloaded and a fresh JSON (or text) log, as run_client does.
ClientRun run_preloaded(std::vector<std::string> argv, std::map<std::string, std::string> env = {},
                        bool json_log = true, const ProcessOptions& opt = {});
//! Exit, stdout, stderr and log, for assertion messages.
std::string describe(const ClientRun& r);
//! A fresh, empty folder under the temporary directory, named by `tag` and this test process's pid.
std::string temp_dir(const std::string& tag);
//! A file's whole content ("" when it cannot be read).
std::string read_all(const std::string& path);
//! Writes a file under /tmp (unique to this test process) and returns its path.
std::string write_file(const std::string& name, const std::string& text);
