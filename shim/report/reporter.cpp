// tmaguard shim: the reporter (log sink, dedupe, actions on error findings, summary).
//
// Records are handed to an spdlog async logger over a sink of tmaguard's own: a thread of tmaguard's (made when the
// first record is, signals blocked) writes them, one write(2) per record on an O_APPEND descriptor, so records of
// several threads and processes never interleave in a log file whatever their size. No launch, fork handler or exit
// handler ever waits on the log's reader: the reporter's lock guards only memory, a record waits in a bounded queue
// (the oldest is dropped and counted when it is full), and where a record must be out before something happens (an
// abort, the exit summary) the wait is bounded too. SIGPIPE is blocked around each write, so a log or stderr whose
// reader is gone never kills the job; a record the log refuses (a full disk) goes to stderr instead and is counted.
// The log is opened without following a symbolic link (but /dev/stdout and /dev/fd/N name the process's own
// descriptors), creating the directories it needs (0755), with mode 0644 at most; a child forked with %p or %r in
// TMAGUARD_LOG reopens its own.
#include "report/reporter.h"

#include <fcntl.h>
#include <fnmatch.h>
#include <pthread.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <thread>
#include <unordered_map>

#include <spdlog/async_logger.h>
#include <spdlog/details/null_mutex.h>
#include <spdlog/details/thread_pool.h>
#include <spdlog/logger.h>
#include <spdlog/sinks/base_sink.h>

#include "process/counters.h"
#include "thread/reentry.h"
#include "process/fork_locks.h"
#include "thread/thread_words.h"
#include "process/context.h"
#include "process/settings.h"
#include "process/stderr_io.h"
#include "tmaguard/judge.h"
#include "tmaguard_version.h"

namespace tmaguard {
namespace {

// Records waiting for the log at most; past this the oldest is dropped (and counted in the summary).
constexpr std::size_t kQueuedRecords = 8192;
// How long the records of an abort and the exit summary may wait for a log that does not take them.
constexpr auto kDeliveryWait = std::chrono::seconds(5);

// The descriptor a path names when it is one of the process's own by name (/dev/stdout, /dev/fd/N, /proc/self/fd/N:
// symbolic links, which tmaguard would otherwise refuse to follow), or -1.
int named_descriptor(const std::string& path) {
  if (path == "/dev/stdout") return 1;
  if (path == "/dev/stderr" || path == "stderr") return 2;
  for (const char* prefix : {"/dev/fd/", "/proc/self/fd/"}) {
    const std::size_t n = std::strlen(prefix);
    if (path.size() > n && path.size() <= n + 6 && path.compare(0, n, prefix) == 0 &&
        std::all_of(path.begin() + static_cast<long>(n), path.end(), [](char c) { return c >= '0' && c <= '9'; }))
      return std::atoi(path.c_str() + n);
  }
  return -1;
}

// Opens the log the way a log of someone else's job must be opened; -1 with `error` set when it cannot be (yet).
// A descriptor named by path (/dev/stdout) is duplicated: records go where the process's own descriptor goes.
int open_log(const std::string& path, std::string* error) {
  if (const int named = named_descriptor(path); named >= 0) {
    const int fd = fcntl(named, F_DUPFD_CLOEXEC, 3);
    if (fd < 0) *error = "descriptor " + std::to_string(named) + " is not open";
    return fd;
  }
  const int fd =
      ::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY | O_NONBLOCK, 0644);
  if (fd < 0) {
    const int e = errno;
    *error = e == ELOOP   ? "it is a symbolic link (tmaguard never follows one for its log)"
             : e == ENXIO ? "a FIFO nobody reads yet"
                          : std::strerror(e);
    return -1;
  }
  const int flags = fcntl(fd, F_GETFL);
  if (flags >= 0) fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);  // O_NONBLOCK only so that opening a FIFO never waits
  return fd;
}

