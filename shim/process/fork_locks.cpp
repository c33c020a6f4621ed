// tmaguard shim: the one fork handler (fork_locks.h).
#include "process/fork_locks.h"

#include <pthread.h>

#include <atomic>
#include <mutex>

namespace tmaguard {
namespace {

constexpr int kLocks = static_cast<int>(ForkLock::kCount);
// Constant-initialised: nothing runs at load time. A row is written before its flag is set (release), and read
// only after the flag is seen (acquire).
ForkHandlers g_handlers[kLocks];
std::atomic<bool> g_registered[kLocks];
std::atomic<bool> g_installed{false};

void prepare() {
  for (int i = 0; i < kLocks; ++i)
    if (g_registered[i].load(std::memory_order_acquire)) g_handlers[i].prepare();
}
void parent() {
  for (int i = kLocks - 1; i >= 0; --i)
    if (g_registered[i].load(std::memory_order_acquire)) g_handlers[i].parent();
}
void child() {
  for (int i = kLocks - 1; i >= 0; --i)
    if (g_registered[i].load(std::memory_order_acquire)) g_handlers[i].child();
}

}  // namespace

void register_fork_lock(ForkLock which, ForkHandlers handlers) {
  const int i = static_cast<int>(which);
  if (i < 0 || i >= kLocks || g_registered[i].load(std::memory_order_acquire)) return;
  // Installed first: a lock is never registered without the handler that takes it.
  if (!g_installed.exchange(true, std::memory_order_acq_rel)) pthread_atfork(prepare, parent, child);
  // Another thread registering the same lock waits here until it is registered: no thread uses a lock fork does
  // not know of.
  static std::once_flag once[kLocks];
  std::call_once(once[i], [&] {
    g_handlers[i] = handlers;
    g_registered[i].store(true, std::memory_order_release);
  });
}

}  // namespace tmaguard
