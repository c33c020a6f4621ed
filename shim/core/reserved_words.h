// tmaguard core, internal: whether 128 bytes leave clear every word no tensor map of any form sets (word 2's reserved
// bits, word 17, words 19-31). Inline, for the launch fast path's watched places, and tmaguard::may_hold_map's body.
#pragma once

#include <cstdint>

namespace tmaguard::words {

// Word 2: bit 1 is CuTe DSL's (its host code sets it, the driver never does); bits 2-3 and 22-31 are reserved in
// every form seen (bits 19-21 are Blackwell swizzle atomicity and the large-tensor flag).
constexpr uint32_t kCuteDslMarker = 1u << 1;
constexpr uint32_t kReservedWord2Bits = 0xffc0000cu;

//! True when word 2's reserved bits, word 17 and words 19-31 of `b` (128 bytes) are all 0. Words 19-31 are read as
//! one 32-bit and six 64-bit loads.
inline bool reserved_words_clear(const uint8_t* b) {
  uint32_t w2, w17, w19;
  __builtin_memcpy(&w2, b + 8, 4);
  __builtin_memcpy(&w17, b + 68, 4);
  __builtin_memcpy(&w19, b + 76, 4);
  uint64_t r = (w2 & kReservedWord2Bits) | w17 | w19;
  for (int off = 80; off < 128; off += 8) {
    uint64_t x;
    __builtin_memcpy(&x, b + off, 8);
    r |= x;
  }
  return r == 0;
}

}  // namespace tmaguard::words
