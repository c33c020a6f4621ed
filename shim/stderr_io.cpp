// tmaguard shim: tmaguard's own lines on the job's stderr, outside the reporter (before it opens, when tmaguard
// cannot work, and the reporter's own fallback), and whole writes to a descriptor.
#include "stderr_io.h"

#include <pthread.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <ctime>

#include "hot.h"

namespace tmaguard {

namespace {
// Constant-initialised: nothing runs when the library is loaded.
std::atomic<bool> g_cannot_work_said{false};
}  // namespace

// Writes all of [p, p + n) to fd; false when the descriptor refuses it. SIGPIPE is blocked for this thread during
// the write, and a SIGPIPE the write itself raised is consumed (one that was already pending is left alone).
bool write_whole(int fd, const char* p, std::size_t n) {
  sigset_t pipe_set, old;
  sigemptyset(&pipe_set);
  sigaddset(&pipe_set, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe_set, &old);
  sigset_t pending;
  sigpending(&pending);
  const bool was_pending = sigismember(&pending, SIGPIPE);
  bool ok = true;
  while (n > 0) {
    const ssize_t w = ::write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      ok = false;
      break;
    }
    p += w;
    n -= static_cast<std::size_t>(w);
  }
  if (!ok && errno == EPIPE && !was_pending) {
    const timespec zero{0, 0};
    sigtimedwait(&pipe_set, nullptr, &zero);
  }
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  return ok;
}

namespace {
// The process's stderr as tmaguard first saw it (note_process_stderr): 0 not looked at yet, 1 open, 2 closed.
std::atomic<int> g_stderr_state{0};
dev_t g_stderr_dev = 0;
ino_t g_stderr_ino = 0;
}  // namespace

void note_process_stderr() {
  if (g_stderr_state.load(std::memory_order_acquire) != 0) return;
  struct stat st;
  static std::atomic<bool> claimed{false};
  if (claimed.exchange(true)) return;  // one thread looks; a racing one writes nothing until it has
  if (fstat(2, &st) == 0) {
    g_stderr_dev = st.st_dev;
    g_stderr_ino = st.st_ino;
    g_stderr_state.store(1, std::memory_order_release);
  } else {
    g_stderr_state.store(2, std::memory_order_release);
  }
}

bool write_stderr(const std::string& text) {
  note_process_stderr();
  struct stat st;
  if (g_stderr_state.load(std::memory_order_acquire) != 1 || fstat(2, &st) != 0 || st.st_dev != g_stderr_dev ||
      st.st_ino != g_stderr_ino)
    return false;  // closed, or descriptor 2 now names another file (the job's own): never written into
  return write_whole(2, text.data(), text.size());
}

void write_stderr_line(const std::string& line) { write_stderr(line + "\n"); }

bool cannot_work_said() { return g_cannot_work_said.load(); }

void report_cannot_work(const std::string& why) {
  g_hot.state.store(kDisabled, std::memory_order_release);
  if (g_cannot_work_said.exchange(true)) return;
  write_stderr_line("tmaguard: cannot work: " + why + "; the job runs on unguarded");
}

}  // namespace tmaguard