// Where records go. Written by one thread at a time: the log thread, or (when no record is in flight, under the
// reporter's lock) the thread writing the summary.
class RecordSink final : public spdlog::sinks::base_sink<spdlog::details::null_mutex> {
 public:
  //! `pattern`: TMAGUARD_LOG as given (empty: stderr). A log that cannot be opened yet (a missing directory, a FIFO
  //! nobody reads) is tried again at every record; until it opens, records go to stderr.
  explicit RecordSink(std::string pattern) : pattern_(std::move(pattern)) {
    if (named_descriptor(pattern_) == 2) pattern_.clear();  // /dev/stderr: stderr, with its checks (stderr_io.h)
    if (!pattern_.empty()) try_open();
  }
  uint64_t lost() const { return lost_.load(std::memory_order_relaxed); }
  void count_lost() { lost_.fetch_add(1, std::memory_order_relaxed); }
  uint64_t flushes() const { return flushes_.load(std::memory_order_acquire); }
  bool is_stderr() const { return fd_ < 0; }
  //! After fork in the child: a %p log path names another file now; the inherited descriptor is the parent's.
  void after_fork_child() {
    lost_.store(0, std::memory_order_relaxed);
    if (pattern_.find("%p") == std::string::npos && pattern_.find("%r") == std::string::npos) return;
    if (fd_ > 2) ::close(fd_);
    fd_ = -1;
    try_open();
  }
  //! Writes one finished line; false when the log refused it, which is then counted and, with `fallback`, written
  //! to stderr instead.
  bool put(const std::string& line, bool fallback = true) {
    if (fd_ < 0 && !pattern_.empty()) try_open();
    if (fd_ >= 0) {
      if (write_whole(fd_, line.data(), line.size())) return true;
      lost_.fetch_add(1, std::memory_order_relaxed);
      if (fallback) to_stderr(line);
      return false;
    }
    if (to_stderr(line)) return true;
    lost_.fetch_add(1, std::memory_order_relaxed);
    return false;
  }
  //! stderr, if it is still the one tmaguard first saw (stderr_io.h: write_stderr).
  bool to_stderr(const std::string& line) { return write_stderr(line); }

 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    spdlog::memory_buf_t buf;
    formatter_->format(msg, buf);
    put(std::string(buf.data(), buf.size()));
  }
  void flush_() override { flushes_.fetch_add(1, std::memory_order_release); }

 private:
  void try_open() {
    std::string why;
    const std::string path = expand_path(pattern_, path_context(settings().config));
    if (named_descriptor(path) < 0) make_parent_directories(path);
    fd_ = open_log(path, &why);
    if (fd_ < 0 && !said_) {
      said_ = true;
      write_stderr_line("tmaguard: warning: cannot open TMAGUARD_LOG='" + path + "' yet: " + why +
                            "; reporting to stderr until it opens",
                        Notice::kLogNotOpen);
    }
  }
  int fd_ = -1;          // the log; -1: stderr (no log asked for, or not open yet)
  std::string pattern_;  // TMAGUARD_LOG as given (empty: stderr)
  bool said_ = false;
  std::atomic<uint64_t> lost_{0};
  std::atomic<uint64_t> flushes_{0};  // flush requests reached (each after every record queued before it)
};

// spdlog catches what stops a record (no memory for it, say) and hands it to the logger's error handler: the record
// is lost, and counted as such.
void set_error_handler(spdlog::logger& logger, const std::shared_ptr<RecordSink>& sink) {
  RecordSink* s = sink.get();  // the sink outlives every logger (never freed)
  logger.set_error_handler([s](const std::string&) { s->count_lost(); });
}

struct Reporter {
  Config cfg;
  std::string host;  // gethostname() when the reporter opened
  std::shared_ptr<RecordSink> sink;
  std::shared_ptr<spdlog::logger> logger;          // over a sink we own; never registered with spdlog
  std::shared_ptr<spdlog::details::thread_pool>* pool = nullptr;  // the log thread's; never freed (its thread runs
                                                                  // until the process ends)
  bool async_tried = false;  // the first record made the log thread (or found it could not)
  std::unordered_map<std::string, uint64_t> seen;  // dedupe key -> occurrences
  std::map<std::string, uint64_t> by_rule;         // error findings, repeats included
  std::map<std::string, uint64_t> warnings_by_rule;
  std::map<std::string, uint64_t> suppressed_by_rule;
  std::map<std::string, uint64_t> not_checkable;  // reason -> launches
  bool summary_written = false;                   // the final summary went out (before an abort): not again at exit
};

// Serialises reporting and dedupe; held across fork by the atfork handlers. It guards memory only (no write happens
// under it but the summary's, once nothing else is in flight), so holding it is always short; waiting for it is
// bounded all the same, and a thread that gives up never touches what it guards: its record is dropped and counted
// (g_dropped) instead.
std::timed_mutex g_mu;
thread_local bool t_reporting __attribute__((tls_model("initial-exec"))) = false;
std::atomic<Reporter*> g_rep{nullptr};  // published once when opened; never freed (used at exit)
std::atomic<uint64_t> g_dropped{0};     // records dropped because the reporter's lock was not free in time
bool g_fork_held = false;               // fork_prepare got the lock

