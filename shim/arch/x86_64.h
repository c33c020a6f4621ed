// tmaguard shim: the x86-64 parts of cpu.h. The library is built for baseline x86-64 (SSE2); the 32-byte compare is
// taken only where compares_wide() said so (CPUID and XGETBV), so that no AVX2 instruction runs on a CPU without it:
// inline assembly in code built for baseline x86-64, or the lanes of cpu.h in a function compiled for AVX2.
#pragma once

namespace tmaguard::cpu {

//! Lanes of the wide compare, and the attribute of a function compiled for it.
inline constexpr std::size_t kWideLanes = 32;
#define TG_WIDE_COMPARE __attribute__((target("avx2")))

//! Whether this CPU and OS run AVX2 (CPUID leaf 7 EBX bit 5; OSXSAVE with XMM and YMM state enabled in XCR0).
//! Asked once per process; cheap afterwards.
bool compares_wide();

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

//! 128 bytes equal, in four 32-byte steps (AVX2), callable from code built for baseline x86-64 (a function compiled
//! for AVX2 uses fold_difference<32> instead). Only where compares_wide(). Leaves the upper halves of the vector
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

//! 128 bytes equal, the wide way where `wide` (compares_wide()).
__attribute__((always_inline)) inline bool same_map_bytes(const uint8_t* a, const uint8_t* b, bool wide) {
  return wide ? same_map_bytes_avx2(a, b) : portable::same_map_bytes(a, b);
}

//! The hint a spinning thread gives the CPU.
inline void spin_pause() { __builtin_ia32_pause(); }

}  // namespace tmaguard::cpu
