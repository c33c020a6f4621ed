// The launch room's device audit without a process: what a kernel's pointer parameters lead to, read back after its
// launch by the audit's worker, and the maps found there judged.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "fakecuda.h"
#include "launch/device_audit.h"
#include "report/reporter.h"
#include "room_launch.h"
#include "room_maps.h"
#include "room_mode.h"
#include "tmaguard/tensormap.h"

namespace tmaguard {
namespace {

// Device memory of the stand-in driver, allocated as a job allocates it (the driver's own cuMemAlloc).
CUdeviceptr device_alloc(std::size_t bytes) {
  void* driver = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
  auto alloc = driver ? reinterpret_cast<CUresult (*)(CUdeviceptr*, std::size_t)>(dlsym(driver, "cuMemAlloc_v2"))
                      : nullptr;
  CUdeviceptr p = 0;
  return alloc && alloc(&p, bytes) == CUDA_SUCCESS ? p : 0;
}

uint64_t errors(const Summary& s, const std::string& rule) { return count_of(s.violations_by_rule, rule); }

// The summary once `done` holds for it, or after `seconds` (the audit's worker judges after the launch).
template <typename Done>
Summary after_worker(const Done& done, int seconds) {
  Summary now = current_summary();
  for (int i = 0; i < 100 * seconds && !done(now); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    now = current_summary();
  }
  return now;
}

struct PointerLaunch {
  CUdeviceptr buffer = 0;
  void* params[1] = {&buffer};
  LaunchView view(CUfunction f) { return launch_of(f, params); }
};

// Two maps the kernel left in its scratch buffer: one over a tensor of its own allocation, one reaching past it.
TEST(DeviceAudit, MapsLeftInDeviceMemoryAreFoundAfterTheLaunchAndJudged) {
  const std::vector<std::size_t> sizes = {8};
  const auto f = static_cast<CUfunction>(fakecuda_define_kernel("device_audit_kernel_scratch", 1, sizes.data(), 0));
  PointerLaunch l;
  l.buffer = device_alloc(4096);
  const CUdeviceptr tensor = device_alloc(8192);  // a 64 x 64 float16 tensor, as half_map() spans
  ASSERT_NE(l.buffer, 0u);
  ASSERT_NE(tensor, 0u);
  std::memset(reinterpret_cast<void*>(l.buffer), 0, 4096);  // the stand-in's device memory is the host's
  auto* scratch = reinterpret_cast<uint8_t*>(l.buffer);
  ASSERT_EQ(encode(half_map(tensor), scratch + 256), 0);
  ASSERT_EQ(encode(half_map(tensor + 4096), scratch + 1024), 0);  // its second half lies past the allocation
  const LaunchView v = l.view(f);
  const LaunchArgs args = LaunchArgs::of_params(v.kernel_params);
  const KernelInfo* k = kernel_info(f, &args);
  ASSERT_NE(k, nullptr);
  ASSERT_TRUE(audit_due(*k)) << "a kernel with a pointer parameter is audited on its first launches";
  const InMode log(Mode::kLog);  // the finding comes after the launch: abort mode would end the test binary
  const Summary before = current_summary();
  audit_after_launch(*k, v);
  const Summary after = after_worker([&](const Summary& s) {
    return s.device_maps_found >= before.device_maps_found + 2 &&
           errors(s, "tmap-beyond-allocation") > errors(before, "tmap-beyond-allocation");
  }, 10);
  EXPECT_EQ(after.device_launches_audited, before.device_launches_audited + 1);
  EXPECT_EQ(after.device_buffers_read, before.device_buffers_read + 1);
  EXPECT_EQ(after.device_maps_found, before.device_maps_found + 2);
  EXPECT_EQ(errors(after, "tmap-beyond-allocation"), errors(before, "tmap-beyond-allocation") + 1);
}

TEST(DeviceAudit, HostMemoryBehindAPointerIsNeverRead) {
  const std::vector<std::size_t> sizes = {8};
  const auto f = static_cast<CUfunction>(fakecuda_define_kernel("device_audit_kernel_host", 1, sizes.data(), 0));
  alignas(64) static uint8_t host[4096] = {};
  ASSERT_EQ(encode(half_map(0), host + 256), 0);
  PointerLaunch l;
  l.buffer = reinterpret_cast<CUdeviceptr>(host);
  const LaunchView v = l.view(f);
  const LaunchArgs args = LaunchArgs::of_params(v.kernel_params);
  const KernelInfo* k = kernel_info(f, &args);
  ASSERT_NE(k, nullptr);
  const InMode log(Mode::kLog);
  const Summary before = current_summary();
  ASSERT_TRUE(audit_due(*k));
  audit_after_launch(*k, v);
  const Summary after = after_worker([&](const Summary& s) {  // waits the whole time: nothing is to be found
    return s.device_maps_found > before.device_maps_found;
  }, 2);
  EXPECT_EQ(after.device_buffers_read, before.device_buffers_read);
  EXPECT_EQ(after.device_maps_found, before.device_maps_found);
  EXPECT_EQ(after.violations_by_rule, before.violations_by_rule);
}

}  // namespace
}  // namespace tmaguard
