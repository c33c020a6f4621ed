// FlashAttention-4 maps for the core's tests: tensors as CuTe DSL's TMA atoms describe them (dim 0 the head dim,
// stride-0 modes dropped), encoded with the H200-pinned encoder, and judged by the built-in rules.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tmaguard/judge.h"
#include "tmaguard/rules.h"

namespace tmaguard::test {

inline constexpr uint64_t kBase = 0x7f0000000000ULL, kStep = 0x1000000ULL;

// One tensor as its TMA map sees it: dims (innermost first) and byte strides of dims 1.. (bf16).
struct T {
  std::vector<uint64_t> dims, strides;
};
// torch (b, s, h, d) contiguous, bf16: dims {d, s, h, b}. transposed: the same memory seen seqlen-contiguous.
inline T bshd(uint64_t b, uint64_t s, uint64_t h, uint64_t d, bool transposed = false) {
  if (!transposed) return {{d, s, h, b}, {2 * h * d, 2 * d, 2 * s * h * d}};
  return {{s, d, h, b}, {2 * s, 2 * s * d, 2 * s * h * d}};
}
// varlen (total, h, d): dims {d, total, h}.
inline T thd(uint64_t total, uint64_t h, uint64_t d, bool transposed = false) {
  if (!transposed) return {{d, total, h}, {2 * h * d, 2 * d}};
  return {{total, d, h}, {2 * total, 2 * total * d}};
}

inline TensorMapParam map(int param, uint64_t addr, const T& t, uint32_t inner_box = 64, uint32_t dtype = 9) {
  EncodeArgs a;
  a.dtype = dtype;
  a.rank = static_cast<uint32_t>(t.dims.size());
  a.address = addr;
  for (std::size_t i = 0; i < t.dims.size(); ++i) {
    a.dims[i] = t.dims[i];
    a.box[i] = i == 0 ? inner_box : i == 1 ? 128 : 1;
    a.element_strides[i] = 1;
    if (i + 1 < t.dims.size()) a.strides[i] = t.strides[i];
  }
  a.swizzle = inner_box * element_size(static_cast<DataType>(dtype)) >= 128 ? 3 : 2;
  uint8_t b[128];
  EXPECT_EQ(encode(a, b), 0) << validate_encode(a).message;
  return {{static_cast<uint32_t>(param), 0}, decode(b)};
}

inline const char* kSm100Bwd =
    "kernel_cutlass_kernel_flash_attncuteflash_bwd_sm100FlashAttentionBackwardSm100_object_at__x_0";
inline const char* kHd256 =
    "kernel_cutlass_kernel_flash_attncutesm100_hd256_2cta_fmha_backward_dkdvkernelBlackwellFusedMultiHeadAttention"
    "BackwardDKDVKernel_object_at__x_0";

inline Judgement judge(const std::vector<TensorMapParam>& maps, const char* name = kSm100Bwd, Arch arch = {10, 0}) {
  static const auto rules = parse_rules(builtin_rules_text(), "built-in").rules;
  return judge_launch(*rules, rules_for_kernel(*rules, name), name, maps, arch);
}

// A ragged map of a varlen (total, h, d) tensor as quack's create_ragged_tensor_for_tma(ptr_shift=True) builds it:
// dims {d, 2^30, h, 2^31 - 1}, strides {S, Sh, S}, address base - 2^30 S; `transposed`: the heads contiguous instead
// (dims {h, 2^30, d, 2^31 - 1}).
inline TensorMapParam ragged(int param, uint64_t base, uint64_t h, uint64_t d, bool transposed = false) {
  const uint64_t s = 2 * h * d, inner = 2 * d;
  T t;
  if (!transposed)
    t = {{d, 1ULL << 30, h, (1ULL << 31) - 1}, {s, inner, s}};
  else
    t = {{h, 1ULL << 30, d, (1ULL << 31) - 1}, {s, 2 * h, s}};
  return map(param, base - (1ULL << 30) * s, t);
}

//! Each finding as its rule id, "!" for an error and "?" for a warning.
inline std::vector<std::string> rules_of(const Judgement& j) {
  std::vector<std::string> v;
  for (const Finding& f : j.findings) v.push_back(f.rule + (f.severity == Severity::kError ? "!" : "?"));
  return v;
}

}  // namespace tmaguard::test
