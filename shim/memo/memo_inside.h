// tmaguard shim: the clean-launch memo's own state and steps, for the memo room's .cpp files (and its tests) alone:
// the rest of tmaguard asks memo.h. What each tier keeps: look.h.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "arch/cpu.h"
#include "core/launch_key.h"
#include "memo/memo.h"
#include "process/hash_key.h"
#include "thread/reentry.h"

namespace tmaguard {

//! An entry's clean keys: 8 sets of 8 (a key's set: key % 8; newest first), so that a kernel launched once per layer
//! on each layer's tensors (a training step) is known by its key in one line of the thread's own, up to 64 layers.
inline constexpr std::size_t kKeySets = 8, kKeyWays = 8;

//! A kernel launched once per layer, each layer on its own tensors (a training step): copies of its clean launches'
//! maps in the order they first came, so that a repeat whose bytes are not the entry's copy is compared with the copy
//! after the last one that matched (the next layer; the one before, while the layers come in reverse order, as a
//! recomputed forward pass in a backward pass has them) instead of being hashed. Made on the first repeat known by a
//! key other than the entry's last; grows by doubling from 8 copies to kRingCopies; a full ring keeps the layers it
//! has (the others are known by their keys); a thread's rings hold at most kRingBytesPerThread between them. Every
//! copy is the bytes of a launch known clean for the entry's kernel, as the entry's own copy is.
inline constexpr std::size_t kRingCopies = 64;
inline constexpr std::size_t kRingBytesPerThread = std::size_t{512} << 10;
struct alignas(64) LayerRing {
  uint64_t key[kRingCopies];  // each copy's launch key
  uint32_t stride;            // bytes per copy: 128 per map
  uint8_t capacity, size;
  uint8_t next;               // the copy the next launch is compared with (below size)
  uint8_t last;               // the copy the last launch matched (by bytes or by key)
  int8_t step;                // +1: the layers come in the order they were first seen; -1: in reverse
  uint8_t* copy(std::size_t i) { return reinterpret_cast<uint8_t*>(this + 1) + std::size_t{stride} * i; }
  //! What a ring of this capacity and stride holds in memory, itself included (a multiple of 64: the header's size
  //! is, and a stride is a multiple of 128).
  static std::size_t bytes(std::size_t capacity, std::size_t stride) { return sizeof(LayerRing) + capacity * stride; }
  std::size_t bytes() const { return bytes(capacity, stride); }
  //! The copy after copy i, in the order the layers now come.
  uint8_t after(std::size_t i) const {
    if (step > 0) return static_cast<uint8_t>(i + 1 == size ? 0 : i + 1);
    return static_cast<uint8_t>(i == 0 ? size - 1 : i - 1);
  }
};

//! What an entry keeps of its kernel's clean launches on this thread.
struct alignas(64) CleanBlock {
  uint64_t keys[kKeySets][kKeyWays];           // 0: none
  uint8_t maps[kCopiedMaps * kTensorMapBytes];  // valid while the entry's clean_key is not 0
  LayerRing* ring;                              // nullptr: none (yet)
};

namespace memo_detail {

CleanBlock* block_of(const MemoEntry& e, bool allocate);
//! Block `b`'s ring with room for one more copy of `stride` bytes: made or grown (within the thread's budget), or as
//! it is when full; nullptr when there is none and none can be made.
LayerRing* ring_with_room(CleanBlock& b, std::size_t stride);
//! A repeat of a ringed kernel whose maps equal the ring's next copy, or the one after it (a layer between them
//! passed by the entry's copy): the ring moves on, and the copy's key becomes the entry's last clean key (so that a
//! kernel that settles on one layer is seen to, and gets its copy). Out of line: a kernel launched on one set of
//! tensors never comes here.
bool ring_pass(MemoEntry& e, void* const* kernel_params);
void insert_shared_key(uint64_t key);
bool shared_key_known(uint64_t key);


//! Whether `key` is among a block's clean keys (one line: the key's set).
__attribute__((always_inline)) inline bool has_key(const CleanBlock& b, uint64_t key) {
  const uint64_t* set = b.keys[key % kKeySets];
  bool found = false;
  for (std::size_t w = 0; w < kKeyWays; ++w) found |= set[w] == key;
  return found && key != 0;
}
//! Adds a clean key to a block (newest first in its set; the oldest of a full set goes).
inline void add_key(CleanBlock& b, uint64_t key) {
  if (key == 0 || has_key(b, key)) return;
  uint64_t* set = b.keys[key % kKeySets];
  for (std::size_t w = kKeyWays - 1; w > 0; --w) set[w] = set[w - 1];
  set[0] = key;
}

// The steps before TG_ENTER write this thread's memo: for their duration the thread counts as inside tmaguard
// (InsideTmaguard), so that a signal handler launching meanwhile is counted, not checked against a half-written memo.

template <typename BytesOf>
void remember_local(MemoEntry& e, uint64_t key, BytesOf&& bytes) {
  e.clean_key = 0;
  const std::size_t n = copied_maps(e);
  CleanBlock* b = block_of(e, true);
  if (b) add_key(*b, key);
  if (n) {
    if (!b) return;  // no copies: the entry keeps no key either (a key without its bytes would be read as both)
    for (std::size_t i = 0; i < n; ++i) {
      const uint8_t* m = bytes(i);
      if (!m) return;
      __builtin_memcpy(b->maps + kTensorMapBytes * i, m, kTensorMapBytes);
    }
    bump(this_thread_words().clean_copies);
  }
  e.clean_key = key;
}


//! The most maps a copy of one launch holds (an entry's copy: kCopiedMaps; a ring's: 14 whole parameters).
inline constexpr std::size_t kMaxSnapshotMaps = 14;
//! The maps' bytes (`slot(i)`) read once into `out` (n * 128 bytes), kept only when they still hash to `key`: a pass
//! by key hashed the caller's bytes, and another thread may have rewritten them since; a copy of bytes nobody judged
//! would pass them from then on.
template <typename MapBytes>
bool snapshot_of_key(const MemoEntry& e, uint64_t key, std::size_t n, const MapBytes& slot, uint8_t* out) {
  if (n > kMaxSnapshotMaps) return false;
  for (std::size_t i = 0; i < n; ++i) {
    const uint8_t* m = slot(i);
    if (!m) return false;
    __builtin_memcpy(out + kTensorMapBytes * i, m, kTensorMapBytes);
  }
  uint64_t again = 0;
  return launch_key(e.identity, g_hash_key, n, [out](std::size_t i) { return out + kTensorMapBytes * i; }, &again) &&
         again == key;
}

// A clean launch of the entry's kernel seen again by its key (its maps' bytes differ from the copy, or were not
// compared): a key that repeats the entry's last clean key (the kernel settled on these tensors), or an entry without
// a copy, takes a copy, so that the launches after it take the compare; another key only becomes the last one.
// Copying each layer's maps in turn, when one kernel is launched once per layer on its own tensors, would cost more
// than the compare saves; but a copy left at another layer's bytes would send every later repeat to the hash.
template <typename MapBytes>
__attribute__((noinline, cold)) void renew_copy(MemoEntry& e, uint64_t key, const MapBytes& slot) {
  const InsideTmaguard inside;
  alignas(16) uint8_t snapshot[kMaxSnapshotMaps * kTensorMapBytes];
  const std::size_t n = copied_maps(e);
  if (n == 0) return remember_local(e, key, slot);          // the key alone: no bytes are copied
  if (!snapshot_of_key(e, key, n, slot, snapshot)) return;  // rewritten since it was keyed: no copy, no new key
  remember_local(e, key, [&snapshot](std::size_t i) -> const uint8_t* { return snapshot + kTensorMapBytes * i; });
}
// A clean launch known by a key other than the entry's last (the kernel runs on several sets of tensors): where the
// key is one of the entry's ring, the ring expects the layer after this one next; else the launch's bytes join it.
template <typename MapBytes>
__attribute__((noinline, cold)) void ring_learn(const MemoEntry& e, uint64_t key, std::size_t n, const MapBytes& slot) {
  if (n == 0 || n != e.count || (e.at != MapsAt::kParams && e.at != MapsAt::kPairs)) return;
  const InsideTmaguard inside;
  CleanBlock* b = block_of(e, false);
  LayerRing* r = b ? b->ring : nullptr;
  if (r && r->stride == n * kTensorMapBytes) {
    for (std::size_t i = 0; i < r->size; ++i)
      if (r->key[i] == key) {
        if (i != r->last) r->step = (i + 1) % r->size == r->last ? -1 : 1;  // the layer before the last: reverse
        r->last = static_cast<uint8_t>(i);
        r->next = r->after(i);
        return;
      }
  }
  if (!b || !(r = ring_with_room(*b, n * kTensorMapBytes)) || r->size == r->capacity) return;
  const std::size_t at = r->size;
  // Not counted in size until written: a copy that could not be made is never compared.
  if (!snapshot_of_key(e, key, n, slot, r->copy(at))) return;
  r->key[at] = key;
  r->size = static_cast<uint8_t>(at + 1);
  r->last = static_cast<uint8_t>(at);
  r->step = 1;
  r->next = 0;  // the layer after the newest is the oldest, until the order shows otherwise
}

template <typename MapBytes>
__attribute__((always_inline)) inline void note_clean_again(MemoEntry& e, uint64_t key, std::size_t n,
                                                            const MapBytes& slot) {
  if (e.clean_key && key != e.clean_key) {
    e.clean_key = key;  // the copy stays valid: any clean bytes of the kernel serve for the compare
    ring_learn(e, key, n, slot);
  } else if (key != e.clean_key || n <= kCopiedMaps) {  // no copy yet, or one a repeat of this key can renew
    renew_copy(e, key, slot);
  }
}

// The maps' key (`slot(i)`: map i's 128 bytes, nullptr: not available) against the entry's last clean key and the
// process's clean keys: a key another thread found clean, or one this thread's block no longer holds (more than 64
// layers, a full set). A hit joins the block's keys. Out of line and cold: fast_pass covers the repeats.
template <typename MapBytes>
__attribute__((noinline, cold)) bool pass_by_shared_key(MemoEntry& e, std::size_t n, const MapBytes& slot) {
  const InsideTmaguard inside;
  uint64_t key = 0;
  if (!launch_key(e.identity, g_hash_key, n, slot, &key)) return false;
  if (key != e.clean_key && e.info->clean_key.load(std::memory_order_relaxed) != key && !shared_key_known(key))
    return false;
  if (CleanBlock* b = block_of(e, false)) add_key(*b, key);
  note_clean_again(e, key, n, slot);
  bump(this_thread_words().launches_seen);
  bump(this_thread_words().launches_checked);
  return true;
}

// The maps' bytes against `copy`, one compare (Wide: the CPU's wide one, cpu.h) for every map: what a repeat runs per map is the
// compare alone, with no choice of compare or of place kind inside the loop.
template <bool Wide, typename MapBytes>
__attribute__((always_inline)) inline bool copy_equal_as(const uint8_t* copy, std::size_t n, const MapBytes& slot) {
  for (std::size_t i = 0; i < n; ++i) {
    const uint8_t* b = slot(i);
    if (!b) return false;
    const uint8_t* c = copy + kTensorMapBytes * i;
    if (!cpu::same_map_bytes(b, c, Wide)) return false;
  }
  return true;
}

// The maps' bytes against `copy` (a clean launch's maps, 128 bytes each), the widest way this CPU compares.
template <typename MapBytes>
__attribute__((always_inline)) inline bool same_as_copy(const uint8_t* copy, std::size_t n, const MapBytes& slot) {
  return this_thread_words().wide_compare ? copy_equal_as<true>(copy, n, slot) : copy_equal_as<false>(copy, n, slot);
}

// The maps' bytes against the entry's copy of a clean launch of its kernel.
template <typename MapBytes>
__attribute__((always_inline)) inline bool copy_equal(const MemoEntry& e, std::size_t n, const MapBytes& slot) {
  if (!e.clean_key || n > kCopiedMaps || !e.block) return false;
  return same_as_copy(e.block->maps, n, slot);
}

// The maps' launch key among the entry's clean keys on this thread (the kernel on another layer's tensors, or a
// repeat whose copy is another layer's); a hit may renew the copy (note_clean_again).
template <typename MapBytes>
__attribute__((always_inline)) inline bool pass_by_entry_key(MemoEntry& e, std::size_t n, const MapBytes& slot) {
  uint64_t key = 0;
  if (!e.block || !launch_key(e.identity, g_hash_key, n, slot, &key) || !has_key(*e.block, key))
    return false;
  note_clean_again(e, key, n, slot);
  return true;
}

// Map i's bytes in a launch of an entry that holds its map places itself (kParams, kPairs). It carries the view's
// kernelParams, not the view: handed to a cold step, it must not make the wrapper keep its view in memory.
// ParamSlots and PairSlots: the same for an entry known to be kParams or kPairs (the compare's loop, chosen once).
struct ParamSlots {
  const MemoEntry& e;
  void* const* kernel_params;
  __attribute__((always_inline)) const uint8_t* operator()(std::size_t i) const {
    return LaunchArgs::of_params(kernel_params).param(e.idx[i]);
  }
};
struct PairSlots {
  const MemoEntry& e;
  void* const* kernel_params;
  __attribute__((always_inline)) const uint8_t* operator()(std::size_t i) const {
    return LaunchArgs::of_params(kernel_params).param(e.idx[2 * i], 64 * std::size_t{e.idx[2 * i + 1]});
  }
};
struct EntrySlots {
  const MemoEntry& e;
  void* const* kernel_params;
  __attribute__((always_inline)) const uint8_t* operator()(std::size_t i) const {
    return e.at == MapsAt::kParams ? ParamSlots{e, kernel_params}(i) : PairSlots{e, kernel_params}(i);
  }
};

// Whether every watched place of the entry still holds no map, asked in full of each place (the parameter's bytes
// not readable: false, and the full check looks). Cold: a watched place that changes is rare.
__attribute__((noinline, cold)) inline bool watched_clean_slow(const MemoEntry& e, void* const* kernel_params) {
  const uint8_t* p = LaunchArgs::of_params(kernel_params).param(e.watch_param);
  const WatchList& w = this_memo().watched[&e - this_memo().entries];
  for (std::size_t i = 0; p && i < e.watch_count; ++i)
    if (watched_place_may_hold_map(p + w.word13[i] - kWord13Offset)) return false;
  return p != nullptr;
}

// Whether the words 13 of every watched place of the entry are still 0 (the parameter's bytes not readable: false).
// The parameter's address is read once: a large struct has dozens of watched places, and reading kernelParams again
// for each would add a load and a test per place to every repeated launch of it. The places' words are OR-ed from
// the list of their offsets, entered at the entry's count of places and run to the list's start without a loop or a
// branch per place: an offset's load and an OR from memory per place (on a host with the driver's work between
// launches what a repeat costs is mostly how many instructions it runs).
__attribute__((always_inline)) inline bool watched_words_zero(const MemoEntry& e, void* const* kernel_params) {
  const uint8_t* p = LaunchArgs::of_params(kernel_params).param(e.watch_param);
  if (!p) return false;
  const uint16_t* at = this_memo().watched[&e - this_memo().entries].word13;
  uint32_t any[2] = {0, 0};  // two chains of ORs, not one as long as the list
  const auto word13 = [p](uint16_t offset) {
    uint32_t v;
    __builtin_memcpy(&v, p + offset, 4);
    return v;
  };
#define TG_PLACE(k)         \
  case k:                   \
    any[(k) & 1] |= word13(at[(k) - 1]); \
    [[fallthrough]];
#define TG_PLACES4(k) TG_PLACE((k) + 3) TG_PLACE((k) + 2) TG_PLACE((k) + 1) TG_PLACE(k)
#define TG_PLACES16(k) TG_PLACES4((k) + 12) TG_PLACES4((k) + 8) TG_PLACES4((k) + 4) TG_PLACES4(k)
  switch (e.watch_count) {
    TG_PLACES16(49) TG_PLACES16(33) TG_PLACES16(17) TG_PLACES16(1)
    default:
      break;
  }
#undef TG_PLACES16
#undef TG_PLACES4
#undef TG_PLACE
  static_assert(kMaxWatched == 64, "one case per place");
  return __builtin_expect((any[0] | any[1]) == 0, 1);
}

// Whether every watched place of the entry still holds no map: all words 13 still 0 is the answer for the repeats; a
// place whose word 13 changed takes the full question (watched_clean_slow).
__attribute__((always_inline)) inline bool watched_clean(const MemoEntry& e, void* const* kernel_params) {
  return watched_words_zero(e, kernel_params) || watched_clean_slow(e, kernel_params);
}
}  // namespace memo_detail
}  // namespace tmaguard
