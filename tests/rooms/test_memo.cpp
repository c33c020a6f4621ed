// The launch room's clean-launch memo, without a process: what a thread and the process remember of clean launches.
#include <gtest/gtest.h>

#include <array>
#include <cstring>
#include <thread>

#include "fakecuda.h"
#include "base/counters.h"
#include "core/struct_search.h"
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

// A struct kernel's watched places (its empty 64-byte places): a repeat passes while every one still holds no map,
// and a map's word 13 appearing in any one of them (the last of the list too, which is read four places a step and
// padded) sends the launch on to the full check. `bytes`: the struct's size; `map`: whether a map sits at offset 128.
void expect_every_watched_place_seen(const char* name, std::size_t bytes, bool map, std::size_t watched) {
  SCOPED_TRACE(name);
  const CUfunction f = define(name, {bytes});
  alignas(128) static uint8_t params[4160];
  std::memset(params, 0, sizeof params);
  if (map) {
    EncodeArgs a;
    a.dtype = 6;  // float16
    a.rank = 2;
    a.address = 0x7f0000000000;
    a.dims = {64, 64};
    a.strides = {128};
    a.box = {64, 64};
    a.element_strides = {1, 1};
    ASSERT_EQ(encode(a, params + 128), 0);
  }
  void* kernel_params[] = {params};
  const LaunchArgs args = LaunchArgs::of_params(kernel_params);
  // The device audit's launches are not what this test is about: the kernel is done with them.
  kernel_info(f, &args)->audit.launches_left.store(0, std::memory_order_relaxed);
  audit_done(entry(f, &args));
  MemoEntry& e = entry(f, &args);
  ASSERT_EQ(e.at, MapsAt::kPairs);
  ASSERT_EQ(e.count, map ? 1u : 0u);
  ASSERT_EQ(e.watch_count, watched);
  if (map) {
    register_thread();  // as the full check does: a registered thread keeps copies of clean launches
    const auto slot = [&](std::size_t) { return static_cast<const uint8_t*>(params + 128); };
    uint64_t key = 0;
    ASSERT_TRUE(launch_key(e.identity, g_hash_key, 1, slot, &key));
    remember(e, key, slot, false);
  }
  LaunchView v;
  v.f = f;
  v.kernel_params = kernel_params;
  ASSERT_TRUE(fast_pass(v)) << "a repeat of a clean launch did not pass";
  std::size_t looked = 0;
  for (std::size_t k = 0; 64 * k + kTensorMapBytes <= bytes; ++k) {
    if (map && k >= 1 && k <= 3) continue;  // places that overlap the map are not watched
    ++looked;
    uint8_t& top = params[64 * k + kWord13Offset + 3];
    top = 0x3f;  // word 13 as a map has it: boxDim[0] - 1 in its top byte
    EXPECT_FALSE(fast_pass(v)) << "a map's word 13 in watched place " << k << " went unseen";
    top = 0;
    EXPECT_TRUE(fast_pass(v)) << "place " << k << " emptied again, and the repeat did not pass";
  }
  EXPECT_EQ(looked, watched);
}

TEST(Memo, EveryWatchedPlaceIsLookedAtOnEveryRepeat) {
  expect_every_watched_place_seen("memo_kernel_watched_15", 1216, true, 15);  // 15: not a multiple of four
  expect_every_watched_place_seen("memo_kernel_watched_64", 4160, false, kMaxWatched);
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
