// The launch room's kernel table, without a process: facts of kernels the stand-in driver declares.
#include <gtest/gtest.h>

#include <set>
#include <thread>
#include <vector>

#include "fakecuda.h"
#include "process/arena.h"
#include "core/struct_search.h"
#include "launch/device_audit.h"
#include "kernels/kernel_table.h"
#include "room_maps.h"
#include "runtime/runtime.h"

namespace tmaguard {
namespace {

CUfunction define(const char* name, std::vector<std::size_t> sizes) {
  return static_cast<CUfunction>(
      fakecuda_define_kernel(name, static_cast<int>(sizes.size()), sizes.data(), 0));
}

TEST(KernelTable, AKernelsFactsAreItsNameLayoutAndMapCandidates) {
  fakecuda_new_module(0);
  const CUfunction f = define("room_kernel_two_maps", {128, 8, 128, 4});
  const KernelInfo* k = kernel_info(f, nullptr);
  ASSERT_NE(k, nullptr);
  EXPECT_EQ(k->name, "room_kernel_two_maps");
  EXPECT_EQ(k->layout.sizes, (std::vector<std::size_t>{128, 8, 128, 4}));
  ASSERT_EQ(k->maps.size(), 2u);
  EXPECT_EQ(k->maps[0].param, 0u);
  EXPECT_EQ(k->maps[1].param, 2u);
  EXPECT_FALSE(k->search_pending);
  EXPECT_EQ(kernel_info(f, nullptr), k) << "a second lookup built the facts again";
  EXPECT_NE(kernel_identity(k), 0u);
}

// The audit's share of a kernel's facts is planned with them: its pointer parameters, and the budget in force.
TEST(KernelTable, AKernelWithAPointerIsAuditedAndOneWithoutIsNot) {
  fakecuda_new_module(0);
  const KernelInfo* with = kernel_info(define("room_kernel_pointer", {128, 8, 4}), nullptr);
  ASSERT_EQ(with->audit.pointer_count(), 1u);
  EXPECT_EQ(with->audit.pointers[0].word(0).param, 1u);
  EXPECT_EQ(with->audit.launches_left.load(), config().device_audit);
  EXPECT_TRUE(audit_due(*with));
  const KernelInfo* without = kernel_info(define("room_kernel_no_pointer", {128, 4}), nullptr);
  EXPECT_TRUE(without->audit.pointers.empty());
  EXPECT_FALSE(audit_due(*without)) << "a kernel without device addresses in its parameters has nothing to read back";
}

// A kernel's facts live in the facts arena (pages prepared ahead: no page fault on a first launch), each list as
// long as it is.
TEST(KernelTable, AKernelsFactsLiveInTheArena) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "AddressSanitizer builds keep the sanitizer's operator new (arena.cpp)";
#endif
  fakecuda_new_module(0);
  const KernelInfo* k =
      kernel_info(define("room_kernel_facts_memory_with_a_long_name", {4, 128, 128, 128, 4, 128, 128, 128, 8}), nullptr);
  EXPECT_TRUE(facts_owns(k));
  EXPECT_TRUE(facts_owns(k->name.data()));
  EXPECT_TRUE(facts_owns(k->layout.sizes.data()));
  EXPECT_TRUE(facts_owns(k->maps.data()));
  EXPECT_EQ(k->layout.sizes.capacity(), 9u) << "the layout kept the room it grew into";
  EXPECT_EQ(k->layout.offsets.capacity(), 9u);
  EXPECT_EQ(k->maps.capacity(), 6u);
}

// The places of a struct that may hold device addresses are kept as runs of words, the words of a map found there
// left out: a 1024-byte struct with a map at byte 128 is words 0-15 and, up to the 64 places read, words 32-63.
TEST(KernelTable, AStructsPointerPlacesAreRunsAroundItsMaps) {
  fakecuda_new_module(0);
  const CUfunction f = define("room_kernel_struct_pointer_runs", {1024});
  alignas(64) uint8_t params[1024] = {};
  ASSERT_EQ(encode(half_map(0x7f0000000000), params + 128), 0);
  void* kernel_params[] = {params};
  const LaunchArgs args = LaunchArgs::of_params(kernel_params);
  const KernelInfo* k = kernel_info(f, &args);
  ASSERT_EQ(k->maps.size(), 1u);
  ASSERT_EQ(k->audit.pointers.size(), 2u);
  EXPECT_EQ(k->audit.pointers[0].offset, 0u);
  EXPECT_EQ(k->audit.pointers[0].words, 16u);
  EXPECT_EQ(k->audit.pointers[1].offset, 256u);
  EXPECT_EQ(k->audit.pointers[1].words, 32u);
  EXPECT_EQ(k->audit.pointer_count(), 48u);
  EXPECT_EQ(k->audit.pointers[1].word(31).offset, 504u);
}

TEST(KernelTable, AStructWithoutBytesWaitsForASearch) {
  fakecuda_new_module(0);
  const CUfunction f = define("room_kernel_params_struct", {1024});
  const KernelInfo* k = kernel_info(f, nullptr);
  EXPECT_TRUE(k->search_pending);
  EXPECT_TRUE(k->maps.empty());
}

TEST(KernelTable, AnUnloadedKernelsHandleReusedIsANewKernelWithANewIdentity) {
  void* module = fakecuda_new_module(0);
  const CUfunction f = define("room_kernel_before_unload", {128});
  const KernelInfo* before = kernel_info(f, nullptr);
  const uint64_t old_identity = kernel_identity(before);
  forget_kernels_of(module);
  const KernelInfo* after = kernel_info(f, nullptr);
  EXPECT_NE(kernel_identity(after), old_identity) << "clean keys of the unloaded kernel would pass the new one";
}

TEST(KernelTable, IdentitiesAreUniqueAcrossThreads) {
  fakecuda_new_module(0);
  std::vector<CUfunction> fs;
  for (int i = 0; i < 64; ++i) fs.push_back(define(("room_kernel_many_" + std::to_string(i)).c_str(), {8}));
  std::vector<uint64_t> ids(fs.size());
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (std::size_t i = t; i < fs.size(); i += 4) ids[i] = kernel_identity(kernel_info(fs[i], nullptr));
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(std::set<uint64_t>(ids.begin(), ids.end()).size(), fs.size());
}

}  // namespace
}  // namespace tmaguard
