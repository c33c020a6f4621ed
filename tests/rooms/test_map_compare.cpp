// The memo's map compare (arch/cpu.h), every way this CPU has: the portable one, this CPU's own, and the wide one where
// the CPU has it (AVX2 on x86-64): every single-bit difference in 128 bytes is seen, equal bytes are equal, at any
// alignment of either side. Also the page size the facts arena rounds to.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <random>

#include "arch/cpu.h"

namespace tmaguard {
namespace {

void each_way(const uint8_t* a, const uint8_t* b, bool expect_equal, const char* what) {
  EXPECT_EQ(cpu::portable::same_map_bytes(a, b), expect_equal) << what << " (portable)";
  EXPECT_EQ(cpu::same_map_bytes(a, b, false), expect_equal) << what << " (16 bytes at a time)";
  if (cpu::compares_wide()) EXPECT_EQ(cpu::same_map_bytes(a, b, true), expect_equal) << what << " (wide)";
}

TEST(MapCompare, EverySingleBitDifferenceIsSeenAtAnyAlignment) {
  std::mt19937_64 rng(7);
  alignas(64) uint8_t buf_a[128 + 64], buf_b[128 + 64];
  for (std::size_t shift : {0u, 1u, 8u, 16u, 33u}) {
    uint8_t* a = buf_a + shift;
    uint8_t* b = buf_b + (shift * 3) % 64;
    for (int i = 0; i < 128; ++i) a[i] = static_cast<uint8_t>(rng());
    std::memcpy(b, a, 128);
    each_way(a, b, true, "equal bytes");
    for (int bit = 0; bit < 128 * 8; ++bit) {
      b[bit / 8] ^= static_cast<uint8_t>(1u << (bit % 8));
      each_way(a, b, false, ("bit " + std::to_string(bit)).c_str());
      b[bit / 8] ^= static_cast<uint8_t>(1u << (bit % 8));
    }
    each_way(a, b, true, "equal bytes again");
  }
}

TEST(MapCompare, TheCpuIsAskedOnceAndAnswersTheSame) {
  const bool first = cpu::compares_wide();
  for (int i = 0; i < 3; ++i) EXPECT_EQ(cpu::compares_wide(), first);
#if defined(__x86_64__) && !defined(TMAGUARD_PORTABLE_CPU)
  __builtin_cpu_init();
  EXPECT_EQ(first, __builtin_cpu_supports("avx2") != 0) << "CPUID/XGETBV and the compiler's own reading differ";
#else
  EXPECT_FALSE(first) << "no wide compare on this CPU";
#endif
}

// The page size is the kernel's (4 KiB on x86-64; 4, 16 or 64 KiB on aarch64; qemu-user's -p sets it), a power of two.
TEST(MapCompare, PageSizeIsTheKernels) {
  const std::size_t p = cpu::page_size();
  EXPECT_EQ(p, static_cast<std::size_t>(sysconf(_SC_PAGESIZE)));
  EXPECT_TRUE(p >= 4096 && (p & (p - 1)) == 0) << p;
  if (const char* want = std::getenv("TG_EXPECT_PAGE_SIZE")) EXPECT_EQ(p, std::stoul(want));
}

}  // namespace
}  // namespace tmaguard
