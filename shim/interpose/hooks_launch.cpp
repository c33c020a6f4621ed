// tmaguard shim: the launch wrappers (cuLaunchKernel, cuLaunchKernelEx, cuLaunchCooperativeKernel and _ptsz).
//
//   client --> cuLaunchKernel (ours) --> fast path: a known kernel without maps, or with maps whose bytes equal this
//                                        thread's copy of a clean launch of it or whose key is among its clean keys
//                                        here --> real cuLaunchKernel (tail call)
//                                    \-> launch_rest: the key in the process-wide clean cache, or a kernel with more
//                                        maps than a front entry holds --> real cuLaunchKernel (tail call)
//                                        \-> launch_checked: TG_ENTER, check_launch() (launch_check.cpp) --> run |
//                                            reject | abort; after a run, the device audit's read-back of the
//                                            memory its pointers lead to (device_audit.h), while the kernel is due
#include "launch/device_audit.h"
#include "runtime/intercept.h"
#include "launch/kernel_table.h"
#include "launch/launch_check.h"

namespace tmaguard {
namespace {

// Whether this launch may use the per-thread caches at all: armed, not inside one of our own calls, not
// inspecting (inspect mode records every layout, so every launch takes the full path), and no kernel facts
// replaced since this thread's front cache was last validated (an unload frees handles the driver may reuse; a
// deferred struct search gives a kernel more map slots).
__attribute__((always_inline)) inline bool caches_usable() {
  return t_hot.hook_depth == 0 && g_hot.state.load(std::memory_order_acquire) == kArmed &&
         g_hot.mode.load(std::memory_order_relaxed) != Mode::kInspect &&
         t_hot.kernel_epoch.load(std::memory_order_relaxed) == g_hot.kernel_epoch.load(std::memory_order_relaxed);
}

// A clean launch of the entry's kernel seen again by its key (the maps' bytes differ from the entry's copy, or were
// not compared): a key that repeats the entry's last clean key (the kernel settled on these tensors), or an entry
// without a copy, takes a copy, so that the launches after it take the compare; another key only becomes the last
// one. Copying each layer's maps in turn, when one kernel is launched once per layer on its own tensors, would cost
// more than the compare saves; but a copy left at another layer's bytes would send every later repeat to the hash
// (on the H200, +197 ns against +83).
// The cold steps below write this thread's caches before TG_ENTER: for their duration the thread counts as inside a
// tmaguard call, so that a signal handler launching meanwhile is counted, not checked against half-written caches.
struct InsideCall {
  InsideCall() { ++t_hot.hook_depth; }
  ~InsideCall() { --t_hot.hook_depth; }
};

template <typename Slot>
__attribute__((noinline, cold)) void renew_copy(FrontEntry& e, uint64_t key, const Slot& slot) {
  const InsideCall inside;
  remember_clean(e, key, slot);
}
template <typename Slot>
__attribute__((always_inline)) inline void known_again(FrontEntry& e, uint64_t key, std::size_t n, const Slot& slot) {
  if (e.clean_key && key != e.clean_key)
    e.clean_key = key;  // the copy stays valid: any clean bytes of the kernel serve for the compare
  else if (key != e.clean_key || n <= kCleanCopyMaps)  // no copy yet, or one a repeat of this key can renew
    renew_copy(e, key, slot);
}

// The maps' key (`slot(i)`: map i's 128 bytes, nullptr: not available) against the entry's last clean key and the
// process-wide clean cache: a key another thread found clean, or one this thread's clean keys (CleanBlock) do not
// hold (more than 64 layers, a full set). A hit joins the thread's clean keys. Out of line and cold: the wrapper's
// own path covers the repeats of a kernel on this thread.
template <typename Slot>
__attribute__((noinline, cold)) bool key_clean(FrontEntry& e, std::size_t n, const Slot& slot) {
  const InsideCall inside;
  uint64_t key = 0;
  if (!launch_key(kernel_identity(e.info), n, slot, &key)) return false;
  if (key != e.clean_key && !clean_cache_contains(key)) return false;
  if (CleanBlock* b = clean_block_of(e, false)) add_clean_key(*b, key);
  known_again(e, key, n, slot);
  bump(t_hot.launches_seen);
  bump(t_hot.launches_checked);
  return true;
}

// The maps' bytes against the entry's clean copy (this thread's copy of a clean launch of its kernel).
template <typename Slot>
__attribute__((always_inline)) inline bool copy_equal(const FrontEntry& e, std::size_t n, const Slot& slot) {
  if (!e.clean_key || n > kCleanCopyMaps || !t_hot.clean) return false;
  const uint8_t* copy = t_hot.clean[&e - t_hot.front].maps;
  for (std::size_t i = 0; i < n; ++i) {
    const uint8_t* b = slot(i);
    if (!b || !same_map_bytes(b, copy + kTensorMapBytes * i)) return false;
  }
  return true;
}

// The maps' launch key among the entry's clean keys on this thread (the kernel on another layer's tensors, or a
// repeat whose copy is another layer's); a hit may renew the copy (known_again).
template <typename Slot>
__attribute__((always_inline)) inline bool key_known(FrontEntry& e, std::size_t n, const Slot& slot) {
  uint64_t key = 0;
  if (!t_hot.clean || !launch_key(kernel_identity(e.info), n, slot, &key) ||
      !has_clean_key(t_hot.clean[&e - t_hot.front], key))
    return false;
  known_again(e, key, n, slot);
  return true;
}

// Map i's bytes in a launch of a front entry that holds its map places itself (n_maps below kAuditing): whole
// parameters, or (parameter index, offset / 64) pairs.
struct FrontSlots {
  const FrontEntry& e;
  void** params;
  __attribute__((always_inline)) const uint8_t* operator()(std::size_t i) const {
    if (e.n_maps < kPairs) return static_cast<const uint8_t*>(params[e.idx[i]]);
    const auto* p = static_cast<const uint8_t*>(params[e.idx[2 * i]]);
    return p ? p + 64 * std::size_t{e.idx[2 * i + 1]} : nullptr;
  }
};

// Whether every watched place of the entry (its mask, in parameter watch_param) still holds no map.
__attribute__((always_inline)) inline bool watched_clean(const FrontEntry& e, void** params) {
  const auto* p = static_cast<const uint8_t*>(params[e.watch_param]);
  for (uint64_t m = e.watch_mask; m; m &= m - 1)
    if (watched_place_may_hold_map(p ? p + 64 * static_cast<std::size_t>(__builtin_ctzll(m)) : nullptr))
      return false;
  return true;
}

// The launch wrappers' fast path, inlined into each, before TG_ENTER (it changes nothing but this thread's counters
// and front entry, and calls nothing but renew_copy): true when a repeated launch, on this thread, of a known kernel
// is fine without any check: the kernel has no tensor maps, or the entry holds its map places (up to fourteen
// whole-parameter maps, or seven inside parameters, and watched places in one parameter), its watched places still
// hold no map, and its maps' bytes equal the entry's clean copy (a repeat) or their key is one of the entry's clean
// keys (the kernel on another layer's tensors: a hash and one line). One piece of straight-line code, so that a
// repeat with maps touches no code line besides the wrapper's own (the stand-in behind 1 MiB of cache traffic per
// launch, builds side by side in one process, `bench_hot_path --probe`: FA4 about -15 ns, FA4 over 8 layers about
// -30 ns against the compare in the out-of-line rest and the key in the shared cache). Prefetching every line it
// reads (watched places, maps, copy) before reading any made it slower in every case on the H200 (FA4 +97 against
// +66 ns, the struct +71 against +37: docs/gpu-runs/nvidia-h200-run23a-prefetch.txt). False sends the launch to
// the rest.
__attribute__((always_inline)) inline bool fast_pass(CUfunction f, void** params) {
  if (__builtin_expect(!caches_usable(), 0)) return false;
  FrontEntry& e = front_slot(f);
  if (__builtin_expect(e.f != f || !e.info, 0)) return false;
  const uint8_t n = e.n_maps;
  if (__builtin_expect(n == 0, 1)) {
    bump(t_hot.launches_seen);
    return true;
  }
  if (n >= kAuditing || !params) return false;                     // the device audit, or maps in the KernelInfo
  if (e.watch_mask && !watched_clean(e, params)) return false;     // the full path searches the parameters again
  if (n != kPairs) {  // kPairs: watched places alone
    const FrontSlots slots{e, params};
    if (!copy_equal(e, n & ~kPairs, slots) && !key_known(e, n & ~kPairs, slots)) return false;
  }
  bump(t_hot.launches_seen);
  if (n != kPairs) bump(t_hot.launches_checked);
  return true;
}

// The rest's first step, also before TG_ENTER: a repeated launch whose maps are known clean though the wrapper could
// not tell: their launch key is the entry's last clean key or one in the process-wide clean cache (a key another
// thread found clean, or one this thread's clean keys no longer hold); or the kernel's map places live in its
// KernelInfo (more maps than an entry holds): compared with the clean copy, else keyed.
__attribute__((always_inline)) inline bool clean_pass(CUfunction f, void** params) {
  if (!caches_usable()) return false;
  FrontEntry& e = front_slot(f);
  if (e.f != f || !e.info || !params || e.n_maps == kAuditing) return false;
  if (e.n_maps != kManyMaps) {
    if (e.n_maps == 0 || e.n_maps == kPairs || (e.watch_mask && !watched_clean(e, params))) return false;
    return key_clean(e, e.n_maps & ~kPairs, FrontSlots{e, params});
  }
  // Every slot of a KernelInfo lies inside its parameter (checked when it was found), so with kernelParams the
  // bytes are at params[slot.param] + slot.offset.
  const KernelInfo& k = *e.info;
  auto at = [&](const MapPlace& s) -> const uint8_t* {
    const auto* p = static_cast<const uint8_t*>(params[s.param]);
    return p ? p + s.offset : nullptr;
  };
  if (k.search_pending) return false;  // the full path searches the kernel's parameters again
  for (const MapPlace& w : k.watch)    // a watched place that may now hold a map: the full path looks
    if (watched_place_may_hold_map(at(w))) return false;
  if (k.maps.empty()) {  // nothing to hash: the watched places were all there was to look at
    bump(t_hot.launches_seen);
    return true;
  }
  auto slot = [&](std::size_t i) { return at(k.maps[i]); };
  if (copy_equal(e, k.maps.size(), slot) || key_known(e, k.maps.size(), slot)) {
    bump(t_hot.launches_seen);
    bump(t_hot.launches_checked);
    return true;
  }
  return key_clean(e, k.maps.size(), slot);
}

}  // namespace
}  // namespace tmaguard

