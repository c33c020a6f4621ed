// tmaguard shim: what a fleet sees of a guarded process besides its findings: the start record (proof that the guard
// is there, written when the library loads), the metrics file (Prometheus text format for node_exporter's textfile
// collector, replaced atomically), the periodic summary, and the summary a SIGTERM, SIGINT or SIGHUP writes before the
// job's own handler or the default action runs.
//
//   load          write_start_record_at_load(): the settings, one write to the log file (stderr: deferred to arming)
//   first CUDA    fleet_arm(): the start record if not written yet, the first metrics, the summary thread, handlers
//   every N s     the summary thread: a summary ("final":false) and the metrics, when anything changed
//   signal        the handler (async-signal-safe): wakes the summary thread through a pipe, waits for it (at most
//                 3 s), then chains: the job's handler, or the default action (the summary is then "final":true)
//   exit          report_summary_at_exit(): the final summary, the last metrics (tmaguard_active 0)
#include <dlfcn.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <string>

#include "thread/thread_words.h"
#include "thread/reentry.h"
#include "process/context.h"
#include "process/settings.h"
#include "process/stderr_io.h"
#include "report/reporter.h"
#include "tmaguard/records.h"
#include "tmaguard_version.h"

namespace tmaguard {
namespace {

std::atomic<bool> g_start_written{false};

std::string preload_path() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&host_name), &info) && info.dli_fname) return info.dli_fname;
  return "";
}

StartRecord start_record(const Config& cfg) {
  StartRecord r;
  r.version = TMAGUARD_VERSION;
  r.revision = TMAGUARD_REVISION;
  r.mode = to_string(cfg.mode);
  r.log_format = cfg.format == LogFormat::kJson ? "json" : "text";
  r.preload = preload_path();
  char exe[4096];
  const ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n > 0) r.program.assign(exe, static_cast<std::size_t>(n));
  r.rules_files = cfg.rules_files;
  r.builtin_rules = cfg.builtin_rules;
  for (const Config::Source& s : cfg.sources) r.settings.push_back({s.name, {s.value, s.from}});
  return r;
}

// ---- metrics

std::atomic<bool> g_metrics_failed_said{false};
std::atomic<uint64_t> g_metrics_failures{0};

bool write_file_atomically(const std::string& dir, const std::string& name, const std::string& text,
                           std::string* why) {
  make_parent_directories(dir + "/");
  const std::string final_path = dir + "/" + name, tmp = dir + "/." + name + ".tmp";  // not *.prom: never collected
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (fd < 0) return *why = std::strerror(errno), false;
  const bool wrote = write_whole(fd, text.data(), text.size());
  const int e = errno;
  ::close(fd);
  if (!wrote || std::rename(tmp.c_str(), final_path.c_str()) != 0) {
    *why = std::strerror(wrote ? errno : e);
    ::unlink(tmp.c_str());
    return false;
  }
  return true;
}

// ---- the summary thread and the signals it serves

constexpr int kSignals[] = {SIGTERM, SIGINT, SIGHUP};
constexpr const char* kSignalNames[] = {"SIGTERM", "SIGINT", "SIGHUP"};
struct sigaction g_previous[3];        // the job's actions when tmaguard armed
std::atomic<bool> g_installed[3];      // tmaguard's handler is installed for kSignals[i]
int g_wake[2] = {-1, -1}, g_ack[2] = {-1, -1};
std::atomic<long> g_thread_pid{0};     // the process whose summary thread reads g_wake (not a forked child)
Config* g_fleet_cfg = nullptr;         // the settings in force (never freed)

int signal_index(int sig) {
  for (int i = 0; i < 3; ++i)
    if (kSignals[i] == sig) return i;
  return -1;
}

