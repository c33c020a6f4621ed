// tmaguard shim: the launch check shared by the launch wrappers and the CUDA graph kernel-node wrappers.
#pragma once

#include <cuda.h>

namespace tmaguard {

struct Geometry {
  unsigned gx, gy, gz, bx, by, bz;
};

//! Runs the checks for a launch (or a kernel node about to be added/updated). True: it must not happen (reject
//! mode); abort mode never returns after an error.
bool check_launch(CUfunction f, const Geometry& geom, void** kernel_params, void** extra);

}  // namespace tmaguard
