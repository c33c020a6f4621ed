// tmaguard shim: the process's init state, changed here alone (init_state.h).
#include "process/init_state.h"

#include <unistd.h>

#include <atomic>

#include "process/stderr_io.h"

namespace tmaguard {
namespace {
std::atomic<bool> g_cannot_work_said{false};
}  // namespace

bool begin_init(uint64_t& seen) {
  const uint64_t mine = initing_state(static_cast<long>(getpid()));
  return g_launch_globals.state.compare_exchange_strong(seen, mine, std::memory_order_acq_rel);
}

bool end_init(bool ok) {
  if (cannot_work_said()) ok = false;
  uint64_t expected = initing_state(static_cast<long>(getpid()));  // report_cannot_work() may have disabled it
  g_launch_globals.state.compare_exchange_strong(expected, ok ? kArmed : kDisabled, std::memory_order_acq_rel);
  refresh_memo_gate();
  return init_state() == kArmed;
}

void restart_init(uint64_t seen) {
  g_launch_globals.state.compare_exchange_strong(seen, kUninit, std::memory_order_acq_rel);
  refresh_memo_gate();
}

bool cannot_work_said() { return g_cannot_work_said.load(); }

void report_cannot_work(const std::string& why) {
  g_launch_globals.state.store(kDisabled, std::memory_order_release);
  refresh_memo_gate();
  if (g_cannot_work_said.exchange(true)) return;
  write_stderr_line("tmaguard: cannot work: " + why + "; the job runs on unguarded", Notice::kCannotWork);
}

}  // namespace tmaguard