// Async-signal-safe: write(2), poll(2), read(2), sigaction(2), raise(3) and the job's own handler only.
void on_signal(int sig, siginfo_t* info, void* context) {
  const int saved = errno;
  const int i = signal_index(sig);
  if (i < 0) return;
  const struct sigaction& prev = g_previous[i];
  const bool ends = !(prev.sa_flags & SA_SIGINFO) && prev.sa_handler == SIG_DFL;  // the default action ends the job
  if (g_thread_pid.load(std::memory_order_relaxed) == static_cast<long>(getpid())) {
    const char msg = static_cast<char>(i | (ends ? 0x80 : 0));
    if (::write(g_wake[1], &msg, 1) == 1) {
      pollfd p{g_ack[0], POLLIN, 0};
      if (::poll(&p, 1, 3000) > 0) {
        char c;
        (void)!::read(g_ack[0], &c, 1);
      }
    }
  }
  errno = saved;
  if (ends) {
    sigaction(sig, &prev, nullptr);  // the default action, delivered as this handler returns (sig is blocked now)
    raise(sig);
  } else if (prev.sa_flags & SA_SIGINFO) {
    if (prev.sa_sigaction) prev.sa_sigaction(sig, info, context);
  } else if (prev.sa_handler != SIG_IGN && prev.sa_handler) {
    prev.sa_handler(sig);
  }
}

void metrics_now(bool active) { write_metrics(active); }

// Changes since the last periodic summary: launches seen, checked, findings.
uint64_t fingerprint() {
  const Summary s = current_summary();
  uint64_t f = s.launches_seen * 1000003 + s.launches_checked * 101 + s.tensor_maps_decoded;
  for (const auto* m : {&s.violations_by_rule, &s.warnings_by_rule, &s.suppressed_by_rule, &s.not_checkable})
    for (const auto& [k, n] : *m) f = f * 31 + n;
  return f;
}

// One turn of the summary thread: a wake-up from a signal handler (`msg`), or the interval's end.
void summary_turn(bool woken, char msg, uint64_t& last) {
  if (woken) {
    const int i = msg & 0x7f;
    const bool ends = (msg & 0x80) != 0;
    report_summary_now(ends, i < 3 ? kSignalNames[i] : "signal");
    metrics_now(!ends);
    last = fingerprint();
    return;
  }
  if (const uint64_t now = fingerprint(); now != last) {
    last = now;
    report_summary_now(false, nullptr);
    metrics_now(true);
  }
}

void* summary_thread(void*) {
  become_tmaguard_thread("tmaguard-sum");  // its own writes never enter tmaguard's wrappers
  const uint64_t interval = g_fleet_cfg->summary_interval_s;
  uint64_t last = 0;
  for (;;) {
    pollfd p{g_wake[0], POLLIN, 0};
    const int ready = ::poll(&p, 1, interval ? static_cast<int>(interval * 1000) : -1);
    if (ready < 0 && errno == EINTR) continue;
    char msg = 0;
    const bool woken = ready > 0 && ::read(g_wake[0], &msg, 1) == 1;
    if (ready > 0 && !woken) continue;
    try {
      summary_turn(woken, msg, last);
    } catch (...) {  // no memory for a record: this turn's summary is lost, the next one says it all
    }
    if (woken) {
      const char ack = 1;
      (void)!::write(g_ack[1], &ack, 1);
    }
  }
  return nullptr;
}

void install_handlers() {
  for (int i = 0; i < 3; ++i) {
    struct sigaction prev {};
    if (sigaction(kSignals[i], nullptr, &prev) != 0) continue;
    if (!(prev.sa_flags & SA_SIGINFO) && prev.sa_handler == SIG_IGN) continue;  // ignored: nothing ends, nothing to say
    g_previous[i] = prev;
    // The job's own flags and mask: a call its handler interrupts restarts or fails with EINTR as the job chose
    // (SA_RESTART), a handler installed with SA_RESETHAND is reset by the kernel on delivery (the next signal takes
    // the default action), and SA_NODEFER leaves the signal unblocked in the handler. SA_SIGINFO is ours to add: the
    // job's handler is called as it was installed (on_signal).
    struct sigaction ours {};
    ours.sa_sigaction = on_signal;
    ours.sa_mask = prev.sa_mask;
    ours.sa_flags = prev.sa_flags | SA_SIGINFO;
    if (sigaction(kSignals[i], &ours, nullptr) == 0) g_installed[i].store(true, std::memory_order_relaxed);
  }
}

}  // namespace

