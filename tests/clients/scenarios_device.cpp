// Scenarios: tensor maps a kernel builds in device memory, as Triton's tl.make_tensor_descriptor does (tensormap.replace
// into the global scratch buffer its allocator hands each launch, program p's descriptors at p * 256 + {0, 128}).
// The stand-in runs a kernel's "body" at launch (fakecuda_set_kernel_effect): it writes device-built descriptors.
//
//   device_desc   triton_device_desc_kernel(a, out, M, scratch, profile_scratch), 8 programs, 6 launches, each
//                 with a fresh scratch buffer (cuMemAlloc). a and out: 128 x 64 bf16 (16 KiB each).
//     TG_DEVICE_BAD=beyond       the store map of `out` says 256 rows: it reaches 16 KiB past out's allocation
//                  =transposed   the store map of `out` sees it column-major (dims {128, 64}, stride 256 B)
//                  =ragged       the store map of `out` is ragged (quack's ptr-shift form); =ragged_wrap: Triton's
//                                wraparound form (both healthy: what the idioms do on purpose)
//     TG_DEVICE_FREE=1           the scratch buffer is freed right after each launch (and its memory reused)
//     TG_DEVICE_SPLIT=1          out lies across two adjacent allocations of 8 KiB each (as PyTorch's expandable
//                                segments map memory piece by piece)
//     TG_DEVICE_SCRATCH=host     the scratch "pointer" is ordinary host memory; =pinned: pinned host memory
//     TG_DEVICE_CAPTURE=1        every launch goes to a stream being captured into a graph
//     TG_DEVICE_THREADS=N        N threads launch at once (each its own kernel and buffers)
//     TG_DEVICE_FREE_OUT=free    each launch gets a fresh `out`, freed right after the launch (before the worker
//                                judges what was read); =smaller: its address then goes to a smaller allocation
//     TG_DEVICE_DECLARE=1        `a` and `out` are declared as (128, 64) bf16 tensors (include/tmaguard/declare.h)
//     TG_DEVICE_BURST=N          N healthy launches, then one whose store map reaches past `out` (TG_DEVICE_BAD
//                                does not apply)
//   device_fork   the parent's kernel is audited twice (the worker runs), then the process forks: the child makes its
//                 own kernel and buffers (TG_DEVICE_BAD applies to the child only) and launches 6 times, then the
//                 parent launches 6 more
//   scalar_params a kernel whose 8-byte parameters hold an int64 scalar and NULL (nothing to read), 50 launches
// Prints "DEVICE copies=N capture_violations=M pointer_queries=Q" (the stand-in's counts) before it returns.
#include <dlfcn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "client.h"
#include "fakecuda.h"
#include "tmaguard/declare.h"
#include "tmaguard/tensormap.h"

