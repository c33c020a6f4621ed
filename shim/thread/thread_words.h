// tmaguard shim: the words every launch touches, packed into as few cache lines as possible.
//
// A real driver spends microseconds between two launches and evicts these lines from L1/L2, so what a launch adds
// on a GPU host is mostly how many distinct lines it misses on, not how many instructions it runs. A launch of a
// known kernel touches: one global line (state, the memo's gate, the six real launch pointers), this thread's
// LaunchThread line (kernel epoch, re-entry depth, counters) and its clean-launch memo entry (memo/memo.h), the
// last two in one thread-local object (t_launch_tls), whose offset from the thread pointer is one GOT entry's line.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace tmaguard {

enum class Mode;  // tmaguard/config.h

//! Initialisation state (LaunchGlobals::state). Uninit -> Initing -> Armed | Disabled; read on every launch. While
//! initialising, the word also holds the initialising process's pid (initing_state()), so that a child forked in
//! the middle knows the initialiser is not in its process.
enum InitState : uint64_t { kUninit = 0, kIniting = 1, kArmed = 2, kDisabled = 3 };
inline uint64_t initing_state(long pid) { return (static_cast<uint64_t>(pid) << 8) | kIniting; }
inline long initing_pid(uint64_t state) { return static_cast<long>(state >> 8); }

//! Process-wide, read-mostly. Entry ids 0..5 are the launch entries (entry_points.def lists them first), so
//! their real pointers share the first line with `state` and the memo's gate.
struct alignas(64) LaunchGlobals {
  std::atomic<uint64_t> state;         // InitState (with the initialiser's pid while initialising)
  std::atomic<uint64_t> memo_gate;     // kernel_epoch + 1 while the memo may pass launches (armed, not inspecting),
                                       // 0 otherwise: the one word a launch's look compares (memo_gate_open())
  std::atomic<void*> real[64];         // the real driver's functions by EntryId (driver.h: kNotLookedUp, kMissing)
  std::atomic<Mode> mode;              // valid once armed
  std::atomic<uint32_t> kernel_epoch;  // bumped whenever kernel facts are replaced (a module/library unload, a
                                       // deferred struct search): per-thread caches must be dropped
};
extern LaunchGlobals g_launch_globals;

//! Sets LaunchGlobals::memo_gate from state, mode and kernel_epoch as they are now. Called after every change of
//! one of them; concurrent calls converge on the latest values (each stores, then checks again).
void refresh_memo_gate();

//! True once initialisation succeeded; never initialises (runtime.h: armed() does).
inline bool armed_already() { return g_launch_globals.state.load(std::memory_order_acquire) == kArmed; }
//! The mode in force (valid once armed).
inline Mode mode() { return g_launch_globals.mode.load(std::memory_order_relaxed); }

//! This thread's counters and re-entry depth: one cache line. Counters are plain per-thread words (relaxed load+store,
//! no locked instruction); the summary adds up every live thread's and those of exited threads.
struct alignas(64) LaunchThread {
  // The first eight bytes, read as one word by memo_gate_open(): this thread's kernel epoch (low half) and re-entry
  // depth (high half).
  std::atomic<uint32_t> kernel_epoch;  // LaunchGlobals::kernel_epoch when this thread's memo entries were last known
                                       // valid (read by the thread that frees forgotten kernel facts:
                                       // kernels/kernel_table.cpp)
  int reentry_depth;      // owned by the re-entry guard (thread/reentry.h): nothing else writes it
  int registered;         // counted in the summary (registered with the thread registry)
  uint32_t nested_unreported;  // launches made inside another tmaguard call of this thread (a signal handler) that
                               // ran unchecked and were not said yet (said when the outer call ends: runtime.h)
  std::atomic<uint64_t> launches_seen;
  std::atomic<uint64_t> launches_checked;
  std::atomic<uint64_t> maps_decoded;
  std::atomic<uint64_t> clean_copies;  // copies of a clean launch's maps the memo took (memo/memo.h)
  std::atomic<uint64_t> launches_moved;  // launches whose maps had only moved, judged by their addresses alone
  bool wide_compare;  // the memo compares maps 32 bytes at a time (arch/cpu.h); set with the thread's entries
};

//! The launch path's one thread-local object: this thread's LaunchThread, then its clean-launch memo (memo/memo.h:
//! LaunchTls), so that a launch's look finds both through one GOT entry (its offset from the thread pointer), where
//! two objects took two entries on two lines. Defined by the launch room, which alone knows the memo's size; the
//! rooms below it see its first bytes, this thread's words. initial-exec: the library is preloaded, so its TLS is
//! static and a hook pays no __tls_get_addr call.
extern thread_local unsigned char t_launch_tls[] __attribute__((tls_model("initial-exec")));
//! This thread's words: the first bytes of its thread-local object.
__attribute__((always_inline)) inline LaunchThread& this_thread_words() {
  return *reinterpret_cast<LaunchThread*>(t_launch_tls);
}

//! Whether the memo may pass this thread's launch: tmaguard armed and not inspecting, this thread's entries made in
//! the current kernel epoch, and the thread not inside one of tmaguard's own calls. One load of each side and one
//! compare: the thread's word (epoch | depth << 32) plus one equals the gate only with depth 0 and the same epoch,
//! and never equals a closed gate (0).
__attribute__((always_inline)) inline bool memo_gate_open() {
  uint64_t word;
  __builtin_memcpy(&word, t_launch_tls, sizeof word);
  return word + 1 == g_launch_globals.memo_gate.load(std::memory_order_acquire);
}

//! Adds to one of this thread's counters without a locked instruction (only this thread writes it).
inline void bump(std::atomic<uint64_t>& c, uint64_t n = 1) {
  c.store(c.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
}

}  // namespace tmaguard

namespace tmaguard {
static_assert(offsetof(LaunchGlobals, real) + 6 * sizeof(void*) <= 64,
              "state, the memo's gate and the six launch entries' real pointers share one cache line");
static_assert(offsetof(LaunchThread, kernel_epoch) == 0 && offsetof(LaunchThread, reentry_depth) == 4 &&
                  sizeof(std::atomic<uint32_t>) == 4 && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "memo_gate_open() reads the thread's epoch and depth as one word, the epoch in its low half");
}  // namespace tmaguard
