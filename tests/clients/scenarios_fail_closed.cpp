// Scenarios for the ways tmaguard could stop guarding, or disturb the job, in silence (fail closed).
//
//   encode_template       CUTLASS's grouped-GEMM template maps encoded by the driver (every dim 1, a stride of 0,
//                         a box larger than the dims), as torch._grouped_mm does: no encode warning
//   stderr_reused         the job closes descriptor 2 and opens its own data file, which gets descriptor 2
//                         (TG_DATA_FILE), then launches a transposed dK (log mode) and writes its data; with
//                         TG_STDERR_FIRST=cloexec|late (tg_client.cpp) the file took descriptor 2 before the first CUDA
//                         call: opened with O_CLOEXEC as Python opens files, or without it 1.2 s into the run
//   alloc_failure         a transposed dK launched with memory, 64 times while every allocation tmaguard makes fails
//                         (fail_alloc.cpp, preloaded), again with memory, then a healthy launch (ALLOC ...)
//   launch_from_signal_handler  a SIGALRM handler launches a transposed dK every 100 us while the main thread encodes
//                         in a loop (HANDLER calls=N ran=M)
//   fork_behind_stalled_log  a thread reports 400 findings into a log FIFO whose reader stalls (the log thread is held
//                         in a write); 0.3 s later the main thread forks 5 times (each child's transposed dK rejected)
//                         and prints how long the slowest fork() took
//   log_blocked           a thread fills a log nobody drains (200 distinct findings); 0.5 s later another thread
//                         reports one of its own and prints how long its launch took (LATE_DONE ms=N)
//   fork_while_launching  four threads launch without pause while the main thread forks 20 times; each child
//                         launches a transposed dK (reject mode) and exits 0 only when it was rejected
#include <dlfcn.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

#include "client.h"
#include "tmaguard/tensormap.h"

