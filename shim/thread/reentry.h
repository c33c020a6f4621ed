// tmaguard shim: the re-entry guard, the one owner of this thread's re-entry depth (LaunchThread::reentry_depth).
//
// A thread is inside tmaguard while it runs one of tmaguard's wrappers or steps (depth > 0). A driver call made from
// there (tmaguard's own, or the driver calling back) passes straight through every wrapper; a launch made there (a
// signal handler that launches) is counted and said later (runtime.h: HookScope). A thread tmaguard starts (its log,
// summary, device-audit and facts threads) is inside tmaguard for its whole life.
#pragma once

#include <pthread.h>
#include <signal.h>

#include "thread/thread_words.h"

namespace tmaguard {

// The depth is written by its own thread alone, and read by the thread that frees forgotten kernel facts
// (counters.h: oldest_thread_epoch): relaxed atomic loads and stores, plain moves on every CPU tmaguard runs on.
__attribute__((always_inline)) inline int depth_now() {
  return __atomic_load_n(&this_thread_words().reentry_depth, __ATOMIC_RELAXED);
}
__attribute__((always_inline)) inline void set_depth(int d) {
  __atomic_store_n(&this_thread_words().reentry_depth, d, __ATOMIC_RELAXED);
}

//! Whether this thread is inside tmaguard (a wrapper, a memo step, or a thread of tmaguard's own).
__attribute__((always_inline)) inline bool inside_tmaguard() { return depth_now() != 0; }

//! A scope of tmaguard's own work on this thread: entered, it counts as inside tmaguard until it ends. A thread outside
//! every such scope holds no kernel facts (kernel_table.h): whatever reads them is inside one.
class InsideTmaguard {
 public:
  InsideTmaguard() : nested_(depth_now() > 0) {
    set_depth(depth_now() + 1);
    __atomic_signal_fence(__ATOMIC_SEQ_CST);  // entered before anything inside is read (counters.h: membarrier)
  }
  ~InsideTmaguard() {
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    set_depth(depth_now() - 1);
  }
  InsideTmaguard(const InsideTmaguard&) = delete;
  InsideTmaguard& operator=(const InsideTmaguard&) = delete;
  //! This thread was inside tmaguard already when the scope began.
  bool nested() const { return nested_; }
  //! The scope is the outermost one of this thread (it ends the thread's time inside tmaguard).
  static bool outermost() { return depth_now() == 1; }

 private:
  bool nested_;
};

//! A thread tmaguard started, called first thing on it: whatever it calls passes through tmaguard's wrappers for its
//! whole life, it blocks every signal (the job's handlers never run on it) and it is named `name` ("tmaguard-...",
//! what ps and a debugger show).
inline void become_tmaguard_thread(const char* name) {
  sigset_t all;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, nullptr);
  set_depth(1);
  pthread_setname_np(pthread_self(), name);
}

}  // namespace tmaguard