// The reporter's lock, waited for at most `bound`. ThreadSanitizer's runtime does not see pthread_mutex_clocklock
// (what try_lock_for on the steady clock uses) and would read every unlock as one of a lock never taken: its builds
// wait on the realtime clock (pthread_mutex_timedlock), which it sees.
bool lock_within(std::chrono::seconds bound) {
#if defined(__SANITIZE_THREAD__)
  return g_mu.try_lock_until(std::chrono::system_clock::now() + bound);
#else
  return g_mu.try_lock_for(bound);
#endif
}

//
// While a thread holds it, the signals whose summary tmaguard writes (SIGTERM, SIGINT, SIGHUP) are blocked in that
// thread: one of them delivered there would run the summary (which takes this lock) or a job's handler that calls
// exit() (whose exit summary takes it, and allocates) while the lock and what it guards are half-way. The kernel
// delivers a process-wide signal to another thread meanwhile, or to this one as the lock is let go.
struct Locked {
  Locked() {
    sigset_t ends;
    sigemptyset(&ends);
    for (int sig : {SIGTERM, SIGINT, SIGHUP}) sigaddset(&ends, sig);
    masked = pthread_sigmask(SIG_BLOCK, &ends, &before) == 0;
    held = !t_reporting && lock_within(std::chrono::seconds(2));
    if (held) {
      t_reporting = true;
    } else {
      g_dropped.fetch_add(1, std::memory_order_relaxed);
    }
  }
  ~Locked() {
    if (held) {
      t_reporting = false;
      g_mu.unlock();
    }
    if (masked) pthread_sigmask(SIG_SETMASK, &before, nullptr);
  }
  Locked(const Locked&) = delete;
  Locked& operator=(const Locked&) = delete;
  bool held = false;
  bool masked = false;
  sigset_t before;
};

ProcessContext context(const Reporter& rep) {
  ProcessContext c;
  c.pid = static_cast<long>(getpid());
  c.tid = static_cast<long>(syscall(SYS_gettid));
  c.rank = rep.cfg.rank;
  c.local_rank = rep.cfg.local_rank;
  c.host = rep.host;
  c.job_id = rep.cfg.job_id;
  const auto now = std::chrono::system_clock::now().time_since_epoch();
  c.time = format_time_utc(std::chrono::duration_cast<std::chrono::milliseconds>(now).count());
  return c;
}

uint64_t overruns(const Reporter& rep) { return rep.pool ? (*rep.pool)->overrun_counter() : 0; }

// The log thread: signals blocked (the job's handlers never run on it), tmaguard's wrappers pass through on it.
void log_thread_start() {
  become_tmaguard_thread("tmaguard-log");
}

// Caller holds g_mu. The first record makes the log thread and the async logger over the sink; where no thread can
// be made, records are written by the reporting thread itself (the synchronous logger reporter_open made).
void ensure_log_thread(Reporter& rep) {
  if (rep.async_tried) return;
  rep.async_tried = true;
  try {
    rep.pool = new std::shared_ptr<spdlog::details::thread_pool>(
        std::make_shared<spdlog::details::thread_pool>(kQueuedRecords, 1, log_thread_start));
    auto async = std::make_shared<spdlog::async_logger>("tmaguard", rep.sink, *rep.pool,
                                                        spdlog::async_overflow_policy::overrun_oldest);
    async->set_pattern("%v");
    set_error_handler(*async, rep.sink);
    rep.logger = std::move(async);
  } catch (const std::exception&) {
    rep.pool = nullptr;  // (a pool whose thread could not start was never made)
  }
}

// Caller holds g_mu.
void emit_locked(Reporter& rep, const std::string& line) {
  ensure_log_thread(rep);
  rep.logger->info(line);
}

