// Runs a child process with a chosen environment and captures its exit, stdout and stderr.
#pragma once
#include <map>
#include <string>
#include <vector>

struct ProcessResult {
  bool exited = false;
  int code = -1;
  bool signaled = false;
  int signal = 0;
  bool timed_out = false;  // killed (SIGKILL) after the timeout
  std::string out, err;
};

struct ProcessOptions {
  int timeout_s = 60;              // a child still running then is killed: hangs fail the test instead of ctest
  bool stderr_reader_gone = false;  // stderr is a pipe whose read end is closed before the child starts
  std::string cwd;                  // the child's working directory (empty: the parent's)
};

//! Runs argv with the parent's environment plus `env` (an empty value unsets the variable).
ProcessResult run_process(const std::vector<std::string>& argv, const std::map<std::string, std::string>& env,
                          const ProcessOptions& opt = {});
