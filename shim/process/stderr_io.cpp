// tmaguard shim: tmaguard's own lines on the job's stderr, outside the reporter (before it opens, when tmaguard
// cannot work, and the reporter's own fallback), and whole writes to a descriptor.
#include "process/stderr_io.h"

#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>

#include "process/context.h"
#include "process/settings.h"
#include "tmaguard/records.h"

namespace tmaguard {

namespace {
// Constant-initialised: nothing runs when the library is loaded.
}  // namespace

// For the duration of a write: SIGPIPE blocked for this thread, and a SIGPIPE the write itself raised consumed (one
// that was already pending is left alone), so that a descriptor whose reader is gone never kills the job.
class QuietPipe {
 public:
  QuietPipe() {
    sigemptyset(&pipe_set_);
    sigaddset(&pipe_set_, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_set_, &old_);
    sigset_t pending;
    sigpending(&pending);
    was_pending_ = sigismember(&pending, SIGPIPE);
  }
  ~QuietPipe() {
    if (failed_ && errno == EPIPE && !was_pending_) {
      const timespec zero{0, 0};
      sigtimedwait(&pipe_set_, nullptr, &zero);
    }
    pthread_sigmask(SIG_SETMASK, &old_, nullptr);
  }
  QuietPipe(const QuietPipe&) = delete;
  QuietPipe& operator=(const QuietPipe&) = delete;
  //! The write failed (with errno set): a SIGPIPE it raised is consumed.
  bool fail() {
    failed_ = true;
    return false;
  }

 private:
  sigset_t pipe_set_, old_;
  bool was_pending_ = false;
  bool failed_ = false;
};

// Writes all of [p, p + n) to fd; false when the descriptor refuses it (SIGPIPE quieted: QuietPipe).
bool write_whole(int fd, const char* p, std::size_t n) {
  QuietPipe quiet;
  while (n > 0) {
    const ssize_t w = ::write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return quiet.fail();
    p += w;
    n -= static_cast<std::size_t>(w);
  }
  return true;
}

bool write_bounded(int fd, const char* p, std::size_t n, int timeout_ms) {
  using Clock = std::chrono::steady_clock;
  const Clock::time_point deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  QuietPipe quiet;
  while (n > 0) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    pollfd pfd{fd, POLLOUT, 0};
    const int ready = left > 0 ? ::poll(&pfd, 1, static_cast<int>(left)) : 0;
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0 || (pfd.revents & (POLLERR | POLLNVAL))) return quiet.fail();
    // Writable: a pipe has a free buffer, so a write of PIPE_BUF bytes or less does not block.
    const ssize_t w = ::write(fd, p, n < PIPE_BUF ? n : PIPE_BUF);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return quiet.fail();
    p += w;
    n -= static_cast<std::size_t>(w);
  }
  return true;
}

