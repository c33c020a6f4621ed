// tmaguard shim: the one fork handler (as sanitizer runtimes have one before/after-fork with an ordered lock list).
// Every lock tmaguard takes is listed in ForkLock, in the order fork() takes them: the order locks nest in (a thread
// holding one may take a later one, never an earlier one). A module registers its lock's handlers once, before its
// first use of the lock; the handler takes every registered lock in that order before fork() and releases them in
// reverse order in both processes, the child resetting what it inherited. A new lock gets a row here.
#pragma once

namespace tmaguard {

enum class ForkLock : int {
  kKernelOverflow,    // kernels/kernel_table.cpp: held while a kernel's facts are built, which may report a notice
  kKernelIndex,       // kernels/kernel_table.cpp: kernels by owner, and forgotten facts waiting to be freed (reads the
                      // thread registry's epochs)
  kReporter,          // reporter.cpp: held while a record is written, which may read the counters
  kCounters,          // counters.cpp: the thread registry
  kAllocationRanges,  // hooks_encode.cpp: the allocation-range cache (a leaf)
  kDeviceArch,        // device_arch.cpp: compute capability per context (a leaf)
  kDeviceAudit,       // device_audit.cpp: the read-back slots and their queue (takes the free journal's)
  kFreeJournal,       // allocations.cpp: the frees journaled while device-audit reads are in flight (a leaf)
  kBuildIds,          // callsite.cpp: the build ids of loaded modules (a leaf)
  kArena,       // arena.cpp: the blocks of kernels' facts (a leaf: any allocation may take it)
  kCount
};

struct ForkHandlers {
  void (*prepare)();  // takes the lock
  void (*parent)();   // releases it
  void (*child)();    // resets what the child inherited, then releases it
};

//! Registers one lock's handlers; a lock registered again keeps its first handlers. The first registration in a
//! process image installs the one pthread_atfork handler (a forked child inherits both).
void register_fork_lock(ForkLock which, ForkHandlers handlers);

}  // namespace tmaguard
