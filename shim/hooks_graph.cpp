// tmaguard shim: CUDA graph kernel nodes added or updated explicitly (cuGraphAddKernelNode, cuGraph[Exec]KernelNode-
// SetParams, cuGraphAddNode, cuGraph[Exec]NodeSetParams and their versions) are checked like launches: a replay
// never calls a launch API, so the node's parameters are the last chance. Launches during stream capture go
// through the launch wrappers already. A rejected node is not added (or not updated): the call returns
// CUDA_ERROR_INVALID_VALUE without reaching the driver.
#include "driver.h"
#include "hooks_launch.h"

namespace tmaguard {
namespace {

// v1 has no `kern` member; v2/v3 launch `kern` when `func` is NULL.
template <typename P>
CUfunction node_function(const P* p) {
  if constexpr (sizeof(P) > sizeof(CUDA_KERNEL_NODE_PARAMS_v1)) {
    if (!p->func && p->kern) return reinterpret_cast<CUfunction>(p->kern);
  }
  return p->func;
}

template <typename P>
bool reject_node(const P* p) {
  if (!p) return false;
  return check_launch(node_function(p), Geometry{p->gridDimX, p->gridDimY, p->gridDimZ, p->blockDimX, p->blockDimY,
                                                 p->blockDimZ},
                      p->kernelParams, p->extra);
}

bool reject_generic(const CUgraphNodeParams* p) {
  return p && p->type == CU_GRAPH_NODE_TYPE_KERNEL && reject_node(&p->kernel);
}

}  // namespace
}  // namespace tmaguard

using tmaguard::reject_generic;
using tmaguard::reject_node;

#define TG_GRAPH_CHECKED(name, reject, params, ...)  \
  {                                                  \
    auto real = TG_REAL(name);                       \
    if (!real) return CUDA_ERROR_NOT_INITIALIZED;    \
    if (reject(params)) return CUDA_ERROR_INVALID_VALUE; \
    return real(__VA_ARGS__);                        \
  }

CUresult TG_WRAPPER(cuGraphAddKernelNode)(CUgraphNode* node, CUgraph g, const CUgraphNode* deps, size_t n,
                                          const CUDA_KERNEL_NODE_PARAMS_v1* p)
    TG_GRAPH_CHECKED(cuGraphAddKernelNode, reject_node, p, node, g, deps, n, p)
CUresult TG_WRAPPER(cuGraphAddKernelNode_v2)(CUgraphNode* node, CUgraph g, const CUgraphNode* deps, size_t n,
                                             const CUDA_KERNEL_NODE_PARAMS_v2* p)
    TG_GRAPH_CHECKED(cuGraphAddKernelNode_v2, reject_node, p, node, g, deps, n, p)
CUresult TG_WRAPPER(cuGraphKernelNodeSetParams)(CUgraphNode node, const CUDA_KERNEL_NODE_PARAMS_v1* p)
    TG_GRAPH_CHECKED(cuGraphKernelNodeSetParams, reject_node, p, node, p)
CUresult TG_WRAPPER(cuGraphKernelNodeSetParams_v2)(CUgraphNode node, const CUDA_KERNEL_NODE_PARAMS_v2* p)
    TG_GRAPH_CHECKED(cuGraphKernelNodeSetParams_v2, reject_node, p, node, p)
CUresult TG_WRAPPER(cuGraphExecKernelNodeSetParams)(CUgraphExec e, CUgraphNode node, const CUDA_KERNEL_NODE_PARAMS_v1* p)
    TG_GRAPH_CHECKED(cuGraphExecKernelNodeSetParams, reject_node, p, e, node, p)
CUresult TG_WRAPPER(cuGraphExecKernelNodeSetParams_v2)(CUgraphExec e, CUgraphNode node,
                                                       const CUDA_KERNEL_NODE_PARAMS_v2* p)
    TG_GRAPH_CHECKED(cuGraphExecKernelNodeSetParams_v2, reject_node, p, e, node, p)
CUresult TG_WRAPPER(cuGraphAddNode)(CUgraphNode* node, CUgraph g, const CUgraphNode* deps, size_t n,
                                    CUgraphNodeParams* p)
    TG_GRAPH_CHECKED(cuGraphAddNode, reject_generic, p, node, g, deps, n, p)
CUresult TG_WRAPPER(cuGraphAddNode_v2)(CUgraphNode* node, CUgraph g, const CUgraphNode* deps,
                                       const CUgraphEdgeData* edges, size_t n, CUgraphNodeParams* p)
    TG_GRAPH_CHECKED(cuGraphAddNode_v2, reject_generic, p, node, g, deps, edges, n, p)
CUresult TG_WRAPPER(cuGraphNodeSetParams)(CUgraphNode node, CUgraphNodeParams* p)
    TG_GRAPH_CHECKED(cuGraphNodeSetParams, reject_generic, p, node, p)
CUresult TG_WRAPPER(cuGraphExecNodeSetParams)(CUgraphExec e, CUgraphNode node, CUgraphNodeParams* p)
    TG_GRAPH_CHECKED(cuGraphExecNodeSetParams, reject_generic, p, e, node, p)