void write_start_record_at_load() {
  const ConfigResult& s = settings();
  const Config& cfg = s.config;
  if (cfg.mode == Mode::kOff || !s.errors.empty() || cfg.log_path.empty() || cfg.log_path == "stderr") return;
  if (cfg.log_path.rfind("/dev/", 0) == 0 || cfg.log_path.rfind("/proc/", 0) == 0) return;  // a descriptor: at arming
  const std::string path = expand_path(cfg.log_path, path_context(cfg));
  make_parent_directories(path);
  const int fd = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY | O_NONBLOCK,
                        0644);
  if (fd < 0) return;  // said when the reporter opens it
  const std::string line = render_start(start_record(cfg), process_context(cfg), cfg.format) + "\n";
  if (write_whole(fd, line.data(), line.size())) g_start_written.store(true, std::memory_order_release);
  ::close(fd);
}

void fleet_arm(const Config& cfg) {
  g_fleet_cfg = new Config(cfg);
  try {
    if (!g_start_written.exchange(true)) report_line(render_start(start_record(cfg), report_context(), cfg.format));
    write_metrics(true);
  } catch (...) {  // no memory now: the start record is lost (the summary still comes)
  }
  if (pipe2(g_wake, O_CLOEXEC) != 0 || pipe2(g_ack, O_CLOEXEC | O_NONBLOCK) != 0) return;
  pthread_t t;
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  pthread_attr_setstacksize(&attr, 256 * 1024);
  const bool started = pthread_create(&t, &attr, summary_thread, nullptr) == 0;
  pthread_attr_destroy(&attr);
  if (!started) return;  // no thread: the exit summary alone (said nowhere: the job is not harmed)
  g_thread_pid.store(static_cast<long>(getpid()), std::memory_order_relaxed);
  install_handlers();
}

void write_metrics(bool active) {
  const Config* cfg = g_fleet_cfg;
  if (!cfg || cfg->metrics_dir.empty()) return;
  try {
    write_metrics_file(*cfg, active);
  } catch (...) {  // no memory for the text: counted as a write that failed
    g_metrics_failures.fetch_add(1, std::memory_order_relaxed);
  }
}

void write_metrics_file(const Config& config, bool active) {
  const Config* cfg = &config;
  const PathContext pc = path_context(*cfg);
  const std::string dir = expand_path(cfg->metrics_dir, pc);
  MetricLabels l;
  l.host = pc.host.substr(0, pc.host.find('.'));
  l.pid = std::to_string(pc.pid);
  l.rank = cfg->rank.empty() ? "x" : cfg->rank;
  l.job = cfg->job_id.empty() ? "x" : cfg->job_id;
  l.version = TMAGUARD_VERSION;
  l.mode = to_string(cfg->mode);
  std::string why;
  const std::string name = "tmaguard-" + (l.host.empty() ? std::string("x") : l.host) + "-" + l.pid + ".prom";
  if (write_file_atomically(dir, name, render_metrics(current_summary(), l, active), &why)) return;
  g_metrics_failures.fetch_add(1, std::memory_order_relaxed);
  if (!g_metrics_failed_said.exchange(true))
    report_notice(Notice::kMetricsNotWritten, "",
                  "cannot write the metrics file " + dir + "/" + name + ": " + why +
                      "; tmaguard keeps guarding and tries again at each summary");
}

uint64_t metrics_write_failures() { return g_metrics_failures.load(std::memory_order_relaxed); }

}  // namespace tmaguard
