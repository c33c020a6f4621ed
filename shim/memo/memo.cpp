// tmaguard shim: the clean-launch memo's state: the thread's object, its entries, blocks and rings, the process's
// clean keys and map hashes, and the moved layouts kept in a kernel's facts (look.h tells the whole story; the
// passes that read this state: passes.cpp).
#include "memo/memo_inside.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "process/counters.h"

namespace tmaguard {

// The launch path's thread-local object (memo.h: LaunchTls), as the bytes the rooms below see (thread_words.h); zero
// at a thread's start, as its words and memo begin.
alignas(LaunchTls) thread_local unsigned char t_launch_tls[sizeof(LaunchTls)] __attribute__((tls_model("initial-exec")));

namespace {

// The process's clean launch keys: 64-bit keys in sets of eight, one cache line each, bounded. Set-associative,
// because a training step launches one kernel for every layer with its own tensors, and one collision between two of
// those keys in a direct-mapped table would re-judge both launches on every step; a full set forgets its oldest key.
constexpr std::size_t kSharedWays = 8;
constexpr std::size_t kSharedSets = (1 << 12) / kSharedWays;
struct alignas(64) SharedSet {
  std::atomic<uint64_t> key[kSharedWays];
};
SharedSet g_shared[kSharedSets];

// Content hashes of maps that passed the generic descriptor checks (which depend on the bytes alone): a launch whose
// key is new because one of its many maps changed judges only that map again. 64 KiB: maps, not launches.
constexpr std::size_t kMapHashes = 1 << 13;
std::atomic<uint64_t> g_map_hashes[kMapHashes];

// Block `b`'s ring goes (its copies were clean for the kernel the entry held).
void drop_ring(CleanBlock& b) {
  if (!b.ring) return;
  this_memo().ring_bytes -= b.ring->bytes();
  std::free(b.ring);
  b.ring = nullptr;
}

// Forgets the clean keys and the ring of entry `e`'s block, when the entry is made afresh (for another kernel, an
// earlier KernelInfo's, or after invalidate_this_threads_entries()).
void forget_keys(const MemoEntry& e) {
  if (!this_memo().blocks) return;
  CleanBlock& b = this_memo().blocks[&e - this_memo().entries];
  std::memset(b.keys, 0, sizeof(CleanBlock::keys));
  drop_ring(b);
}

// A thread is exiting (counters.h): its blocks go, and with them every entry's copy and ring.
void release_thread() {
  if (this_memo().blocks)
    for (std::size_t i = 0; i < kMemoEntries; ++i) drop_ring(this_memo().blocks[i]);
  std::free(this_memo().blocks);
  this_memo().blocks = nullptr;
  for (MemoEntry& e : this_memo().entries) {
    e.clean_key = 0;
    e.block = nullptr;
  }
}

// Fills entry `e` (made empty for kernel `info`) with where the kernel's maps sit: up to fourteen whole-parameter
// places with an index below 256, or up to seven places inside parameters as (index, offset / 64) pairs, and watched
// places that all lie in one parameter below offset 4096 as a list of their words' offsets (the thread's WatchList);
// anything else is read from the KernelInfo (a kernel with places only rules name).
void fill(MemoEntry& e, const KernelInfo& info) {
  const std::vector<MapPlace>& m = info.maps;
  const std::vector<MapPlace>& w = info.watch;
  if (audit_due(info)) {
    e.at = MapsAt::kAuditing;  // the device audit wants this launch: the full check
    return;
  }
  const auto fits = [&](const MapPlace& s) {
    return s.param == w.front().param && s.param < 256 && s.offset % 64 == 0 && s.offset / 64 < 64;
  };
  const bool watch_fits = w.empty() || (w.size() <= kMaxWatched && std::all_of(w.begin(), w.end(), fits));
  const bool named = std::any_of(info.named_only.begin(), info.named_only.end(), [](bool b) { return b; });
  if (info.search_pending || !watch_fits || named) {
    e.at = MapsAt::kKernelInfo;
    return;
  }
  const bool whole = std::all_of(m.begin(), m.end(), [](const MapPlace& s) { return s.offset == 0 && s.param < 256; });
  const bool pairs = std::all_of(m.begin(), m.end(), [](const MapPlace& s) {
    return s.param < 256 && s.offset % 64 == 0 && s.offset / 64 < 256;
  });
  if (m.empty() && w.empty()) {
    e.at = MapsAt::kNowhere;
  } else if (whole && !m.empty() && m.size() <= sizeof(e.idx)) {
    for (std::size_t i = 0; i < m.size(); ++i) e.idx[i] = static_cast<uint8_t>(m[i].param);
    e.at = MapsAt::kParams;
    e.count = static_cast<uint8_t>(m.size());
  } else if (pairs && m.size() <= sizeof(e.idx) / 2) {
    for (std::size_t i = 0; i < m.size(); ++i) {
      e.idx[2 * i] = static_cast<uint8_t>(m[i].param);
      e.idx[2 * i + 1] = static_cast<uint8_t>(m[i].offset / 64);
    }
    e.at = MapsAt::kPairs;
    e.count = static_cast<uint8_t>(m.size());
  } else {
    e.at = MapsAt::kKernelInfo;
    return;
  }
  WatchList& list = this_memo().watched[&e - this_memo().entries];
  std::size_t n = 0;
  for (const MapPlace& s : w) list.word13[n++] = static_cast<uint16_t>(s.offset + kWord13Offset);
  e.watch_count = static_cast<uint8_t>(n);
  e.watch_param = w.empty() ? 0 : static_cast<uint8_t>(w.front().param);
}

// A map's content hash salted by how its bytes were read.
uint64_t map_hash(uint64_t hash, MapEvidence e) {
  return hash ^ (0x9e3779b97f4a7c15ULL * (static_cast<uint64_t>(e) + 1));
}

}  // namespace

namespace {

// Kernel facts replaced since this thread last looked (an unload, a new search): any entry may be stale.
void catch_up_with_kernel_epoch() {
  // Called inside tmaguard: the epoch is read after the depth was raised (reentry.h), so that a thread the freeing
  // thread saw outside tmaguard reads the epoch that freed what its entries held, and drops them unread.
  __atomic_signal_fence(__ATOMIC_SEQ_CST);
  const uint32_t epoch = g_launch_globals.kernel_epoch.load(std::memory_order_acquire);
  if (this_thread_words().kernel_epoch.load(std::memory_order_relaxed) == epoch) return;
  forget_this_threads_entries();
  this_thread_words().kernel_epoch.store(epoch, std::memory_order_release);
  kernel_facts_released();  // this thread no longer holds what was forgotten
}

}  // namespace

MemoEntry& entry(CUfunction f, const LaunchArgs* args, uint64_t declared) {
  catch_up_with_kernel_epoch();
  MemoEntry& e = memo_detail::slot(f);
  const bool known = e.f == f && e.info;
  bool built = false;  // by this lookup, with these bytes: nothing to search again
  const KernelInfo* info = known ? e.info : kernel_info(f, args, &built);
  if (args && !built && needs_new_search(*info, *args)) {
    // A kernel that waited for readable bytes, or with a map in a place that was empty: searched again now, once.
    info = search_again(f, info, *args);
    catch_up_with_kernel_epoch();  // the search replaced facts every thread's entries may hold, this one's too
  } else if (known) {
    return e;
  }
  forget_keys(e);  // another kernel's keys, an earlier KernelInfo's, or keys from before a forget
  e = MemoEntry{};
  this_thread_words().wide_compare = cpu::compares_wide();
  e.f = f;
  e.info = info;
  e.block = this_memo().blocks ? this_memo().blocks + (&e - this_memo().entries) : nullptr;
  e.identity = kernel_identity(info) ^ declared;
  fill(e, *info);
  return e;
}

void forget_this_threads_entries() {
  invalidate_this_threads_entries();
  for (const MemoEntry& e : this_memo().entries) forget_keys(e);
}

void invalidate_this_threads_entries() {
  // The entries alone (16 lines): an entry made afresh forgets its block's keys and ring before it keeps any (entry()),
  // and nothing reads a block but through its entry.
  std::memset(static_cast<void*>(this_memo().entries), 0, sizeof this_memo().entries);
}

bool is_clean_key(const MemoEntry& e, uint64_t key) {
  return key && (key == e.clean_key || (e.info && e.info->clean_key.load(std::memory_order_relaxed) == key) ||
                 memo_detail::shared_key_known(key));
}

void audit_done(MemoEntry& e) {
  e.f = nullptr;
  e.info = nullptr;
}

bool map_passed_before(uint64_t hash, MapEvidence evidence) {
  const uint64_t h = map_hash(hash, evidence);
  return h && g_map_hashes[h & (kMapHashes - 1)].load(std::memory_order_relaxed) == h;
}

void remember_map(uint64_t hash, MapEvidence evidence) {
  const uint64_t h = map_hash(hash, evidence);
  g_map_hashes[h & (kMapHashes - 1)].store(h, std::memory_order_relaxed);
}

namespace memo_detail {

constexpr std::size_t kBlocksAlignment = 4096;
constexpr std::size_t kBlocksBytes = (kMemoEntries * sizeof(CleanBlock) + kBlocksAlignment - 1) / kBlocksAlignment *
                                     kBlocksAlignment;  // aligned_alloc's size is a multiple of its alignment

CleanBlock* block_of(const MemoEntry& e, bool allocate) {
  if (!this_memo().blocks) {
    // Only a registered thread: its exit frees the blocks (counters.h).
    if (!allocate || !this_thread_words().registered) return nullptr;
    on_thread_exit(release_thread);
    // Page-aligned: where each entry's copy sits in its page is fixed by the layout, not by what the heap handed out
    // before. A repeat's first loads are the copy's, issued while the driver's last stores of the previous launch
    // may still be in flight; a copy at the page offsets of those stores waits for them (4 KiB aliasing: on the
    // stand-in, one queue position of sixteen cost FA4 +13 ns against +6 to +8, docs/verification.md).
    void* p = std::aligned_alloc(kBlocksAlignment, kBlocksBytes);
    if (!p) return nullptr;
    std::memset(p, 0, kMemoEntries * sizeof(CleanBlock));
    this_memo().blocks = static_cast<CleanBlock*>(p);
    for (std::size_t i = 0; i < kMemoEntries; ++i) this_memo().entries[i].block = this_memo().blocks + i;
  }
  return this_memo().blocks + (&e - this_memo().entries);
}

LayerRing* ring_with_room(CleanBlock& b, std::size_t stride) {
  LayerRing* r = b.ring;
  if (r && r->stride != stride) return nullptr;  // another kernel's (an entry given to another drops its ring)
  if (r && (r->size < r->capacity || r->capacity == kRingCopies)) return r;
  const std::size_t capacity = r ? 2 * std::size_t{r->capacity} : 8;
  const std::size_t bytes = LayerRing::bytes(capacity, stride);
  if (this_memo().ring_bytes - (r ? r->bytes() : 0) + bytes > kRingBytesPerThread) return r;
  void* p = std::aligned_alloc(alignof(LayerRing), bytes);
  if (!p) return r;
  auto* grown = static_cast<LayerRing*>(p);
  std::memset(static_cast<void*>(grown), 0, sizeof(LayerRing));
  grown->stride = static_cast<uint32_t>(stride);
  grown->capacity = static_cast<uint8_t>(capacity);
  if (r) {
    std::memcpy(grown->key, r->key, sizeof r->key);
    std::memcpy(grown->copy(0), r->copy(0), std::size_t{r->size} * stride);
    grown->size = r->size;
    grown->next = r->next;
    grown->last = r->last;
    grown->step = r->step;
  }
  drop_ring(b);
  this_memo().ring_bytes += bytes;
  b.ring = grown;
  return grown;
}

bool shared_key_known(uint64_t key) {
  if (!key) return false;
  const SharedSet& set = g_shared[key % kSharedSets];
  bool found = false;
  for (const auto& k : set.key) found |= k.load(std::memory_order_relaxed) == key;
  return found;
}

void insert_shared_key(uint64_t key) {
  if (!key || shared_key_known(key)) return;
  // Newest first; racing inserts may lose a key or hold one twice (a later launch re-checks and inserts again).
  SharedSet& set = g_shared[key % kSharedSets];
  for (std::size_t i = kSharedWays - 1; i > 0; --i)
    set.key[i].store(set.key[i - 1].load(std::memory_order_relaxed), std::memory_order_relaxed);
  set.key[0].store(key, std::memory_order_relaxed);
}

}  // namespace memo_detail

void remember(MemoEntry& e, uint64_t key, const uint8_t* const* maps, bool shared) {
  if (shared) {
    memo_detail::insert_shared_key(key);
    if (e.info) e.info->clean_key.store(key, std::memory_order_relaxed);
  }
  memo_detail::remember_local(e, key, [maps](std::size_t i) { return maps[i]; });
}

uint64_t moved_layout_key(const MemoEntry& e, std::size_t n, const uint8_t* const* maps) {
  alignas(16) uint8_t masked[kTensorMapBytes];
  auto without_address = [&](std::size_t i) {
    std::memcpy(masked, maps[i], kTensorMapBytes);
    std::memset(masked, 0, sizeof(uint64_t));
    return masked;
  };
  uint64_t key = 0;
  launch_key(e.identity, g_hash_key, n, without_address, &key);
  return key;
}

bool moved_maps_clean(const KernelInfo& k, uint64_t layout, std::size_t n, const uint8_t* const* maps) {
  for (std::size_t s = 0; s < kMovedLayouts; ++s) {
    if (layout != k.moved_layout[s].load(std::memory_order_acquire)) continue;
    const MovedMaps* m = k.moved[s].load(std::memory_order_relaxed);
    uint64_t addresses[MovedMaps::kMaxMaps];
    if (!m || m->size() != n) return false;
    for (std::size_t i = 0; i < n; ++i) std::memcpy(&addresses[i], maps[i], sizeof(uint64_t));
    return m->clean_at(addresses);
  }
  return false;
}

namespace memo_detail {

// Each slot is set once: its facts are read by every thread without a lock.
bool moved_slot_wanted(const KernelInfo& k, uint64_t layout, std::size_t* slot) {
  if (k.judged_clean.load(std::memory_order_relaxed) == 0) {
    k.judged_clean.store(1, std::memory_order_relaxed);
    return false;
  }
  if (k.uncompiled.load(std::memory_order_relaxed) >= kMovedLayouts) return false;
  std::size_t free_slot = kMovedLayouts;
  for (std::size_t s = 0; s < kMovedLayouts; ++s) {
    // A layout known already: its check failed on this move.
    if (k.moved_layout[s].load(std::memory_order_acquire) == layout) return false;
    if (free_slot == kMovedLayouts && !k.moved[s].load(std::memory_order_relaxed)) free_slot = s;
  }
  *slot = free_slot;
  return free_slot != kMovedLayouts;
}

void keep_moved_maps(const KernelInfo& k, std::size_t slot, uint64_t layout, std::unique_ptr<const MovedMaps> m) {
  if (!m) {
    const auto tries = static_cast<uint8_t>(k.uncompiled.load(std::memory_order_relaxed) + 1);
    k.uncompiled.store(tries, std::memory_order_relaxed);
    return;
  }
  const MovedMaps* expected = nullptr;
  if (!k.moved[slot].compare_exchange_strong(expected, m.get())) return;
  m.release();  // the kernel's facts own it now (kernel_table.h)
  k.moved_layout[slot].store(layout, std::memory_order_release);
}

}  // namespace memo_detail

}  // namespace tmaguard
