// tmaguard shim: the aarch64 parts of cpu.h (Grace: Neoverse V2), besides its 16-byte-only declarations there. The
// compare is the portable one, which the compiler turns into NEON loads, EORs and ORRs; the lanes' test is one UMAXV
// across the accumulator. There is no wider compare to choose at run time (SVE's width varies by CPU and buys nothing
// for 128 bytes), and no launch thunk: the C++ wrapper of hooks_launch.cpp serves (measured only under emulation,
// where timings mean nothing).
#pragma once

#include <arm_neon.h>

namespace tmaguard::cpu {

template <std::size_t W>
__attribute__((always_inline)) inline bool all_zero(typename Lanes<W>::type acc) {
  static_assert(W == 16, "aarch64 compares 16 bytes a step");
  return vmaxvq_u32(vreinterpretq_u32_u64(reinterpret_cast<uint64x2_t>(acc))) == 0;
}

__attribute__((always_inline)) inline bool same_map_bytes(const uint8_t* a, const uint8_t* b, bool) {
  Lanes<16>::type d = {0, 0};
  fold_difference<16>(d, a, b);
  return all_zero<16>(d);
}

//! The hint a spinning thread gives the CPU (YIELD).
inline void spin_pause() { __asm__ __volatile__("yield" ::: "memory"); }

}  // namespace tmaguard::cpu
