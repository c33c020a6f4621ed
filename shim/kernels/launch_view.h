// tmaguard shim: one launch as a value. Every stage of a launch (the memo, the full check, the driver call, the device
// audit) and every kind of launch (cuLaunchKernel, cuLaunchKernelEx, cuLaunchCooperativeKernel, a graph kernel node)
// sees the same LaunchView; its parameters are read only through it (param(), args()).
#pragma once

#include "driver/cuda_names.h"
#include "tmaguard/launch.h"

namespace tmaguard {

struct Geometry {
  unsigned gx = 0, gy = 0, gz = 0, bx = 0, by = 0, bz = 0;
};

struct LaunchView {
  CUfunction f = nullptr;  // the launch handle (a CUfunction, or a CUkernel passed as one)
  Geometry geom;
  CUstream stream = nullptr;
  bool per_thread = false;  // made through a _ptsz entry: stream 0 is the per-thread default stream
  void** kernel_params = nullptr;
  void** extra = nullptr;

  //! `offset` bytes into parameter `i` (kernelParams only, unchecked): for places already known to lie inside their
  //! parameter. The memo's reads, on the fast path.
  __attribute__((always_inline)) const uint8_t* param(std::size_t i, std::size_t offset = 0) const {
    return LaunchArgs::of_params(kernel_params).param(i, offset);
  }
  //! The parameters in whichever form the caller gave them, for checked reads (LaunchArgs::bytes). Parses `extra`
  //! on each call: a stage that reads several places asks once.
  LaunchArgs args() const { return kernel_params ? LaunchArgs::of_params(kernel_params) : parse_extra(extra); }
};

}  // namespace tmaguard
