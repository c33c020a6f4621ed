// tmaguard shim: the clean-launch memo's public face, what the rest of tmaguard asks of the memo room: the look a
// launch entry runs (fast_pass, inline, through look.h), the step after it (slow_pass), and what the full check asks
// and tells (entry, is_clean_key, remember, the map hashes, the moved layouts). How a repeat launch goes, and every
// tier of "known clean": look.h, the room's door. The memo's own state and steps: memo_inside.h (this room alone).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <type_traits>

#include "thread/thread_words.h"
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

// ---- what the full check asks and tells (full_check.cpp)

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
//! block's, and for a kernel with few maps, the maps' bytes (`maps[i]`: map i's 128 bytes, copied_maps(e) of them)
//! its copy. `shared`: the key also joins the process-wide keys and becomes the kernel's last clean key (a launch the
//! full check judged).
void remember(MemoEntry& e, uint64_t key, const uint8_t* const* maps, bool shared);
//! The same, map i's bytes given by `bytes(i)`.
template <typename BytesOf, typename = std::enable_if_t<std::is_invocable_v<BytesOf&, std::size_t>>>
void remember(MemoEntry& e, uint64_t key, BytesOf&& bytes, bool shared);
//! Whether a map's bytes (their content hash, as read under `evidence`) passed the generic checks before; and
//! remembering that they did. Salted by how the bytes were read: the same bytes are no map where maps are only
//! searched for and a map where a rule names the kernel.
bool map_passed_before(uint64_t hash, MapEvidence evidence);
void remember_map(uint64_t hash, MapEvidence evidence);
//! The device audit is done with the entry's kernel: the next launch makes the entry afresh (fast paths again).
void audit_done(MemoEntry& e);

// ---- the steps before TG_ENTER (the launch wrappers, interpose/hooks_launch.cpp)

//! True when a repeated launch of a known kernel, on this thread, is fine without any check. Inline in each wrapper's
//! look (look.h).
bool fast_pass(const LaunchView& v);
//! True when a launch fast_pass() could not pass is known clean all the same (passes.cpp). Called by each wrapper's
//! out-of-line after_fast_pass (hooks_launch.cpp).
bool slow_pass(const LaunchView& v);

// ---- maps that only moved (the full check's last shortcut before a judgement)

//! A launch's layout: its launch key with every map's global address (bytes 0..7, in every form) left out; two
//! launches of one layout differ in their maps' addresses alone. `maps[i]`: map i's 128 bytes (n of them).
uint64_t moved_layout_key(const MemoEntry& e, std::size_t n, const uint8_t* const* maps);
//! Whether a launch of kernel `k` at `layout` is clean by what its judgement asks of addresses alone: a launch of
//! that layout was judged in full with nothing said, and its compiled maps (judge.h: MovedMaps) pass these addresses.
bool moved_maps_clean(const KernelInfo& k, uint64_t layout, std::size_t n, const uint8_t* const* maps);
//! A launch of kernel `k` judged in full with nothing said: from the kernel's second such launch on, its layout's
//! compiled maps (`compile()`: a std::unique_ptr<const MovedMaps>, empty when they cannot be compiled) are kept, for
//! up to kMovedLayouts layouts (a few sequence-length buckets); a kernel launched once keeps no more than its facts.
template <typename Compile>
void learn_moved_maps(const KernelInfo& k, uint64_t layout, Compile&& compile);

// ------------------------------------------------------------------------------------------------------------------
// What the inline steps need; everything else the memo does is in its .cpp files (memo_inside.h).
namespace memo_detail {

//! fast_pass() for a known kernel with maps or watched places: its watched places still hold no map, and its maps
//! equal the entry's copy or its ring's next copy (ring_pass), or their key is one of the entry's clean keys. A
//! repeat of the entry's copy touches no other code line. maps_pass_wide: compiled for AVX2, for CPUs that compare
//! 32 bytes at a time (cpu::compares_wide()); maps_pass_narrow: for the rest.
bool maps_pass_wide(MemoEntry& e, void* const* kernel_params);
bool maps_pass_narrow(MemoEntry& e, void* const* kernel_params);

//! How many maps entry `e` keeps a copy of (0: none).
inline std::size_t copied_maps(const MemoEntry& e) {
  std::size_t n = 0;
  if (e.at == MapsAt::kKernelInfo) n = e.info ? e.info->maps.size() : 0;
  else if (e.at == MapsAt::kParams || e.at == MapsAt::kPairs) n = e.count;
  return n <= kCopiedMaps ? n : 0;
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

//! learn_moved_maps' steps: whether kernel `k` wants `layout` compiled now (its first judged launch only marks it;
//! a known layout, full slots or too many failed compiles: no), its free slot in `*slot`; then the compiled maps
//! kept there (empty: counted as a failed compile).
bool moved_slot_wanted(const KernelInfo& k, uint64_t layout, std::size_t* slot);
void keep_moved_maps(const KernelInfo& k, std::size_t slot, uint64_t layout, std::unique_ptr<const MovedMaps> m);
}  // namespace memo_detail

// Changes nothing but this thread's counters, entry and ring. A known kernel without maps is passed here, inline in
// the entry's look (interpose/hooks_launch.cpp), which then calls nothing and saves one register; one with maps or
// watched places takes maps_pass_wide() or maps_pass_narrow() (passes.cpp).
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

template <typename BytesOf, typename>
void remember(MemoEntry& e, uint64_t key, BytesOf&& bytes, bool shared) {
  const uint8_t* maps[kCopiedMaps] = {};
  const std::size_t n = memo_detail::copied_maps(e);
  for (std::size_t i = 0; i < n; ++i) maps[i] = bytes(i);
  remember(e, key, maps, shared);
}

template <typename Compile>
void learn_moved_maps(const KernelInfo& k, uint64_t layout, Compile&& compile) {
  std::size_t slot = 0;
  if (memo_detail::moved_slot_wanted(k, layout, &slot)) memo_detail::keep_moved_maps(k, slot, layout, compile());
}

}  // namespace tmaguard
