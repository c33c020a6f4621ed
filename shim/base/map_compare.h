// tmaguard shim: comparing 128-byte tensor maps on the launch fast path, 16 bytes at a time (SSE2, every x86-64) or
// 32 (AVX2, where the CPU and the OS offer it). The library is built for baseline x86-64; the AVX2 compare is taken
// only when cpu_compares_wide() said so (CPUID and XGETBV), so that no AVX2 instruction runs on a CPU without it:
// inline assembly in code built for baseline x86-64, or the lanes below in a function compiled for AVX2.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tmaguard {

//! Whether this CPU and OS run AVX2 (CPUID leaf 7 EBX bit 5; OSXSAVE with XMM and YMM state enabled in XCR0).
//! Asked once per process; cheap afterwards.
bool cpu_compares_wide();

//! W bytes of lanes: what one step of a compare reads from each side (`loose`: as it lies in memory, at any
//! alignment and under any type, as the compiler's own unaligned vector types are). W = 32 only inside a function
//! compiled for AVX2 (target("avx2")): elsewhere the compiler would split each step in two.
template <std::size_t W>
struct Lanes;
template <>
struct Lanes<16> {
  typedef uint64_t type __attribute__((vector_size(16)));
  typedef uint64_t loose __attribute__((vector_size(16), aligned(1), may_alias));
};
template <>
struct Lanes<32> {
  typedef uint64_t type __attribute__((vector_size(32)));
  typedef uint64_t loose __attribute__((vector_size(32), aligned(1), may_alias));
};

//! ORs the difference of 128 bytes `a` and 128 bytes `b` into `acc`, W bytes a step.
template <std::size_t W>
__attribute__((always_inline)) inline void fold_difference(typename Lanes<W>::type& acc, const uint8_t* a,
                                                           const uint8_t* b) {
  using Loose = typename Lanes<W>::loose;
#pragma GCC unroll 8
  for (std::size_t k = 0; k < 128; k += W)
    acc |= *reinterpret_cast<const Loose*>(a + k) ^ *reinterpret_cast<const Loose*>(b + k);
}

//! Whether every lane is 0 (W = 32: one VPTEST, in the AVX2 function this is inlined into).
template <std::size_t W>
__attribute__((always_inline)) inline bool all_zero(typename Lanes<W>::type acc) {
  if constexpr (W == 32) {
    bool zero;
    __asm__("vptest %1, %1" : "=@ccz"(zero) : "x"(acc));
    return zero;
  } else {
    return (acc[0] | acc[1]) == 0;
  }
}

//! 128 bytes equal, in eight 16-byte steps (every bit, word 2's bit 21 too).
__attribute__((always_inline)) inline bool same_map_bytes_sse2(const uint8_t* a, const uint8_t* b) {
  Lanes<16>::type d = {0, 0};
  fold_difference<16>(d, a, b);
  return all_zero<16>(d);
}

//! 128 bytes equal, in four 32-byte steps (AVX2), callable from code built for baseline x86-64 (a function compiled
//! for AVX2 uses fold_difference<32> instead). Only where cpu_compares_wide(). Leaves the upper halves of the vector
//! registers zero (vzeroupper), so that the SSE code after it pays no transition.
__attribute__((always_inline)) inline bool same_map_bytes_avx2(const uint8_t* a, const uint8_t* b) {
  bool equal;
  __asm__(
      "vmovdqu (%[a]), %%ymm0\n\t"
      "vpxor (%[b]), %%ymm0, %%ymm0\n\t"
      "vmovdqu 32(%[a]), %%ymm1\n\t"
      "vpxor 32(%[b]), %%ymm1, %%ymm1\n\t"
      "vmovdqu 64(%[a]), %%ymm2\n\t"
      "vpxor 64(%[b]), %%ymm2, %%ymm2\n\t"
      "vmovdqu 96(%[a]), %%ymm3\n\t"
      "vpxor 96(%[b]), %%ymm3, %%ymm3\n\t"
      "vpor %%ymm1, %%ymm0, %%ymm0\n\t"
      "vpor %%ymm3, %%ymm2, %%ymm2\n\t"
      "vpor %%ymm2, %%ymm0, %%ymm0\n\t"
      "vptest %%ymm0, %%ymm0\n\t"
      "vzeroupper"
      : "=@ccz"(equal)
      : [a] "r"(a), [b] "r"(b), "m"(*reinterpret_cast<const uint8_t(*)[128]>(a)),
        "m"(*reinterpret_cast<const uint8_t(*)[128]>(b))
      : "xmm0", "xmm1", "xmm2", "xmm3");
  return equal;
}

//! 128 bytes equal, the wide way where `wide` (cpu_compares_wide()).
__attribute__((always_inline)) inline bool same_map_bytes(const uint8_t* a, const uint8_t* b, bool wide) {
  return wide ? same_map_bytes_avx2(a, b) : same_map_bytes_sse2(a, b);
}

}  // namespace tmaguard