namespace client {
namespace {

constexpr int kPrograms = 8;
constexpr uint64_t kRows = 128, kCols = 64;
std::atomic<unsigned long> g_ran{0};
std::string g_bad;  // TG_DEVICE_BAD for the kernels launched now

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

CUdeviceptr alloc(std::size_t n) {
  static auto fn = reinterpret_cast<PFN_cuMemAlloc_v3020>(dlsym(g_lib, "cuMemAlloc_v2"));
  CUdeviceptr p = 0;
  if (!fn || fn(&p, n) != CUDA_SUCCESS) die("cuMemAlloc failed");
  return p;
}
void release(CUdeviceptr p) {
  static auto fn = reinterpret_cast<PFN_cuMemFree_v3020>(dlsym(g_lib, "cuMemFree_v2"));
  if (!fn || fn(p) != CUDA_SUCCESS) die("cuMemFree failed");
}

// What tensormap.replace leaves in a zero-filled descriptor for a rows x cols bf16 matrix (row-major), or its
// transposed (column-major) view.
void device_map(uint8_t* out, uint64_t addr, uint64_t rows, uint64_t cols, bool transposed) {
  tmaguard::EncodeArgs a;
  a.dtype = CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
  a.rank = 2;
  a.address = addr;
  a.dims = transposed ? std::array<uint64_t, 5>{rows, cols} : std::array<uint64_t, 5>{cols, rows};
  a.strides = {2 * (transposed ? rows : cols)};
  a.box = {64, 64};
  a.element_strides = {1, 1};
  a.swizzle = CU_TENSOR_MAP_SWIZZLE_128B;
  if (tmaguard::encode_in_form(tmaguard::Encoder::kDeviceBuilt, a, out) != 0) die("device-built encode failed");
}

// A ragged store map of the rows x cols bf16 matrix at addr, device-built: quack's ptr-shift form (address 2^30 rows
// below the tensor, dims {cols, 2^30, 2^31 - 1}) or Triton's tools/ragged_tma.py wraparound form (the tensor's own
// address, dims {cols, 2^30, 0x7fff0000, 0x7fff0000}, last strides S and 2^35 - S bytes).
void ragged_device_map(uint8_t* out, uint64_t addr, bool wraparound) {
  const uint64_t row = 2 * kCols, billion = 1ULL << 30;
  tmaguard::EncodeArgs a;
  a.dtype = CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
  a.box = {64, 64, 1, 1};
  a.element_strides = {1, 1, 1, 1};
  a.swizzle = CU_TENSOR_MAP_SWIZZLE_128B;
  if (wraparound) {
    a.rank = 4;
    a.address = addr;
    a.dims = {kCols, billion, 0x7fff0000ULL, 0x7fff0000ULL};
    a.strides = {row, row, (1ULL << 35) - row};
  } else {
    a.rank = 3;
    a.address = addr - billion * row;
    a.dims = {kCols, billion, (1ULL << 31) - 1};
    a.strides = {row, row};
  }
  if (tmaguard::encode_in_form(tmaguard::Encoder::kDeviceBuilt, a, out) != 0) die("ragged device-built encode failed");
}

// The kernel body: every program writes its two descriptors (a's load map, out's store map) into the scratch.
void body(void** params, void*) {
  uint64_t a, out, scratch;
  std::memcpy(&a, params[0], 8);
  std::memcpy(&out, params[1], 8);
  std::memcpy(&scratch, params[3], 8);
  const std::string bad = g_bad;
  auto* s = reinterpret_cast<uint8_t*>(scratch);
  for (int p = 0; p < kPrograms; ++p) {
    device_map(s + p * 256, a, kRows, kCols, false);
    if (bad == "ragged" || bad == "ragged_wrap")
      ragged_device_map(s + p * 256 + 128, out, bad == "ragged_wrap");
    else
      device_map(s + p * 256 + 128, out, bad == "beyond" ? 2 * kRows : kRows, kCols, bad == "transposed");
  }
}

int report_and_finish() {
  static auto copies = reinterpret_cast<decltype(&fakecuda_copies)>(fake_api("fakecuda_copies"));
  static auto violations =
      reinterpret_cast<decltype(&fakecuda_capture_violations)>(fake_api("fakecuda_capture_violations"));
  static auto queries = reinterpret_cast<decltype(&fakecuda_pointer_queries)>(fake_api("fakecuda_pointer_queries"));
  std::printf("DEVICE copies=%lu capture_violations=%lu pointer_queries=%lu\n", copies(), violations(), queries());
  return finish(g_ran.load());
}

void launches(int n, const std::string& bad_env = env("TG_DEVICE_BAD"));

void launches(int n, const std::string& bad_env) {
  static auto set_effect =
      reinterpret_cast<decltype(&fakecuda_set_kernel_effect)>(fake_api("fakecuda_set_kernel_effect"));
  const CUdeviceptr a = alloc(kRows * kCols * 2);
  CUdeviceptr out;
  if (env("TG_DEVICE_SPLIT") == "1") {
    static auto reg = reinterpret_cast<decltype(&fakecuda_register_memory)>(fake_api("fakecuda_register_memory"));
    static std::atomic<uint64_t> next{0x7e0000000000ULL};
    out = next.fetch_add(1 << 20);
    reg(out, kRows * kCols);
    reg(out + kRows * kCols, kRows * kCols);
  } else {
    out = alloc(kRows * kCols * 2);
  }
  if (env("TG_DEVICE_DECLARE") == "1") {
    const int64_t shape[] = {kRows, kCols}, strides[] = {kCols, 1};
    if (tmaguard_declare("a", reinterpret_cast<const void*>(a), 2, shape, strides, 2) != 0 ||
        tmaguard_declare("out", reinterpret_cast<const void*>(out), 2, shape, strides, 2) != 0)
      die("tmaguard_declare refused a or out");
  }
  const int32_t m = kRows;
  const uint64_t none = 0;
  const std::string where = env("TG_DEVICE_SCRATCH");
  std::vector<uint8_t> host_scratch(kPrograms * 256);
  auto bytes = [](const void* v, std::size_t size) {
    const auto* b = static_cast<const uint8_t*>(v);
    return std::vector<uint8_t>(b, b + size);
  };
  Kernel k = make_kernel_raw("triton_device_desc_kernel",
                             {bytes(&a, 8), bytes(&out, 8), bytes(&m, 4), bytes(&none, 8), bytes(&none, 8)});
  set_effect(k.handle, body, nullptr);
  g_bad = bad_env;
  for (int i = 0; i < n; ++i) {
    uint64_t scratch;
    if (where == "host") {
      scratch = reinterpret_cast<uint64_t>(host_scratch.data());
    } else if (where == "pinned") {
      static auto reg =
          reinterpret_cast<decltype(&fakecuda_register_host_memory)>(fake_api("fakecuda_register_host_memory"));
      static bool registered = false;
      if (!registered) reg(reinterpret_cast<uint64_t>(host_scratch.data()), host_scratch.size());
      registered = true;
      scratch = reinterpret_cast<uint64_t>(host_scratch.data());
    } else {
      scratch = alloc(kPrograms * 256);
    }
    k.values[3] = bytes(&scratch, 8);
    const std::string free_out = env("TG_DEVICE_FREE_OUT");
    if (!free_out.empty()) {  // a fresh `out` for this launch, freed right after it
      out = alloc(kRows * kCols * 2);
      k.values[1] = bytes(&out, 8);
    }
    launch(k);
    if (!free_out.empty()) {
      release(out);
      if (free_out == "smaller") alloc(kRows * kCols);  // the freed address, handed to a smaller allocation
    }
    if (where.empty() && env("TG_DEVICE_FREE") == "1") {
      release(scratch);
      // The freed block is reused at once and overwritten: what tmaguard judges must be what the kernel wrote.
      const CUdeviceptr again = alloc(kPrograms * 256);
      std::memset(reinterpret_cast<void*>(again), 0x5a, kPrograms * 256);
    }
  }
  g_ran += ran(k);
}

int device_desc() {
  if (env("TG_DEVICE_CAPTURE") == "1") {
    auto begin = reinterpret_cast<PFN_cuStreamBeginCapture_v10010>(dlsym(g_lib, "cuStreamBeginCapture_v2"));
    g_stream = reinterpret_cast<CUstream>(0x7700);
    if (!begin || begin(g_stream, CU_STREAM_CAPTURE_MODE_GLOBAL) != CUDA_SUCCESS) die("capture failed");
  }
  if (const int burst = std::atoi(env("TG_DEVICE_BURST").c_str()); burst > 0) {
    launches(burst, "");
    launches(1, "beyond");
    return report_and_finish();
  }
  const int threads = std::atoi(env("TG_DEVICE_THREADS").c_str());
  if (threads > 1) {
    std::vector<std::thread> ts;
    for (int t = 0; t < threads; ++t) ts.emplace_back([] { launches(6); });
    for (auto& t : ts) t.join();
  } else {
    launches(6);
  }
  return report_and_finish();
}

int device_fork() {
  launches(2, "");
  const pid_t pid = fork();
  if (pid == 0) {
    launches(6);
    std::printf("CHILD ran=%lu\n", g_ran.load());
    std::fflush(stdout);
    std::exit(0);  // exit, not _Exit: the child's summary runs at exit
  }
  int status = 0;
  waitpid(pid, &status, 0);
  launches(6, "");
  std::printf("CHILD_STATUS exited=%d code=%d\n", WIFEXITED(status), WEXITSTATUS(status));
  return finish(g_ran.load());
}

int scalar_params() {
  const int64_t n = 123456789;
  const uint64_t null = 0;
  const int32_t m = 7;
  std::vector<uint8_t> a(8), b(8), c(4);
  std::memcpy(a.data(), &n, 8);
  std::memcpy(b.data(), &null, 8);
  std::memcpy(c.data(), &m, 4);
  const Kernel k = make_kernel_raw("scalar_kernel", {a, b, c});
  for (int i = 0; i < 50; ++i) launch(k);
  g_ran += ran(k);
  return report_and_finish();
}

}  // namespace

const std::vector<Scenario>& device_scenarios() {
  static const std::vector<Scenario> s = {
      {"device_desc", device_desc}, {"device_fork", device_fork}, {"scalar_params", scalar_params}};
  return s;
}

}  // namespace client
