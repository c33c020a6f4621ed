// tmaguard shim: the memo's passes, what a repeat launch runs before TG_ENTER: maps_pass_wide/_narrow (called by
// fast_pass, inline in the look) and slow_pass (called by a wrapper's after_fast_pass); look.h tells the whole story.
// They change nothing but this thread's counters, entries, copies and rings.
#include "memo/memo_inside.h"

namespace tmaguard {
namespace memo_detail {

namespace {

// A counted pass of a launch with maps.
inline bool counted_pass(const MemoEntry& e) {
  bump(this_thread_words().launches_seen);
  if (e.count) bump(this_thread_words().launches_checked);
  return true;
}

// A repeat whose maps are not the entry's copy: the ring's next layer, or one of the entry's clean keys. Out of line,
// so that a repeat of the copy saves no register for the hash.
__attribute__((noinline)) bool other_layer_pass(MemoEntry& e, void* const* kernel_params) {
  if (!ring_pass(e, kernel_params) && !pass_by_entry_key(e, e.count, EntrySlots{e, kernel_params})) return false;
  return counted_pass(e);
}

// Whether the entry's maps (map i at `at(i)`, nullptr: not readable) equal its copy. The first map is tested alone
// (a kernel launched per layer differs from the copy there, and goes on to the ring at once); the others'
// differences are OR-ed into one accumulator, tested once at the end.
template <std::size_t W, typename At>
__attribute__((always_inline)) inline bool maps_equal(std::size_t n, const uint8_t* copy, const At& at) {
  typename cpu::Lanes<W>::type acc = {};
  const uint8_t* first = at(0);
  if (!first) return false;
  cpu::fold_difference<W>(acc, first, copy);
  if (!cpu::all_zero<W>(acc)) return false;
  for (std::size_t i = 1; i < n; ++i) {
    const uint8_t* map = at(i);
    if (!map) return false;
    cpu::fold_difference<W>(acc, map, copy + kTensorMapBytes * i);
  }
  return cpu::all_zero<W>(acc);
}

// Whether the entry's maps equal its copy.
template <std::size_t W>
__attribute__((always_inline)) inline bool equals_copy(const MemoEntry& e, void* const* kernel_params) {
  if (!e.clean_key || e.count > kCopiedMaps || !e.block) return false;
  const uint8_t* copy = e.block->maps;
  return e.at == MapsAt::kParams ? maps_equal<W>(e.count, copy, ParamSlots{e, kernel_params})
                                 : maps_equal<W>(e.count, copy, PairSlots{e, kernel_params});
}

// The entry's maps against its copy (W bytes a step), then the other layers' (other_layer_pass); counted when they
// pass. Calls nothing but in tail position: the pass that inlines it saves no register.
template <std::size_t W>
__attribute__((always_inline)) inline bool copy_pass(MemoEntry& e, void* const* kernel_params) {
  if (e.count && !equals_copy<W>(e, kernel_params)) return other_layer_pass(e, kernel_params);  // 0: watched alone
  return counted_pass(e);
}

// A repeat whose watched places' words 13 are not all 0 (other data written there, or a map): the full question,
// then the rest of the pass. Cold, and called in tail position.
__attribute__((noinline, cold)) bool watched_changed_pass(MemoEntry& e, void* const* kernel_params) {
  if (!watched_clean_slow(e, kernel_params)) return false;  // the full check searches again
  return copy_pass<16>(e, kernel_params);
}

// maps_pass_wide and maps_pass_narrow, with the copy compared W bytes a step.
template <std::size_t W>
__attribute__((always_inline)) inline bool maps_pass_as(MemoEntry& e, void* const* kernel_params) {
  if (e.at >= MapsAt::kKernelInfo || !kernel_params) return false;  // the rest, or the full check
  if (e.watch_count && !watched_words_zero(e, kernel_params)) return watched_changed_pass(e, kernel_params);
  return copy_pass<W>(e, kernel_params);
}

}  // namespace

// Compiled for the CPU's wide compare (x86-64: AVX2, its 32-byte lanes in ymm registers, whose upper halves the
// compiler clears on return), called only where cpu::compares_wide() said so.
__attribute__((noinline)) TG_WIDE_COMPARE bool maps_pass_wide(MemoEntry& e, void* const* kernel_params) {
  return maps_pass_as<cpu::kWideLanes>(e, kernel_params);
}

__attribute__((noinline)) bool maps_pass_narrow(MemoEntry& e, void* const* kernel_params) {
  return maps_pass_as<16>(e, kernel_params);
}

bool ring_pass(MemoEntry& e, void* const* kernel_params) {
  if (!e.block) return false;
  LayerRing* r = e.block->ring;
  if (!r || r->size == 0 || r->stride != e.count * kTensorMapBytes) return false;
  const EntrySlots slots{e, kernel_params};
  uint8_t at = r->next;
  for (int tries = 0; tries < 2; ++tries, at = r->after(at)) {
    if (same_as_copy(r->copy(at), e.count, slots)) {
      r->last = at;
      r->next = r->after(at);
      if (e.clean_key) e.clean_key = r->key[at];  // 0: the entry has no valid copy, and must not seem to
      return true;
    }
  }
  return false;
}

}  // namespace memo_detail

// A repeated launch whose maps are known clean though fast_pass could not tell: their launch key is the entry's last
// clean key or one of the process's (a key another thread found clean, or one this thread's block no longer holds);
// or the kernel's map places live in its KernelInfo (more maps than an entry holds): compared with the copy, else
// keyed.
bool slow_pass(const LaunchView& v) {
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

}  // namespace tmaguard
