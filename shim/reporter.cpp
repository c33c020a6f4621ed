// tmaguard shim: the reporter (log sink, dedupe, actions on error findings, summary).
//
// The log is written by a sink of tmaguard's own, under spdlog: one write(2) per record on an O_APPEND descriptor,
// so records of several threads and processes never interleave in a log file whatever their size; SIGPIPE blocked
// around each write, so a log or stderr whose reader is gone never kills the job; and a record the log refuses
// (a full disk) goes to stderr instead and is counted in the summary. The log is opened without following a
// symbolic link, without creating directories, with mode 0644 at most; a child forked with %p in TMAGUARD_LOG
// reopens its own.
#include "reporter.h"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <unordered_map>

#include <spdlog/details/null_mutex.h>
#include <spdlog/logger.h>
#include <spdlog/sinks/base_sink.h>

#include "counters.h"
#include "runtime.h"
#include "tmaguard_version.h"

namespace tmaguard {
namespace {

// Opens the log the way a log of someone else's job must be opened; -1 with `error` set when it cannot be.
int open_log(const std::string& path, std::string* error) {
  const int fd =
      ::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY | O_NONBLOCK, 0644);
  if (fd < 0) {
    const int e = errno;
    *error = e == ELOOP ? "it is a symbolic link (tmaguard never follows one for its log)" : std::strerror(e);
    return -1;
  }
  const int flags = fcntl(fd, F_GETFL);
  if (flags >= 0) fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);  // O_NONBLOCK only so that opening a FIFO never waits
  return fd;
}

class RecordSink final : public spdlog::sinks::base_sink<spdlog::details::null_mutex> {
 public:
  RecordSink(int fd, std::string pattern) : fd_(fd), pattern_(std::move(pattern)) {}
  uint64_t lost() const { return lost_; }
  bool is_stderr() const { return fd_ == 2; }
  //! After fork in the child: a %p log path names another file now; the inherited descriptor is the parent's.
  void after_fork_child() {
    if (pattern_.find("%p") == std::string::npos) return;
    if (fd_ > 2) ::close(fd_);
    fd_ = -1;
    reopen_ = true;
  }
  //! Writes one finished line; false when the log refused it, which is then counted and, with `fallback`, written
  //! to stderr instead.
  bool put(const std::string& line, bool fallback = true) {
    if (reopen_) {
      reopen_ = false;
      std::string why;
      fd_ = open_log(expand_log_path(pattern_, static_cast<long>(getpid())), &why);
    }
    if (fd_ >= 0 && write_whole(fd_, line.data(), line.size())) return true;
    ++lost_;
    if (fallback && fd_ != 2) write_whole(2, line.data(), line.size());
    return false;
  }

 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    spdlog::memory_buf_t buf;
    formatter_->format(msg, buf);
    put(std::string(buf.data(), buf.size()));
  }
  void flush_() override {}

 private:
  int fd_;
  std::string pattern_;  // TMAGUARD_LOG as given (empty: stderr)
  bool reopen_ = false;
  uint64_t lost_ = 0;
};

struct Reporter {
  Config cfg;
  std::shared_ptr<RecordSink> sink;
  std::shared_ptr<spdlog::logger> logger;          // over a sink we own; never registered with spdlog
  std::unordered_map<std::string, uint64_t> seen;  // dedupe key -> occurrences
  std::map<std::string, uint64_t> by_rule;
  std::map<std::string, uint64_t> not_checkable;  // reason -> launches
  bool summary_written = false;                   // the summary went out (before an abort): not again at exit
};

// Serialises reporting and dedupe; held across fork by the atfork handlers. Timed: the exit summary never waits
// for ever on a thread that is stuck (or on itself, from a signal handler that calls exit()).
std::timed_mutex g_mu;
thread_local bool t_reporting __attribute__((tls_model("initial-exec"))) = false;
std::atomic<Reporter*> g_rep{nullptr};  // published once when opened; never freed (used at exit)

struct Locked {
  Locked() : held(!t_reporting && g_mu.try_lock_for(std::chrono::seconds(2))) { t_reporting = true; }
  ~Locked() {
    t_reporting = false;
    if (held) g_mu.unlock();
  }
  bool held;
};

ProcessContext context(const Reporter& rep) {
  ProcessContext c;
  c.pid = static_cast<long>(getpid());
  c.tid = static_cast<long>(syscall(SYS_gettid));
  c.rank = rep.cfg.rank;
  const auto now = std::chrono::system_clock::now().time_since_epoch();
  c.time = format_time_utc(std::chrono::duration_cast<std::chrono::milliseconds>(now).count());
  return c;
}

// Caller holds g_mu.
void emit_locked(Reporter& rep, const std::string& line) { rep.logger->info(line); }

Summary summary_of(const Reporter& rep) {
  const Counts c = counts_total();
  Summary s;
  s.launches_seen = c.launches_seen;
  s.launches_checked = c.launches_checked;
  s.tensor_maps_decoded = c.maps_decoded;
  s.violations_by_rule = rep.by_rule;
  s.not_checkable = rep.not_checkable;
  s.log_records_lost = rep.sink->lost();
  s.version = TMAGUARD_VERSION;
  s.revision = TMAGUARD_REVISION;
  return s;
}

