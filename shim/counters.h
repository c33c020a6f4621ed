// tmaguard shim: exact launch counts for the summary, from every live thread plus those that exited.
#pragma once

#include <cstdint>

namespace tmaguard {

struct Counts {
  uint64_t launches_seen = 0, launches_checked = 0, maps_decoded = 0;
};

//! Prepares the thread registry (a pthread key whose destructor keeps an exiting thread's counts) and registers its
//! lock with the fork handler (the child keeps only the forking thread and starts from zero). False when the key
//! cannot be created.
bool counters_init();
//! Makes this thread's counters part of the summary (once per thread; the launch slow path calls it).
void register_thread();
//! Every thread's counts added up, exited threads included.
Counts counts_total();

}  // namespace tmaguard
