// Scenarios for the ways a launch could escape the guard, hang, lose a record or crash the host (hardening).
#include <dlfcn.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "client.h"
#include "fakecuda.h"
#include "tmaguard/tensormap.h"

namespace client {
namespace {

std::vector<uint8_t> bytes_of(const void* p, std::size_t n) {
  return {static_cast<const uint8_t*>(p), static_cast<const uint8_t*>(p) + n};
}

// Eight threads make their very first launch at the same moment (nothing touched tmaguard before: maps are filled
// inline), each 1000 launches of a kernel with a transposed dK. Not one may run unchecked while tmaguard starts.
int startup_threads() {
  const Kernel bad = fa4_kernel(false, true, false, false);
  pthread_barrier_t go;
  pthread_barrier_init(&go, nullptr, 8);
  std::vector<std::thread> ts;
  for (int t = 0; t < 8; ++t)
    ts.emplace_back([&] {
      pthread_barrier_wait(&go);
      for (int i = 0; i < 1000; ++i) launch(bad);
    });
  for (auto& t : ts) t.join();
  return finish(ran(bad));
}

// One thread starts tmaguard (a slow rules file keeps it starting); the main thread forks meanwhile. The child
// must be guarded: its launch of a transposed dK is stopped like any other.
int fork_during_init() {
  const Kernel good = fa4_kernel(false, false, false, false);
  std::thread starter([&] { launch(good); });
  const timespec wait{0, 30 * 1000 * 1000};
  nanosleep(&wait, nullptr);
  const pid_t pid = fork();
  if (pid == 0) {
    const Kernel bad = fa4_kernel(false, true, false, false);
    launch(bad);
    std::printf("CHILD failed=%d ran_bad=%lu\n", g_failed.load(), ran(bad));
    std::fflush(stdout);
    _exit(0);
  }
  starter.join();
  int status = 0;
  waitpid(pid, &status, 0);
  return finish(ran(good));
}

// 5000 parameters: 4999 ints, and a NULL-address map as parameter 4500.
int many_params() {
  std::vector<std::vector<uint8_t>> values;
  const int32_t v = 1;
  const CUtensorMap bad = null_address_map();
  for (int i = 0; i < 5000; ++i) values.push_back(i == 4500 ? bytes_of(&bad, sizeof bad) : bytes_of(&v, 4));
  const Kernel k = make_kernel_raw("kernel_with_5000_params", values);
  launch(k);
  return finish(ran(k));
}

// A kernel of a module is launched (clean), the module is unloaded, and a new module's kernel gets the same handle:
// an (int, NULL-address map) kernel. It must be checked as itself, not with the FA4 layout of the freed one.
int unload_reuse() {
  auto new_module = reinterpret_cast<decltype(&fakecuda_new_module)>(fake_api("fakecuda_new_module"));
  void* first = new_module(g_opt.cukernel ? 1 : 0);
  const Kernel fa4 = fa4_kernel(true, false, false, false);
  for (int i = 0; i < 3; ++i) launch(fa4);
  const void* old_handle = fa4.handle;
  CUresult rc;
  if (g_opt.cukernel) {
    rc = reinterpret_cast<PFN_cuLibraryUnload_v12000>(resolve("cuLibraryUnload", false, 12000))(
        static_cast<CUlibrary>(first));
  } else {
    rc = reinterpret_cast<PFN_cuModuleUnload_v2000>(resolve("cuModuleUnload", false, 2000))(
        static_cast<CUmodule>(first));
  }
  if (rc != CUDA_SUCCESS) die("unload failed");
  new_module(g_opt.cukernel ? 1 : 0);
  const int32_t n = 1;
  const CUtensorMap bad = null_address_map();
  const Kernel reused = make_kernel_raw("plain_kernel_with_a_null_map", {bytes_of(&n, 4), bytes_of(&bad, sizeof bad)});
  std::printf("HANDLE_REUSED=%d\n", reused.handle == old_handle ? 1 : 0);
  launch(reused);
  return finish(ran(reused));
}

// Many modules loaded, launched once and unloaded (a JIT that compiles, runs and drops kernels): what tmaguard keeps
// must not grow with the cycles. Prints the heap's growth between cycle N/10 and cycle N (heap_in_use: tmaguard and the
// stand-in allocate from the same heap).
// Bytes malloc has handed out. mallinfo, not mallinfo2: the tests also build against glibc 2.31 (test-release.sh),
// which has no mallinfo2; its int fields hold up to 4 GiB when read as unsigned.
std::size_t heap_in_use() {
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
  return static_cast<unsigned>(mallinfo().uordblks);
#pragma GCC diagnostic pop
}

int unload_cycles() {
  auto new_module = reinterpret_cast<decltype(&fakecuda_new_module)>(fake_api("fakecuda_new_module"));
  auto unload = reinterpret_cast<PFN_cuModuleUnload_v2000>(resolve("cuModuleUnload", false, 2000));
  const char* n_env = std::getenv("TG_CYCLES");
  const long n = n_env ? std::atol(n_env) : 20000;
  const CUtensorMap m = encode_map(bshd(0x7f0000000000ULL, 2, 256, 4, 128));
  const int32_t v = 1;
  std::size_t at_tenth = 0;
  unsigned long ran_total = 0;
  for (long i = 0; i < n; ++i) {
    void* mod = new_module(0);
    const Kernel k = make_kernel_raw("jit_kernel_" + std::to_string(i % 7), {bytes_of(&v, 4), bytes_of(&m, sizeof m)});
    launch(k);
    ran_total += ran(k);
    if (unload(static_cast<CUmodule>(mod)) != CUDA_SUCCESS) die("unload failed");
    if (i + 1 == n / 10) at_tenth = heap_in_use();
  }
  const std::size_t at_end = heap_in_use();
  std::printf("UNLOAD cycles=%ld grew=%lld\n", n, static_cast<long long>(at_end) - static_cast<long long>(at_tenth));
  g_ok = 0;
  return finish(ran_total);
}

// The job's SIGABRT handler calls exit(): the abort and the exit summary must not wait on each other.
extern "C" void exit_on_abort(int) { std::exit(7); }
int abort_handler_exit() {
  signal(SIGABRT, exit_on_abort);
  const Kernel bad = fa4_kernel(false, true, false, false);
  launch(bad);
  return finish(ran(bad));
}

// A kernel named by TG_KERNEL_NAME (or TG_KERNEL_NAME_REPEAT times TG_KERNEL_NAME_CHAR plus TG_KERNEL_NAME_TAIL) with
// one healthy map: rule matching on unusual names.
int named_kernel() {
  std::string name;
  if (const char* n = std::getenv("TG_KERNEL_NAME")) name = n;
  if (const char* r = std::getenv("TG_KERNEL_NAME_REPEAT"))
    name = std::string(std::strtoul(r, nullptr, 10), std::getenv("TG_KERNEL_NAME_CHAR")[0]) +
           std::getenv("TG_KERNEL_NAME_TAIL");
  const CUtensorMap m = encode_map(bshd(0x7f0000000000ULL, 2, 256, 4, 128));
  const Kernel k = make_kernel(name, {m});
  launch(k);
  return finish(ran(k));
}

// Distinct kernels of nine maps each, from eight threads: in inspect mode, every one is a record of over 4 KiB.
int inspect_many_kernels() {
  std::vector<std::thread> ts;
  for (int t = 0; t < 8; ++t)
    ts.emplace_back([t] {
      for (int i = 0; i < 16; ++i) {
        // Long names, as templated C++ kernels have: with nine maps, every record is well over 4 KiB.
        const std::string name =
            std::string(1500, 'k') + "_" + std::to_string(getpid()) + "_" + std::to_string(t) + "_" + std::to_string(i);
        std::vector<CUtensorMap> maps;
        for (uint64_t m = 0; m < 9; ++m)
          maps.push_back(encode_map(bshd(0x7f0000000000ULL + m * 0x100000, 2, 256, 4, 128)));
        launch(make_kernel(name, maps));
      }
    });
  for (auto& t : ts) t.join();
  return finish(0);
}

// The `extra` form with a parameter buffer but no CU_LAUNCH_PARAM_BUFFER_SIZE. The 16-byte buffer ends where an
// inaccessible page starts: reading past what the caller declared would crash.
int extra_without_size() {
  const Kernel k = fa4_kernel(false, true, false, false);
  const long page = sysconf(_SC_PAGESIZE);
  auto* mem =
      static_cast<uint8_t*>(mmap(nullptr, 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  if (mem == MAP_FAILED || mprotect(mem + page, page, PROT_NONE) != 0) die("cannot set up the guard page");
  uint8_t* buf = mem + page - 16;
  std::memset(buf, 0, 16);
  void* extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, buf, CU_LAUNCH_PARAM_END};
  auto fn = reinterpret_cast<PFN_cuLaunchKernel_v4000>(resolve("cuLaunchKernel", false, 4000));
  const CUresult rc = fn(static_cast<CUfunction>(k.handle), 1, 1, 1, 128, 1, 1, 0, nullptr, nullptr, extra);
  (rc == CUDA_SUCCESS ? g_ok : g_failed)++;
  return finish(ran(k));
}

// A healthy map of registered memory (no warning may come of it, whatever the driver can tell about pointers).
int encode_healthy() {
  const CUtensorMap m = encode_map(bshd(0x7f0000000000ULL, 2, 256, 4, 128));
  const Kernel k = make_kernel("plain_tma_kernel", {m});
  launch(k);
  return finish(ran(k));
}

// Triton's ragged descriptors (triton.tools.ragged_tma): two leading dims of 0x7fff0000 with strides that rely on
// 64-bit wraparound, and (write-only form) a base address moved below the tensor, mod 2^64.
int encode_ragged() {
  static auto reg = reinterpret_cast<decltype(&fakecuda_register_memory)>(fake_api("fakecuda_register_memory"));
  const uint64_t rows = 1000, cols = 64, es = 2, base = 0x7e0000000000ULL, billion = 1ULL << 30,
                 max_int = 0x7fff0000ULL;
  reg(base, rows * cols * es);
  auto enc = reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(resolve("cuTensorMapEncodeTiled", false, 12000));
  // read-write: shape [max_int, max_int, 2^30, cols], strides (elements) [2^34 - cols, cols, cols, 1]
  const cuuint64_t rw_dims[4] = {cols, billion, max_int, max_int};
  const cuuint64_t rw_strides[3] = {cols * es, cols * es, ((1ULL << 34) - cols) * es};
  const cuuint32_t rw_box[4] = {64, 32, 1, 1}, es4[4] = {1, 1, 1, 1};
  // write-only: shape [max_int, 2^30, cols], strides [cols, cols, 1], base - 2^30 * cols * es (mod 2^64)
  const cuuint64_t wo_dims[3] = {cols, billion, max_int};
  const cuuint64_t wo_strides[2] = {cols * es, cols * es};
  const cuuint32_t wo_box[3] = {64, 32, 1}, es3[3] = {1, 1, 1};
  const uint64_t wo_base = base - billion * cols * es;
  CUtensorMap rw, wo;
  const CUresult a = enc(&rw, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 4, reinterpret_cast<void*>(base), rw_dims, rw_strides,
                         rw_box, es4, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                         CU_TENSOR_MAP_L2_PROMOTION_L2_128B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  const CUresult b = enc(&wo, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 3, reinterpret_cast<void*>(wo_base), wo_dims,
                         wo_strides, wo_box, es3, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                         CU_TENSOR_MAP_L2_PROMOTION_L2_128B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  // quack's ptr_shift form (FA4 SM90's varlen dK/dV): the last mode 2^31 - 1; TG_RAGGED_BASE=unallocated moves the
  // tensor under it off the registered memory.
  const char* where = std::getenv("TG_RAGGED_BASE");
  const uint64_t qbase = where && std::string(where) == "unallocated" ? base + (1ULL << 32) : base;
  const cuuint64_t q_dims[3] = {cols, billion, (1ULL << 31) - 1};
  CUtensorMap qs;
  const CUresult c = enc(&qs, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 3, reinterpret_cast<void*>(qbase - billion * cols * es),
                         q_dims, wo_strides, wo_box, es3, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                         CU_TENSOR_MAP_L2_PROMOTION_L2_128B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  std::printf("ENCODE rc=%d,%d,%d\n", static_cast<int>(a), static_cast<int>(b), static_cast<int>(c));
  const Kernel k = make_kernel("ragged_store_kernel", {rw, wo, qs});
  launch(k);
  return finish(ran(k));
}

}  // namespace

const std::vector<Scenario>& hardening_scenarios() {
  static const std::vector<Scenario> v = {
      {"startup_threads", startup_threads},
      {"fork_during_init", fork_during_init},
      {"many_params", many_params},
      {"unload_reuse", unload_reuse},
      {"unload_cycles", unload_cycles},
      {"abort_handler_exit", abort_handler_exit},
      {"named_kernel", named_kernel},
      {"inspect_many_kernels", inspect_many_kernels},
      {"extra_without_size", extra_without_size},
      {"encode_healthy", encode_healthy},
      {"encode_ragged", encode_ragged},
  };
  return v;
}

}  // namespace client
