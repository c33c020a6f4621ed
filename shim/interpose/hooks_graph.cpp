// tmaguard shim: CUDA graph kernel nodes added or updated explicitly (cuGraphAddKernelNode, cuGraph[Exec]KernelNode-
// SetParams, cuGraphAddNode, cuGraph[Exec]NodeSetParams and their versions) are checked like launches: a replay
// never calls a launch API, so the node's parameters are the last chance. Launches during stream capture go
// through the launch wrappers already. A rejected node is not added (or not updated): the call returns
// CUDA_ERROR_INVALID_VALUE without reaching the driver.
#include "launch/graph_node.h"
#include "runtime/intercept.h"
#include "launch/launch_check.h"

namespace tmaguard {
namespace {

template <typename P>
Verdict node_verdict(const Intercepted& call, const P* p) {
  const NodeLaunch n = node_launch(p);
  if (!n.is_kernel || !n.launch.f) return Verdict::kRun;  // nothing to launch, or the driver refuses it itself
  return check_launch(call, n.launch);
}

}  // namespace
}  // namespace tmaguard

using tmaguard::node_verdict;
using tmaguard::refused;
using tmaguard::Verdict;

#define TG_GRAPH_CHECKED(name, verdict, params, ...)                                \
  {                                                                                 \
    TG_ENTER(name);                                                                 \
    if (const Verdict v = verdict(call, params); v != Verdict::kRun) return refused(v); \
    return real(__VA_ARGS__);                                                       \
  }

// clang-format off
CUresult TG_WRAPPER(cuGraphAddKernelNode)(CUgraphNode* node, CUgraph g, const CUgraphNode* deps, size_t n,
                                          const CUDA_KERNEL_NODE_PARAMS_v1* p)
    TG_GRAPH_CHECKED(cuGraphAddKernelNode, node_verdict, p, node, g, deps, n, p)
CUresult TG_WRAPPER(cuGraphAddKernelNode_v2)(CUgraphNode* node, CUgraph g, const CUgraphNode* deps, size_t n,
                                             const CUDA_KERNEL_NODE_PARAMS_v2* p)
    TG_GRAPH_CHECKED(cuGraphAddKernelNode_v2, node_verdict, p, node, g, deps, n, p)
CUresult TG_WRAPPER(cuGraphKernelNodeSetParams)(CUgraphNode node, const CUDA_KERNEL_NODE_PARAMS_v1* p)
    TG_GRAPH_CHECKED(cuGraphKernelNodeSetParams, node_verdict, p, node, p)
CUresult TG_WRAPPER(cuGraphKernelNodeSetParams_v2)(CUgraphNode node, const CUDA_KERNEL_NODE_PARAMS_v2* p)
    TG_GRAPH_CHECKED(cuGraphKernelNodeSetParams_v2, node_verdict, p, node, p)
CUresult TG_WRAPPER(cuGraphExecKernelNodeSetParams)(CUgraphExec e, CUgraphNode node,
                                                    const CUDA_KERNEL_NODE_PARAMS_v1* p)
    TG_GRAPH_CHECKED(cuGraphExecKernelNodeSetParams, node_verdict, p, e, node, p)
CUresult TG_WRAPPER(cuGraphExecKernelNodeSetParams_v2)(CUgraphExec e, CUgraphNode node,
                                                       const CUDA_KERNEL_NODE_PARAMS_v2* p)
    TG_GRAPH_CHECKED(cuGraphExecKernelNodeSetParams_v2, node_verdict, p, e, node, p)
CUresult TG_WRAPPER(cuGraphAddNode)(CUgraphNode* node, CUgraph g, const CUgraphNode* deps, size_t n,
                                    CUgraphNodeParams* p)
    TG_GRAPH_CHECKED(cuGraphAddNode, node_verdict, p, node, g, deps, n, p)
CUresult TG_WRAPPER(cuGraphAddNode_v2)(CUgraphNode* node, CUgraph g, const CUgraphNode* deps,
                                       const CUgraphEdgeData* edges, size_t n, CUgraphNodeParams* p)
    TG_GRAPH_CHECKED(cuGraphAddNode_v2, node_verdict, p, node, g, deps, edges, n, p)
CUresult TG_WRAPPER(cuGraphNodeSetParams)(CUgraphNode node, CUgraphNodeParams* p)
    TG_GRAPH_CHECKED(cuGraphNodeSetParams, node_verdict, p, node, p)
CUresult TG_WRAPPER(cuGraphExecNodeSetParams)(CUgraphExec e, CUgraphNode node, CUgraphNodeParams* p)
    TG_GRAPH_CHECKED(cuGraphExecNodeSetParams, node_verdict, p, e, node, p)
    // clang-format on
