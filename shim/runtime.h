// tmaguard shim: lazy initialisation, the re-entry guard, configuration, statistics and reporting.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "hot.h"
#include "tmaguard/config.h"
#include "tmaguard/finding.h"

namespace tmaguard {

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

//! True when checks should run: initialises on first use (Uninit -> Initing -> Armed | Disabled). While another
//! thread initialises, or after tmaguard stepped aside, it returns false and the wrapper passes through.
inline bool armed() { return g_hot.state.load(std::memory_order_acquire) == 2 || detail::armed_slow(); }
//! The mode in force (valid once armed() returned true).
inline Mode mode() { return static_cast<Mode>(g_hot.mode.load(std::memory_order_relaxed)); }

//! tmaguard cannot work: says so once, in one line, on stderr (and the log), then steps aside for good.
void report_cannot_work(const std::string& why);
//! A one-line notice (warnings about tmaguard's own limits, failed encodes): deduplicated by key.
void report_notice(const std::string& key, const char* event, const std::string& message);

//! Makes this thread's counters part of the summary (once per thread; the launch slow path calls it).
void register_thread();

//! Reports findings (deduplicated by rule, kernel, parameter) and applies the mode to error findings.
//! Returns true when the launch must not run (reject). In abort mode it flushes and aborts the process.
bool report_findings(std::vector<Finding>& findings);

struct InspectRecord;
struct RuleSet;
//! The rules in force (built-in preset merged with TMAGUARD_RULES); valid once armed.
const RuleSet& rules();
//! Inspect mode: writes the record once per key (kernel + tensor-map layout).
void report_inspect(const std::string& key, const InspectRecord& record);

}  // namespace tmaguard
