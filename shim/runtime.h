// tmaguard shim: lazy initialisation (configuration, rules, reporter), the re-entry guard, and the mode in force.
#pragma once

#include <atomic>
#include <string>

#include "hot.h"
#include "tmaguard/config.h"

namespace tmaguard {

struct RuleSet;

namespace detail {
bool armed_slow();
}  // namespace detail

//! RAII re-entry guard (as TSan's ScopedInterceptor): the driver or our own code calling back into a wrapper
//! passes straight through.
class HookScope {
 public:
  HookScope() : nested_(t_hot.hook_depth++ > 0) {}
  ~HookScope() { --t_hot.hook_depth; }
  HookScope(const HookScope&) = delete;
  HookScope& operator=(const HookScope&) = delete;
  bool nested() const { return nested_; }

 private:
  bool nested_;
};

//! True once initialisation succeeded; never initialises.
inline bool armed_already() { return g_hot.state.load(std::memory_order_acquire) == kArmed; }
//! True when checks should run: initialises on first use (Uninit -> Initing -> Armed | Disabled). While another
//! thread initialises, it waits for it (a launch never passes unchecked because tmaguard is starting); after
//! tmaguard stepped aside, it returns false and the wrapper passes through.
inline bool armed() { return armed_already() || detail::armed_slow(); }
//! The mode in force (valid once armed() returned true).
inline Mode mode() { return g_hot.mode.load(std::memory_order_relaxed); }

//! tmaguard cannot work: says so once, in one line, on stderr, then steps aside for good.
void report_cannot_work(const std::string& why);
//! Writes all of [p, p + n) to fd (false when the descriptor refuses it), with SIGPIPE blocked for the write: a
//! reader that went away must not kill the job.
bool write_whole(int fd, const char* p, std::size_t n);
//! Remembers which file the process's stderr (descriptor 2) is, the first time tmaguard is called: a job that later
//! closes descriptor 2 and opens a data file (which gets descriptor 2) must not find tmaguard's records in its data.
void note_process_stderr();
//! Writes text to that stderr; false (nothing written) when descriptor 2 is closed or names another file now.
bool write_stderr(const std::string& text);
//! One line on stderr, written whole (tmaguard's own warnings before or outside the reporter).
void write_stderr_line(const std::string& line);

//! The rules in force (built-in preset merged with TMAGUARD_RULES); valid once armed.
const RuleSet& rules();

}  // namespace tmaguard