// Caller holds g_mu. Waits (bounded) until every record queued so far left the queue (written, refused or dropped):
// a flush request queued behind them reaches the sink after them. Then no thread but the caller touches the sink.
// False when the log did not take them in time.
bool wait_delivered(const Reporter& rep) {
  if (!rep.pool) return true;  // no log thread: every record was written by the thread that made it
  const uint64_t target = rep.sink->flushes() + 1;
  rep.logger->flush();
  const auto deadline = std::chrono::steady_clock::now() + kDeliveryWait;
  for (;;) {
    if (rep.sink->flushes() >= target) return true;
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

Summary summary_of(const Reporter& rep) {
  const Counts c = counts_total();
  Summary s;
  s.launches_seen = c.launches_seen;
  s.launches_checked = c.launches_checked;
  s.tensor_maps_decoded = c.maps_decoded;
  s.clean_copies = c.clean_copies;
  s.launches_moved = c.launches_moved;
  s.mode = to_string(rep.cfg.mode);
  s.violations_by_rule = rep.by_rule;
  s.warnings_by_rule = rep.warnings_by_rule;
  s.suppressed_by_rule = rep.suppressed_by_rule;
  s.not_checkable = rep.not_checkable;
  for (int i = 0; i < static_cast<int>(Unchecked::kCount); ++i)
    if (const uint64_t n = unchecked_count(static_cast<Unchecked>(i))) s.not_checked[to_string(static_cast<Unchecked>(i))] = n;
  s.log_records_lost = rep.sink->lost();
  s.records_dropped = g_dropped.load(std::memory_order_relaxed) + overruns(rep);
  s.metrics_failures = metrics_write_failures();
  const AuditCounts a = audit_counts();
  s.device_launches_audited = a.launches_audited;
  s.device_buffers_read = a.buffers_read;
  s.device_maps_found = a.maps_found;
  for (int i = 0; i < static_cast<int>(AuditSkip::kCount); ++i)
    if (a.skipped[i]) s.device_skipped[to_string(static_cast<AuditSkip>(i))] = a.skipped[i];
  const CallSiteCounts cs = call_site_counts();
  s.call_sites_taken = cs.taken;
  s.call_site_ns = cs.ns;
  s.maps_compared_with_tensors = compared_with_tensors();
  s.large_flags_cleared = large_flags_cleared();
  s.version = TMAGUARD_VERSION;
  s.revision = TMAGUARD_REVISION;
  return s;
}

// Caller holds g_mu. The summary is written by the caller once every record before it is out, so it says how many
// records the log refused, itself included: when the log refuses it too, it goes to stderr rendered again with the
// count that includes it. A log that takes nothing for kDeliveryWait gets no summary; stderr gets it (bounded).
void emit_summary_locked(Reporter& rep, bool final = true, const char* signal = nullptr) {
  auto marked = [&](Summary s) {
    s.final = final;
    if (signal) s.signal = signal;
    return s;
  };
  Summary s = marked(summary_of(rep));
  if (!wait_delivered(rep)) {
    if (!rep.sink->is_stderr())
      write_stderr_bounded(render_summary(s, context(rep), rep.cfg.format) + "\n", kStderrLineTimeoutMs);
    return;
  }
  s = marked(summary_of(rep));  // with what the wait saw delivered
  if (rep.sink->put(render_summary(s, context(rep), rep.cfg.format) + "\n", false) || rep.sink->is_stderr()) return;
  s.log_records_lost = rep.sink->lost();
  rep.sink->to_stderr(render_summary(s, context(rep), rep.cfg.format) + "\n");
}

// fork: the reporter's lock is held across fork() when it could be had within a second (it guards memory only, so
// that is always); the child starts with empty dedupe and counts, and without the parent's log thread or its queue
// (the parent writes what it queued): its own thread is made with its first record.
void fork_prepare() { g_fork_held = lock_within(std::chrono::seconds(1)); }
void fork_parent() {
  if (g_fork_held) g_mu.unlock();
}
void fork_child() {
  if (!g_fork_held) new (&g_mu) std::timed_mutex;  // held by a thread the child does not have: a fresh one
  if (Reporter* rep = g_rep.load(std::memory_order_acquire)) {
    rep->seen.clear();
    rep->by_rule.clear();
    rep->warnings_by_rule.clear();
    rep->suppressed_by_rule.clear();
    rep->not_checkable.clear();
    rep->summary_written = false;
    if (rep->pool) {
      // The parent's log thread and queue: not in the child, never freed (freeing a pool joins its thread).
      new std::shared_ptr<spdlog::logger>(std::move(rep->logger));
      rep->pool = nullptr;
      rep->logger = std::make_shared<spdlog::logger>("tmaguard", rep->sink);
      rep->logger->set_pattern("%v");
      set_error_handler(*rep->logger, rep->sink);
    }
    rep->async_tried = false;
    rep->sink->after_fork_child();
  }
  g_dropped.store(0, std::memory_order_relaxed);
  t_reporting = false;
  g_mu.unlock();
}

}  // namespace

bool reporter_open(const Config& cfg, std::string* error) {
  auto rep = std::make_unique<Reporter>();
  rep->cfg = cfg;
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) == 0) rep->host = host;
  try {
    rep->sink = std::make_shared<RecordSink>(cfg.log_path);
    rep->logger = std::make_shared<spdlog::logger>("tmaguard", rep->sink);
    rep->logger->set_pattern("%v");
    set_error_handler(*rep->logger, rep->sink);
  } catch (const std::exception& e) {
    *error = std::string("cannot set up the log: ") + e.what();
    return false;
  }
  register_fork_lock(ForkLock::kReporter, {fork_prepare, fork_parent, fork_child});
  g_rep.store(rep.release(), std::memory_order_release);  // no lock: a fork in the middle must not inherit one
  return true;
}

