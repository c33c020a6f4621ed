// The launch room's clean-launch memo, without a process: what a thread and the process remember of clean launches.
#include <gtest/gtest.h>

#include <array>
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>
#include <thread>

#include "fakecuda.h"
#include "process/counters.h"
#include "arch/cpu.h"
#include "core/struct_search.h"
#include "memo/memo_inside.h"  // the memo's own state, which these tests look into
#include "room_maps.h"
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

// This thread's entry for `f`, the kernel done with the device audit's launches (not what these tests are about).
MemoEntry& entry_without_audit(CUfunction f, const LaunchArgs& args) {
  kernel_info(f, &args)->audit.launches_left.store(0, std::memory_order_relaxed);
  audit_done(entry(f, &args, kNothingDeclared));
  return entry(f, &args, kNothingDeclared);
}

TEST(Memo, AnEntryIsItsKernelsFacts) {
  const CUfunction f = define("memo_kernel_entry", {128, 8});
  MemoEntry& e = entry(f, nullptr, kNothingDeclared);
  EXPECT_EQ(e.info, kernel_info(f, nullptr));
  EXPECT_EQ(e.identity, kernel_identity(e.info));
  EXPECT_EQ(&entry(f, nullptr, kNothingDeclared), &e) << "the thread's entry moved between two lookups";
}

// A kernel whose struct parameter waited for readable bytes: the lookup that brings them searches once and gives an
// entry of the new facts (one way through: no second lookup by the caller).
TEST(Memo, AnEntryWithBytesForAPendingSearchIsTheSearchedFacts) {
  const CUfunction f = define("memo_kernel_pending_struct", {1024});
  MemoEntry& waiting = entry(f, nullptr, kNothingDeclared);
  ASSERT_TRUE(waiting.info->search_pending);
  const uint64_t identity_before = waiting.identity;
  const EncodeArgs a = half_map(0x7f0000000000);
  alignas(64) uint8_t params[1024] = {};
  ASSERT_EQ(encode(a, params + 256), 0);
  void* kernel_params[] = {params};
  const LaunchArgs args = LaunchArgs::of_params(kernel_params);
  MemoEntry& searched = entry(f, &args, kNothingDeclared);
  ASSERT_EQ(searched.f, f);
  EXPECT_FALSE(searched.info->search_pending);
  ASSERT_EQ(searched.info->maps.size(), 1u) << "the map in the struct was not found";
  EXPECT_EQ(searched.info->maps[0].offset, 256u);
  EXPECT_NE(searched.identity, identity_before) << "clean keys of the old facts would still match";
  EXPECT_EQ(&entry(f, &args, kNothingDeclared), &searched);
  EXPECT_EQ(entry(f, &args, kNothingDeclared).info, searched.info)
      << "a second lookup with the same bytes searched again";
}

TEST(Memo, AKeyRememberedSharedIsKnownOnEveryThreadOneKeptLocalOnlyOnItsOwn) {
  const CUfunction f = define("memo_kernel_keys", {128});
  const auto map = some_map(7);
  MemoEntry& e = entry(f, nullptr, kNothingDeclared);
  constexpr uint64_t kShared = 0x1111'2222'3333'4445ULL, kLocal = 0x5555'6666'7777'8889ULL;
  EXPECT_FALSE(is_clean_key(e, kShared));
  remember(e, kShared, [&](std::size_t) { return map.data(); }, true);
  remember(e, kLocal, [&](std::size_t) { return map.data(); }, false);
  EXPECT_TRUE(is_clean_key(e, kShared));
  bool shared_there = false, local_there = true;
  std::thread([&] {
    MemoEntry& other = entry(f, nullptr, kNothingDeclared);
    shared_there = is_clean_key(other, kShared);
    local_there = is_clean_key(other, kLocal);
  }).join();
  EXPECT_TRUE(shared_there) << "a key the full check judged clean is not known to another thread";
  EXPECT_FALSE(local_there) << "a thread's own key leaked to another thread";
}

