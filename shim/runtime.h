// tmaguard shim: lazy initialisation, the re-entry guard, configuration, statistics and reporting.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "tmaguard/config.h"
#include "tmaguard/finding.h"

namespace tmaguard {

namespace detail {
// initial-exec: the library is preloaded, so its TLS is static and a hook pays no __tls_get_addr call.
extern thread_local int t_hook_depth __attribute__((tls_model("initial-exec")));
extern std::atomic<int> g_state;  // 0 uninit, 1 initing, 2 armed, 3 disabled
extern std::atomic<int> g_mode;   // Mode, valid once armed
bool armed_slow();
}  // namespace detail

//! RAII re-entry guard (as TSan's ScopedInterceptor): the driver or our own code calling back into a wrapper
//! passes straight through.
class HookScope {
 public:
  HookScope() : nested_(detail::t_hook_depth++ > 0) {}
  ~HookScope() { --detail::t_hook_depth; }
  HookScope(const HookScope&) = delete;
  HookScope& operator=(const HookScope&) = delete;
  bool nested() const { return nested_; }

 private:
  bool nested_;
};

//! True when checks should run: initialises on first use (Uninit -> Initing -> Armed | Disabled). While another
//! thread initialises, or after tmaguard stepped aside, it returns false and the wrapper passes through.
inline bool armed() { return detail::g_state.load(std::memory_order_acquire) == 2 || detail::armed_slow(); }
//! The mode in force (valid once armed() returned true).
inline Mode mode() { return static_cast<Mode>(detail::g_mode.load(std::memory_order_relaxed)); }

//! tmaguard cannot work: says so once, in one line, on stderr (and the log), then steps aside for good.
void report_cannot_work(const std::string& why);
//! A one-line notice (warnings about tmaguard's own limits, failed encodes): deduplicated by key.
void report_notice(const std::string& key, const char* event, const std::string& message);

//! Counters, sharded by thread so that launching threads never share a cache line (summed for the summary).
struct alignas(64) Stats {
  std::atomic<uint64_t> launches_seen{0};
  std::atomic<uint64_t> launches_checked{0};
  std::atomic<uint64_t> maps_decoded{0};
};
//! This thread's shard.
Stats& stats();
//! Adds to a counter of this thread's shard without a locked instruction: each launching thread owns its shard
//! (64 of them), so counts are exact up to 64 launching threads and may undercount beyond.
inline void bump(std::atomic<uint64_t>& c, uint64_t n = 1) {
  c.store(c.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
}

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