using tmaguard::audit_after_launch;
using tmaguard::audit_due;
using tmaguard::check_launch;
using tmaguard::refused;
using tmaguard::KernelInfo;
using tmaguard::clean_pass;
using tmaguard::fast_pass;
using tmaguard::Geometry;
using tmaguard::Verdict;

// Each wrapper is a fast path that ends in a tail call, either to the driver or to its out-of-line rest (same
// signature, so no argument is spilled on the way). The rest passes a launch whose maps match its last clean launch
// (again a tail call to the driver); anything else goes to the full check, which enters (TG_ENTER) first.
#define TG_LAUNCH_WRAPPER(name, per_thread)                                                                            \
  __attribute__((noinline)) static CUresult launch_checked_##name(                                                     \
      CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz, unsigned smem,       \
      CUstream s, void** params, void** extra) {                                                                       \
    TG_ENTER(name);                                                                                                    \
    const Geometry g{gx, gy, gz, bx, by, bz};                                                                          \
    const KernelInfo* k = nullptr;                                                                                     \
    if (const Verdict v = check_launch(call, f, g, params, extra, &k); v != Verdict::kRun) return refused(v);          \
    const CUresult rc = real(f, gx, gy, gz, bx, by, bz, smem, s, params, extra);                                       \
    if (rc == CUDA_SUCCESS && k && audit_due(*k)) audit_after_launch(*k, g, params, extra, s, per_thread);             \
    return rc;                                                                                                         \
  }                                                                                                                    \
  __attribute__((noinline)) static CUresult launch_rest_##name(CUfunction f, unsigned gx, unsigned gy, unsigned gz,    \
                                                               unsigned bx, unsigned by, unsigned bz, unsigned smem,   \
                                                               CUstream s, void** params, void** extra) {              \
    auto real = TG_REAL_IF_RESOLVED(name);                                                                             \
    if (real && clean_pass(f, params)) return real(f, gx, gy, gz, bx, by, bz, smem, s, params, extra);                 \
    return launch_checked_##name(f, gx, gy, gz, bx, by, bz, smem, s, params, extra);                                   \
  }                                                                                                                    \
  CUresult TG_WRAPPER(name)(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx,          \
                            unsigned int by, unsigned int bz, unsigned int smem, CUstream s, void** params,            \
                            void** extra) {                                                                            \
    auto real = TG_REAL_IF_RESOLVED(name);                                                                             \
    if (__builtin_expect(real && fast_pass(f, params), 1))                                                             \
      return real(f, gx, gy, gz, bx, by, bz, smem, s, params, extra);                                                  \
    return launch_rest_##name(f, gx, gy, gz, bx, by, bz, smem, s, params, extra);                                      \
  }
