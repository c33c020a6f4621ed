// tmaguard shim: everything that is specific to a CPU, behind one small interface (the one place of it): comparing
// 128-byte tensor maps on the launch fast path, the spin-wait hint, the page size. x86_64.h and aarch64.h hold their
// CPUs' parts; any other CPU, or a build with TMAGUARD_PORTABLE_CPU, takes the portable parts below, which compile
// everywhere (the rooms' tests hold every CPU's compare to them). The x86-64 launch thunk is launch_thunk_x86_64.h.
#pragma once

#include <time.h>

#include <cstddef>
#include <cstdint>

namespace tmaguard::cpu {

//! W bytes of lanes: what one step of a compare reads from each side (`loose`: as it lies in memory, at any
//! alignment and under any type, as the compiler's own unaligned vector types are). W = 32 only inside a function
//! compiled for the wide compare (TG_WIDE_COMPARE: AVX2 on x86-64): elsewhere the compiler splits each step in two.
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

//! ORs the difference of 128 bytes `a` and 128 bytes `b` into `acc`, W bytes a step (SSE2 or AVX2 on x86-64, NEON on
//! aarch64: the compiler's vector extensions, no intrinsics).
template <std::size_t W>
__attribute__((always_inline)) inline void fold_difference(typename Lanes<W>::type& acc, const uint8_t* a,
                                                           const uint8_t* b) {
  using Loose = typename Lanes<W>::loose;
#pragma GCC unroll 8
  for (std::size_t k = 0; k < 128; k += W)
    acc |= *reinterpret_cast<const Loose*>(a + k) ^ *reinterpret_cast<const Loose*>(b + k);
}

namespace portable {
//! Whether every lane is 0.
template <std::size_t W>
__attribute__((always_inline)) inline bool all_zero(typename Lanes<W>::type acc) {
  uint64_t any = 0;
  for (std::size_t i = 0; i < W / 8; ++i) any |= acc[i];
  return any == 0;
}
//! 128 bytes equal (every bit, word 2's bit 21 too), 16 bytes a step.
__attribute__((always_inline)) inline bool same_map_bytes(const uint8_t* a, const uint8_t* b) {
  Lanes<16>::type d = {0, 0};
  fold_difference<16>(d, a, b);
  return all_zero<16>(d);
}
}  // namespace portable

//! The page size of the running kernel (sysconf: 4 KiB, or 16/64 KiB on some aarch64 kernels), asked once.
std::size_t page_size();

//! A cheap steadily counting clock for benchmarks (x86-64: the TSC; aarch64: the generic timer CNTVCT_EL0; else
//! nanoseconds), in ticks: compare differences, never convert without calibrating.
__attribute__((always_inline)) inline uint64_t ticks() {
#if defined(__x86_64__)
  return __builtin_ia32_rdtsc();
#elif defined(__aarch64__)
  uint64_t v;
  __asm__ __volatile__("isb\n\tmrs %0, cntvct_el0" : "=r"(v));
  return v;
#else
  timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return static_cast<uint64_t>(t.tv_sec) * 1000000000u + static_cast<uint64_t>(t.tv_nsec);
#endif
}

}  // namespace tmaguard::cpu

#if defined(__x86_64__) && !defined(TMAGUARD_PORTABLE_CPU)
#include "arch/x86_64.h"
#else
namespace tmaguard::cpu {
//! Lanes of the wide compare, and the attribute of a function that uses them: none beyond 16 bytes on these CPUs.
inline constexpr std::size_t kWideLanes = 16;
#define TG_WIDE_COMPARE
inline bool compares_wide() { return false; }
}  // namespace tmaguard::cpu
#if defined(__aarch64__) && !defined(TMAGUARD_PORTABLE_CPU)
#include "arch/aarch64.h"
#else
namespace tmaguard::cpu {
template <std::size_t W>
__attribute__((always_inline)) inline bool all_zero(typename Lanes<W>::type acc) {
  return portable::all_zero<W>(acc);
}
__attribute__((always_inline)) inline bool same_map_bytes(const uint8_t* a, const uint8_t* b, bool) {
  return portable::same_map_bytes(a, b);
}
//! The hint a spinning thread gives the CPU: none here.
inline void spin_pause() {}
}  // namespace tmaguard::cpu
#endif
#endif
