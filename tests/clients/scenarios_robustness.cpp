// Scenarios of a job that treats the guard roughly: a thread rewriting a map while another launches it, a thread that
// launched once and then idles while modules come and go, the job's own signal handlers (their flags, a handler
// that exits, a signal landing while tmaguard writes a record), a rule that cannot judge a launch, and a packed
// parameter buffer declared shorter than the kernel's parameters.
#include <dlfcn.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

#include "client.h"
#include "fakecuda.h"

namespace client {
namespace {

// The index in Kernel::values of the n-th 128-byte parameter (make_kernel interleaves scalars).
std::size_t nth_map(const Kernel& k, std::size_t n) {
  for (std::size_t i = 0; i < k.values.size(); ++i)
    if (k.values[i].size() == sizeof(CUtensorMap) && n-- == 0) return i;
  die("no such map");
}

// 128 bytes written one 8-byte word at a time, so that a reader in between sees a map that is half one, half the
// other.
void write_words(uint8_t* to, const uint8_t* from) {
  for (std::size_t w = 0; w < sizeof(CUtensorMap) / 8; ++w) {
    uint64_t v;
    std::memcpy(&v, from + 8 * w, 8);
    __atomic_store_n(reinterpret_cast<uint64_t*>(to) + w, v, __ATOMIC_RELAXED);
  }
}

// One thread flips a shared dK between healthy and transposed while this one launches FA4 (TG_RACY launches, 20,000
// by default); then the writer stops with dK transposed, and the launches after it (quiet: nothing writes any
// more), from this thread and from a new one, must all be judged: in reject mode none runs.
int racing_writer() {
  Kernel k = fa4_kernel(false, false, false, false);
  const Kernel bad = fa4_kernel(false, true, false, false);
  const std::size_t dk = nth_map(k, 5);
  const std::vector<uint8_t> good_bytes = k.values[dk], bad_bytes = bad.values[dk];
  uint8_t* shared = k.values[dk].data();
  std::atomic<bool> stop{false};
  std::thread writer([&] {
    while (!stop.load(std::memory_order_relaxed)) {
      write_words(shared, bad_bytes.data());
      write_words(shared, good_bytes.data());
    }
  });
  const char* n = std::getenv("TG_RACY");
  const int racy = n ? std::atoi(n) : 20000;
  for (int i = 0; i < racy; ++i) launch(k);
  stop = true;
  writer.join();
  write_words(shared, bad_bytes.data());
  const unsigned long before = ran(k);
  for (int i = 0; i < 20; ++i) launch(k);
  const unsigned long quiet = ran(k) - before;
  std::thread fresh([&] {
    for (int i = 0; i < 10; ++i) launch(k);
  });
  fresh.join();
  std::printf("RACE racy=%d quiet_ran=%lu new_thread_ran=%lu\n", racy, quiet, ran(k) - before - quiet);
  return 0;
}

long rss_kib() {
  FILE* f = std::fopen("/proc/self/status", "r");
  char line[256];
  long kib = -1;
  while (f && std::fgets(line, sizeof line, f))
    if (std::sscanf(line, "VmRSS: %ld kB", &kib) == 1) break;
  if (f) std::fclose(f);
  return kib;
}

CUresult unload(void* module) {
  return reinterpret_cast<PFN_cuModuleUnload_v2000>(resolve("cuModuleUnload", false, 2000))(
      static_cast<CUmodule>(module));
}

// Modules loaded, launched and unloaded in turn (TG_CHURN kernels, 20,000 by default) while another thread that
// launched once sits idle (TG_IDLE=0: no such thread): prints how much the resident set grew per kernel over the
// last nine tenths (the first tenth fills what is reused after).
int churn_with_idle_thread() {
  auto new_module = reinterpret_cast<decltype(&fakecuda_new_module)>(fake_api("fakecuda_new_module"));
  const char* idle_env = std::getenv("TG_IDLE");
  const bool with_idle = !idle_env || std::strcmp(idle_env, "0") != 0;
  std::atomic<int> phase{0};
  std::thread idle;
  if (with_idle) {
    idle = std::thread([&] {
      const Kernel once = fa4_kernel(false, false, false, false);
      launch(once);
      phase = 1;
      while (phase.load() != 2) usleep(1000);
    });
    while (phase.load() != 1) usleep(1000);
  }
  const char* n = std::getenv("TG_CHURN");
  const int kernels = n ? std::atoi(n) : 20000;
  long start = 0;
  const std::vector<uint8_t> scalar(8, 0);
  for (int i = 0; i < kernels; ++i) {
    if (i == kernels / 10) start = rss_kib();
    void* module = new_module(0);
    const Kernel k = make_kernel_raw("churned_kernel", {scalar});
    launch(k);
    if (unload(module) != CUDA_SUCCESS) die("unload failed");
  }
  const long grown = rss_kib() - start;
  phase = 2;
  if (idle.joinable()) idle.join();
  std::printf("CHURN kernels=%d idle=%d bytes_per_kernel=%ld\n", kernels, with_idle ? 1 : 0,
              grown * 1024 / (kernels - kernels / 10));
  return 0;
}

// ---- signals

std::atomic<int> g_handled{0};
void count_signal(int) { g_handled.fetch_add(1); }

void say(const char* s) { (void)!write(1, s, std::strlen(s)); }

// The job's own handler for `sig`, installed before its first CUDA call with these flags (and SIGUSR1 in its mask
// when `mask_usr1`), as training scripts and Python do.
void install(int sig, void (*handler)(int), int flags, bool mask_usr1 = false) {
  struct sigaction sa {};
  sa.sa_handler = handler;
  sa.sa_flags = flags;
  sigemptyset(&sa.sa_mask);
  if (mask_usr1) sigaddset(&sa.sa_mask, SIGUSR1);
  sigaction(sig, &sa, nullptr);
}

// Launches (tmaguard arms and installs its summary handlers), then prints how `sig` is installed now.
void launch_and_show(int sig) {
  const Kernel k = fa4_kernel(false, false, false, false);
  launch(k);
  struct sigaction now {};
  sigaction(sig, nullptr, &now);
  std::printf("FLAGS restart=%d resethand=%d nodefer=%d onstack=%d usr1_masked=%d\n", !!(now.sa_flags & SA_RESTART),
              !!(now.sa_flags & SA_RESETHAND), !!(now.sa_flags & SA_NODEFER), !!(now.sa_flags & SA_ONSTACK),
              sigismember(&now.sa_mask, SIGUSR1));
  std::printf("LAUNCHED\n");
  std::fflush(stdout);
}

// A SIGINT handler installed without SA_RESTART: a read(2) it interrupts fails with EINTR, as without tmaguard.
int sigint_interrupts_read() {
  install(SIGINT, count_signal, 0, true);
  launch_and_show(SIGINT);
  int p[2];
  if (pipe(p) != 0) die("pipe");
  char c;
  const ssize_t r = read(p[0], &c, 1);  // nothing ever writes: only a signal ends it
  std::printf("READ r=%zd eintr=%d handled=%d\n", r, r < 0 && errno == EINTR, g_handled.load());
  return 0;
}

// SA_RESETHAND: the first SIGINT runs the handler, the second takes the default action (the job dies of it).
int sigint_resethand() {
  install(SIGINT, count_signal, SA_RESETHAND | SA_RESTART);
  launch_and_show(SIGINT);
  for (int i = 0; i < 300; ++i) {
    usleep(10 * 1000);
    if (g_handled.load() == 1) {
      say("FIRST HANDLED\n");
      g_handled = 2;
    }
  }
  say("SURVIVED\n");
  return 0;
}

// The System V way: SA_RESETHAND | SA_NODEFER, and a handler that re-raises the signal to end the job by it.
void reraise(int sig) {
  say("RERAISE\n");
  raise(sig);
}
int sigterm_reraises() {
  install(SIGTERM, reraise, SA_RESETHAND | SA_NODEFER);
  launch_and_show(SIGTERM);
  for (int i = 0; i < 300; ++i) usleep(10 * 1000);
  say("SURVIVED\n");
  return 0;
}

// A thread that launches a transposed dK without pause (each launch judged and counted under the reporter's lock)
// while the job waits to be stopped; TG_EXIT_HANDLER=1: the job's SIGTERM handler calls exit(5), after telling the
// busy thread to stop (exit() destroys the stand-in driver's tables under a thread still launching).
std::atomic<int> g_busy{0};  // 1: launching, 2: asked to stop, 3: stopped
thread_local bool t_busy_thread = false;
void exit_five(int) {
  if (!t_busy_thread && g_busy.exchange(2) == 1)
    for (int i = 0; i < 1000 && g_busy.load() != 3; ++i) usleep(1000);
  std::exit(5);
}
int records_while_signalled() {
  if (const char* h = std::getenv("TG_EXIT_HANDLER"); h && *h == '1') install(SIGTERM, exit_five, 0);
  const Kernel bad = fa4_kernel(false, true, false, false);
  launch(bad);
  g_busy = 1;
  std::atomic<long> busy_tid{0};
  std::thread busy([&bad, &busy_tid] {
    t_busy_thread = true;
    busy_tid = static_cast<long>(syscall(SYS_gettid));
    while (g_busy.load() == 1) launch(bad);
    g_busy = 3;
  });
  busy.detach();
  std::printf("LAUNCHED\n");
  std::fflush(stdout);
  // TG_AIM_MS=N: after N ms the job sends SIGTERM to the launching thread itself (tgkill), which spends much of its
  // time writing and counting records: the signal lands there far more often than one sent to the process.
  if (const char* aim = std::getenv("TG_AIM_MS")) {
    usleep(static_cast<useconds_t>(std::atoi(aim)) * 1000);
    while (!busy_tid.load()) usleep(100);
    syscall(SYS_tgkill, getpid(), busy_tid.load(), SIGTERM);
  }
  for (int i = 0; i < 1000; ++i) usleep(10 * 1000);
  say("SURVIVED\n");
  return 0;
}

// ---- counts

// An FA4 backward kernel with a map count no rule knows (five maps), launched twice: two warnings, no launch checked.
int unknown_map_count_twice() {
  const uint64_t b = 2, s = 256, h = 4, d = 128, base = 0x7f0000000000ULL, step = 0x1000000ULL;
  std::vector<CUtensorMap> maps;
  for (int i = 0; i < 5; ++i) maps.push_back(encode_map(bshd(base + i * step, b, s, h, d)));
  const Kernel k = make_kernel(kFa4Name, maps);
  launch(k);
  launch(k);
  return finish(ran(k));
}

// cuLaunchKernel with `extra` whose CU_LAUNCH_PARAM_BUFFER_SIZE ends before the transposed dK (the last map).
int extra_short_buffer() {
  const Kernel bad = fa4_kernel(false, true, false, false);
  auto info = reinterpret_cast<PFN_cuFuncGetParamInfo_v12040>(dlsym(g_lib, "cuFuncGetParamInfo"));
  std::vector<uint8_t> buffer;
  std::size_t dk_offset = 0;
  for (std::size_t i = 0; i < bad.values.size(); ++i) {
    std::size_t off = 0, sz = 0;
    if (info(static_cast<CUfunction>(bad.handle), i, &off, &sz) != CUDA_SUCCESS) die("param info failed");
    if (buffer.size() < off + sz) buffer.resize(off + sz);
    std::memcpy(buffer.data() + off, bad.values[i].data(), sz);
    if (i == nth_map(bad, 5)) dk_offset = off;
  }
  std::size_t size = dk_offset + 64;  // half of dK declared
  void* extra[5] = {CU_LAUNCH_PARAM_BUFFER_POINTER, buffer.data(), CU_LAUNCH_PARAM_BUFFER_SIZE, &size,
                    CU_LAUNCH_PARAM_END};
  auto launch_kernel = reinterpret_cast<PFN_cuLaunchKernel_v4000>(resolve("cuLaunchKernel", false, 4000));
  const CUresult rc = launch_kernel(static_cast<CUfunction>(bad.handle), 1, 1, 1, 1, 1, 1, 0, nullptr, nullptr, extra);
  std::printf("SHORT rc=%d\n", static_cast<int>(rc));
  return finish(ran(bad));
}

}  // namespace

const std::vector<Scenario>& robustness_scenarios() {
  static const std::vector<Scenario> v = {
      {"racing_writer", racing_writer},
      {"churn_with_idle_thread", churn_with_idle_thread},
      {"sigint_interrupts_read", sigint_interrupts_read},
      {"sigint_resethand", sigint_resethand},
      {"sigterm_reraises", sigterm_reraises},
      {"records_while_signalled", records_while_signalled},
      {"unknown_map_count_twice", unknown_map_count_twice},
      {"extra_short_buffer", extra_short_buffer},
  };
  return v;
}

}  // namespace client