TG_LAUNCH_WRAPPER(cuLaunchKernel, false)
TG_LAUNCH_WRAPPER(cuLaunchKernel_ptsz, true)

#define TG_LAUNCH_EX_WRAPPER(name, per_thread)                                                                         \
  __attribute__((noinline)) static CUresult launch_checked_##name(const CUlaunchConfig* config, CUfunction f,          \
                                                                  void** params, void** extra) {                       \
    TG_ENTER(name);                                                                                                    \
    const Geometry g = config ? Geometry{config->gridDimX,  config->gridDimY,  config->gridDimZ,                       \
                                         config->blockDimX, config->blockDimY, config->blockDimZ}                      \
                              : Geometry{};                                                                            \
    const KernelInfo* k = nullptr;                                                                                     \
    if (const Verdict v = check_launch(call, f, g, params, extra, &k); v != Verdict::kRun) return refused(v);          \
    const CUresult rc = real(config, f, params, extra);                                                                \
    if (rc == CUDA_SUCCESS && k && config && audit_due(*k))                                                            \
      audit_after_launch(*k, g, params, extra, config->hStream, per_thread);                                           \
    return rc;                                                                                                         \
  }                                                                                                                    \
  __attribute__((noinline)) static CUresult launch_rest_##name(const CUlaunchConfig* config, CUfunction f,             \
                                                               void** params, void** extra) {                          \
    auto real = TG_REAL_IF_RESOLVED(name);                                                                             \
    if (real && clean_pass(f, params)) return real(config, f, params, extra);                                          \
    return launch_checked_##name(config, f, params, extra);                                                            \
  }                                                                                                                    \
  CUresult TG_WRAPPER(name)(const CUlaunchConfig* config, CUfunction f, void** params, void** extra) {                 \
    auto real = TG_REAL_IF_RESOLVED(name);                                                                             \
    if (__builtin_expect(real && fast_pass(f, params), 1)) return real(config, f, params, extra);                      \
    return launch_rest_##name(config, f, params, extra);                                                               \
  }
