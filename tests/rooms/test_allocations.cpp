// The driver room's allocations and free journal, without a process: asked of the stand-in driver, which this test
// binary links as libcuda.so.1 (the room finds it loaded, as it finds a job's driver).
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cudaTypedefs.h>

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

// The clients' tensors live in a range they declare ([0x7f0000000000, +1 GiB)), where the process's own memory may be
// mapped too, after the declaration (where mmap lands moves from run to run): pinned memory inside a declared range is
// still pinned host memory, as the real driver sees it, and a copy into it is taken.
TEST_F(Allocations, PinnedMemoryInsideADeclaredRangeIsStillHostMemory) {
  void* driver = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
  ASSERT_NE(driver, nullptr);
  auto copy = reinterpret_cast<PFN_cuMemcpyDtoHAsync_v3020>(dlsym(driver, "cuMemcpyDtoHAsync_v2"));
  auto unmap = reinterpret_cast<PFN_cuMemUnmap_v10020>(dlsym(driver, "cuMemUnmap"));
  ASSERT_TRUE(copy && unmap);
  alignas(4096) static uint8_t pinned[4096];
  const uint64_t at = reinterpret_cast<uint64_t>(pinned), declared = at - (1 << 20);
  fakecuda_register_memory(declared, 4 << 20);    // first the declared range,
  fakecuda_register_host_memory(at, sizeof pinned);  // then the pinned memory mapped inside it
  Range r;
  EXPECT_FALSE(device_allocation(at + 8, &r)) << "pinned host memory counted as device memory";
  EXPECT_EQ(copy(pinned, kDevice, 256, nullptr), CUDA_SUCCESS) << "a copy into pinned memory refused";
  ASSERT_TRUE(device_allocation(at - 64, &r)) << "the declared range around it";
  EXPECT_EQ(r.start, declared);
  EXPECT_EQ(unmap(declared, 4 << 20), CUDA_SUCCESS);
}

}  // namespace
}  // namespace tmaguard
