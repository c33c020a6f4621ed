// Test client library (client.h): driver access paths, tensor maps, kernels and every launch form.
#include "client.h"

#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "fakecuda.h"
#include "tmaguard/tensormap.h"

#ifdef TG_CLIENT_LINKED
#define DIRECT(name, pfn) extern "C" std::remove_pointer_t<pfn> direct_##name __asm__(#name);
DIRECT(cuInit, PFN_cuInit_v2000)
DIRECT(cuLaunchKernel, PFN_cuLaunchKernel_v4000)
DIRECT(cuLaunchKernel_ptsz, PFN_cuLaunchKernel_v7000_ptsz)
DIRECT(cuLaunchKernelEx, PFN_cuLaunchKernelEx_v11060)
DIRECT(cuLaunchKernelEx_ptsz, PFN_cuLaunchKernelEx_v11060_ptsz)
DIRECT(cuLaunchCooperativeKernel, PFN_cuLaunchCooperativeKernel_v9000)
DIRECT(cuLaunchCooperativeKernel_ptsz, PFN_cuLaunchCooperativeKernel_v9000_ptsz)
DIRECT(cuTensorMapEncodeTiled, PFN_cuTensorMapEncodeTiled_v12000)
#endif

namespace client {

Options g_opt;
CUstream g_stream = nullptr;
void* g_lib = nullptr;
std::atomic<int> g_ok{0}, g_failed{0};

void die(const char* what) {
  std::fprintf(stderr, "tg_client: %s\n", what);
  std::exit(2);
}

namespace {

void* direct_symbol(const std::string& name) {
#ifdef TG_CLIENT_LINKED
#define D(x) \
  if (name == #x) return reinterpret_cast<void*>(&direct_##x);
  D(cuInit)
  D(cuLaunchKernel) D(cuLaunchKernel_ptsz) D(cuLaunchKernelEx) D(cuLaunchKernelEx_ptsz) D(cuLaunchCooperativeKernel)
      D(cuLaunchCooperativeKernel_ptsz) D(cuTensorMapEncodeTiled)
#undef D
#endif
          (void) name;
  die("path 'direct' needs tg_client_linked");
}

// CUDA graph kernel-node entries: ENTRY -> (name asked for, version, the ABI that version gives).
struct GraphEntry {
  const char* entry;
  const char* base;
  int version;
  const char* exact;  // the exported name of that ABI (what dlsym asks for, and what the stand-in counts)
};
const GraphEntry kGraph[] = {
    {"graph_add_v1", "cuGraphAddKernelNode", 10000, "cuGraphAddKernelNode"},
    {"graph_add", "cuGraphAddKernelNode", 12000, "cuGraphAddKernelNode_v2"},
    {"graph_set_v1", "cuGraphKernelNodeSetParams", 10000, "cuGraphKernelNodeSetParams"},
    {"graph_set", "cuGraphKernelNodeSetParams", 12000, "cuGraphKernelNodeSetParams_v2"},
    {"graph_exec_set_v1", "cuGraphExecKernelNodeSetParams", 10010, "cuGraphExecKernelNodeSetParams"},
    {"graph_exec_set", "cuGraphExecKernelNodeSetParams", 12000, "cuGraphExecKernelNodeSetParams_v2"},
    {"graph_add_node", "cuGraphAddNode", 12020, "cuGraphAddNode"},
    {"graph_add_node_v2", "cuGraphAddNode", 12030, "cuGraphAddNode_v2"},
    {"graph_node_set", "cuGraphNodeSetParams", 12020, "cuGraphNodeSetParams"},
    {"graph_exec_node_set", "cuGraphExecNodeSetParams", 12020, "cuGraphExecNodeSetParams"},
};
const GraphEntry* graph_entry() {
  for (const GraphEntry& g : kGraph)
    if (g_opt.entry == g.entry) return &g;
  return nullptr;
}

CUresult graph_node(const GraphEntry& g, CUfunction f, void** kp, void** ex) {
  void* fn = g_opt.path == "dlsym" ? dlsym(g_lib, g.exact) : resolve(g.base, false, g.version);
  if (!fn) die("cannot resolve the graph entry point");
  CUDA_KERNEL_NODE_PARAMS_v2 p2{};
  if (g_opt.cukernel && std::getenv("TG_NODE_KERN"))
    p2.kern = reinterpret_cast<CUkernel>(f);  // func NULL: `kern` runs
  else
    p2.func = f;
  p2.gridDimX = 2;
  p2.gridDimY = p2.gridDimZ = 1;
  p2.blockDimX = 128;
  p2.blockDimY = p2.blockDimZ = 1;
  p2.kernelParams = kp;
  p2.extra = ex;
  CUDA_KERNEL_NODE_PARAMS_v1 p1{};
  std::memcpy(&p1, &p2, sizeof p1);  // v1 is v2's prefix
  CUgraphNodeParams gp{};
  gp.type = CU_GRAPH_NODE_TYPE_KERNEL;
  std::memcpy(&gp.kernel, &p2, sizeof p2);
  CUgraphNode node = nullptr;
  auto* graph = reinterpret_cast<CUgraph>(0x2000);
  auto* exec = reinterpret_cast<CUgraphExec>(0x3000);
  const std::string e = g.exact;
  if (e == "cuGraphAddKernelNode")
    return reinterpret_cast<PFN_cuGraphAddKernelNode_v10000>(fn)(&node, graph, nullptr, 0, &p1);
  if (e == "cuGraphAddKernelNode_v2")
    return reinterpret_cast<PFN_cuGraphAddKernelNode_v12000>(fn)(&node, graph, nullptr, 0, &p2);
  if (e == "cuGraphKernelNodeSetParams") return reinterpret_cast<PFN_cuGraphKernelNodeSetParams_v10000>(fn)(node, &p1);
  if (e == "cuGraphKernelNodeSetParams_v2")
    return reinterpret_cast<PFN_cuGraphKernelNodeSetParams_v12000>(fn)(node, &p2);
  if (e == "cuGraphExecKernelNodeSetParams")
    return reinterpret_cast<PFN_cuGraphExecKernelNodeSetParams_v10010>(fn)(exec, node, &p1);
  if (e == "cuGraphExecKernelNodeSetParams_v2")
    return reinterpret_cast<PFN_cuGraphExecKernelNodeSetParams_v12000>(fn)(exec, node, &p2);
  if (e == "cuGraphAddNode") return reinterpret_cast<PFN_cuGraphAddNode_v12020>(fn)(&node, graph, nullptr, 0, &gp);
  if (e == "cuGraphAddNode_v2")
    return reinterpret_cast<PFN_cuGraphAddNode_v12030>(fn)(&node, graph, nullptr, nullptr, 0, &gp);
  if (e == "cuGraphNodeSetParams") return reinterpret_cast<PFN_cuGraphNodeSetParams_v12020>(fn)(node, &gp);
  return reinterpret_cast<PFN_cuGraphExecNodeSetParams_v12020>(fn)(exec, node, &gp);
}

bool entry_is_ptsz() {
  const std::string& e = g_opt.entry;
  return e.size() > 5 && e.compare(e.size() - 5, 5, "_ptsz") == 0;
}

}  // namespace

void* resolve(const std::string& base, bool ptsz, int version) {
  if (g_opt.path == "direct") return direct_symbol(ptsz ? base + "_ptsz" : base);
  if (g_opt.path == "dlsym") return dlsym(g_lib, (ptsz ? base + "_ptsz" : base).c_str());
  auto v2 = reinterpret_cast<PFN_cuGetProcAddress_v12000>(dlsym(g_lib, "cuGetProcAddress_v2"));
  if (!v2) die("no cuGetProcAddress_v2");
  const cuuint64_t flags = ptsz ? CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM : 0;
  void* fn = nullptr;
  if (g_opt.path == "getproc") {
    if (v2(base.c_str(), &fn, version, flags, nullptr) != CUDA_SUCCESS) die("cuGetProcAddress_v2 failed");
  } else if (g_opt.path == "getproc_self") {
    void* self = nullptr;
    CUdriverProcAddressQueryResult st;
    if (v2("cuGetProcAddress", &self, 12000, 0, &st) != CUDA_SUCCESS || !self) die("self-lookup failed");
    if (reinterpret_cast<PFN_cuGetProcAddress_v12000>(self)(base.c_str(), &fn, version, flags, &st) != CUDA_SUCCESS)
      die("lookup through the self-looked-up cuGetProcAddress failed");
  } else if (g_opt.path == "getproc_legacy") {
    void* self = nullptr;
    if (v2("cuGetProcAddress", &self, 11030, 0, nullptr) != CUDA_SUCCESS || !self) die("legacy self-lookup failed");
    if (reinterpret_cast<PFN_cuGetProcAddress_v11030>(self)(base.c_str(), &fn, version, flags) != CUDA_SUCCESS)
      die("lookup through the 4-argument cuGetProcAddress failed");
  } else {
    die("unknown path");
  }
  return fn;
}

void* fake_api(const char* name) {
  void* f = dlsym(g_lib, name);
  if (!f) die("not the stand-in driver (a fakecuda_* test function is missing)");
  return f;
}

Tensor bshd(uint64_t addr, uint64_t b, uint64_t s, uint64_t h, uint64_t d, bool mn) {
  if (!mn) return {addr, {d, s, h, b}, {2 * h * d, 2 * d, 2 * s * h * d}};
  return {addr, {s, d, h, b}, {2 * s, 2 * s * d, 2 * s * h * d}};
}

CUtensorMap encode_map(const Tensor& t, const MapShape& shape) {
  const auto rank = static_cast<cuuint32_t>(t.dims.size());
  std::vector<cuuint32_t> box(rank, 1), es(rank, 1);
  for (std::size_t i = 0; i < rank && i < shape.box.size(); ++i) box[i] = shape.box[i];
  CUtensorMap m;
  if (g_opt.inline_maps) {  // as CuTe DSL does: fill the 128 bytes in the host program, no driver call
    tmaguard::EncodeArgs a;
    a.dtype = shape.dtype;
    a.rank = rank;
    a.address = t.addr;
    for (std::size_t i = 0; i < rank; ++i) {
      a.dims[i] = t.dims[i];
      a.box[i] = box[i];
      a.element_strides[i] = 1;
      if (i + 1 < rank) a.strides[i] = t.strides[i];
    }
    a.swizzle = shape.swizzle;
    a.l2_promotion = 2;
    const auto form = g_opt.cute_maps ? tmaguard::Encoder::kCuteDsl : tmaguard::Encoder::kDriver;
    if (tmaguard::encode_in_form(form, a, reinterpret_cast<uint8_t*>(&m)) != 0) die("inline encode failed");
    return m;
  }
  static auto enc =
      reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(resolve("cuTensorMapEncodeTiled", false, 12000));
  if (!enc) die("cannot resolve cuTensorMapEncodeTiled");
  const CUresult rc = enc(&m, static_cast<CUtensorMapDataType>(shape.dtype), rank, reinterpret_cast<void*>(t.addr),
                          t.dims.data(), t.strides.data(), box.data(), es.data(), CU_TENSOR_MAP_INTERLEAVE_NONE,
                          static_cast<CUtensorMapSwizzle>(shape.swizzle), CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
                          CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (rc != CUDA_SUCCESS) die("cuTensorMapEncodeTiled failed");
  return m;
}

CUtensorMap null_address_map() {
  tmaguard::EncodeArgs a;
  a.dtype = CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
  a.rank = 2;
  a.address = 0;
  a.dims = {128, 64};
  a.strides = {256};
  a.box = {64, 32};
  a.element_strides = {1, 1};
  a.swizzle = CU_TENSOR_MAP_SWIZZLE_128B;
  CUtensorMap m;
  if (tmaguard::encode(a, reinterpret_cast<uint8_t*>(&m)) != 0) die("inline encode failed");
  return m;
}

Kernel make_kernel_raw(const std::string& name, const std::vector<std::vector<uint8_t>>& values,
                       const std::vector<std::size_t>& aligns) {
  Kernel k;
  k.values = values;
  for (const auto& v : values) k.sizes.push_back(v.size());
  static auto define = reinterpret_cast<decltype(&fakecuda_define_kernel)>(fake_api("fakecuda_define_kernel"));
  static auto define_aligned =
      reinterpret_cast<decltype(&fakecuda_define_kernel_aligned)>(fake_api("fakecuda_define_kernel_aligned"));
  const int n = static_cast<int>(k.sizes.size());
  k.handle = aligns.empty() ? define(name.c_str(), n, k.sizes.data(), g_opt.cukernel ? 1 : 0)
                            : define_aligned(name.c_str(), n, k.sizes.data(), aligns.data(), g_opt.cukernel ? 1 : 0);
  return k;
}

std::vector<uint8_t> param_bytes(const void* p, std::size_t n) {
  return {static_cast<const uint8_t*>(p), static_cast<const uint8_t*>(p) + n};
}

std::vector<uint8_t> tensor_param(uint64_t ptr, int words) {
  std::vector<uint8_t> v = param_bytes(&ptr, 8);
  for (int i = 0; i < words; ++i) {
    const int32_t w = 128 + i;
    const auto b = param_bytes(&w, 4);
    v.insert(v.end(), b.begin(), b.end());
  }
  return v;
}

Kernel make_kernel(const std::string& name, const std::vector<CUtensorMap>& maps) {
  std::vector<std::vector<uint8_t>> values;
  auto add = [&](const void* p, std::size_t n) {
    values.emplace_back(static_cast<const uint8_t*>(p), static_cast<const uint8_t*>(p) + n);
  };
  const int32_t seqlen = 256;
  const float scale = 0.125f;
  add(&seqlen, 4);
  for (std::size_t i = 0; i < maps.size(); ++i) {
    add(&maps[i], sizeof(CUtensorMap));
    if (i == 2) add(&scale, 4);
  }
  const int64_t tail = 7;
  add(&tail, 8);
  return make_kernel_raw(name, values);
}

CUresult launch(const Kernel& k) {
  std::vector<void*> params;
  std::vector<uint8_t> buffer;
  for (const auto& v : k.values) params.push_back(const_cast<uint8_t*>(v.data()));
  std::size_t size = 0;
  void* extra[5] = {CU_LAUNCH_PARAM_BUFFER_POINTER, nullptr, CU_LAUNCH_PARAM_BUFFER_SIZE, &size, CU_LAUNCH_PARAM_END};
  if (g_opt.extra) {  // the packed-buffer form, laid out as the driver reports the offsets
    auto info = reinterpret_cast<PFN_cuFuncGetParamInfo_v12040>(
        dlsym(g_lib, g_opt.cukernel ? "cuKernelGetParamInfo" : "cuFuncGetParamInfo"));
    for (std::size_t i = 0; i < k.values.size(); ++i) {
      std::size_t off = 0, sz = 0;
      if (info(static_cast<CUfunction>(k.handle), i, &off, &sz) != CUDA_SUCCESS) die("param info failed");
      if (buffer.size() < off + sz) buffer.resize(off + sz);
      std::memcpy(buffer.data() + off, k.values[i].data(), sz);
    }
    size = buffer.size();
    extra[1] = buffer.data();
  }
  void** kp = g_opt.extra ? nullptr : params.data();
  void** ex = g_opt.extra ? extra : nullptr;
  auto f = static_cast<CUfunction>(k.handle);
  const bool ptsz = entry_is_ptsz();
  const std::string& e = g_opt.entry;
  CUresult rc;
  if (const GraphEntry* g = graph_entry()) {
    rc = graph_node(*g, f, kp, ex);
  } else if (e.rfind("launch", 0) == 0) {
    auto fn = reinterpret_cast<PFN_cuLaunchKernel_v4000>(resolve("cuLaunchKernel", ptsz, ptsz ? 7000 : 4000));
    rc = fn(f, 1, 1, 1, 128, 1, 1, 0, g_stream, kp, ex);
  } else if (e.rfind("ex", 0) == 0) {
    auto fn = reinterpret_cast<PFN_cuLaunchKernelEx_v11060>(resolve("cuLaunchKernelEx", ptsz, 11060));
    CUlaunchAttribute attr{};
    attr.id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
    attr.value.clusterDim.x = 2;
    attr.value.clusterDim.y = attr.value.clusterDim.z = 1;
    CUlaunchConfig cfg{};
    cfg.gridDimX = 2;
    cfg.gridDimY = cfg.gridDimZ = 1;
    cfg.blockDimX = 128;
    cfg.blockDimY = cfg.blockDimZ = 1;
    cfg.attrs = &attr;
    cfg.numAttrs = 1;
    cfg.hStream = g_stream;
    rc = fn(&cfg, f, kp, ex);
  } else if (e.rfind("coop", 0) == 0) {
    if (g_opt.extra) die("cooperative launches have no extra form");
    auto fn = reinterpret_cast<PFN_cuLaunchCooperativeKernel_v9000>(resolve("cuLaunchCooperativeKernel", ptsz, 9000));
    rc = fn(f, 1, 1, 1, 128, 1, 1, 0, g_stream, kp);
  } else {
    die("unknown entry");
  }
  (rc == CUDA_SUCCESS ? g_ok : g_failed)++;
  return rc;
}

bool graph_entry_chosen() { return graph_entry() != nullptr; }

unsigned long via() {
  static auto count = reinterpret_cast<decltype(&fakecuda_launches_via)>(fake_api("fakecuda_launches_via"));
  if (const GraphEntry* g = graph_entry()) return count(g->exact);
  const std::string& e = g_opt.entry;
  std::string name = e.rfind("launch", 0) == 0 ? "cuLaunchKernel"
                     : e.rfind("ex", 0) == 0   ? "cuLaunchKernelEx"
                                               : "cuLaunchCooperativeKernel";
  if (entry_is_ptsz()) name += "_ptsz";
  return count(name.c_str());
}

unsigned long ran(const Kernel& k) {
  static auto count = reinterpret_cast<decltype(&fakecuda_launches)>(fake_api("fakecuda_launches"));
  return count(k.handle);
}

int finish(unsigned long total_ran) {
  std::printf("RESULT ok=%d failed=%d ran=%lu via=%lu\n", g_ok.load(), g_failed.load(), total_ran, via());
  return g_failed ? 3 : 0;
}

const char* const kFa4Name =
    "kernel_cutlass_kernel_flash_attncuteflash_bwd_sm100FlashAttentionBackwardSm100_object_at__0x7f_0";

Kernel fa4_kernel(bool two_cta, bool dk_bad, bool dv_bad, bool postprocess) {
  const uint64_t b = 2, s = 256, h = 4, d = 128, base = 0x7f0000000000ULL, step = 0x1000000ULL;
  const CUtensorMap q = encode_map(bshd(base, b, s, h, d)), k = encode_map(bshd(base + step, b, s, h, d)),
                    v = encode_map(bshd(base + 2 * step, b, s, h, d)),
                    dout = encode_map(bshd(base + 3 * step, b, s, h, d));
  const CUtensorMap dv = encode_map(bshd(base + 4 * step, b, s, h, d, dv_bad));
  const CUtensorMap dk = encode_map(bshd(base + 5 * step, b, s, h, d, dk_bad));
  std::vector<CUtensorMap> maps;
  if (two_cta)
    maps = {q, q, k, k, v, dout, dout};
  else
    maps = {q, k, v, dout};
  if (!postprocess) {
    maps.push_back(dv);
    maps.push_back(dk);
  }
  return make_kernel(kFa4Name, maps);
}

}  // namespace client
