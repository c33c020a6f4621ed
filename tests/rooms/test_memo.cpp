// The launch room's clean-launch memo, without a process: what a thread and the process remember of clean launches.
#include <gtest/gtest.h>

#include <array>
#include <thread>

#include "fakecuda.h"
#include "launch/memo.h"
#include "tmaguard/tensormap.h"

namespace tmaguard {
namespace {

CUfunction define(const char* name, std::vector<std::size_t> sizes) {
  return static_cast<CUfunction>(fakecuda_define_kernel(name, static_cast<int>(sizes.size()), sizes.data(), 0));
}

std::array<uint8_t, kTensorMapBytes> some_map(uint8_t fill) {
  std::array<uint8_t, kTensorMapBytes> b{};
  b.fill(fill);
  return b;
}

TEST(Memo, AnEntryIsItsKernelsFacts) {
  const CUfunction f = define("memo_kernel_entry", {128, 8});
  MemoEntry& e = entry(f, nullptr);
  EXPECT_EQ(e.info, kernel_info(f, nullptr));
  EXPECT_EQ(e.identity, kernel_identity(e.info));
  EXPECT_EQ(&entry(f, nullptr), &e) << "the thread's entry moved between two lookups";
}

// A kernel whose struct parameter waited for readable bytes: the lookup that brings them searches once and gives an
// entry of the new facts (one way through: no second lookup by the caller).
TEST(Memo, AnEntryWithBytesForAPendingSearchIsTheSearchedFacts) {
  const CUfunction f = define("memo_kernel_pending_struct", {1024});
  MemoEntry& waiting = entry(f, nullptr);
  ASSERT_TRUE(waiting.info->search_pending);
  const uint64_t identity_before = waiting.identity;
  EncodeArgs a;
  a.dtype = 6;  // float16
  a.rank = 2;
  a.address = 0x7f0000000000;
  a.dims = {64, 64};
  a.strides = {128};
  a.box = {64, 64};
  a.element_strides = {1, 1};
  alignas(64) uint8_t params[1024] = {};
  ASSERT_EQ(encode(a, params + 256), 0);
  void* kernel_params[] = {params};
  const LaunchArgs args = LaunchArgs::of_params(kernel_params);
  MemoEntry& searched = entry(f, &args);
  ASSERT_EQ(searched.f, f);
  EXPECT_FALSE(searched.info->search_pending);
  ASSERT_EQ(searched.info->maps.size(), 1u) << "the map in the struct was not found";
  EXPECT_EQ(searched.info->maps[0].offset, 256u);
  EXPECT_NE(searched.identity, identity_before) << "clean keys of the old facts would still match";
  EXPECT_EQ(&entry(f, &args), &searched);
  EXPECT_EQ(entry(f, &args).info, searched.info) << "a second lookup with the same bytes searched again";
}

TEST(Memo, AKeyRememberedSharedIsKnownOnEveryThreadOneKeptLocalOnlyOnItsOwn) {
  const CUfunction f = define("memo_kernel_keys", {128});
  const auto map = some_map(7);
  MemoEntry& e = entry(f, nullptr);
  constexpr uint64_t kShared = 0x1111'2222'3333'4445ULL, kLocal = 0x5555'6666'7777'8889ULL;
  EXPECT_FALSE(is_clean_key(e, kShared));
  remember(e, kShared, [&](std::size_t) { return map.data(); }, true);
  remember(e, kLocal, [&](std::size_t) { return map.data(); }, false);
  EXPECT_TRUE(is_clean_key(e, kShared));
  bool shared_there = false, local_there = true;
  std::thread([&] {
    MemoEntry& other = entry(f, nullptr);
    shared_there = is_clean_key(other, kShared);
    local_there = is_clean_key(other, kLocal);
  }).join();
  EXPECT_TRUE(shared_there) << "a key the full check judged clean is not known to another thread";
  EXPECT_FALSE(local_there) << "a thread's own key leaked to another thread";
}

TEST(Memo, AMapThatPassedIsKnownOnlyUnderTheEvidenceItWasReadWith) {
  constexpr uint64_t kHash = 0xabcdef01'23456789ULL;
  EXPECT_FALSE(map_passed_before(kHash, MapEvidence::kParameter));
  remember_map(kHash, MapEvidence::kParameter);
  EXPECT_TRUE(map_passed_before(kHash, MapEvidence::kParameter));
  EXPECT_FALSE(map_passed_before(kHash, MapEvidence::kKnown)) << "bytes passed as a searched map pass where a rule names it";
  EXPECT_FALSE(map_passed_before(kHash + 1, MapEvidence::kParameter));
}

}  // namespace
}  // namespace tmaguard
