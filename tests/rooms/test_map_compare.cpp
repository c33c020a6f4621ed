// The memo's map compare (base/map_compare.h), both ways: every single-bit difference in 128 bytes is seen, equal
// bytes are equal, at any alignment of either side. The wide way runs only where this CPU has AVX2.
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "base/map_compare.h"

namespace tmaguard {
namespace {

void each_way(const uint8_t* a, const uint8_t* b, bool expect_equal, const char* what) {
  EXPECT_EQ(same_map_bytes_sse2(a, b), expect_equal) << what << " (16 bytes at a time)";
  if (cpu_compares_wide()) EXPECT_EQ(same_map_bytes_avx2(a, b), expect_equal) << what << " (32 bytes at a time)";
  EXPECT_EQ(same_map_bytes(a, b, cpu_compares_wide()), expect_equal) << what;
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
  const bool first = cpu_compares_wide();
  for (int i = 0; i < 3; ++i) EXPECT_EQ(cpu_compares_wide(), first);
#if defined(__GNUC__)
  __builtin_cpu_init();
  EXPECT_EQ(first, __builtin_cpu_supports("avx2") != 0) << "CPUID/XGETBV and the compiler's own reading differ";
#endif
}

}  // namespace
}  // namespace tmaguard
