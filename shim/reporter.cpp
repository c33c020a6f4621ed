// tmaguard shim: the reporter (log sink, dedupe, actions on error findings, summary).
#include "reporter.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <unordered_map>

#include <spdlog/logger.h>
#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/sinks/stdout_sinks.h>

#include "counters.h"
#include "runtime.h"

namespace tmaguard {
namespace {

struct Reporter {
  Config cfg;
  std::shared_ptr<spdlog::logger> logger;          // built over a sink we own; never registered with spdlog
  std::unordered_map<std::string, uint64_t> seen;  // dedupe key -> occurrences
  std::map<std::string, uint64_t> by_rule;
};
std::mutex g_mu;            // serialises reporting and dedupe; held across fork by the atfork handlers
Reporter* g_rep = nullptr;  // written once when opened, then read-only; never freed (used at exit)

ProcessContext context() {
  ProcessContext c;
  c.pid = static_cast<long>(getpid());
  c.tid = static_cast<long>(syscall(SYS_gettid));
  if (g_rep) c.rank = g_rep->cfg.rank;
  const auto now = std::chrono::system_clock::now().time_since_epoch();
  c.time = format_time_utc(std::chrono::duration_cast<std::chrono::milliseconds>(now).count());
  return c;
}

// Caller holds g_mu.
void emit_locked(const std::string& line) {
  g_rep->logger->info(line);
  g_rep->logger->flush();
}

void emit_summary_locked() {
  const Counts c = counts_total();
  Summary s;
  s.launches_seen = c.launches_seen;
  s.launches_checked = c.launches_checked;
  s.tensor_maps_decoded = c.maps_decoded;
  s.violations_by_rule = g_rep->by_rule;
  emit_locked(render_summary(s, context(), g_rep->cfg.format));
}

}  // namespace

bool reporter_open(const Config& cfg, std::string* error) {
  auto rep = std::make_unique<Reporter>();
  rep->cfg = cfg;
  try {
    std::shared_ptr<spdlog::sinks::sink> sink;
    if (cfg.log_path.empty()) {
      sink = std::make_shared<spdlog::sinks::stderr_sink_st>();
    } else {
      sink = std::make_shared<spdlog::sinks::basic_file_sink_st>(
          expand_log_path(cfg.log_path, static_cast<long>(getpid())), false);
    }
    rep->logger = std::make_shared<spdlog::logger>("tmaguard", std::move(sink));
    rep->logger->set_pattern("%v");
    rep->logger->set_error_handler([](const std::string&) {});
  } catch (const std::exception& e) {
    *error = std::string("cannot open TMAGUARD_LOG='") + cfg.log_path + "': " + e.what();
    return false;
  }
  std::lock_guard<std::mutex> lock(g_mu);
  g_rep = rep.release();
  return true;
}

void report_summary_at_exit() {
  if (!armed_already()) return;
  std::lock_guard<std::mutex> lock(g_mu);
  if (g_rep) emit_summary_locked();
}

void report_notice(const std::string& key, const char* event, const std::string& message) {
  std::lock_guard<std::mutex> lock(g_mu);
  if (!g_rep || g_rep->seen[key]++ > 0) return;
  emit_locked(render_notice(event, message, context(), g_rep->cfg.format));
}

void report_inspect(const std::string& key, const InspectRecord& record) {
  std::lock_guard<std::mutex> lock(g_mu);
  if (!g_rep || g_rep->seen[key]++ > 0) return;
  emit_locked(render_inspect(record, context(), g_rep->cfg.format));
}

Verdict report_findings(std::vector<Finding>& findings) {
  const Mode m = mode();
  bool reject = false;
  std::lock_guard<std::mutex> lock(g_mu);
  if (!g_rep) return Verdict::kRun;
  bool abort_now = false;
  for (Finding& f : findings) {
    const bool error = f.severity == Severity::kError;
    // A rule's action override applies to its errors, except in inspect mode, which never blocks.
    const std::string action = !error ? "none" : (f.action.empty() || m == Mode::kInspect) ? to_string(m) : f.action;
    abort_now |= action == "abort";
    reject |= action == "reject";
    if (error) ++g_rep->by_rule[f.rule];
    const std::string key = f.rule + '\x1f' + f.kernel + '\x1f' + std::to_string(f.param_index);
    if (g_rep->seen[key]++ > 0) continue;
    emit_locked(render_finding(f, context(), action, g_rep->cfg.format));
  }
  if (abort_now) {
    emit_locked(render_notice("abort", "aborting the process before the kernel runs (abort mode)", context(),
                              g_rep->cfg.format));
    emit_summary_locked();
    g_rep->logger->flush();
    std::abort();
  }
  return reject ? Verdict::kReject : Verdict::kRun;
}

void reporter_fork_prepare() { g_mu.lock(); }
void reporter_fork_parent() { g_mu.unlock(); }
void reporter_fork_child() {
  if (g_rep) {
    g_rep->seen.clear();
    g_rep->by_rule.clear();
  }
  g_mu.unlock();
}

}  // namespace tmaguard
