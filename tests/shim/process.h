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
  std::string out, err;
};

//! Runs argv with the parent's environment plus `env` (an empty value unsets the variable).
ProcessResult run_process(const std::vector<std::string>& argv, const std::map<std::string, std::string>& env);