// A struct kernel's watched places (its empty 64-byte places): a repeat passes while every one still holds no map,
// and a map's word 13 appearing in any one of them (the last of the list too, which is read four places a step and
// padded) sends the launch on to the full check. `bytes`: the struct's size; `map`: whether a map sits at offset 128.
void expect_every_watched_place_seen(const char* name, std::size_t bytes, bool map, std::size_t watched, bool wide) {
  SCOPED_TRACE(std::string(name) + (wide ? ", 32 bytes at a time" : ", 16 bytes at a time"));
  const CUfunction f = define(name, {bytes});
  alignas(128) static uint8_t params[4160];
  std::memset(params, 0, sizeof params);
  if (map) {
    const EncodeArgs a = half_map(0x7f0000000000);
    ASSERT_EQ(encode(a, params + 128), 0);
  }
  void* kernel_params[] = {params};
  const LaunchArgs args = LaunchArgs::of_params(kernel_params);
  MemoEntry& e = entry_without_audit(f, args);
  ASSERT_EQ(e.at, MapsAt::kPairs);
  ASSERT_EQ(e.count, map ? 1u : 0u);
  ASSERT_EQ(e.watch_count, watched);
  this_thread_words().wide_compare = wide;  // the repeats' pass for this CPU, or the other one
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
  for (const bool wide : {false, true}) {
    if (wide && !cpu::compares_wide()) continue;
    const std::string w = wide ? "_wide" : "_narrow";
    // Counts at both ends of the repeats' run of places: 2 and 3 (a parameter of 128 bytes or less is not searched),
    // 15 (odd, with a map), 63 and all 64.
    expect_every_watched_place_seen(("memo_kernel_watched_2" + w).c_str(), 192, false, 2, wide);
    expect_every_watched_place_seen(("memo_kernel_watched_3" + w).c_str(), 256, false, 3, wide);
    expect_every_watched_place_seen(("memo_kernel_watched_15" + w).c_str(), 1216, true, 15, wide);
    expect_every_watched_place_seen(("memo_kernel_watched_63" + w).c_str(), 4096, false, 63, wide);
    expect_every_watched_place_seen(("memo_kernel_watched_64" + w).c_str(), 4160, false, kMaxWatched, wide);
  }
}

// A repeat passes by the entry's copy only when every byte of every map is the copy's: one bit changed in any byte
// of any map fails the pass (its key is no clean key either), for maps in whole parameters and maps in a struct,
// compared 16 and 32 bytes at a time.
void expect_every_map_byte_compared(const char* name, bool in_struct, bool wide) {
  SCOPED_TRACE(std::string(name) + (wide ? ", 32 bytes at a time" : ", 16 bytes at a time"));
  constexpr std::size_t kMaps = 3;
  alignas(128) static uint8_t whole[kMaps][kTensorMapBytes];
  alignas(128) static uint8_t params[1024];
  std::memset(params, 0, sizeof params);
  const std::size_t struct_offset[kMaps] = {128, 384, 768};
  uint8_t* map[kMaps];
  for (std::size_t i = 0; i < kMaps; ++i) {
    map[i] = in_struct ? params + struct_offset[i] : whole[i];
    ASSERT_EQ(encode(half_map(0x7f0000000000 + (i << 20)), map[i]), 0);
  }
  const CUfunction f = in_struct ? define(name, {sizeof params}) : define(name, {8, 128, 128, 128});
  int n = 4;
  void* kernel_params_whole[] = {&n, whole[0], whole[1], whole[2]};
  void* kernel_params_struct[] = {params};
  void** kernel_params = in_struct ? kernel_params_struct : kernel_params_whole;
  const LaunchArgs args = LaunchArgs::of_params(kernel_params);
  MemoEntry& e = entry_without_audit(f, args);
  ASSERT_EQ(e.at, in_struct ? MapsAt::kPairs : MapsAt::kParams);
  ASSERT_EQ(e.count, kMaps);
  this_thread_words().wide_compare = wide;
  register_thread();  // as the full check does: a registered thread keeps copies of clean launches
  const auto slot = [&](std::size_t i) { return static_cast<const uint8_t*>(map[i]); };
  uint64_t key = 0;
  ASSERT_TRUE(launch_key(e.identity, g_hash_key, kMaps, slot, &key));
  remember(e, key, slot, false);
  LaunchView v;
  v.f = f;
  v.kernel_params = kernel_params;
  ASSERT_TRUE(fast_pass(v)) << "a repeat of a clean launch did not pass";
  for (std::size_t i = 0; i < kMaps; ++i)
    for (std::size_t b = 0; b < kTensorMapBytes; ++b) {
      map[i][b] ^= static_cast<uint8_t>(1u << (b % 8));
      EXPECT_FALSE(fast_pass(v)) << "map " << i << " byte " << b << " changed and the repeat passed";
      map[i][b] ^= static_cast<uint8_t>(1u << (b % 8));
    }
  EXPECT_TRUE(fast_pass(v)) << "the maps as they were, and the repeat did not pass";
}

TEST(Memo, EveryByteOfEveryMapIsComparedOnEveryRepeat) {
  for (const bool wide : {false, true}) {
    if (wide && !cpu::compares_wide()) continue;
    const std::string w = wide ? "_wide" : "_narrow";
    expect_every_map_byte_compared(("memo_kernel_bytes_whole" + w).c_str(), false, wide);
    expect_every_map_byte_compared(("memo_kernel_bytes_struct" + w).c_str(), true, wide);
  }
}

