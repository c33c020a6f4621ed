// tmaguard shim: what cpu.h asks of the system once: the page size, and on x86-64 whether the CPU compares wide.
#include "arch/cpu.h"

#include <unistd.h>

#include <atomic>

#if defined(__x86_64__) && !defined(TMAGUARD_PORTABLE_CPU)
#include <cpuid.h>
#endif

namespace tmaguard::cpu {

std::size_t page_size() {
  static std::atomic<std::size_t> known{0};  // a race asks twice and gets the same answer
  std::size_t v = known.load(std::memory_order_relaxed);
  if (v == 0) {
    const long p = sysconf(_SC_PAGESIZE);
    v = p > 0 ? static_cast<std::size_t>(p) : 4096;
    known.store(v, std::memory_order_relaxed);
  }
  return v;
}

#if defined(__x86_64__) && !defined(TMAGUARD_PORTABLE_CPU)
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

bool compares_wide() {
  static std::atomic<int> known{-1};  // -1: not asked yet; a race asks twice and gets the same answer
  int v = known.load(std::memory_order_relaxed);
  if (v < 0) {
    v = ask_cpu() ? 1 : 0;
    known.store(v, std::memory_order_relaxed);
  }
  return v == 1;
}
#endif

}  // namespace tmaguard::cpu