namespace {
// The process's stderr as tmaguard first saw it (note_process_stderr): 0 not looked at yet, 1 the process's own,
// 2 closed or not the process's own (a descriptor the job opened itself that landed on 2).
std::atomic<int> g_stderr_state{0};
dev_t g_stderr_dev = 0;
ino_t g_stderr_ino = 0;
const char* g_stderr_why = "";

// When this process started, in seconds since the epoch (its task's start time in /proc/self/stat, after boot).
double process_start_epoch() {
  char buf[1024];
  const int fd = ::open("/proc/self/stat", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  const ssize_t n = ::read(fd, buf, sizeof buf - 1);
  ::close(fd);
  if (n <= 0) return 0;
  buf[n] = 0;
  const char* p = std::strrchr(buf, ')');  // the command name may hold spaces and parentheses
  if (!p) return 0;
  unsigned long long start = 0;
  // Fields after the name: state (3) ... starttime (22): 19 fields to skip.
  if (std::sscanf(p + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d %*d %*d %*d %llu", &start) !=
      1)
    return 0;
  const long hz = sysconf(_SC_CLK_TCK);
  timespec now{}, boot{};
  if (hz <= 0 || clock_gettime(CLOCK_REALTIME, &now) != 0 || clock_gettime(CLOCK_BOOTTIME, &boot) != 0) return 0;
  const double booted = static_cast<double>(now.tv_sec - boot.tv_sec) + (now.tv_nsec - boot.tv_nsec) * 1e-9;
  return booted + static_cast<double>(start) / static_cast<double>(hz);
}

// Whether descriptor 2 is, as far as can be told, not the stderr the process was started with: it carries
// close-on-exec (no descriptor inherited across exec does: Python opens every file that way), or it is a regular file
// created more than a second after the process started (a data file the job opened after closing 2; a shell creates a
// redirect's file between its fork and the exec).
const char* not_inherited() {
  const int fd_flags = fcntl(2, F_GETFD);
  if (fd_flags >= 0 && (fd_flags & FD_CLOEXEC)) return "it has close-on-exec set (a file the job opened itself)";
  struct statx stx{};
  if (statx(2, "", AT_EMPTY_PATH, STATX_TYPE | STATX_BTIME, &stx) != 0 || !(stx.stx_mask & STATX_BTIME) ||
      !S_ISREG(stx.stx_mode))
    return nullptr;
  const double born = static_cast<double>(stx.stx_btime.tv_sec) + stx.stx_btime.tv_nsec * 1e-9;
  const double started = process_start_epoch();
  if (started > 0 && born > started + 1.0) return "it is a file created after the process started (the job's own)";
  return nullptr;
}
}  // namespace

void note_process_stderr() {
  if (g_stderr_state.load(std::memory_order_acquire) != 0) return;
  struct stat st;
  static std::atomic<bool> claimed{false};
  if (claimed.exchange(true)) return;  // one thread looks; a racing one writes nothing until it has
  if (fstat(2, &st) != 0) {
    g_stderr_why = "descriptor 2 is closed";
    g_stderr_state.store(2, std::memory_order_release);
  } else if (const char* why = not_inherited()) {
    g_stderr_why = why;
    g_stderr_state.store(2, std::memory_order_release);
  } else {
    g_stderr_dev = st.st_dev;
    g_stderr_ino = st.st_ino;
    g_stderr_state.store(1, std::memory_order_release);
  }
}

const char* stderr_unusable() {
  note_process_stderr();
  return g_stderr_state.load(std::memory_order_acquire) == 1 ? nullptr : g_stderr_why;
}

namespace {
bool stderr_is_ours() {
  note_process_stderr();
  struct stat st;
  return g_stderr_state.load(std::memory_order_acquire) == 1 && fstat(2, &st) == 0 && st.st_dev == g_stderr_dev &&
         st.st_ino == g_stderr_ino;  // else closed, or descriptor 2 now names another file (the job's own)
}
}  // namespace

bool write_stderr(const std::string& text) {
  return stderr_is_ours() && write_whole(2, text.data(), text.size());
}

bool write_stderr_bounded(const std::string& text, int timeout_ms) {
  return stderr_is_ours() && write_bounded(2, text.data(), text.size(), timeout_ms);
}

void write_stderr_line(const std::string& line, Notice kind) {
  const ConfigResult& s = settings();
  if (s.config.format != LogFormat::kJson) {
    write_stderr_bounded(line + "\n", kStderrLineTimeoutMs);
    return;
  }
  // JSON mode: every line tmaguard writes is one record a log agent can parse.
  constexpr std::string_view kPrefix = "tmaguard: ";
  const std::string message = line.rfind(kPrefix, 0) == 0 ? line.substr(kPrefix.size()) : line;
  const ProcessContext c = process_context(s.config);
  write_stderr_bounded(render_notice(kind, message, c, LogFormat::kJson) + "\n", kStderrLineTimeoutMs);
}

}  // namespace tmaguard
