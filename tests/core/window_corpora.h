// Windows of bytes that are not tensor maps, by class: what real kernel parameters and structures hold (sparse and
// dense float32 / half / bf16 arrays, bitmasks, shape-and-stride structs, pointer tables, small integers, struct
// fields, zero-padded regions, random bytes) and the padding and fields around real maps of every encoder's form.
// Each window is read the three ways a place where maps are only searched for reads it (launch.h: MapEvidence
// kParameter, kInStruct, kDeviceMemory) and judged by the generic descriptor checks as an sm_90 launch would be:
// a window taken for a map is a false map, one that draws an error-severity finding would stop a healthy job.
// Shared by the unit test (a few hundred thousand windows per class, asserting none) and tests/bench/false_maps.cpp
// (scripts/bench.sh: the rates over 10^8 windows per class).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "tmaguard/descriptor_checks.h"
#include "tmaguard/launch.h"
#include "tmaguard/tensormap.h"

namespace corpora {

constexpr tmaguard::MapEvidence kSearched[] = {tmaguard::MapEvidence::kParameter, tmaguard::MapEvidence::kInStruct,
                                               tmaguard::MapEvidence::kDeviceMemory};

struct Tally {
  long windows = 0;
  long maps[3] = {0, 0, 0};    // taken for a map, per kSearched entry
  long errors[3] = {0, 0, 0};  // error-severity findings of the generic checks, per kSearched entry
  void add(const uint8_t* w) {
    ++windows;
    for (int i = 0; i < 3; ++i) {
      tmaguard::TensorMapParam m{{1, 0}, tmaguard::read_map(w, kSearched[i])};
      if (!m.decoded.ok()) continue;
      ++maps[i];
      std::vector<tmaguard::Finding> out;
      tmaguard::check_descriptor("k", m, tmaguard::Arch{9, 0}, out);
      for (const tmaguard::Finding& f : out) errors[i] += f.severity == tmaguard::Severity::kError;
    }
  }
  void merge(const Tally& o) {
    windows += o.windows;
    for (int i = 0; i < 3; ++i) {
      maps[i] += o.maps[i];
      errors[i] += o.errors[i];
    }
  }
};

// ---- element encodings

inline uint16_t half_bits(float f) {  // IEEE binary16, round to nearest even (denormals and infinities included)
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const int exp = static_cast<int>((x >> 23) & 0xff) - 127 + 15;
  uint32_t mant = x & 0x7fffffu;
  if (exp >= 31) return static_cast<uint16_t>(sign | 0x7c00u);
  if (exp <= 0) {
    if (exp < -10) return static_cast<uint16_t>(sign);
    mant |= 0x800000u;
    const int shift = 14 - exp;
    uint32_t h = mant >> shift;
    if ((mant >> (shift - 1)) & 1) ++h;
    return static_cast<uint16_t>(sign | h);
  }
  uint32_t h = (static_cast<uint32_t>(exp) << 10) | (mant >> 13);
  if ((mant >> 12) & 1) ++h;
  return static_cast<uint16_t>(sign | h);
}
inline uint16_t bf16_bits(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  return static_cast<uint16_t>((x + 0x7fffu + ((x >> 16) & 1)) >> 16);
}

// A value an array of activations, gradients, masks or weights holds: exact "round" values (the ones a sparse array
// is made of: +-0.5, 1, 1.75, 2, 28, small integers, powers of two) or a normal-distributed one of some scale.
inline float array_value(std::mt19937_64& rng) {
  static const float kRound[] = {0.5f, -0.5f, 1.f,   -1.f,  2.f,    1.75f, 28.f,   0.25f, 3.f,    4.f,
                                 8.f,  16.f,  0.125f, 100.f, -2.f,   1e-3f, 65504.f, 1024.f, 0.0625f, 6.f};
  if (rng() % 2) return kRound[rng() % (sizeof kRound / sizeof kRound[0])];
  std::normal_distribution<float> n(0.f, 1.f);
  const float scales[] = {1e-6f, 1e-3f, 0.02f, 1.f, 10.f, 1000.f};
  return n(rng) * scales[rng() % 6];
}

enum class Elem { kF32, kF16, kBF16 };
// 128 bytes of one element type; `density`: the chance an element is not zero.
inline void float_window(std::mt19937_64& rng, Elem e, double density, uint8_t w[128]) {
  std::uniform_real_distribution<double> u(0, 1);
  if (e == Elem::kF32) {
    for (int i = 0; i < 32; ++i) {
      const float v = u(rng) < density ? array_value(rng) : 0.f;
      std::memcpy(w + 4 * i, &v, 4);
    }
    return;
  }
  for (int i = 0; i < 64; ++i) {
    const float v = u(rng) < density ? array_value(rng) : 0.f;
    const uint16_t h = e == Elem::kF16 ? half_bits(v) : bf16_bits(v);
    std::memcpy(w + 2 * i, &h, 2);
  }
}

// ---- the classes

struct Class {
  const char* name;
  void (*fill)(std::mt19937_64&, uint8_t w[128]);
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

inline void random_bytes(std::mt19937_64& rng, uint8_t w[128]) {
  for (int q = 0; q < 16; ++q) {
    const uint64_t v = rng();
    std::memcpy(w + 8 * q, &v, 8);
  }
}
inline void struct_fields(std::mt19937_64& rng, uint8_t w[128]) {
  for (int q = 0; q < 16; ++q) {
    const uint64_t v = struct_field(rng);
    std::memcpy(w + 8 * q, &v, 8);
  }
}
// Zero-filled and zero-padded: k leading fields, then zeros; or zeros with one stray 32-bit value anywhere (a float
// 0.5 at word 13 read as a device-built NULL-address map aborted a job once).
inline void zero_padded(std::mt19937_64& rng, uint8_t w[128]) {
  std::memset(w, 0, 128);
  if (rng() % 2) {
    const int fields = static_cast<int>(rng() % 17);
    for (int q = 0; q < fields; ++q) {
      const uint64_t v = struct_field(rng);
      std::memcpy(w + 8 * q, &v, 8);
    }
    return;
  }
  const float f = array_value(rng);
  uint32_t v;
  std::memcpy(&v, &f, 4);
  if (rng() % 3 == 0) v = static_cast<uint32_t>(rng()) & (0xffu << (8 * (rng() % 4)));  // one byte of an int
  std::memcpy(w + 4 * (rng() % 32), &v, 4);
}
// 32-bit words, a third of them small integers (0..255), the rest zero: flag and count structs.
inline void small_ints(std::mt19937_64& rng, uint8_t w[128]) {
  for (int q = 0; q < 32; ++q) {
    const uint32_t v = rng() % 3 == 0 ? static_cast<uint32_t>(rng() % 256) : 0;
    std::memcpy(w + 4 * q, &v, 4);
  }
}
inline void f32_sparse(std::mt19937_64& rng, uint8_t w[128]) { float_window(rng, Elem::kF32, 0.05 + 0.1 * (rng() % 3), w); }
inline void f32_dense(std::mt19937_64& rng, uint8_t w[128]) { float_window(rng, Elem::kF32, 0.7 + 0.1 * (rng() % 4), w); }
inline void f16_sparse(std::mt19937_64& rng, uint8_t w[128]) { float_window(rng, Elem::kF16, 0.05 + 0.1 * (rng() % 3), w); }
inline void f16_dense(std::mt19937_64& rng, uint8_t w[128]) { float_window(rng, Elem::kF16, 0.7 + 0.1 * (rng() % 4), w); }
inline void bf16_sparse(std::mt19937_64& rng, uint8_t w[128]) {
  float_window(rng, Elem::kBF16, 0.05 + 0.1 * (rng() % 3), w);
}
inline void bf16_dense(std::mt19937_64& rng, uint8_t w[128]) {
  float_window(rng, Elem::kBF16, 0.7 + 0.1 * (rng() % 4), w);
}
// Bitmasks: 32- or 64-bit words with a few bits set (attention masks, block-sparsity maps), some all ones or zero.
inline void bitmasks(std::mt19937_64& rng, uint8_t w[128]) {
  for (int q = 0; q < 16; ++q) {
    uint64_t v = 0;
    switch (rng() % 6) {
      case 0: break;
      case 1: v = ~0ULL; break;
      case 2: v = rng() & rng() & rng(); break;
      case 3: v = 1ULL << (rng() % 64); break;
      case 4: v = (1ULL << (rng() % 64)) - 1; break;
      default: v = rng(); break;
    }
    std::memcpy(w + 8 * q, &v, 8);
  }
}
// Shape-and-stride structs: sizes then strides (elements or bytes) of tensors of rank 1..6, as int64 or int32,
// back to back, zero-padded (PyTorch's TensorInfo, CUTLASS's problem shapes, Triton's int arguments).
inline void shapes_strides(std::mt19937_64& rng, uint8_t w[128]) {
  std::memset(w, 0, 128);
  static const uint64_t kSizes[] = {1, 2, 3, 4, 8, 16, 32, 64, 96, 128, 192, 256, 512, 700, 1024, 2048, 4096, 8192, 32000};
  const bool wide = rng() % 2;
  const std::size_t es = wide ? 8 : 4;
  std::size_t at = 0;
  while (at + es <= 128) {
    const int rank = 1 + static_cast<int>(rng() % 6);
    uint64_t dims[6], strides[6];
    for (int i = 0; i < rank; ++i) dims[i] = kSizes[rng() % (sizeof kSizes / sizeof kSizes[0])];
    uint64_t s = rng() % 3 == 0 ? 2 : 1;  // element strides, or bytes of bf16
    for (int i = rank - 1; i >= 0; --i) {
      strides[i] = s;
      s *= dims[i];
    }
    if (rng() % 4 == 0 && rank > 1) std::swap(strides[rank - 1], strides[rank - 2]);  // a transposed view
    for (const uint64_t* arr : {dims, strides})
      for (int i = 0; i < rank && at + es <= 128; ++i, at += es) std::memcpy(w + at, &arr[i], es);
    if (rng() % 2) break;
  }
}
// Pointer tables: device pointers (256-byte aligned, some at element offsets), NULL entries, sorted or not.
inline void pointer_tables(std::mt19937_64& rng, uint8_t w[128]) {
  const uint64_t base = 0x7f0000000000ULL + (rng() % (1ULL << 28)) * 4096;
  for (int q = 0; q < 16; ++q) {
    uint64_t v = 0;
    switch (rng() % 4) {
      case 0: v = 0; break;
      case 1: v = base + static_cast<uint64_t>(q) * 0x200000; break;
      case 2: v = base + (rng() % (1ULL << 32)) * 256; break;
      default: v = base + (rng() % (1ULL << 30)) * 2; break;
    }
    std::memcpy(w + 8 * q, &v, 8);
  }
}
// 32-bit integers of any size (indices, hashes, counts, 0x0F000000-style flags), a third of them zero.
inline void int32_words(std::mt19937_64& rng, uint8_t w[128]) {
  for (int q = 0; q < 32; ++q) {
    uint32_t v = 0;
    switch (rng() % 3) {
      case 0: break;
      case 1: v = static_cast<uint32_t>(rng()); break;
      default: v = static_cast<uint32_t>(rng() & 0xff) << (8 * (rng() % 4)); break;
    }
    std::memcpy(w + 4 * q, &v, 4);
  }
}

inline const std::vector<Class>& classes() {
  static const std::vector<Class> v = {
      {"random bytes", random_bytes},          {"struct fields", struct_fields},
      {"zero-filled and zero-padded", zero_padded}, {"small 32-bit integers", small_ints},
      {"32-bit integers", int32_words},        {"float32 sparse", f32_sparse},
      {"float32 dense", f32_dense},            {"half sparse", f16_sparse},
      {"half dense", f16_dense},               {"bf16 sparse", bf16_sparse},
      {"bf16 dense", bf16_dense},              {"bitmasks", bitmasks},
      {"shape and stride structs", shapes_strides}, {"pointer tables", pointer_tables},
  };
  return v;
}

inline void run(const Class& c, std::mt19937_64& rng, long n, Tally& t) {
  uint8_t w[128];
  for (long i = 0; i < n; ++i) {
    c.fill(rng, w);
    t.add(w);
  }
}

// A 1 KiB structure of fields holding one real map (driver, CuTe DSL or device-built form) at a 128-byte place:
// every 16-byte-step window except the map itself (padding next to real maps).
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
      const uint64_t v = rng() % 2 ? struct_field(rng) : 0;
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