// A kernel launched once per layer on each layer's own tensors (a training step): after one round known by their
// keys, the layers pass by the entry's ring (here with the keys forgotten, so that nothing else could pass them),
// in their order, past the ring's first 8 copies, and in reverse order once a reverse round was known by its keys;
// a layer whose map was rewritten in place does not pass; forgetting the entry gives the ring's memory back.
TEST(Memo, LayersPassByTheRingAndARewrittenLayerDoesNot) {
  constexpr std::size_t kLayers = 10;
  const CUfunction f = define("memo_kernel_layers", {128, 128, 8});
  register_thread();  // as the full check does: a registered thread keeps copies of clean launches
  alignas(64) static uint8_t maps[kLayers][2][kTensorMapBytes];
  static void* params[kLayers][3];
  static uint64_t n = 7;
  for (std::size_t l = 0; l < kLayers; ++l) {
    for (std::size_t i = 0; i < 2; ++i) {
      const EncodeArgs a = half_map(0x7f0000000000 + (l << 24) + (i << 20));
      ASSERT_EQ(encode(a, maps[l][i]), 0);
    }
    params[l][0] = maps[l][0];
    params[l][1] = maps[l][1];
    params[l][2] = &n;
  }
  const LaunchArgs first = LaunchArgs::of_params(params[0]);
  MemoEntry& e = entry_without_audit(f, first);
  ASSERT_EQ(e.at, MapsAt::kParams);
  ASSERT_EQ(e.count, 2u);
  const auto launch = [&](std::size_t l) {
    LaunchView v;
    v.f = f;
    v.kernel_params = params[l];
    return fast_pass(v);
  };
  for (std::size_t l = 0; l < kLayers; ++l) {  // each layer judged clean once, as the full check remembers it
    const auto slot = [&](std::size_t i) { return static_cast<const uint8_t*>(maps[l][i]); };
    uint64_t key = 0;
    ASSERT_TRUE(launch_key(e.identity, g_hash_key, 2, slot, &key));
    remember(e, key, slot, false);
  }
  for (std::size_t l = 0; l < kLayers; ++l) EXPECT_TRUE(launch(l)) << "layer " << l << " not known by its key";
  CleanBlock& block = this_memo().blocks[&e - this_memo().entries];
  ASSERT_NE(block.ring, nullptr) << "no ring after a round of layers known by their keys";
  EXPECT_EQ(block.ring->size, kLayers - 1) << "every layer but the last remembered (the entry's own copy)";
  EXPECT_EQ(block.ring->capacity, 16u) << "the ring did not grow past its first 8 copies";
  uint64_t keys[kKeySets][kKeyWays] = {};
  std::memcpy(keys, block.keys, sizeof keys);
  std::memset(block.keys, 0, sizeof block.keys);  // from here on only the copies can pass a launch
  for (int round = 0; round < 3; ++round)
    for (std::size_t l = 0; l < kLayers; ++l)
      EXPECT_TRUE(launch(l)) << "layer " << l << " of round " << round << " did not pass by the ring";
  std::memcpy(block.keys, keys, sizeof keys);
  for (int round = 0; round < 2; ++round)  // the turn: the ring learns the order from the keys
    for (std::size_t l = kLayers; l-- > 0;) EXPECT_TRUE(launch(l)) << "layer " << l << " in reverse, keys known";
  std::memset(block.keys, 0, sizeof block.keys);
  for (std::size_t l = kLayers; l-- > 0;) EXPECT_TRUE(launch(l)) << "layer " << l << " in reverse, by the ring";
  for (std::size_t l = kLayers; l-- > 5;) EXPECT_TRUE(launch(l)) << "layer " << l;
  maps[4][1][20] ^= 0x10;  // a stride of layer 4's second map, rewritten in place
  EXPECT_FALSE(launch(4)) << "layer 4 rewritten in place passed";
  maps[4][1][20] ^= 0x10;  // as it was: the ring still expects it
  for (std::size_t l = 5; l-- > 0;) EXPECT_TRUE(launch(l)) << "layer " << l << " after the rewrite was undone";
  EXPECT_GT(this_memo().ring_bytes, 0u);
  forget_this_threads_entries();
  EXPECT_EQ(this_memo().ring_bytes, 0u) << "a forgotten entry's ring kept its memory";
}