// The summary says how many records the log refused, itself included: when the log refuses it too, it goes to
// stderr rendered again with the count that includes it.
void emit_summary_locked(Reporter& rep) {
  Summary s = summary_of(rep);
  if (rep.sink->put(render_summary(s, context(rep), rep.cfg.format) + "\n", false) || rep.sink->is_stderr()) return;
  s.log_records_lost = rep.sink->lost();
  const std::string line = render_summary(s, context(rep), rep.cfg.format) + "\n";
  write_whole(2, line.data(), line.size());
}

}  // namespace

bool reporter_open(const Config& cfg, std::string* error) {
  auto rep = std::make_unique<Reporter>();
  rep->cfg = cfg;
  int fd = 2;
  if (!cfg.log_path.empty()) {
    std::string why;
    fd = open_log(expand_log_path(cfg.log_path, static_cast<long>(getpid())), &why);
    if (fd < 0) {
      *error = "cannot open TMAGUARD_LOG='" + cfg.log_path + "': " + why;
      return false;
    }
  }
  try {
    rep->sink = std::make_shared<RecordSink>(fd, cfg.log_path);
    rep->logger = std::make_shared<spdlog::logger>("tmaguard", rep->sink);
    rep->logger->set_pattern("%v");
    rep->logger->set_error_handler([](const std::string&) {});
  } catch (const std::exception& e) {
    if (fd > 2) ::close(fd);
    *error = std::string("cannot set up the log: ") + e.what();
    return false;
  }
  g_rep.store(rep.release(), std::memory_order_release);  // no lock: a fork in the middle must not inherit one
  return true;
}

void report_summary_at_exit() {
  Reporter* rep = g_rep.load(std::memory_order_acquire);
  if (!rep || !armed_already()) return;
  Locked lock;
  if (rep->summary_written) return;
  rep->summary_written = true;
  emit_summary_locked(*rep);
}

void report_notice(const std::string& key, const char* event, const std::string& message) {
  Reporter* rep = g_rep.load(std::memory_order_acquire);
  if (!rep) return;
  Locked lock;
  if (rep->seen[key]++ > 0) return;
  emit_locked(*rep, render_notice(event, message, context(*rep), rep->cfg.format));
}

void report_not_checkable(const std::string& reason, const std::string& message) {
  Reporter* rep = g_rep.load(std::memory_order_acquire);
  if (!rep) return;
  Locked lock;
  if (rep->not_checkable[reason]++ > 0) return;
  emit_locked(*rep, render_notice("not-checkable", message, context(*rep), rep->cfg.format));
}

void report_census(const CensusRecord& record) {
  Reporter* rep = g_rep.load(std::memory_order_acquire);
  if (!rep) return;
  Locked lock;
  emit_locked(*rep, render_census(record, context(*rep), rep->cfg.format));
}

void report_inspect(const std::string& key, const InspectRecord& record) {
  Reporter* rep = g_rep.load(std::memory_order_acquire);
  if (!rep) return;
  Locked lock;
  if (rep->seen[key]++ > 0) return;
  emit_locked(*rep, render_inspect(record, context(*rep), rep->cfg.format));
}

Verdict report_findings(std::vector<Finding>& findings) {
  Reporter* rep = g_rep.load(std::memory_order_acquire);
  if (!rep) return Verdict::kRun;
  const Mode m = mode();
  bool reject = false, abort_now = false;
  {
    Locked lock;
    for (Finding& f : findings) {
      const bool error = f.severity == Severity::kError;
      // A rule's action override applies to its errors, except in inspect mode, which never blocks.
      const std::string action = !error ? "none" : (f.action.empty() || m == Mode::kInspect) ? to_string(m) : f.action;
      abort_now |= action == "abort";
      reject |= action == "reject";
      if (error) ++rep->by_rule[f.rule];
      const std::string key =
          f.rule + '\x1f' + f.kernel + '\x1f' + std::to_string(f.param_index) + '\x1f' + std::to_string(f.param_offset);
      if (rep->seen[key]++ > 0) continue;
      emit_locked(*rep, render_finding(f, context(*rep), action, rep->cfg.format));
    }
    if (abort_now) {
      emit_locked(*rep, render_notice("abort", "aborting the process before the kernel runs (abort mode)",
                                      context(*rep), rep->cfg.format));
      rep->summary_written = true;
      emit_summary_locked(*rep);
    }
  }
  // Outside the lock: a SIGABRT handler that calls exit() runs the exit summary, which must not wait on us.
  if (abort_now) std::abort();
  return reject ? Verdict::kReject : Verdict::kRun;
}

void reporter_fork_prepare() { g_mu.lock(); }
void reporter_fork_parent() { g_mu.unlock(); }
void reporter_fork_child() {
  if (Reporter* rep = g_rep.load(std::memory_order_acquire)) {
    rep->seen.clear();
    rep->by_rule.clear();
    rep->not_checkable.clear();
    rep->summary_written = false;
    rep->sink->after_fork_child();
  }
  g_mu.unlock();
}

}  // namespace tmaguard
