// tmaguard core: Python line tables (frames.h).
#include "tmaguard/frames.h"

namespace tmaguard {
namespace {

// CPython 3.11+ location table (Objects/locations.md): entries start with a byte 1CCCCLLL (code C, L+1 code units);
// varints are 6-bit chunks, low first, bit 6 set while more follow.
struct Reader {
  const uint8_t* p;
  const uint8_t* end;
  bool ok() const { return p < end; }
  unsigned byte() { return p < end ? *p++ : 0; }
  uint64_t varint() {
    uint64_t v = 0;
    for (int shift = 0; p < end && shift < 64; shift += 6) {
      const unsigned b = *p++;
      v |= uint64_t{b & 63u} << shift;
      if (!(b & 64)) break;
    }
    return v;
  }
  int64_t svarint() {
    const uint64_t v = varint();
    return (v & 1) ? -static_cast<int64_t>(v >> 1) : static_cast<int64_t>(v >> 1);
  }
};

int line_311(const uint8_t* table, std::size_t size, int first_line, int index) {
  Reader r{table, table + size};
  int64_t line = first_line;
  int64_t addr = 0;
  while (r.ok()) {
    const unsigned first = r.byte();
    if (!(first & 0x80)) return 0;  // not an entry's first byte: a table tmaguard does not understand
    const unsigned code = (first >> 3) & 15;
    const int64_t length = (first & 7) + 1;
    bool has_line = true;
    if (code <= 9) {
      r.byte();  // column
    } else if (code <= 12) {
      line += code - 10;
      r.byte();
      r.byte();
    } else if (code == 13) {
      line += r.svarint();
    } else if (code == 14) {
      line += r.svarint();
      r.varint();
      r.varint();
      r.varint();
    } else {
      has_line = false;
    }
    if (index < addr + length) return has_line && line > 0 ? static_cast<int>(line) : 0;
    addr += length;
  }
  return 0;
}

// CPython 3.10: (bytes delta, signed line delta) pairs; a line delta of -128 means no line.
int line_310(const uint8_t* table, std::size_t size, int first_line, int index) {
  const int64_t target = int64_t{index} * 2;
  int64_t line = first_line, start = 0, end = 0;
  int64_t current = -1;
  for (std::size_t i = 0; i + 1 < size; i += 2) {
    start = end;
    end += table[i];
    const int delta = static_cast<int8_t>(table[i + 1]);
    if (delta == -128) {
      current = -1;
    } else {
      line += delta;
      current = line;
    }
    if (target >= start && target < end) return current > 0 ? static_cast<int>(current) : 0;
  }
  return 0;
}

// CPython 3.9: co_lnotab (address increment, signed line increment) pairs.
int line_39(const uint8_t* table, std::size_t size, int first_line, int index) {
  const int64_t target = int64_t{index} * 2;
  int64_t line = first_line, addr = 0;
  for (std::size_t i = 0; i + 1 < size; i += 2) {
    addr += table[i];
    if (addr > target) break;
    line += static_cast<int8_t>(table[i + 1]);
  }
  return line > 0 ? static_cast<int>(line) : 0;
}

}  // namespace

int python_line(const uint8_t* table, std::size_t size, int first_line, int index, int format) {
  if (!table || index < 0) return 0;
  switch (format) {
    case 311: return line_311(table, size, first_line, index);
    case 310: return line_310(table, size, first_line, index);
    case 39: return line_39(table, size, first_line, index);
    default: return 0;
  }
}

}  // namespace tmaguard
