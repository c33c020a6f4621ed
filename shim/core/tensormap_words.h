// tmaguard core, internal: the word-level helpers the descriptor's encoder and decoder share (tensormap_encode.cpp,
// tensormap_decode.cpp).
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <cstring>
#include <string>

#include "reserved_words.h"
#include "tmaguard/tensormap.h"

namespace tmaguard::words {

// Hardware element-type code stored in word 2 bits 10:7, indexed by CUtensorMapDataType (sm90 types only).
constexpr uint32_t kHwType[13] = {0, 1, 2, 3, 4, 5, 6, 7, 9, 10, 8, 7, 8};
constexpr uint32_t kTf32Bit = 1u << 16;

inline uint32_t load_word(const uint8_t* b, int i) {
  uint32_t w;
  std::memcpy(&w, b + 4 * i, 4);
  return w;
}
inline void store_word(uint8_t* b, int i, uint32_t w) { std::memcpy(b + 4 * i, &w, 4); }

inline int corner_bits(uint32_t rank) { return rank == 3 ? 16 : rank == 4 ? 8 : 5; }
inline int32_t corner_limit(uint32_t rank) { return rank == 3 ? 32768 : rank == 4 ? 128 : 16; }
inline int32_t sign_extend(uint32_t v, int bits) {
  const uint32_t m = 1u << (bits - 1);
  v &= (1u << bits) - 1;
  return static_cast<int32_t>((v ^ m) - m);
}

inline EncodeProblem problem(std::string field, std::string msg) { return {std::move(field), std::move(msg)}; }

// The words that tell the forms apart, for messages.
inline std::string form_words(const uint32_t w[32]) {
  return fmt::format("word 2 bit 1 = {}, tile-size word 0x{:x}, swizzle-span word 0x{:x}", (w[2] >> 1) & 1, w[16],
                     w[18]);
}

}  // namespace tmaguard::words
