// tmaguard shim: the words a launch touches on its fast path, packed into as few cache lines as possible.
//
// A real driver spends microseconds between two launches and evicts these lines from L1/L2, so what a launch adds
// on a GPU host is mostly how many distinct lines it misses on, not how many instructions it runs. A launch of a
// known kernel touches: one global line (state, mode, the six real launch pointers), the first line of this
// thread's ThreadHot (re-entry depth, counters) and the line of its front-cache entry.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace tmaguard {

struct KernelInfo;
enum class Mode;  // tmaguard/config.h

//! Initialisation state (HotGlobals::state). Uninit -> Initing -> Armed | Disabled; read on every launch. While
//! initialising, the word also holds the initialising process's pid (initing_state()), so that a child forked in
//! the middle knows the initialiser is not in its process.
enum InitState : uint64_t { kUninit = 0, kIniting = 1, kArmed = 2, kDisabled = 3 };
inline uint64_t initing_state(long pid) { return (static_cast<uint64_t>(pid) << 8) | kIniting; }
inline long initing_pid(uint64_t state) { return static_cast<long>(state >> 8); }

//! Process-wide, read-mostly. Entry ids 0..5 are the launch entries (entry_points.def lists them first), so
//! their real pointers share the first line with `state` and `mode`.
struct alignas(64) HotGlobals {
  std::atomic<uint64_t> state;         // InitState (with the initialiser's pid while initialising)
  std::atomic<Mode> mode;              // valid once armed
  std::atomic<uint32_t> kernel_epoch;  // bumped whenever kernel facts are replaced (a module/library unload, a
                                       // deferred struct search): per-thread caches must be dropped
  std::atomic<void*> real[64];         // the real driver's functions by EntryId (driver.h: kNotLookedUp, kMissing)
};
extern HotGlobals g_hot;

//! True once initialisation succeeded; never initialises (runtime.h: armed() does).
inline bool armed_already() { return g_hot.state.load(std::memory_order_acquire) == kArmed; }
//! The mode in force (valid once armed).
inline Mode mode() { return g_hot.mode.load(std::memory_order_relaxed); }

//! Per-thread cache of what the launch path needs to know about a kernel, so that a repeated launch never reads
//! the shared kernel table or the KernelInfo (both usually cold after a trip through the driver). One cache line.
struct alignas(64) FrontEntry {
  const void* f;           // the launch handle (CUfunction or CUkernel)
  const KernelInfo* info;  // nullptr: empty entry
  uint64_t clean_key;      // the last launch key found clean for this kernel on this thread (0: none). Not 0 in an
                           // entry of a kernel with 1..kCleanCopyMaps maps: this thread's clean copy for the entry
                           // (ThreadHot::clean, CleanBlock::maps) holds the maps' bytes of a clean launch of it
  uint64_t watch_mask;     // the kernel's watched places (kernel_cache.h), all in parameter `watch_param`: bit i is
                           // the place at offset 64 * i (0: none)
  uint8_t n_maps;          // how `idx` holds the kernel's map slots (below)
  uint8_t watch_param;
  uint8_t idx[14];
  uint8_t unused[16];
};
static_assert(sizeof(FrontEntry) == 64);
// n_maps: 0..14 whole 128-byte parameters, their indices in idx; kPairs | n (n <= 7): maps inside parameters, idx
// holding (parameter index, offset / 64) pairs (a CUTLASS Params struct with three maps); either form with the
// watched places in `watch_mask` (a kernel without maps but with watched places is kPairs | 0, so that it never
// takes the no-maps fast path); kManyMaps: anything else, read from the KernelInfo; kAuditing: every launch takes
// the full path (the device audit still wants this kernel's launches, device_audit.h).
constexpr uint8_t kPairs = 0x80;
constexpr uint8_t kManyMaps = 0xff;
constexpr uint8_t kAuditing = 0xfe;
constexpr unsigned kFrontEntries = 16;
//! One front entry's clean copy: the maps of a clean launch of its kernel, in slot order (kernels with more maps
//! hash them on every launch). Nine: 2-CTA FA4.
constexpr std::size_t kCleanCopyMaps = 9;
constexpr std::size_t kCleanCopyBytes = kCleanCopyMaps * 128;
//! One front entry's clean keys: launch keys (launch.h) found clean for its kernel on this thread, in 8 sets of 8
//! (a key's set: key % 8; newest first), so that a kernel launched once per layer on each layer's tensors (a
//! training step) is known by its key in one line of this thread's own, up to 64 layers.
constexpr std::size_t kCleanKeySets = 8, kCleanKeyWays = 8;
//! What a front entry keeps of its kernel's clean launches on this thread (ThreadHot::clean).
struct alignas(64) CleanBlock {
  uint64_t keys[kCleanKeySets][kCleanKeyWays];  // 0: none
  uint8_t maps[kCleanCopyBytes];                // valid while the entry's clean_key is not 0
};

//! This thread's counters, re-entry depth and front cache. Counters are plain per-thread words (relaxed
//! load+store, no locked instruction); the summary adds up every live thread's and those of exited threads.
struct alignas(64) ThreadHot {
  int hook_depth;
  int registered;         // counted in the summary (registered with the thread registry)
  std::atomic<uint32_t> kernel_epoch;  // HotGlobals::kernel_epoch when `front` was last known valid (read by the
                                       // thread that frees forgotten kernel facts: kernel_cache.cpp)
  uint32_t nested_unreported;  // launches made inside another tmaguard call of this thread (a signal handler) that
                               // ran unchecked and were not said yet (said when the outer call ends: runtime.h)
  std::atomic<uint64_t> launches_seen;
  std::atomic<uint64_t> launches_checked;
  std::atomic<uint64_t> maps_decoded;
  std::atomic<uint64_t> clean_copies;  // copies of a clean launch's maps taken (remember_clean)
  // kFrontEntries blocks, one per front entry, allocated on this thread's first clean launch with maps (nullptr:
  // none yet, or no memory); freed when the thread exits. A repeated launch whose maps equal the block's copy is
  // clean (comparing them costs less than hashing them), or one whose key is among the block's keys.
  CleanBlock* clean;
  FrontEntry front[kFrontEntries] __attribute__((aligned(64)));
};

// initial-exec: the library is preloaded, so its TLS is static and a hook pays no __tls_get_addr call.
extern thread_local ThreadHot t_hot __attribute__((tls_model("initial-exec")));

//! Adds to one of this thread's counters without a locked instruction (only this thread writes it).
inline void bump(std::atomic<uint64_t>& c, uint64_t n = 1) {
  c.store(c.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
}

//! The front-cache slot for a launch handle.
inline FrontEntry& front_slot(const void* f) {
  const uint64_t h = reinterpret_cast<uintptr_t>(f) * 0x9e3779b97f4a7c15ULL;
  return t_hot.front[h >> 60];
}
static_assert(kFrontEntries == 16, "front_slot takes the top 4 bits");

}  // namespace tmaguard

namespace tmaguard {
static_assert(offsetof(HotGlobals, real) + 6 * sizeof(void*) <= 64,
              "state, mode, the unload epoch and the six launch entries' real pointers share one cache line");
}  // namespace tmaguard
