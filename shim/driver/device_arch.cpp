// tmaguard shim: compute capability per context (cuCtxGetCurrent, cuCtxGetDevice, cuDeviceGetAttribute), and the
// driver's version (cuDriverGetVersion, asked once: one driver serves the process).
#include "driver/device_arch.h"

#include <atomic>
#include <mutex>

#include "driver/driver.h"
#include "process/fork_locks.h"

namespace tmaguard {
namespace {

struct Known {
  CUcontext ctx = nullptr;
  Arch arch;
};
constexpr int kContexts = 16;  // contexts remembered (one per GPU a process uses, usually)
std::mutex g_mu;
Known g_known[kContexts];
int g_next = 0;

// cuDriverGetVersion's answer, asked once (0 until asked or when it fails).
int driver_version() {
  static std::atomic<int> version{-1};
  int v = version.load(std::memory_order_relaxed);
  if (v >= 0) return v;
  auto get = TG_REAL(cuDriverGetVersion);
  if (!get || get(&v) != CUDA_SUCCESS || v < 0) v = 0;
  version.store(v, std::memory_order_relaxed);
  return v;
}

Arch query() {
  auto get_dev = TG_REAL(cuCtxGetDevice);
  auto attr = TG_REAL(cuDeviceGetAttribute);
  CUdevice dev = 0;
  Arch a;
  if (!get_dev || !attr || get_dev(&dev) != CUDA_SUCCESS) return {};
  if (attr(&a.major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev) != CUDA_SUCCESS ||
      attr(&a.minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev) != CUDA_SUCCESS)
    return {};
  a.driver = driver_version();
  return a;
}

}  // namespace

Arch current_arch() {
  register_fork_lock(ForkLock::kDeviceArch, {[] { g_mu.lock(); }, [] { g_mu.unlock(); }, [] { g_mu.unlock(); }});
  auto get_ctx = TG_REAL(cuCtxGetCurrent);
  CUcontext ctx = nullptr;
  if (!get_ctx || get_ctx(&ctx) != CUDA_SUCCESS || !ctx) return {};
  {
    std::lock_guard<std::mutex> lock(g_mu);
    for (const Known& k : g_known)
      if (k.ctx == ctx) return k.arch;
  }
  const Arch a = query();
  if (!a.known()) return a;  // not cached: the next launch asks again
  std::lock_guard<std::mutex> lock(g_mu);
  g_known[g_next++ % kContexts] = {ctx, a};
  return a;
}

}  // namespace tmaguard
