// tmaguard shim: whether the CPU offers the wide map compare (map_compare.h).
#include "base/map_compare.h"

#include <cpuid.h>

#include <atomic>

namespace tmaguard {
namespace {

bool ask_cpu() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return false;
  const bool osxsave = c & (1u << 27), avx = c & (1u << 28);
  if (!osxsave || !avx) return false;
  unsigned lo = 0, hi = 0;
  __asm__("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  if ((lo & 0x6) != 0x6) return false;  // the OS saves XMM and YMM state
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
  return b & (1u << 5);
}

}  // namespace

bool cpu_compares_wide() {
  static std::atomic<int> known{-1};  // -1: not asked yet; a race asks twice and gets the same answer
  int v = known.load(std::memory_order_relaxed);
  if (v < 0) {
    v = ask_cpu() ? 1 : 0;
    known.store(v, std::memory_order_relaxed);
  }
  return v == 1;
}

}  // namespace tmaguard