namespace client {
namespace {

int encode_template() {
  auto enc = reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(resolve("cuTensorMapEncodeTiled", false, 12000));
  const cuuint64_t dims[2] = {1, 1}, strides[1] = {0};
  const cuuint32_t box[2] = {64, 128}, es[2] = {1, 1};
  CUtensorMap m;
  const CUresult rc = enc(&m, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, reinterpret_cast<void*>(0x7f0000000000ULL), dims,
                          strides, box, es, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                          CU_TENSOR_MAP_L2_PROMOTION_L2_128B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  std::printf("ENCODE rc=%d\n", static_cast<int>(rc));
  return finish(0);
}

int stderr_reused() {
  const char* path = std::getenv("TG_DATA_FILE");
  if (!path) die("TG_DATA_FILE is not set");
  int fd = 2;
  if (!std::getenv("TG_STDERR_FIRST")) {  // else main() replaced descriptor 2 before the first CUDA call
    ::close(2);
    fd = ::open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd != 2) die("the data file did not get descriptor 2");
  }
  const Kernel bad = fa4_kernel(false, true, false, false);
  launch(bad);
  const char data[] = "job data\n";
  if (::write(fd, data, sizeof data - 1) != static_cast<ssize_t>(sizeof data - 1)) die("write");
  return finish(ran(bad));
}

int log_blocked() {
  std::vector<Kernel> bad;
  for (int i = 0; i < 200; ++i) bad.push_back(make_kernel("blocked_kernel_" + std::to_string(i), {null_address_map()}));
  const Kernel late = make_kernel("late_kernel", {null_address_map()});
  std::thread filler([&] {
    for (const Kernel& k : bad) launch(k);
  });
  const timespec half{0, 500 * 1000 * 1000};
  nanosleep(&half, nullptr);
  const auto before = std::chrono::steady_clock::now();
  std::thread reporter([&] { launch(late); });
  reporter.join();
  const auto ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - before).count();
  std::printf("LATE_DONE ms=%lld\n", static_cast<long long>(ms));
  std::fflush(stdout);
  filler.join();
  return finish(ran(late));
}

int fork_while_launching() {
  const Kernel good = fa4_kernel(false, false, false, false);
  std::atomic<bool> stop{false};
  std::vector<std::thread> ts;
  for (int t = 0; t < 4; ++t)
    ts.emplace_back([&] {
      while (!stop.load()) launch(good);
    });
  int children_ok = 0;
  for (int i = 0; i < 20; ++i) {
    const pid_t pid = fork();
    if (pid == 0) {
      const Kernel bad = fa4_kernel(false, true, false, false);
      const CUresult rc = launch(bad);
      _exit(rc == CUDA_ERROR_INVALID_VALUE && ran(bad) == 0 ? 0 : 1);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    children_ok += WIFEXITED(status) && WEXITSTATUS(status) == 0;
  }
  stop = true;
  for (auto& t : ts) t.join();
  std::printf("CHILDREN ok=%d of 20\n", children_ok);
  g_ok = 0;  // the threads' launch count is not the point: the children's is
  return finish(children_ok);
}

int fork_behind_stalled_log() {
  std::vector<Kernel> bad;
  for (int i = 0; i < 400; ++i) bad.push_back(make_kernel("stalled_kernel_" + std::to_string(i), {null_address_map()}));
  std::thread filler([&] {
    for (const Kernel& k : bad) launch(k);
  });
  const timespec pause{0, 300 * 1000 * 1000};
  nanosleep(&pause, nullptr);  // the log thread is now inside a write the FIFO's reader does not take
  long long slowest = 0;
  int children_ok = 0;
  for (int i = 0; i < 5; ++i) {
    const auto before = std::chrono::steady_clock::now();
    const pid_t pid = fork();
    if (pid == 0) {
      const Kernel child_bad = fa4_kernel(false, true, false, false);
      const CUresult rc = launch(child_bad);
      _exit(rc == CUDA_ERROR_INVALID_VALUE && ran(child_bad) == 0 ? 0 : 1);
    }
    const auto ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - before).count();
    slowest = std::max<long long>(slowest, ms);
    int status = 0;
    waitpid(pid, &status, 0);
    children_ok += WIFEXITED(status) && WEXITSTATUS(status) == 0;
  }
  std::printf("FORKS slowest_ms=%lld children_ok=%d of 5\n", slowest, children_ok);
  std::fflush(stdout);
  filler.join();
  g_ok = 0;
  g_failed = 0;
  return finish(static_cast<unsigned long>(children_ok));
}

// Allocation failure during checks (fail_alloc.cpp preloaded after tmaguard): a transposed dK launched once with
// memory, 64 times while every allocation tmaguard makes fails, then again with memory, then a healthy launch.
int alloc_failure() {
  auto fail = reinterpret_cast<int (*)(int)>(dlsym(RTLD_DEFAULT, "tg_fail_tmaguard_allocations"));
  if (!fail) die("fail_alloc.so is not preloaded");
  const Kernel bad = fa4_kernel(false, true, false, false), good = fa4_kernel(false, false, false, false);
  const CUresult before = launch(bad);
  int out_of_memory = 0;
  if (fail(1) != 0) die("cannot find libtmaguard.so");
  for (int i = 0; i < 64; ++i) out_of_memory += launch(bad) == CUDA_ERROR_OUT_OF_MEMORY;
  fail(0);
  const CUresult after = launch(bad);
  const CUresult healthy = launch(good);
  std::printf("ALLOC before=%d during_oom=%d of 64 after=%d healthy=%d\n", static_cast<int>(before), out_of_memory,
              static_cast<int>(after), static_cast<int>(healthy));
  g_ok = 0;
  g_failed = 0;
  return finish(ran(bad));
}

// A signal handler that launches: SIGALRM every 100 us, the handler launches a transposed dK through the resolved
// cuLaunchKernel (no allocation in the handler) while the main thread encodes in a loop (inside tmaguard's encode
// wrapper most of the time) for 400 ms, longer until a handler launch interrupted it. Reject mode: a handler launch
// that interrupted a tmaguard call runs unchecked and must be counted; every other one is rejected.
namespace nested {
PFN_cuLaunchKernel_v4000 g_launch = nullptr;
CUfunction g_f = nullptr;
void** g_params = nullptr;
volatile sig_atomic_t g_calls = 0, g_ran_ok = 0;
void on_alarm(int) {
  const CUresult rc = g_launch(g_f, 1, 1, 1, 128, 1, 1, 0, nullptr, g_params, nullptr);
  g_calls = g_calls + 1;
  if (rc == CUDA_SUCCESS) g_ran_ok = g_ran_ok + 1;
}
}  // namespace nested

int launch_from_signal_handler() {
  const Kernel bad = fa4_kernel(false, true, false, false);
  std::vector<void*> params;
  for (const auto& v : bad.values) params.push_back(const_cast<uint8_t*>(v.data()));
  nested::g_params = params.data();
  nested::g_f = static_cast<CUfunction>(bad.handle);
  nested::g_launch = reinterpret_cast<PFN_cuLaunchKernel_v4000>(resolve("cuLaunchKernel", false, 4000));
  auto enc = reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(resolve("cuTensorMapEncodeTiled", false, 12000));
  launch(bad);  // known to tmaguard (and rejected) before the handler runs
  struct sigaction sa {};
  sa.sa_handler = nested::on_alarm;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  sigaction(SIGALRM, &sa, nullptr);
  itimerval every{{0, 100}, {0, 100}};
  setitimer(ITIMER_REAL, &every, nullptr);
  const cuuint64_t dims[2] = {128, 4096}, strides[1] = {256};
  const cuuint32_t box[2] = {64, 128}, es[2] = {1, 1};
  CUtensorMap m;
  // 400 ms, and on until a handler launch interrupted an encode (at most 10 s): under an emulator on a busy machine
  // the signals can land between wrapper calls for a long while, and a run without a nested launch proves nothing.
  const auto start = std::chrono::steady_clock::now();
  const auto enough = [start] {
    const auto t = std::chrono::steady_clock::now() - start;
    return t >= std::chrono::seconds(10) || (t >= std::chrono::milliseconds(400) && nested::g_ran_ok > 0);
  };
  while (!enough())
    for (int i = 0; i < 100; ++i)
      enc(&m, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, reinterpret_cast<void*>(0x7f0000000000ULL), dims, strides, box, es,
          CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
          CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  itimerval off{};
  setitimer(ITIMER_REAL, &off, nullptr);
  signal(SIGALRM, SIG_IGN);
  // One more wrapper call after the handler ran: the notice is said when the outer call ends.
  enc(&m, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, reinterpret_cast<void*>(0x7f0000000000ULL), dims, strides, box, es,
      CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
      CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  std::printf("HANDLER calls=%d ran=%d\n", static_cast<int>(nested::g_calls), static_cast<int>(nested::g_ran_ok));
  g_ok = 0;
  g_failed = 0;
  return finish(ran(bad));
}

}  // namespace

const std::vector<Scenario>& fail_closed_scenarios() {
  static const std::vector<Scenario> v = {
      {"encode_template", encode_template},
      {"stderr_reused", stderr_reused},
      {"log_blocked", log_blocked},
      {"fork_while_launching", fork_while_launching},
      {"fork_behind_stalled_log", fork_behind_stalled_log},
      {"alloc_failure", alloc_failure},
      {"launch_from_signal_handler", launch_from_signal_handler},
  };
  return v;
}

}  // namespace client