TG_LAUNCH_EX_WRAPPER(cuLaunchKernelEx, false)
TG_LAUNCH_EX_WRAPPER(cuLaunchKernelEx_ptsz, true)

#define TG_LAUNCH_COOP_WRAPPER(name, per_thread)                                                                       \
  __attribute__((noinline)) static CUresult launch_checked_##name(                                                     \
      CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz, unsigned smem,       \
      CUstream s, void** params) {                                                                                     \
    TG_ENTER(name);                                                                                                    \
    const Geometry g{gx, gy, gz, bx, by, bz};                                                                          \
    const KernelInfo* k = nullptr;                                                                                     \
    if (const Verdict v = check_launch(call, f, g, params, nullptr, &k); v != Verdict::kRun) return refused(v);        \
    const CUresult rc = real(f, gx, gy, gz, bx, by, bz, smem, s, params);                                              \
    if (rc == CUDA_SUCCESS && k && audit_due(*k)) audit_after_launch(*k, g, params, nullptr, s, per_thread);           \
    return rc;                                                                                                         \
  }                                                                                                                    \
  __attribute__((noinline)) static CUresult launch_rest_##name(CUfunction f, unsigned gx, unsigned gy, unsigned gz,    \
                                                               unsigned bx, unsigned by, unsigned bz, unsigned smem,   \
                                                               CUstream s, void** params) {                            \
    auto real = TG_REAL_IF_RESOLVED(name);                                                                             \
    if (real && clean_pass(f, params)) return real(f, gx, gy, gz, bx, by, bz, smem, s, params);                        \
    return launch_checked_##name(f, gx, gy, gz, bx, by, bz, smem, s, params);                                          \
  }                                                                                                                    \
  CUresult TG_WRAPPER(name)(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx,          \
                            unsigned int by, unsigned int bz, unsigned int smem, CUstream s, void** params) {          \
    auto real = TG_REAL_IF_RESOLVED(name);                                                                             \
    if (__builtin_expect(real && fast_pass(f, params), 1)) return real(f, gx, gy, gz, bx, by, bz, smem, s, params);    \
    return launch_rest_##name(f, gx, gy, gz, bx, by, bz, smem, s, params);                                             \
  }
TG_LAUNCH_COOP_WRAPPER(cuLaunchCooperativeKernel, false)
TG_LAUNCH_COOP_WRAPPER(cuLaunchCooperativeKernel_ptsz, true)
