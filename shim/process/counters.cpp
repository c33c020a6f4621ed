// tmaguard shim: the thread registry behind the summary's counts.
#include "process/counters.h"

#include <linux/membarrier.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>

#include <atomic>
#include <mutex>
#include <vector>

#include "process/fork_locks.h"
#include "thread/thread_words.h"

namespace tmaguard {
namespace {

// The device audit's counts, the launches not checked and the call sites taken (process-wide atomics; reset in a
// forked child).
std::atomic<uint64_t> g_sites{0}, g_site_ns{0};
std::atomic<uint64_t> g_compared_with_tensors{0};
std::atomic<uint64_t> g_large_flags_cleared{0};
std::atomic<uint64_t> g_audit[3];
std::atomic<uint64_t> g_unchecked[static_cast<int>(Unchecked::kCount)];
std::atomic<uint64_t> g_audit_skipped[static_cast<int>(AuditSkip::kCount)];

// Every thread that launched, and the totals of those that exited. Guarded by g_mu (held across fork). All of it
// constant-initialised: nothing runs at load time.
std::mutex g_mu;
std::vector<LaunchThread*>* g_threads = nullptr;  // written once, by counters_init(); read under g_mu
Counts g_exited;
pthread_key_t g_key;
std::atomic<void (*)()> g_exit_hook{nullptr};  // on_thread_exit()

void add(Counts& c, const LaunchThread& t) {
  c.launches_seen += t.launches_seen.load(std::memory_order_relaxed);
  c.launches_checked += t.launches_checked.load(std::memory_order_relaxed);
  c.maps_decoded += t.maps_decoded.load(std::memory_order_relaxed);
  c.clean_copies += t.clean_copies.load(std::memory_order_relaxed);
  c.launches_moved += t.launches_moved.load(std::memory_order_relaxed);
}

void zero(LaunchThread& t) {
  t.launches_seen.store(0, std::memory_order_relaxed);
  t.launches_checked.store(0, std::memory_order_relaxed);
  t.maps_decoded.store(0, std::memory_order_relaxed);
  t.clean_copies.store(0, std::memory_order_relaxed);
  t.launches_moved.store(0, std::memory_order_relaxed);
}

// pthread key destructor: a thread is exiting; keep its counts, forget its (soon freed) LaunchThread.
void thread_exit(void* p) {
  auto* t = static_cast<LaunchThread*>(p);
  std::lock_guard<std::mutex> lock(g_mu);
  add(g_exited, *t);
  zero(*t);
  t->registered = 0;  // a launch from a later destructor registers it again
  if (auto release = g_exit_hook.load(std::memory_order_acquire)) release();
  if (!g_threads) return;
  for (LaunchThread*& x : *g_threads) {
    if (x != t) continue;
    x = g_threads->back();
    g_threads->pop_back();
    break;
  }
}

// fork: the registry lock is held across fork(); the child keeps only the forking thread and starts from zero.
void fork_prepare() { g_mu.lock(); }
void fork_parent() { g_mu.unlock(); }
void fork_child() {
  // The child starts its own account: its summary covers what it did after fork. Only the forking thread lives on.
  g_exited = Counts{};
  zero(this_thread_words());
  for (auto& a : g_audit) a.store(0, std::memory_order_relaxed);
  for (auto& a : g_audit_skipped) a.store(0, std::memory_order_relaxed);
  for (auto& a : g_unchecked) a.store(0, std::memory_order_relaxed);
  g_sites.store(0, std::memory_order_relaxed);
  g_compared_with_tensors.store(0, std::memory_order_relaxed);
  g_large_flags_cleared.store(0, std::memory_order_relaxed);
  g_site_ns.store(0, std::memory_order_relaxed);
  if (g_threads) {
    g_threads->clear();
    if (this_thread_words().registered) g_threads->push_back(&this_thread_words());
  }
  g_mu.unlock();
}

}  // namespace

void on_thread_exit(void (*release)()) { g_exit_hook.store(release, std::memory_order_release); }

const char* to_string(AuditSkip s) {
  switch (s) {
    case AuditSkip::kCapturing: return "stream capturing into a graph";
    case AuditSkip::kBusy: return "read-back slots all in use";
    case AuditSkip::kNoPinnedMemory: return "no pinned host memory";
    case AuditSkip::kCopyRefused: return "copy refused by the driver";
    case AuditSkip::kUnfinishedAtExit: return "not finished at exit";
    case AuditSkip::kAllocationForgotten: return "map's allocation freed since the read and no longer journaled";
    default: return "?";
  }
}
const char* to_string(Unchecked u) {
  switch (u) {
    case Unchecked::kNoMemory: return "no memory to check it";
    case Unchecked::kInternalError: return "internal error while checking it";
    case Unchecked::kNested: return "made inside another tmaguard call on its thread (a signal handler)";
    case Unchecked::kShortBuffer: return "parameter buffer declared shorter than the kernel's tensor maps";
    default: return "?";
  }
}
void count_unchecked(Unchecked why) { g_unchecked[static_cast<int>(why)].fetch_add(1, std::memory_order_relaxed); }
uint64_t unchecked_count(Unchecked why) { return g_unchecked[static_cast<int>(why)].load(std::memory_order_relaxed); }

void count_call_site(uint64_t ns) {
  g_sites.fetch_add(1, std::memory_order_relaxed);
  g_site_ns.fetch_add(ns, std::memory_order_relaxed);
}
void count_compared_with_tensors(uint64_t n) { g_compared_with_tensors.fetch_add(n, std::memory_order_relaxed); }
uint64_t compared_with_tensors() { return g_compared_with_tensors.load(std::memory_order_relaxed); }
void count_large_flag_cleared() { g_large_flags_cleared.fetch_add(1, std::memory_order_relaxed); }
uint64_t large_flags_cleared() { return g_large_flags_cleared.load(std::memory_order_relaxed); }

CallSiteCounts call_site_counts() {
  return {g_sites.load(std::memory_order_relaxed), g_site_ns.load(std::memory_order_relaxed)};
}

void audit_count(AuditCount what, uint64_t n) { g_audit[static_cast<int>(what)].fetch_add(n, std::memory_order_relaxed); }
void audit_skipped(AuditSkip why, uint64_t n) {
  g_audit_skipped[static_cast<int>(why)].fetch_add(n, std::memory_order_relaxed);
}
AuditCounts audit_counts() {
  AuditCounts c;
  c.launches_audited = g_audit[0].load(std::memory_order_relaxed);
  c.buffers_read = g_audit[1].load(std::memory_order_relaxed);
  c.maps_found = g_audit[2].load(std::memory_order_relaxed);
  for (int i = 0; i < static_cast<int>(AuditSkip::kCount); ++i)
    c.skipped[i] = g_audit_skipped[i].load(std::memory_order_relaxed);
  return c;
}

bool counters_init() {
  // No lock here: a fork while this runs (on another thread, during initialisation) must not leave the child with
  // a held registry lock. The registry is published with one atomic store.
  register_fork_lock(ForkLock::kCounters, {fork_prepare, fork_parent, fork_child});
  if (pthread_key_create(&g_key, thread_exit) != 0) return false;
  auto* fresh = new std::vector<LaunchThread*>;
  std::vector<LaunchThread*>* expected = nullptr;
  if (!__atomic_compare_exchange_n(&g_threads, &expected, fresh, false, __ATOMIC_RELEASE, __ATOMIC_RELAXED))
    delete fresh;
  return true;
}

void register_thread() {
  if (this_thread_words().registered) return;
  std::lock_guard<std::mutex> lock(g_mu);
  if (!g_threads) return;
  g_threads->push_back(&this_thread_words());
  this_thread_words().registered = 1;
  pthread_setspecific(g_key, &this_thread_words());
}

namespace {

// Whether every thread of the process has passed a full memory barrier since the caller's last store: membarrier(2)
// (private expedited, registered on first use; Linux 4.14). Without it (an older kernel, a seccomp filter that
// refuses it) no thread is taken to be outside tmaguard, and forgotten facts wait for every thread to launch again.
bool every_thread_fenced() {
  static std::atomic<int> state{0};  // 0: not tried, 1: registered, -1: not available
  int s = state.load(std::memory_order_acquire);
  if (s == 0) {
    s = syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0 ? 1 : -1;
    state.store(s, std::memory_order_release);
  }
  return s > 0 && syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0) == 0;
}

}  // namespace

uint32_t oldest_thread_epoch(uint32_t now) {
  // A thread outside tmaguard holds no kernel facts (reentry.h: what reads them is inside), and reads the epoch again
  // when it enters: after the fence, one seen at depth 0 is as good as caught up. (The caller bumped the epoch
  // before: the fence orders that store before every depth read here.)
  const bool fenced = every_thread_fenced();
  std::lock_guard<std::mutex> lock(g_mu);
  uint32_t behind = 0;  // how far the furthest thread is behind `now` (epochs wrap around)
  if (g_threads)
    for (const LaunchThread* t : *g_threads) {
      if (fenced && __atomic_load_n(&t->reentry_depth, __ATOMIC_RELAXED) == 0) continue;
      behind = std::max(behind, now - t->kernel_epoch.load(std::memory_order_acquire));
    }
  return now - behind;
}

Counts counts_total() {
  std::lock_guard<std::mutex> lock(g_mu);
  Counts c = g_exited;
  if (g_threads)
    for (const LaunchThread* t : *g_threads) add(c, *t);
  return c;
}

}  // namespace tmaguard
