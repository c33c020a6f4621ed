// tmaguard shim: what a CUDA graph kernel node will launch (handle and arguments), from any version of its
// parameter struct. Header-only and free of calls, so the fuzzers drive it directly (tests/fuzz/fuzz_graph_node.cpp).
#pragma once

#include "driver/cuda_names.h"
#include "kernels/launch_view.h"

namespace tmaguard {

struct NodeLaunch {
  LaunchView launch;       // what a replay of the node will launch (no stream: a graph has none of its own)
  bool is_kernel = false;  // false: not a kernel node (nothing to check)
};

//! CUDA_KERNEL_NODE_PARAMS v1 has no `kern` member; v2/v3 launch `kern` when `func` is NULL.
template <typename P>
NodeLaunch node_launch(const P* p) {
  NodeLaunch n;
  if (!p) return n;
  LaunchView& v = n.launch;
  v.f = p->func;
  if constexpr (sizeof(P) > sizeof(CUDA_KERNEL_NODE_PARAMS_v1)) {
    if (!p->func && p->kern) v.f = reinterpret_cast<CUfunction>(p->kern);
  }
  v.geom = {p->gridDimX, p->gridDimY, p->gridDimZ, p->blockDimX, p->blockDimY, p->blockDimZ};
  v.kernel_params = p->kernelParams;
  v.extra = p->extra;
  n.is_kernel = true;
  return n;
}

//! The generic node form (cuGraphAddNode and friends): only kernel nodes launch anything. The type is read as the
//! integer the caller stored: a value outside CUgraphNodeType must not be loaded as that enum (undefined
//! behaviour, found by tests/fuzz/fuzz_graph_node.cpp).
inline NodeLaunch node_launch(const CUgraphNodeParams* p) {
  if (!p) return {};
  int type = 0;
  static_assert(sizeof p->type == sizeof type);
  __builtin_memcpy(&type, &p->type, sizeof type);
  if (type != CU_GRAPH_NODE_TYPE_KERNEL) return {};
  return node_launch(&p->kernel);
}

}  // namespace tmaguard
