// tmaguard shim: comparing 128-byte tensor maps on the launch fast path, 16 bytes at a time (SSE2, every x86-64) or
// 32 (AVX2, where the CPU and the OS offer it). The library is built for baseline x86-64; the AVX2 compare is inline
// assembly, taken only when cpu_compares_wide() said so (CPUID and XGETBV), so that no AVX2 instruction runs on a
// CPU without it and the wrapper stays one piece of straight-line code.
#pragma once

#include <cstdint>

namespace tmaguard {

//! Whether this CPU and OS run AVX2 (CPUID leaf 7 EBX bit 5; OSXSAVE with XMM and YMM state enabled in XCR0).
//! Asked once per process; cheap afterwards.
bool cpu_compares_wide();

//! 128 bytes equal, in eight 16-byte steps (every bit, word 2's bit 21 too).
__attribute__((always_inline)) inline bool same_map_bytes_sse2(const uint8_t* a, const uint8_t* b) {
  typedef uint64_t v2 __attribute__((vector_size(16)));
  v2 d = {0, 0};
#pragma GCC unroll 8
  for (int i = 0; i < 8; ++i) {
    v2 x, y;
    __builtin_memcpy(&x, a + 16 * i, 16);
    __builtin_memcpy(&y, b + 16 * i, 16);
    d |= x ^ y;
  }
  return (d[0] | d[1]) == 0;
}

//! 128 bytes equal, in four 32-byte steps (AVX2). Only where cpu_compares_wide(). Leaves the upper halves of the
//! vector registers zero (vzeroupper), so that the SSE code after it pays no transition.
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