void report_summary_at_exit() {
  Reporter* rep = g_rep.load(std::memory_order_acquire);
  if (!rep || !armed_already()) return;
  {
    Locked lock;
    if (!lock.held || rep->summary_written) return;
    rep->summary_written = true;
    emit_summary_locked(*rep);
  }
  write_metrics(false);
}

bool report_summary_now(bool final, const char* signal) {
  Reporter* rep = g_rep.load(std::memory_order_acquire);
  if (!rep) return false;
  Locked lock;
  if (!lock.held || rep->summary_written) return false;
  if (final) rep->summary_written = true;
  emit_summary_locked(*rep, final, signal);
  return true;
}

Summary current_summary() {
  Reporter* rep = g_rep.load(std::memory_order_acquire);
  if (!rep) return {};
  Locked lock;
  if (!lock.held) return {};
  return summary_of(*rep);
}

void report_line(const std::string& line) {
  Reporter* rep = g_rep.load(std::memory_order_acquire);
  if (!rep) return;
  Locked lock;
  if (lock.held) emit_locked(*rep, line);
}

ProcessContext report_context() {
  Reporter* rep = g_rep.load(std::memory_order_acquire);
  return rep ? context(*rep) : ProcessContext{};
}

void report_notice(Notice kind, const std::string& detail, const std::string& message) {
  Reporter* rep = g_rep.load(std::memory_order_acquire);
  if (!rep) return;
  const std::string key = std::string("notice|") + notice_info(kind).name + "|" + detail;
  Locked lock;
  if (!lock.held || rep->seen[key]++ > 0) return;
  emit_locked(*rep, render_notice(kind, message, context(*rep), rep->cfg.format));
}

void report_not_checkable(const std::string& reason, const std::string& message) {
  Reporter* rep = g_rep.load(std::memory_order_acquire);
  if (!rep) return;
  Locked lock;
  if (!lock.held || rep->not_checkable[reason]++ > 0) return;
  emit_locked(*rep, render_notice(Notice::kNotCheckable, message, context(*rep), rep->cfg.format));
}

void report_census(const CensusRecord& record) {
  Reporter* rep = g_rep.load(std::memory_order_acquire);
  if (!rep) return;
  Locked lock;
  if (!lock.held) return;
  emit_locked(*rep, render_census(record, context(*rep), rep->cfg.format));
}

void report_inspect(const std::string& key, const InspectRecord& record) {
  Reporter* rep = g_rep.load(std::memory_order_acquire);
  if (!rep) return;
  Locked lock;
  if (!lock.held || rep->seen[key]++ > 0) return;
  emit_locked(*rep, render_inspect(record, context(*rep), rep->cfg.format));
}

