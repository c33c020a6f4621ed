// The benchmarks' reading of their own resident memory (VmRSS in /proc/self/status), in KiB; -1 when not found.
#pragma once

#include <cstdlib>
#include <fstream>
#include <string>

inline long rss_kib() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("VmRSS:", 0) == 0) return std::atol(line.c_str() + 6);
  return -1;
}
