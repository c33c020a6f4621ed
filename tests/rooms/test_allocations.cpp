// The driver room's allocations and free journal, without a process: asked of the stand-in driver, which this test
// binary links as libcuda.so.1 (the room finds it loaded, as it finds a job's driver).
#include <gtest/gtest.h>

#include "driver/allocations.h"
#include "fakecuda.h"

namespace tmaguard {
namespace {

constexpr uint64_t kDevice = 0x7f10'0000'0000ULL, kDeviceBytes = 1 << 20;
constexpr uint64_t kHost = 0x7f20'0000'0000ULL;
constexpr uint64_t kFreed = 0x7f30'0000'0000ULL;  // never registered: the driver knows nothing of it now

class Allocations : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    fakecuda_register_memory(kDevice, kDeviceBytes);
    fakecuda_register_host_memory(kHost, 4096);
  }
};

TEST_F(Allocations, DeviceMemoryIsFoundWithItsRangeAndHostMemoryIsNot) {
  Range r;
  ASSERT_TRUE(device_allocation(kDevice + 100, &r));
  EXPECT_EQ(r.start, kDevice);
  EXPECT_EQ(r.end, kDevice + kDeviceBytes);
  EXPECT_FALSE(device_allocation(kHost + 8, &r)) << "pinned host memory counted as device memory";
  EXPECT_FALSE(device_allocation(kFreed, &r));
  EXPECT_EQ(allocation_now(kDevice + 5, &r), Allocation::kFound);
  EXPECT_EQ(allocation_now(kFreed + 5, &r), Allocation::kNotAllocated);
}

TEST_F(Allocations, ARangeIsNotExtendedPastAGap) {
  const Range r = mapped_through({kDevice, kDevice + kDeviceBytes}, kDevice + 2 * kDeviceBytes);
  EXPECT_EQ(r.end, kDevice + kDeviceBytes);
}

TEST_F(Allocations, AFreeJournaledWhileAReadIsInFlightAnswersForThatRead) {
  EXPECT_FALSE(journal_wanted());
  journal_reads(+1);
  EXPECT_TRUE(journal_wanted());
  const uint64_t epoch = journal_epoch();
  journal_free(kFreed, kFreed + 8192);
  EXPECT_EQ(journal_epoch(), epoch + 1);
  Range r;
  EXPECT_EQ(allocation_at(kFreed + 64, epoch, &r), Allocation::kFound) << "the read's allocation was forgotten";
  EXPECT_EQ(r.start, kFreed);
  EXPECT_EQ(r.end, kFreed + 8192);
  EXPECT_EQ(allocation_at(kFreed + 64, journal_epoch(), &r), Allocation::kNotAllocated)
      << "a read queued after the free";
  EXPECT_EQ(allocation_at(kFreed + 64, kAllocationsNow, &r), Allocation::kNotAllocated);
  journal_reads(-1);
  EXPECT_FALSE(journal_wanted());
}

TEST_F(Allocations, AJournalThatOverflowedClaimsNothing) {
  journal_reads(+1);
  const uint64_t epoch = journal_epoch();
  journal_free(kFreed, kFreed + 4096);
  for (int i = 0; i < 5000; ++i) journal_free(kFreed + 0x100000 + 4096ULL * i, kFreed + 0x100000 + 4096ULL * (i + 1));
  Range r;
  EXPECT_EQ(allocation_at(kFreed + 8, epoch, &r), Allocation::kUnknown);
  journal_reads(-1);
}

}  // namespace
}  // namespace tmaguard
