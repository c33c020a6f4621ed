// Windows of bytes that are not tensor maps, the kinds a decoder meets in real parameters and structures: random
// bytes, struct fields (pointers, sizes, small integers, floats, all-ones), zero-filled and zero-padded regions,
// 32-bit small integers, and the padding and fields around real maps of every encoder's form (windows at 16-byte
// steps that straddle a map). Shared by the unit test (a few million windows, asserting none is a map) and
// tests/bench/false_maps.cpp (scripts/bench.sh: the rate over tens of millions).
#pragma once

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "tmaguard/launch.h"
#include "tmaguard/tensormap.h"

namespace corpora {

struct Tally {
  long windows = 0, decoded = 0, plausible = 0;  // decoded: taken for a map as a whole 128-byte parameter would be;
                                                 // plausible: taken for a map inside a structure
  void add(const uint8_t* w) {
    const tmaguard::DecodeResult d = tmaguard::decode(w);
    ++windows;
    decoded += d.ok();
    plausible += tmaguard::plausible_map(d);
  }
};

// One 8-byte struct field: a device pointer, a size or index, two small int32, a float pair, all-ones, or zero.
inline uint64_t struct_field(std::mt19937_64& rng) {
  const uint64_t pick = rng() % 8;
  uint64_t v = 0;
  if (pick == 0) {
    v = 0x7f0000000000ULL + (rng() % (1ULL << 36)) * 16;
  } else if (pick == 1) {
    v = rng() % 4096;
  } else if (pick == 2) {
    v = (rng() % 256) | ((rng() % 256) << 32);
  } else if (pick == 3) {
    const float f[2] = {static_cast<float>(rng() % 1000) / 7.f, 1.0f};
    std::memcpy(&v, f, 8);
  } else if (pick == 4) {
    v = ~0ULL;
  }
  return v;  // 5..7: zeros
}

inline void random_bytes(std::mt19937_64& rng, long n, Tally& t) {
  uint8_t w[128];
  for (long i = 0; i < n; ++i) {
    for (int q = 0; q < 16; ++q) {
      const uint64_t v = rng();
      std::memcpy(w + 8 * q, &v, 8);
    }
    t.add(w);
  }
}

inline void struct_fields(std::mt19937_64& rng, long n, Tally& t) {
  uint8_t w[128];
  for (long i = 0; i < n; ++i) {
    for (int q = 0; q < 16; ++q) {
      const uint64_t v = struct_field(rng);
      std::memcpy(w + 8 * q, &v, 8);
    }
    t.add(w);
  }
}

// Zero-filled (k = 0) and zero-padded windows: k leading bytes of struct fields, then zeros.
inline void zero_padded(std::mt19937_64& rng, long n, Tally& t) {
  uint8_t w[128];
  for (long i = 0; i < n; ++i) {
    std::memset(w, 0, sizeof w);
    const int fields = static_cast<int>(rng() % 17);
    for (int q = 0; q < fields; ++q) {
      const uint64_t v = struct_field(rng);
      std::memcpy(w + 8 * q, &v, 8);
    }
    t.add(w);
  }
}

// 32-bit words, a third of them small integers (0..255), the rest zero: flag and count structs.
inline void small_ints(std::mt19937_64& rng, long n, Tally& t) {
  uint8_t w[128];
  for (long i = 0; i < n; ++i) {
    for (int q = 0; q < 32; ++q) {
      const uint32_t v = rng() % 3 == 0 ? static_cast<uint32_t>(rng() % 256) : 0;
      std::memcpy(w + 4 * q, &v, 4);
    }
    t.add(w);
  }
}

// A 1 KiB structure of fields holding one real map (driver, CuTe DSL or device-built form) at a 128-byte place:
// every 16-byte-step window except the map itself.
inline void around_real_maps(std::mt19937_64& rng, long structs, Tally& t) {
  tmaguard::EncodeArgs a;
  a.dtype = 9;
  a.rank = 2;
  a.dims = {128, 4096};
  a.strides = {256};
  a.box = {64, 128};
  a.element_strides = {1, 1};
  a.swizzle = 3;
  a.l2_promotion = 2;
  std::vector<uint8_t> buf(1024);
  for (long i = 0; i < structs; ++i) {
    for (std::size_t q = 0; q < buf.size() / 8; ++q) {
      const uint64_t v = struct_field(rng);
      std::memcpy(&buf[8 * q], &v, 8);
    }
    const auto form = static_cast<tmaguard::Encoder>(rng() % 3);
    a.address = 0x7f0000000000ULL + (rng() % (1ULL << 30)) * 16;
    const std::size_t at = 128 * (1 + rng() % 6);
    tmaguard::encode_in_form(form, a, &buf[at]);
    for (std::size_t off = 0; off + 128 <= buf.size(); off += 16)
      if (off != at) t.add(&buf[off]);
  }
}

}  // namespace corpora
