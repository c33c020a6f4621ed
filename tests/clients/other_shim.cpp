// Another CUDA interposer, as monitoring or sharing shims are: it exports cuInit and cuLaunchKernel and reaches the
// next definition with dlsym(RTLD_NEXT, ...) on every call. Preloaded with tmaguard in either order, both must work:
// no recursion, no hang, and the guard still catches a bad launch. It reports its own call counts at exit.
#include <dlfcn.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>

#include "driver/cuda_names.h"

namespace {
std::atomic<unsigned long> g_init_calls{0}, g_launch_calls{0};

struct Report {
  ~Report() {
    char line[128];
    const int n = std::snprintf(line, sizeof line, "OTHER_SHIM cuInit=%lu cuLaunchKernel=%lu\n", g_init_calls.load(),
                                g_launch_calls.load());
    if (n > 0) (void)!write(2, line, static_cast<size_t>(n));
  }
} g_report;
}  // namespace

extern "C" __attribute__((visibility("default"))) CUresult cuInit(unsigned int flags) {
  ++g_init_calls;
  auto next = reinterpret_cast<PFN_cuInit_v2000>(dlsym(RTLD_NEXT, "cuInit"));
  return next ? next(flags) : CUDA_ERROR_NOT_INITIALIZED;
}

extern "C" __attribute__((visibility("default"))) CUresult cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy,
                                                                          unsigned gz, unsigned bx, unsigned by,
                                                                          unsigned bz, unsigned smem, CUstream s,
                                                                          void** params, void** extra) {
  ++g_launch_calls;
  auto next = reinterpret_cast<PFN_cuLaunchKernel_v4000>(dlsym(RTLD_NEXT, "cuLaunchKernel"));
  return next ? next(f, gx, gy, gz, bx, by, bz, smem, s, params, extra) : CUDA_ERROR_NOT_INITIALIZED;
}
