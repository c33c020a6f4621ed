// tmaguard shim: the clean-launch memo. What tmaguard remembers about launches it found clean, so that a repeat costs
// a byte compare or a hash instead of a check; nothing outside memo.{h,cpp} writes the state below. Two more tiers
// of "known clean" live in a kernel's KernelInfo (kernel_table.h): its last clean key (written here) and its compiled
// moved maps (written by launch_check.cpp). Every tier, what it keys on, what forgets it and its memory:
// docs/how-it-works.md#what-tmaguard-remembers-as-clean.
//
//   per thread, per kernel   a MemoEntry (one cache line, 16 per thread): where the kernel's maps sit in a launch,
//                            the key of its last clean launch on this thread and where its CleanBlock is; beside it
//                            a WatchList (two lines): where its watched places sit
//   per thread, per entry    a CleanBlock: the bytes of that clean launch's maps (the compare) and up to 64 clean keys
//                            (the kernel on each layer's own tensors); for a kernel launched per layer, a LayerRing:
//                            copies of each layer's clean maps in launch order (the next layer's compare)
//   per process              the keys of clean launches any thread found (set-associative), and the content hashes
//                            of maps that passed the generic checks
//
// A launch asks in this order, each step only when the one before could not tell:
//
//   fast_pass()     inline in the entry's look (called by the exported thunk), before TG_ENTER: a known kernel
//                   without maps; maps_pass_wide/_narrow() (out of line): one whose maps equal the entry's copy, or
//                   its ring's next copy, or whose key is one of the entry's clean keys --> the driver
//   slow_pass()     out of line, still before TG_ENTER: the launch key among the process's clean keys, or a kernel
//                   whose map places live in its KernelInfo --> the driver
//   the full check  (launch_check.h) entry() --> judge --> remember() / remember_map()
//
// A real driver spends microseconds between two launches and evicts these lines, so what a repeat costs on a GPU host
// is mostly how many distinct lines it misses on, and how many of those misses wait for another: the global line and
// the GOT entry of the thread's object (LaunchTls, below), then the thread's first line and its entry's line;
// a repeat with maps adds the maps and the entry's copy, both found from the entry's line. A repeat without maps
// runs the thunk and the look (one register saved); a repeat of the entry's copy adds maps_pass_wide (no register
// saved: it calls nothing but in tail position), which reads the watched places and compares every map in one pass.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "process/hash_key.h"
#include "arch/cpu.h"
#include "thread/reentry.h"
#include "thread/thread_words.h"
#include "core/launch_key.h"
#include "tmaguard/config.h"
#include "kernels/kernel_table.h"
#include "kernels/launch_view.h"

