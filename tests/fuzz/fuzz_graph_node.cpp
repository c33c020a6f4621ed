// libFuzzer target: CUDA graph kernel-node parameters of every version (v1, v2, the generic CUgraphNodeParams) with
// arbitrary contents, through what the graph wrappers extract (shim/graph_node.h) and then the launch collection.
#include <cstring>
#include <vector>

#include "launch/graph_node.h"
#include "input.h"
#include "tmaguard/launch.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzInput in{data, size};
  uint8_t arg[256] = {};
  void* params[2] = {arg, in.take<uint8_t>() % 2 ? arg + 128 : nullptr};
  std::size_t declared = sizeof arg;
  void* extra[5] = {reinterpret_cast<void*>(1), arg, reinterpret_cast<void*>(2), &declared, nullptr};
  const std::string fill = in.take_string(sizeof arg);
  std::memcpy(arg, fill.data(), fill.size());
  // Node structs: arbitrary bytes, then every pointer member set to memory this target owns (or NULL).
  CUDA_KERNEL_NODE_PARAMS_v1 v1;
  CUDA_KERNEL_NODE_PARAMS_v2 v2;
  CUgraphNodeParams gp;
  for (auto* o : {static_cast<void*>(&v1), static_cast<void*>(&v2), static_cast<void*>(&gp)}) {
    const std::size_t n = o == &v1 ? sizeof v1 : o == &v2 ? sizeof v2 : sizeof gp;
    const std::string b = in.take_string(n);
    std::memset(o, 0, n);
    std::memcpy(o, b.data(), b.size());
  }
  const uint8_t which = in.take<uint8_t>();
  auto fix = [&](auto& p) {
    p.kernelParams = which & 1 ? params : nullptr;
    p.extra = which & 2 ? extra : nullptr;
  };
  fix(v1);
  fix(v2);
  fix(gp.kernel);
  tmaguard::ParamLayout layout{{0, 128}, {128, 128}};
  for (const tmaguard::NodeLaunch n :
       {tmaguard::node_launch(&v1), tmaguard::node_launch(&v2), tmaguard::node_launch(&gp),
        tmaguard::node_launch(static_cast<const CUDA_KERNEL_NODE_PARAMS_v1*>(nullptr))}) {
    if (!n.is_kernel) continue;
    const tmaguard::LaunchArgs args = n.launch.args();
    for (const tmaguard::MapPlace s : {tmaguard::MapPlace{0, 0}, tmaguard::MapPlace{1, 0}})
      if (const uint8_t* b = args.map(layout, s)) (void)tmaguard::decode(b);
  }
  return 0;
}
