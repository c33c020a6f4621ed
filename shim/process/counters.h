// tmaguard shim: exact launch counts for the summary, from every live thread plus those that exited.
#pragma once

#include <cstdint>

namespace tmaguard {

struct Counts {
  uint64_t launches_seen = 0, launches_checked = 0, maps_decoded = 0, clean_copies = 0, launches_moved = 0;
};

//! Prepares the thread registry (a pthread key whose destructor keeps an exiting thread's counts) and registers its
//! lock with the fork handler (the child keeps only the forking thread and starts from zero). False when the key
//! cannot be created.
bool counters_init();
//! Makes this thread's counters part of the summary (once per thread; the launch slow path calls it).
void register_thread();
//! What a registered thread that exits releases besides its counts (the memo's blocks: a room above this one),
//! called on that thread; set once.
void on_thread_exit(void (*release)());
//! Every thread's counts added up, exited threads included.
Counts counts_total();
//! The oldest kernel epoch (LaunchGlobals::kernel_epoch) a registered thread last saw, `now` when there is none: facts
//! forgotten at that epoch or before are held by no thread (kernels/kernel_table.cpp frees them).
uint32_t oldest_thread_epoch(uint32_t now);

//! Launches that tmaguard did not get to check, by why (the summary's launches_not_checked), process-wide; the child
//! of a fork starts from zero.
enum class Unchecked : int { kNoMemory, kInternalError, kNested, kShortBuffer, kCount };
const char* to_string(Unchecked u);
void count_unchecked(Unchecked why);  // async-signal-safe (one atomic add)
uint64_t unchecked_count(Unchecked why);

//! Call sites taken for reported findings (TMAGUARD_STACK), and the time they took, process-wide: the summary says
//! what a finding's call site cost.
void count_call_site(uint64_t ns);
struct CallSiteCounts {
  uint64_t taken = 0, ns = 0;
};
CallSiteCounts call_site_counts();

//! Maps compared with the tensors their launching thread declared (launch/declared.h), process-wide: the summary
//! shows that declarations reached the maps. Counted on full checks only (a repeat passed by the memo is not).
void count_compared_with_tensors(uint64_t n);
uint64_t compared_with_tensors();

//! Maps whose large-tensor flag the encode repair cleared (TMAGUARD_REPAIR), process-wide; a fork's child starts at 0.
void count_large_flag_cleared();
uint64_t large_flags_cleared();

//! The device-map audit's counts (device_audit.cpp), process-wide; the child of a fork starts from zero.
enum class AuditSkip : int {
  kCapturing,
  kBusy,
  kNoPinnedMemory,
  kCopyRefused,
  kUnfinishedAtExit,
  kAllocationForgotten,
  kCount
};
const char* to_string(AuditSkip s);
struct AuditCounts {
  uint64_t launches_audited = 0, buffers_read = 0, maps_found = 0;
  uint64_t skipped[static_cast<int>(AuditSkip::kCount)] = {};
};
enum class AuditCount : int { kLaunchesAudited, kBuffersRead, kMapsFound };
void audit_count(AuditCount what, uint64_t n = 1);
void audit_skipped(AuditSkip why, uint64_t n = 1);
AuditCounts audit_counts();

}  // namespace tmaguard