namespace {
// TMAGUARD_ERROR_MARKER: the first error finding of this process leaves DIR/<pid> (what tmaguard --error-exitcode
// reads after its job ended, whatever the mode).
void mark_error(const std::string& dir) {
  static std::atomic<long> marked_by{0};
  const long pid = static_cast<long>(getpid());
  if (marked_by.exchange(pid) == pid) return;
  const int fd = ::open((dir + "/" + std::to_string(pid)).c_str(), O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (fd >= 0) ::close(fd);
}

// Whether TMAGUARD_SUPPRESS names this finding (its rule, on a kernel its glob matches).
bool suppressed(const Config& cfg, const Finding& f) {
  for (const Suppression& s : cfg.suppress)
    if (s.rule == f.rule && (s.kernel_glob.empty() || fnmatch(s.kernel_glob.c_str(), f.kernel.c_str(), 0) == 0))
      return true;
  return false;
}

std::string dedupe_key(const Finding& f) {
  // A warning never hides a later error of the same rule at the same place (word 2 bit 21 decides which).
  return f.rule + '\x1f' + to_string(f.severity) + '\x1f' + f.kernel + '\x1f' + (f.place ? to_string(*f.place) : "-");
}
}  // namespace

bool findings_unreported(const std::vector<Finding>& findings) {
  Reporter* rep = g_rep.load(std::memory_order_acquire);
  if (!rep || findings.empty()) return false;
  Locked lock;
  if (!lock.held) return false;
  return std::any_of(findings.begin(), findings.end(),
                     [&](const Finding& f) { return rep->seen.find(dedupe_key(f)) == rep->seen.end(); });
}

namespace {

// TMAGUARD_SUPPRESS: a suppressed finding is neither acted on nor reported; it is counted.
void drop_suppressed(Reporter& rep, std::vector<Finding>& findings) {
  std::vector<Finding> kept;
  std::vector<std::string> silenced;
  for (Finding& f : findings) {
    if (suppressed(rep.cfg, f)) silenced.push_back(f.rule);
    else kept.push_back(std::move(f));
  }
  findings = std::move(kept);
  if (silenced.empty()) return;
  Locked lock;
  if (lock.held)
    for (const std::string& r : silenced) ++rep.suppressed_by_rule[r];
}

// What each finding does (finding.h: action_in_mode).
std::vector<Action> actions_of(const std::vector<Finding>& findings, Mode m) {
  std::vector<Action> actions;
  for (const Finding& f : findings) actions.push_back(action_in_mode(f, m));
  return actions;
}

// Caller holds the reporter's lock. The abort notice and the final summary; true when the records reached the log.
bool say_abort_locked(Reporter& rep, const std::vector<Finding>& findings) {
  const bool after = std::any_of(findings.begin(), findings.end(),
                                 [](const Finding& f) { return f.place && f.place->on_device(); });
  emit_locked(rep, render_notice(Notice::kAbort,
                                 after ? "aborting the process: a tensor map read back after its kernel ran "
                                         "is wrong (abort mode)"
                                       : "aborting the process before the kernel runs (abort mode)",
                                 context(rep), rep.cfg.format));
  rep.summary_written = true;
  const bool delivered = wait_delivered(rep);
  emit_summary_locked(rep);
  return delivered;
}

// Counts and writes the findings (each distinct one once); in abort mode also the abort notice and the summary.
// Returns whether an abort's records reached the log.
bool write_findings(Reporter& rep, const std::vector<Finding>& findings, const std::vector<Action>& actions,
                    bool abort_now) {
  Locked lock;
  if (!lock.held) return false;
  for (std::size_t i = 0; i < findings.size(); ++i) {
    const Finding& f = findings[i];
    ++(f.severity == Severity::kError ? rep.by_rule : rep.warnings_by_rule)[f.rule];
    if (rep.seen[dedupe_key(f)]++ > 0) continue;
    emit_locked(rep, render_finding(f, context(rep), actions[i], rep.cfg.format));
  }
  return abort_now && say_abort_locked(rep, findings);
}

}  // namespace

Verdict report_findings(std::vector<Finding>& findings) {
  Reporter* rep = g_rep.load(std::memory_order_acquire);
  if (!rep) return Verdict::kRun;
  if (!rep->cfg.suppress.empty()) {
    drop_suppressed(*rep, findings);
    if (findings.empty()) return Verdict::kRun;
  }
  if (!rep->cfg.error_marker_dir.empty() && has_errors(findings)) mark_error(rep->cfg.error_marker_dir);
  // The verdict never depends on the reporter's lock: it is decided first.
  const std::vector<Action> actions = actions_of(findings, mode());
  const bool abort_now = std::find(actions.begin(), actions.end(), Action::kAbort) != actions.end();
  const bool reject = std::find(actions.begin(), actions.end(), Action::kReject) != actions.end();
  if (!write_findings(*rep, findings, actions, abort_now) && abort_now) {
    // The log did not take the records in time (or the lock was not free: the records were dropped and counted):
    // the reason still reaches stderr before the abort, within a bound, without touching what the lock guards.
    for (std::size_t i = 0; i < findings.size(); ++i)
      if (actions[i] == Action::kAbort) {
        write_stderr_bounded(render_finding(findings[i], context(*rep), Action::kAbort, LogFormat::kText) + "\n",
                             kStderrLineTimeoutMs);
        break;
      }
  }
  // Outside the lock: a SIGABRT handler that calls exit() runs the exit summary, which must not wait on us.
  if (abort_now) std::abort();
  return reject ? Verdict::kReject : Verdict::kRun;
}

}  // namespace tmaguard
