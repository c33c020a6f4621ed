// Scenarios for the ways tmaguard could stop guarding, or disturb the job, in silence (fail closed).
//
//   encode_template       CUTLASS's grouped-GEMM template maps encoded by the driver (every dim 1, a stride of 0,
//                         a box larger than the dims), as torch._grouped_mm does: no encode warning
//   stderr_reused         the job closes descriptor 2 and opens its own data file, which gets descriptor 2
//                         (TG_DATA_FILE), then launches a transposed dK (log mode) and writes its data
//   log_blocked           a thread fills a log nobody drains (200 distinct findings); 0.5 s later another thread
//                         reports one of its own: it may wait 2 s at most, then its record is dropped and counted
//   fork_while_launching  four threads launch without pause while the main thread forks 20 times; each child
//                         launches a transposed dK (reject mode) and exits 0 only when it was rejected
#include <fcntl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

#include "client.h"
#include "tmaguard/tensormap.h"

namespace client {
namespace {

CUtensorMap null_map() {
  tmaguard::EncodeArgs a;
  a.dtype = CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
  a.rank = 2;
  a.dims = {128, 64};
  a.strides = {256};
  a.box = {64, 32};
  a.element_strides = {1, 1};
  a.swizzle = CU_TENSOR_MAP_SWIZZLE_128B;
  CUtensorMap m;
  if (tmaguard::encode(a, reinterpret_cast<uint8_t*>(&m)) != 0) die("inline encode failed");
  return m;
}

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
  ::close(2);
  const int fd = ::open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd != 2) die("the data file did not get descriptor 2");
  const Kernel bad = fa4_kernel(false, true, false, false);
  launch(bad);
  const char data[] = "job data\n";
  if (::write(fd, data, sizeof data - 1) != static_cast<ssize_t>(sizeof data - 1)) die("write");
  return finish(ran(bad));
}

int log_blocked() {
  std::vector<Kernel> bad;
  for (int i = 0; i < 200; ++i) bad.push_back(make_kernel("blocked_kernel_" + std::to_string(i), {null_map()}));
  const Kernel late = make_kernel("late_kernel", {null_map()});
  std::thread filler([&] {
    for (const Kernel& k : bad) launch(k);
  });
  const timespec half{0, 500 * 1000 * 1000};
  nanosleep(&half, nullptr);
  std::thread reporter([&] { launch(late); });
  reporter.join();
  std::printf("LATE_DONE\n");
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

}  // namespace

const std::vector<Scenario>& fail_closed_scenarios() {
  static const std::vector<Scenario> v = {
      {"encode_template", encode_template},
      {"stderr_reused", stderr_reused},
      {"log_blocked", log_blocked},
      {"fork_while_launching", fork_while_launching},
  };
  return v;
}

}  // namespace client
