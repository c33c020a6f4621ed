// tmaguard shim: keeping the memo's gate (thread_words.h) in step with the words it stands for.
#include "thread/thread_words.h"

#include "tmaguard/config.h"

namespace tmaguard {

namespace {

// What the gate says for state, mode and kernel_epoch as they are now.
uint64_t memo_gate_now() {
  const LaunchGlobals& g = g_launch_globals;
  const bool open = g.state.load(std::memory_order_acquire) == kArmed &&
                    g.mode.load(std::memory_order_acquire) != Mode::kInspect;
  return open ? uint64_t{g.kernel_epoch.load(std::memory_order_acquire)} + 1 : 0;
}

}  // namespace

void refresh_memo_gate() {
  // Two threads may refresh at once, one with older values: whoever stores checks again, so the last word stored
  // is what the newest values say.
  for (;;) {
    uint64_t gate = g_launch_globals.memo_gate.load(std::memory_order_acquire);
    const uint64_t want = memo_gate_now();
    if (gate == want) return;
    g_launch_globals.memo_gate.compare_exchange_strong(gate, want, std::memory_order_acq_rel);
  }
}

}  // namespace tmaguard
