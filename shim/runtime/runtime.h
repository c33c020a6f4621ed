// tmaguard shim: lazy initialisation (configuration, rules, reporter), the re-entry guard, and the mode in force.
#pragma once

#include <atomic>
#include <string>

#include "thread/thread_words.h"
#include "thread/reentry.h"
#include "process/stderr_io.h"
#include "tmaguard/config.h"

namespace tmaguard {

struct RuleSet;

namespace detail {
bool armed_slow();
void nested_launches_unreported();
}  // namespace detail

//! What says the launches a thread made inside another tmaguard call (LaunchThread::nested_unreported), once the outer
//! call ends; set by the launch check (a layer above this one).
void on_nested_launches(void (*report)());

//! A wrapper's time inside tmaguard (the re-entry guard, thread/reentry.h, as TSan's ScopedInterceptor): the driver or
//! our own code calling back into a wrapper passes straight through. A launch made while this thread is inside a
//! wrapper (a signal handler that launches) is counted, and said when the outermost wrapper returns (no lock or
//! allocation is safe inside the handler).
class HookScope {
 public:
  HookScope() = default;
  ~HookScope() {
    // Said while this call still counts as one (a signal handler that launches meanwhile is counted too, never checked
    // inside the locks the saying takes).
    if (InsideTmaguard::outermost() && __builtin_expect(this_thread_words().nested_unreported != 0, 0))
      detail::nested_launches_unreported();
  }
  HookScope(const HookScope&) = delete;
  HookScope& operator=(const HookScope&) = delete;
  bool nested() const { return inside_.nested(); }

 private:
  InsideTmaguard inside_;
};

//! True when checks should run: initialises on first use (Uninit -> Initing -> Armed | Disabled). While another
//! thread initialises, it waits for it (a launch never passes unchecked because tmaguard is starting); after
//! tmaguard stepped aside, it returns false and the wrapper passes through.
inline bool armed() { return armed_already() || detail::armed_slow(); }

//! The rules in force (built-in preset merged with TMAGUARD_RULES); valid once armed.
const RuleSet& rules();
//! The configuration in force: the settings (process/settings.h, their one owner, read once), as initialisation
//! accepted them (a setting it cannot understand stops the job before its first launch).
const Config& config();

}  // namespace tmaguard
