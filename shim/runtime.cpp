// tmaguard shim: lazy init state machine, re-entry guard, fork handling, and the reporter (spdlog sinks we own).
#include "runtime.h"

#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <unordered_map>

#include <spdlog/logger.h>
#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/sinks/stdout_sinks.h>

#include <fstream>
#include <sstream>

#include "driver.h"
#include "tmaguard/report.h"
#include "tmaguard/rules.h"

namespace tmaguard {
namespace {

enum State : int { kUninit = 0, kIniting, kArmed, kDisabled };
std::atomic<int>& g_state = g_hot.state;

// Everything here is constant-initialised: nothing runs when the library is loaded.
std::atomic<bool> g_cannot_work_said{false};
std::mutex g_mu;  // serialises reporting and dedupe; held across fork by the atfork handlers

// Thread registry for the summary: every thread that launched, and the totals of those that exited. Guarded by
// g_threads_mu (held across fork).
std::mutex g_threads_mu;
std::vector<ThreadHot*>* g_threads = nullptr;
struct Counts {
  uint64_t launches_seen, launches_checked, maps_decoded;
};
Counts g_exited;  // plain words: constant-initialised, no constructor at load time
pthread_key_t g_thread_key;

void add_counts(Counts& c, const ThreadHot& t) {
  c.launches_seen += t.launches_seen.load(std::memory_order_relaxed);
  c.launches_checked += t.launches_checked.load(std::memory_order_relaxed);
  c.maps_decoded += t.maps_decoded.load(std::memory_order_relaxed);
}

void zero_counts(ThreadHot& t) {
  t.launches_seen.store(0, std::memory_order_relaxed);
  t.launches_checked.store(0, std::memory_order_relaxed);
  t.maps_decoded.store(0, std::memory_order_relaxed);
}

// pthread key destructor: a thread is exiting; keep its counts, forget its (soon freed) ThreadHot.
void thread_exit(void* p) {
  auto* t = static_cast<ThreadHot*>(p);
  std::lock_guard<std::mutex> lock(g_threads_mu);
  add_counts(g_exited, *t);
  zero_counts(*t);
  t->registered = 0;  // a launch from a later destructor registers it again
  if (g_threads) {
    for (ThreadHot*& x : *g_threads)
      if (x == t) {
        x = g_threads->back();
        g_threads->pop_back();
        break;
      }
  }
}

struct Runtime {
  Config cfg;
  std::shared_ptr<spdlog::logger> logger;  // built over a sink we own; never registered with spdlog
  std::unordered_map<std::string, uint64_t> seen;  // dedupe key -> occurrences
  std::map<std::string, uint64_t> by_rule;
  std::shared_ptr<const RuleSet> rules;
};
Runtime* g_rt = nullptr;  // written once by the initialising thread, then read-only; never freed

ProcessContext context() {
  ProcessContext c;
  c.pid = static_cast<long>(getpid());
  c.tid = static_cast<long>(syscall(SYS_gettid));
  if (g_rt) c.rank = g_rt->cfg.rank;
  const auto now = std::chrono::system_clock::now().time_since_epoch();
  c.time = format_time_utc(std::chrono::duration_cast<std::chrono::milliseconds>(now).count());
  return c;
}

void write_stderr(const std::string& line) {
  const std::string l = line + "\n";
  ssize_t n = ::write(2, l.data(), l.size());
  (void)n;
}

// Caller holds g_mu.
void emit_locked(const std::string& line) {
  if (!g_rt || !g_rt->logger) {
    write_stderr(line);
    return;
  }
  g_rt->logger->info(line);
  g_rt->logger->flush();
}

Summary summary_locked() {
  Summary s;
  {
    std::lock_guard<std::mutex> lock(g_threads_mu);
    Counts c = g_exited;
    if (g_threads)
      for (const ThreadHot* t : *g_threads) add_counts(c, *t);
    s.launches_seen = c.launches_seen;
    s.launches_checked = c.launches_checked;
    s.tensor_maps_decoded = c.maps_decoded;
  }
  if (g_rt) s.violations_by_rule = g_rt->by_rule;
  return s;
}

void emit_summary_locked() {
  if (g_rt) emit_locked(render_summary(summary_locked(), context(), g_rt->cfg.format));
}

void at_exit_summary() {
  if (g_state.load() != kArmed) return;
  std::lock_guard<std::mutex> lock(g_mu);
  emit_summary_locked();
}

void fork_prepare() {
  g_mu.lock();
  g_threads_mu.lock();
}
void fork_parent() {
  g_threads_mu.unlock();
  g_mu.unlock();
}
void fork_child() {
  // The child starts its own account: its summary covers what it did after fork. Only the forking thread lives on.
  g_exited = Counts{};
  zero_counts(t_hot);
  if (g_threads) {
    g_threads->clear();
    if (t_hot.registered) g_threads->push_back(&t_hot);
  }
  if (g_rt) {
    g_rt->seen.clear();
    g_rt->by_rule.clear();
  }
  g_threads_mu.unlock();
  g_mu.unlock();
}

bool init() {
  ConfigResult parsed = parse_config([](const char* n) { return std::getenv(n); });
  if (!parsed.errors.empty()) {
    report_cannot_work(parsed.errors.front());
    return false;
  }
  if (parsed.config.mode == Mode::kOff) return false;
  auto* rt = new Runtime;
  rt->cfg = parsed.config;
  try {
    std::shared_ptr<spdlog::sinks::sink> sink;
    if (rt->cfg.log_path.empty()) {
      sink = std::make_shared<spdlog::sinks::stderr_sink_st>();
    } else {
      sink = std::make_shared<spdlog::sinks::basic_file_sink_st>(
          expand_log_path(rt->cfg.log_path, static_cast<long>(getpid())), false);
    }
    rt->logger = std::make_shared<spdlog::logger>("tmaguard", std::move(sink));
    rt->logger->set_pattern("%v");
    rt->logger->set_error_handler([](const std::string&) {});
  } catch (const std::exception& e) {
    report_cannot_work(std::string("cannot open TMAGUARD_LOG='") + rt->cfg.log_path + "': " + e.what());
    delete rt;
    return false;
  }
  // Rules: the built-in preset, then TMAGUARD_RULES files (a rule with the same id replaces the preset's). A broken
  // file never leaves a job silently unguarded: the job stops here, before its first launch, unless
  // TMAGUARD_RULES_ON_ERROR=continue (then it runs without that file, after saying so).
  std::vector<std::shared_ptr<const RuleSet>> sets;
  if (rt->cfg.builtin_rules) sets.push_back(parse_rules(builtin_rules_text(), "built-in rules").rules);
  for (const std::string& path : rt->cfg.rules_files) {
    std::ifstream in(path);
    std::stringstream text;
    text << in.rdbuf();
    RulesResult res = in ? parse_rules(text.str(), path) : RulesResult{nullptr, {path + ": cannot read the rules file"}};
    for (const std::string& e : res.errors) write_stderr("tmaguard: rules error: " + e);
    if (!res.errors.empty() && !rt->cfg.continue_on_rules_error) {
      write_stderr("tmaguard: stopping the job before its first launch: fix " + path +
                   " (scripts/tmaguard check-rules), or set TMAGUARD_RULES_ON_ERROR=continue to run without it");
      std::_Exit(78);
    }
    if (!res.errors.empty()) write_stderr("tmaguard: continuing without " + path + " (TMAGUARD_RULES_ON_ERROR=continue)");
    sets.push_back(res.rules);
  }
  rt->rules = merge_rules(sets);
  if (!real_function(EntryId::cuLaunchKernel)) {
    report_cannot_work(std::string("no usable CUDA driver at '") + driver_path() + "'");
    delete rt;
    return false;
  }
  if (!real_function(EntryId::cuFuncGetParamInfo) || !real_function(EntryId::cuKernelGetParamInfo)) {
    report_cannot_work("the CUDA driver lacks cuFuncGetParamInfo/cuKernelGetParamInfo (needs a CUDA 12.4+ driver)");
    delete rt;
    return false;
  }
  if (pthread_key_create(&g_thread_key, thread_exit) != 0) {
    report_cannot_work("cannot create a thread-specific key");
    delete rt;
    return false;
  }
  g_threads = new std::vector<ThreadHot*>;
  g_rt = rt;
  g_hot.mode.store(static_cast<int>(rt->cfg.mode), std::memory_order_relaxed);
  pthread_atfork(fork_prepare, fork_parent, fork_child);
  std::atexit(at_exit_summary);
  return !g_cannot_work_said.load();
}

}  // namespace

thread_local ThreadHot t_hot __attribute__((tls_model("initial-exec")));

namespace detail {

bool armed_slow() {
  const int s = g_state.load(std::memory_order_acquire);
  if (s == kArmed) return true;
  if (s != kUninit) return false;
  int expected = kUninit;
  if (!g_state.compare_exchange_strong(expected, kIniting, std::memory_order_acq_rel))
    return expected == kArmed;
  bool ok = false;
  try {
    ok = init();
  } catch (const std::exception& e) {
    report_cannot_work(std::string("initialisation failed: ") + e.what());
  }
  if (g_cannot_work_said.load()) ok = false;
  g_state.store(ok ? kArmed : kDisabled, std::memory_order_release);
  return ok;
}
}  // namespace detail

const RuleSet& rules() { return *g_rt->rules; }

void register_thread() {
  if (t_hot.registered || g_state.load(std::memory_order_acquire) != kArmed) return;
  std::lock_guard<std::mutex> lock(g_threads_mu);
  g_threads->push_back(&t_hot);
  t_hot.registered = 1;
  pthread_setspecific(g_thread_key, &t_hot);
}

void report_cannot_work(const std::string& why) {
  g_state.store(kDisabled, std::memory_order_release);
  if (g_cannot_work_said.exchange(true)) return;
  write_stderr("tmaguard: cannot work: " + why + "; the job runs on unguarded");
}

void report_notice(const std::string& key, const char* event, const std::string& message) {
  std::lock_guard<std::mutex> lock(g_mu);
  if (!g_rt) return;
  if (g_rt->seen[key]++ > 0) return;
  emit_locked(render_notice(event, message, context(), g_rt->cfg.format));
}

void report_inspect(const std::string& key, const InspectRecord& record) {
  std::lock_guard<std::mutex> lock(g_mu);
  if (!g_rt || g_rt->seen[key]++ > 0) return;
  emit_locked(render_inspect(record, context(), g_rt->cfg.format));
}

bool report_findings(std::vector<Finding>& findings) {
  const Mode m = mode();
  bool reject = false;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    if (!g_rt) return false;
    bool abort_now = false;
    for (Finding& f : findings) {
      const bool error = f.severity == Severity::kError;
      // A rule's action override applies to its errors, except in inspect mode, which never blocks.
      const std::string action = !error ? "none" : (f.action.empty() || m == Mode::kInspect) ? to_string(m) : f.action;
      abort_now |= action == "abort";
      reject |= action == "reject";
      if (error) ++g_rt->by_rule[f.rule];
      const std::string key = f.rule + '\x1f' + f.kernel + '\x1f' + std::to_string(f.param_index);
      if (g_rt->seen[key]++ > 0) continue;
      emit_locked(render_finding(f, context(), action, g_rt->cfg.format));
    }
    if (abort_now) {
      emit_locked(render_notice("abort", "aborting the process before the kernel runs (abort mode)",
                                context(), g_rt->cfg.format));
      emit_summary_locked();
      g_rt->logger->flush();
      std::abort();
    }
  }
  return reject;
}

}  // namespace tmaguard