namespace tmaguard {

//! Where an entry's kernel keeps its maps in a launch.
enum class MapsAt : uint8_t {
  kNowhere,     // no maps and no watched places: nothing to look at (the no-maps fast path)
  kParams,      // `count` whole 128-byte parameters (1..14), their indices in idx
  kPairs,       // `count` maps inside parameters (0..7: 0 is watched places alone), idx holding (index, offset / 64)
  kKernelInfo,  // read from the KernelInfo: more maps than an entry holds, places only rules name, or a search pending
  kAuditing,    // the device audit still wants this kernel's launches: every launch takes the full check
};

struct CleanBlock;
//! One thread's memo of one kernel: one cache line.
struct alignas(64) MemoEntry {
  const void* f;           // the launch handle (CUfunction or CUkernel)
  const KernelInfo* info;  // nullptr: empty entry
  uint64_t clean_key;      // the last launch key found clean for this kernel on this thread (0: none); while not 0 in
                           // an entry with 1..kCopiedMaps maps, the entry's CleanBlock holds that launch's map bytes
  uint64_t identity;       // what the entry's launch keys start from: kernel_identity(info), with the thread's
                           // declared tensors folded in (declared.h), kept here so that a keyed repeat reads no line
                           // of the KernelInfo
  CleanBlock* block;       // this entry's CleanBlock (nullptr: the thread has none yet): a repeat finds its copy from
                           // the entry's line alone
  MapsAt at;
  uint8_t count;
  uint8_t watch_param;     // the parameter that holds every watched place of the kernel
  uint8_t watch_count;     // how many watched places (0: none); where their words 13 sit: the thread's watch list
  uint8_t idx[14];
};
static_assert(sizeof(MemoEntry) == 64);

//! How many entries a thread has; a thread that cycles through more kernels pays a lookup in the kernel table.
inline constexpr unsigned kMemoEntries = 16;
//! How many maps an entry keeps a copy of (kernels with more are hashed on every launch). Nine: 2-CTA FA4.
inline constexpr std::size_t kCopiedMaps = 9;
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

//! The most watched places an entry holds: every 64-byte place of a parameter's first 4 KiB.
inline constexpr std::size_t kMaxWatched = 64;
//! Where an entry's watched places keep their words 13: byte offsets into parameter `watch_param`, in place order
//! (the repeats read them without a loop: two instructions a place, watched_words_zero()).
struct alignas(64) WatchList {
  uint16_t word13[kMaxWatched];
};

//! One thread's memo: its entries, their watch lists, and their blocks (allocated on the thread's first clean launch
//! with maps; nullptr: none yet, or no memory; freed when the thread exits).
struct alignas(64) MemoThread {
  MemoEntry entries[kMemoEntries];
  WatchList watched[kMemoEntries];
  CleanBlock* blocks;
  std::size_t ring_bytes;  // what this thread's rings hold
};
//! The launch path's thread-local object (thread_words.h: t_launch_tls, defined in memo.cpp): the thread's words,
//! then its memo, so that a launch's look reads its entry through the same GOT entry as its gate (accesses stay
//! %fs-relative).
struct alignas(64) LaunchTls {
  LaunchThread thread;
  MemoThread memo;
};
static_assert(offsetof(LaunchTls, thread) == 0, "the rooms below the memo read the thread's words at its start");
//! This thread's memo.
__attribute__((always_inline)) inline MemoThread& this_memo() {
  return reinterpret_cast<LaunchTls*>(t_launch_tls)->memo;
}

// ---- what the full check asks and tells (launch_check.cpp)

//! This thread's entry for `f`: the kernel's facts in force for this launch, in one lookup. Made afresh from the
//! kernel table when the entry holds another kernel or kernel facts were replaced since this thread last looked; a
//! kernel seen for the first time is searched with `args` as it is built; a known one is searched again (once) when
//! it waited for readable bytes or a watched place now holds a map (kernel_table.h: needs_new_search). `args`: the
//! launch's parameters, nullptr when none are readable. `declared`: the seed of the thread's declared tensors
//! (launch/declared.h: declared_seed; kNothingDeclared: none), folded into the launch keys of an entry made now (a
//! change of declarations makes every entry afresh: invalidate_this_threads_entries).
MemoEntry& entry(CUfunction f, const LaunchArgs* args, uint64_t declared);
//! The seed of a thread that declares no tensors.
inline constexpr uint64_t kNothingDeclared = 0;
//! Forgets every entry of this thread, and with them their clean keys, copies and rings (kernel facts were replaced);
//! the next launch of each kernel makes its entry afresh.
void forget_this_threads_entries();
//! The same, at the price of 16 lines (the thread's declared tensors changed, declared.h: twice a declared block):
//! each entry's clean keys, copy and ring go when the entry is made afresh, and are never read before.
void invalidate_this_threads_entries();
//! Whether a launch with this key is known clean: the entry's last clean key, its kernel's last (any thread's), or
//! one of the process's clean keys.
bool is_clean_key(const MemoEntry& e, uint64_t key);
//! A launch found clean (or known clean by its key): its key becomes the entry's last clean key and one of its
//! block's, and for a kernel with few maps, the maps' bytes (`bytes(i)`: map i's 128 bytes) its copy. `shared`: the
//! key also joins the process-wide keys (a launch the full check judged).
template <typename BytesOf>
void remember(MemoEntry& e, uint64_t key, BytesOf&& bytes, bool shared);
//! Whether a map's bytes (their content hash, as read under `evidence`) passed the generic checks before; and
//! remembering that they did. Salted by how the bytes were read: the same bytes are no map where maps are only
//! searched for and a map where a rule names the kernel.
bool map_passed_before(uint64_t hash, MapEvidence evidence);
void remember_map(uint64_t hash, MapEvidence evidence);
//! The device audit is done with the entry's kernel: the next launch makes the entry afresh (fast paths again).
void audit_done(MemoEntry& e);

// ---- the steps before TG_ENTER (the launch wrappers, interpose/hooks_launch.cpp)

//! True when a repeated launch of a known kernel, on this thread, is fine without any check. Inline in each wrapper.
bool fast_pass(const LaunchView& v);
//! True when a launch fast_pass() could not pass is known clean all the same. Inline in each wrapper's out-of-line
//! after_fast_pass (hooks_launch.cpp).
bool slow_pass(const LaunchView& v);

// ------------------------------------------------------------------------------------------------------------------
// Implementation. Everything below reads or writes the memo's state; the rest of tmaguard calls the functions above.
namespace memo_detail {

CleanBlock* block_of(const MemoEntry& e, bool allocate);
//! Block `b`'s ring with room for one more copy of `stride` bytes: made or grown (within the thread's budget), or as
//! it is when full; nullptr when there is none and none can be made.
LayerRing* ring_with_room(CleanBlock& b, std::size_t stride);
//! fast_pass() for a known kernel with maps or watched places: its watched places still hold no map, and its maps
//! equal the entry's copy or its ring's next copy (ring_pass), or their key is one of the entry's clean keys. A
//! repeat of the entry's copy touches no other code line. maps_pass_wide: compiled for AVX2, for CPUs that compare
//! 32 bytes at a time (cpu::compares_wide()); maps_pass_narrow: for the rest.
bool maps_pass_wide(MemoEntry& e, void* const* kernel_params);
bool maps_pass_narrow(MemoEntry& e, void* const* kernel_params);
//! A repeat of a ringed kernel whose maps equal the ring's next copy, or the one after it (a layer between them
//! passed by the entry's copy): the ring moves on, and the copy's key becomes the entry's last clean key (so that a
//! kernel that settles on one layer is seen to, and gets its copy). Out of line: a kernel launched on one set of
//! tensors never comes here.
bool ring_pass(MemoEntry& e, void* const* kernel_params);
void insert_shared_key(uint64_t key);
bool shared_key_known(uint64_t key);

//! How many maps entry `e` keeps a copy of (0: none).
inline std::size_t copied_maps(const MemoEntry& e) {
  std::size_t n = 0;
  if (e.at == MapsAt::kKernelInfo) n = e.info ? e.info->maps.size() : 0;
  else if (e.at == MapsAt::kParams || e.at == MapsAt::kPairs) n = e.count;
  return n <= kCopiedMaps ? n : 0;
}

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

// Whether this launch may use the memo at all: armed, not inside one of tmaguard's own calls, not inspecting
// (inspect mode records every layout, so every launch takes the full check), and no kernel facts replaced since this
// thread's entries were last made (an unload frees handles the driver may reuse; a new struct search gives a kernel
// more map places).
__attribute__((always_inline)) inline bool usable() { return memo_gate_open(); }

//! The entry slot for a launch handle.
__attribute__((always_inline)) inline MemoEntry& slot(const void* f) {
  const uint64_t h = reinterpret_cast<uintptr_t>(f) * 0x9e3779b97f4a7c15ULL;
  return this_memo().entries[h >> 60];
}
static_assert(kMemoEntries == 16, "slot() takes the top 4 bits");

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

// Changes nothing but this thread's counters, entry and ring. A known kernel without maps is passed here, inline in
// the entry's look (interpose/hooks_launch.cpp), which then calls nothing and saves one register; one with maps or
// watched places takes maps_pass_wide() or maps_pass_narrow() (memo.cpp).
__attribute__((always_inline)) inline bool fast_pass(const LaunchView& v) {
  using namespace memo_detail;
  if (__builtin_expect(!usable(), 0)) return false;
  MemoEntry& e = slot(v.f);
  if (__builtin_expect(e.f != v.f || !e.info, 0)) return false;
  if (__builtin_expect(e.at == MapsAt::kNowhere, 1)) {
    bump(this_thread_words().launches_seen);
    return true;
  }
  return this_thread_words().wide_compare ? maps_pass_wide(e, v.kernel_params) : maps_pass_narrow(e, v.kernel_params);
}

// A repeated launch whose maps are known clean though fast_pass could not tell: their launch key is the entry's last
// clean key or one of the process's (a key another thread found clean, or one this thread's block no longer holds);
// or the kernel's map places live in its KernelInfo (more maps than an entry holds): compared with the copy, else
// keyed.
__attribute__((always_inline)) inline bool slow_pass(const LaunchView& v) {
  using namespace memo_detail;
  if (!usable()) return false;
  // It reads the entry's kernel facts: inside tmaguard from here on, and only in the kernel epoch its entries were
  // made in (facts forgotten since then may be freed once this thread was seen outside: kernel_table.h).
  const InsideTmaguard inside;
  if (this_thread_words().kernel_epoch.load(std::memory_order_relaxed) !=
      g_launch_globals.kernel_epoch.load(std::memory_order_acquire))
    return false;
  MemoEntry& e = slot(v.f);
  if (e.f != v.f || !e.info || !v.kernel_params || e.at == MapsAt::kAuditing) return false;
  if (e.at != MapsAt::kKernelInfo) {
    if (e.at == MapsAt::kNowhere || e.count == 0) return false;
    if (e.watch_count && !watched_clean(e, v.kernel_params)) return false;
    return pass_by_shared_key(e, e.count, EntrySlots{e, v.kernel_params});
  }
  // Every place of a KernelInfo lies inside its parameter (checked when it was found), so with kernelParams the
  // bytes are at param(place.param, place.offset).
  const KernelInfo& k = *e.info;
  auto at = [p = v.kernel_params](const MapPlace& s) { return LaunchArgs::of_params(p).param(s.param, s.offset); };
  if (k.search_pending) return false;  // the full check searches the kernel's parameters again
  for (const MapPlace& w : k.watch)    // a watched place that may now hold a map: the full check looks
    if (watched_place_may_hold_map(at(w))) return false;
  if (k.maps.empty()) {  // nothing to hash: the watched places were all there was to look at
    bump(this_thread_words().launches_seen);
    return true;
  }
  auto slot_of = [&k, at](std::size_t i) { return at(k.maps[i]); };
  if (copy_equal(e, k.maps.size(), slot_of) || pass_by_entry_key(e, k.maps.size(), slot_of)) {
    bump(this_thread_words().launches_seen);
    bump(this_thread_words().launches_checked);
    return true;
  }
  return pass_by_shared_key(e, k.maps.size(), slot_of);
}

template <typename BytesOf>
void remember(MemoEntry& e, uint64_t key, BytesOf&& bytes, bool shared) {
  if (shared) {
    memo_detail::insert_shared_key(key);
    if (e.info) e.info->clean_key.store(key, std::memory_order_relaxed);
  }
  memo_detail::remember_local(e, key, bytes);
}

}  // namespace tmaguard
