// The Python line tables a call site's Python frames are read with (tmaguard/frames.h): CPython 3.11's location
// table against the lines CPython itself gives every code unit (tests/data/python_lines_311.txt, written by
// tests/data/gen_python_lines.py with CPython 3.11), and 3.10's and 3.9's formats against tables built by hand.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "tmaguard/frames.h"

namespace {

using tmaguard::python_line;

std::vector<uint8_t> from_hex(const std::string& h) {
  std::vector<uint8_t> out;
  for (std::size_t i = 0; i + 1 < h.size(); i += 2) out.push_back(static_cast<uint8_t>(std::stoi(h.substr(i, 2), nullptr, 16)));
  return out;
}

TEST(PythonLines, LocationTableGivesTheLinesCPythonGives) {
  std::ifstream in(std::string(TG_DATA_DIR) + "/python_lines_311.txt");
  ASSERT_TRUE(in) << "tests/data/python_lines_311.txt";
  int code_objects = 0, units = 0;
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream f(line);
    std::string name, hex, lines;
    int first = 0;
    f >> name >> first >> hex >> lines;
    const std::vector<uint8_t> table = from_hex(hex);
    std::istringstream l(lines);
    int index = 0;
    for (std::string v; std::getline(l, v, ','); ++index, ++units)
      EXPECT_EQ(python_line(table.data(), table.size(), first, index, 311), std::stoi(v)) << name << " unit " << index;
    // Past the table's end: no line.
    EXPECT_EQ(python_line(table.data(), table.size(), first, index + 1000, 311), 0) << name;
    ++code_objects;
  }
  EXPECT_GE(code_objects, 5);
  EXPECT_GE(units, 100);
}

// CPython 3.10: (bytes, signed line delta) pairs, -128 for no line; an instruction index is 2 bytes.
TEST(PythonLines, Cpython310LineTable) {
  const uint8_t t[] = {6, 0, 4, 1, 2, 0x80, 8, 2};  // [0,6) line 10, [6,10) 11, [10,12) none, [12,20) 13
  const int want[] = {10, 10, 10, 11, 11, 0, 13, 13, 13, 13, 0};
  for (int i = 0; i < 11; ++i) EXPECT_EQ(python_line(t, sizeof t, 10, i, 310), want[i]) << i;
}

// CPython 3.9: co_lnotab (address increment, signed line increment) pairs.
TEST(PythonLines, Cpython39Lnotab) {
  const uint8_t t[] = {6, 1, 4, 2, 4, 0xff};  // line 10 before byte 6, 11 before 10, 13 before 14, then 12
  const int want[] = {10, 10, 10, 11, 11, 13, 13, 12, 12};
  for (int i = 0; i < 9; ++i) EXPECT_EQ(python_line(t, sizeof t, 10, i, 39), want[i]) << i;
}

// Bytes that are no table of the format asked for never read past their end and say "no line".
TEST(PythonLines, NoTableNoLine) {
  const uint8_t junk[] = {0x01, 0x02, 0x7f};
  EXPECT_EQ(python_line(junk, sizeof junk, 5, 0, 311), 0);
  EXPECT_EQ(python_line(nullptr, 0, 5, 0, 311), 0);
  EXPECT_EQ(python_line(junk, sizeof junk, 5, -1, 310), 0);
  EXPECT_EQ(python_line(junk, sizeof junk, 5, 0, 38), 0);
}

}  // namespace
