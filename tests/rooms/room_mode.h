// The mode in force for one room test, put back after it: a test of what a finding does in log or reject mode says
// so itself instead of relying on the environment it runs in (ctest sets TMAGUARD_MODE=log; a run under the
// emulator or by hand may not, and abort mode would end the test binary at the first error).
#pragma once

#include "thread/thread_words.h"
#include "tmaguard/config.h"

namespace tmaguard {

class InMode {
 public:
  explicit InMode(Mode m) : before_(mode()) { g_launch_globals.mode.store(m, std::memory_order_relaxed); }
  ~InMode() { g_launch_globals.mode.store(before_, std::memory_order_relaxed); }
  InMode(const InMode&) = delete;
  InMode& operator=(const InMode&) = delete;

 private:
  Mode before_;
};

}  // namespace tmaguard
