// The table of odd TMAGUARD_MODE values (tests/data/mode_values.txt), read by the core parser test and the process
// test of the command and the library: one table for both, so that they cannot drift apart.
#pragma once

#include <cstdlib>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

struct ModeValue {
  std::string value;     // the raw value, escapes resolved
  std::string escaped;   // as written in the table (for messages)
  std::string expected;  // abort, reject, log, inspect, off, or error
};

inline std::vector<ModeValue> read_mode_values(const std::string& path) {
  std::vector<ModeValue> out;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    const std::size_t close = line.rfind('"'), tab = line.find('\t', close);
    if (line[0] != '"' || close == 0 || tab == std::string::npos) continue;
    ModeValue m;
    m.escaped = line.substr(1, close - 1);
    m.expected = line.substr(tab + 1);
    for (std::size_t i = 0; i < m.escaped.size(); ++i) {
      const char c = m.escaped[i];
      if (c != '\\' || i + 1 >= m.escaped.size()) {
        m.value += c;
        continue;
      }
      const char e = m.escaped[++i];
      if (e == 'x' && i + 2 < m.escaped.size()) {
        m.value += static_cast<char>(std::strtol(m.escaped.substr(i + 1, 2).c_str(), nullptr, 16));
        i += 2;
      } else {
        m.value += e == 'r' ? '\r' : e == 'n' ? '\n' : e == 't' ? '\t' : e == 'v' ? '\v' : e == 'f' ? '\f' : e;
      }
    }
    out.push_back(std::move(m));
  }
  return out;
}