// An entry reaches its thread's copy of its kernel's clean maps from its own line: an entry made before the thread
// had blocks is given its block when they are made, an entry made afterwards (or made afresh after its thread's
// entries were forgotten) has it from the start, and each entry's block is its own. A repeat then passes by the copy.
TEST(Memo, AnEntryHoldsItsOwnBlock) {
  const CUfunction f = define("memo_kernel_block_a", {128, 8}), g = define("memo_kernel_block_b", {128, 8});
  alignas(64) static uint8_t map[kTensorMapBytes];
  const EncodeArgs a = half_map(0x7f0000000000);
  ASSERT_EQ(encode(a, map), 0);
  static uint64_t n = 3;
  void* params[] = {map, &n};
  const LaunchArgs args = LaunchArgs::of_params(params);
  bool before_none = false, given = false, after_given = false, distinct = false, again = false, passed = false;
  std::thread([&] {  // a thread of its own: no blocks yet
    register_thread();
    MemoEntry& e = entry_without_audit(f, args);
    before_none = e.block == nullptr && this_memo().blocks == nullptr;
    const auto slot = [&](std::size_t) { return static_cast<const uint8_t*>(map); };
    uint64_t key = 0;
    if (!launch_key(e.identity, g_hash_key, 1, slot, &key)) return;
    remember(e, key, slot, false);
    given = this_memo().blocks && e.block == &this_memo().blocks[&e - this_memo().entries];
    MemoEntry& other = entry_without_audit(g, args);
    after_given = other.block == &this_memo().blocks[&other - this_memo().entries];
    distinct = &other == &e || other.block != e.block;
    forget_this_threads_entries();
    MemoEntry& fresh = entry_without_audit(f, args);
    again = fresh.block == &this_memo().blocks[&fresh - this_memo().entries];
    remember(fresh, key, slot, false);
    LaunchView v;
    v.f = f;
    v.kernel_params = params;
    passed = fast_pass(v);
  }).join();
  EXPECT_TRUE(before_none) << "an entry of a thread without blocks points at one";
  EXPECT_TRUE(given) << "the entry was not given the block made for it";
  EXPECT_TRUE(after_given) << "an entry made after the blocks has none";
  EXPECT_TRUE(distinct) << "two entries share a block";
  EXPECT_TRUE(again) << "an entry made afresh after its thread's entries were forgotten lost its block";
  EXPECT_TRUE(passed) << "a repeat of the remembered launch did not pass by the copy";
}

// Rings of many kernels with many maps and layers: what a thread's rings hold stays within kRingBytesPerThread, and
// every launch still passes (past the budget, by its key).
TEST(Memo, AThreadsRingsStayWithinTheirBudget) {
  constexpr std::size_t kMaps = 14, kLayers = 40, kKernels = 8;
  register_thread();
  alignas(64) static uint8_t maps[kLayers][kMaps][kTensorMapBytes];
  static void* params[kLayers][kMaps];
  for (std::size_t l = 0; l < kLayers; ++l)
    for (std::size_t i = 0; i < kMaps; ++i) {
      const EncodeArgs a = half_map(0x7f0000000000 + (l << 24) + (i << 16));
      ASSERT_EQ(encode(a, maps[l][i]), 0);
      params[l][i] = maps[l][i];
    }
  std::size_t most = 0;
  for (std::size_t k = 0; k < kKernels; ++k) {
    const std::vector<std::size_t> sizes(kMaps, kTensorMapBytes);
    const CUfunction f = define(("memo_kernel_budget_" + std::to_string(k)).c_str(), sizes);
    const LaunchArgs first = LaunchArgs::of_params(params[0]);
    MemoEntry& e = entry_without_audit(f, first);
    ASSERT_EQ(e.count, kMaps);
    for (std::size_t l = 0; l < kLayers; ++l) {
      const auto slot = [&](std::size_t i) { return static_cast<const uint8_t*>(maps[l][i]); };
      uint64_t key = 0;
      ASSERT_TRUE(launch_key(e.identity, g_hash_key, kMaps, slot, &key));
      remember(e, key, slot, true);
    }
    LaunchView v;
    v.f = f;
    for (int round = 0; round < 2; ++round)
      for (std::size_t l = 0; l < kLayers; ++l) {
        v.kernel_params = params[l];
        // a key its set of the entry's no longer holds (40 keys in sets of 8) is the process's
        EXPECT_TRUE(fast_pass(v) || slow_pass(v)) << "kernel " << k << " layer " << l << " round " << round;
        most = std::max(most, this_memo().ring_bytes);
      }
  }
  EXPECT_GT(most, kRingBytesPerThread / 2) << "the rings never came near their budget: the test tests nothing";
  EXPECT_LE(most, kRingBytesPerThread);
  forget_this_threads_entries();
  EXPECT_EQ(this_memo().ring_bytes, 0u);
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
