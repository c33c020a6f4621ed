// Test client: a real process that reaches the (stand-in) driver the way real stacks do and launches FA4-shaped
// and other kernels. Built twice: tg_client (dlopen only, like Triton/cudart) and tg_client_linked (-lcuda).
//
//   tg_client PATH ENTRY SCENARIO [--cukernel] [--extra] [--inline]
//   PATH: direct (linked build) | dlsym | getproc | getproc_self | getproc_legacy
//   ENTRY: launch | launch_ptsz | ex | ex_ptsz | coop | coop_ptsz
// Prints "RESULT ok=N failed=M ran=R"; exits 0 when every launch succeeded, 3 when one returned an error.
#include <cuda.h>
#include <cudaTypedefs.h>
#include <dlfcn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

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

namespace {

std::string g_path, g_entry;
bool g_cukernel = false, g_extra = false, g_inline = false;
void* g_lib = nullptr;
std::atomic<int> g_ok{0}, g_failed{0};

[[noreturn]] void die(const char* what) {
  std::fprintf(stderr, "tg_client: %s\n", what);
  std::exit(2);
}

void* direct_symbol(const std::string& name) {
#ifdef TG_CLIENT_LINKED
#define D(x) if (name == #x) return reinterpret_cast<void*>(&direct_##x);
  D(cuInit) D(cuLaunchKernel) D(cuLaunchKernel_ptsz) D(cuLaunchKernelEx) D(cuLaunchKernelEx_ptsz)
  D(cuLaunchCooperativeKernel) D(cuLaunchCooperativeKernel_ptsz) D(cuTensorMapEncodeTiled)
#undef D
#endif
  (void)name;
  die("path 'direct' needs tg_client_linked");
}

// Resolves a driver function by the chosen path. `version` is what cudart would ask for.
void* resolve(const std::string& base, bool ptsz, int version) {
  if (g_path == "direct") return direct_symbol(ptsz ? base + "_ptsz" : base);
  if (g_path == "dlsym") return dlsym(g_lib, (ptsz ? base + "_ptsz" : base).c_str());
  auto v2 = reinterpret_cast<PFN_cuGetProcAddress_v12000>(dlsym(g_lib, "cuGetProcAddress_v2"));
  if (!v2) die("no cuGetProcAddress_v2");
  const cuuint64_t flags = ptsz ? CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM : 0;
  void* fn = nullptr;
  if (g_path == "getproc") {
    if (v2(base.c_str(), &fn, version, flags, nullptr) != CUDA_SUCCESS) die("cuGetProcAddress_v2 failed");
  } else if (g_path == "getproc_self") {
    void* self = nullptr;
    CUdriverProcAddressQueryResult st;
    if (v2("cuGetProcAddress", &self, 12000, 0, &st) != CUDA_SUCCESS || !self) die("self-lookup failed");
    if (reinterpret_cast<PFN_cuGetProcAddress_v12000>(self)(base.c_str(), &fn, version, flags, &st) != CUDA_SUCCESS)
      die("lookup through the self-looked-up cuGetProcAddress failed");
  } else if (g_path == "getproc_legacy") {
    void* self = nullptr;
    if (v2("cuGetProcAddress", &self, 11030, 0, nullptr) != CUDA_SUCCESS || !self) die("legacy self-lookup failed");
    if (reinterpret_cast<PFN_cuGetProcAddress_v11030>(self)(base.c_str(), &fn, version, flags) != CUDA_SUCCESS)
      die("lookup through the 4-argument cuGetProcAddress failed");
  } else {
    die("unknown path");
  }
  return fn;
}

struct Tensor {
  uint64_t addr;
  std::vector<uint64_t> dims, strides;
};
// torch (b, s, h, d) bf16, contiguous: dims {d, s, h, b}; "mn" = seqlen-contiguous (a transposed view).
Tensor bshd(uint64_t addr, uint64_t b, uint64_t s, uint64_t h, uint64_t d, bool mn = false) {
  if (!mn) return {addr, {d, s, h, b}, {2 * h * d, 2 * d, 2 * s * h * d}};
  return {addr, {s, d, h, b}, {2 * s, 2 * s * d, 2 * s * h * d}};
}

CUtensorMap encode_map(const Tensor& t) {
  const cuuint32_t box[4] = {64, 128, 1, 1}, es[4] = {1, 1, 1, 1};
  CUtensorMap m;
  if (g_inline) {  // as CuTe DSL does: fill the 128 bytes in the host program, no driver call
    tmaguard::EncodeArgs a;
    a.dtype = CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
    a.rank = 4;
    a.address = t.addr;
    for (int i = 0; i < 4; ++i) {
      a.dims[i] = t.dims[i];
      a.box[i] = box[i];
      a.element_strides[i] = 1;
      if (i < 3) a.strides[i] = t.strides[i];
    }
    a.swizzle = CU_TENSOR_MAP_SWIZZLE_128B;
    a.l2_promotion = 2;
    if (tmaguard::encode(a, reinterpret_cast<uint8_t*>(&m)) != 0) die("inline encode failed");
    return m;
  }
  static auto enc = reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(resolve("cuTensorMapEncodeTiled", false, 12000));
  if (!enc) die("cannot resolve cuTensorMapEncodeTiled");
  const CUresult rc = enc(&m, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 4, reinterpret_cast<void*>(t.addr), t.dims.data(),
                          t.strides.data(), box, es, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                          CU_TENSOR_MAP_L2_PROMOTION_L2_128B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (rc != CUDA_SUCCESS) die("cuTensorMapEncodeTiled failed");
  return m;
}

struct Kernel {
  void* handle;
  std::vector<std::size_t> sizes;
  std::vector<std::vector<uint8_t>> values;
};

// A kernel whose parameters interleave small scalars with tensor maps, as CuTe DSL's flattened signatures do.
Kernel make_kernel(const std::string& name, const std::vector<CUtensorMap>& maps) {
  Kernel k;
  auto add = [&](const void* p, std::size_t n) {
    k.sizes.push_back(n);
    k.values.emplace_back(static_cast<const uint8_t*>(p), static_cast<const uint8_t*>(p) + n);
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
  static auto define = reinterpret_cast<decltype(&fakecuda_define_kernel)>(dlsym(g_lib, "fakecuda_define_kernel"));
  if (!define) die("not the stand-in driver (no fakecuda_define_kernel)");
  k.handle = define(name.c_str(), static_cast<int>(k.sizes.size()), k.sizes.data(), g_cukernel ? 1 : 0);
  return k;
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
    if (g_entry == g.entry) return &g;
  return nullptr;
}

CUresult graph_node(const GraphEntry& g, CUfunction f, void** kp, void** ex) {
  void* fn = g_path == "dlsym" ? dlsym(g_lib, g.exact) : resolve(g.base, false, g.version);
  if (!fn) die("cannot resolve the graph entry point");
  CUDA_KERNEL_NODE_PARAMS_v2 p2{};
  if (g_cukernel && std::getenv("TG_NODE_KERN")) p2.kern = reinterpret_cast<CUkernel>(f);  // func NULL: `kern` runs
  else p2.func = f;
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
  if (e == "cuGraphKernelNodeSetParams_v2") return reinterpret_cast<PFN_cuGraphKernelNodeSetParams_v12000>(fn)(node, &p2);
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

CUresult launch(const Kernel& k) {
  std::vector<void*> params;
  std::vector<uint8_t> buffer;
  for (const auto& v : k.values) params.push_back(const_cast<uint8_t*>(v.data()));
  std::size_t size = 0;
  void* extra[5] = {CU_LAUNCH_PARAM_BUFFER_POINTER, nullptr, CU_LAUNCH_PARAM_BUFFER_SIZE, &size, CU_LAUNCH_PARAM_END};
  if (g_extra) {  // the packed-buffer form, laid out as the driver reports the offsets
    auto info = reinterpret_cast<PFN_cuFuncGetParamInfo_v12040>(
        dlsym(g_lib, g_cukernel ? "cuKernelGetParamInfo" : "cuFuncGetParamInfo"));
    for (std::size_t i = 0; i < k.values.size(); ++i) {
      std::size_t off = 0, sz = 0;
      if (info(static_cast<CUfunction>(k.handle), i, &off, &sz) != CUDA_SUCCESS) die("param info failed");
      if (buffer.size() < off + sz) buffer.resize(off + sz);
      std::memcpy(buffer.data() + off, k.values[i].data(), sz);
    }
    size = buffer.size();
    extra[1] = buffer.data();
  }
  void** kp = g_extra ? nullptr : params.data();
  void** ex = g_extra ? extra : nullptr;
  auto f = static_cast<CUfunction>(k.handle);
  const bool ptsz = g_entry.size() > 5 && g_entry.compare(g_entry.size() - 5, 5, "_ptsz") == 0;
  CUresult rc;
  if (const GraphEntry* g = graph_entry()) {
    rc = graph_node(*g, f, kp, ex);
  } else if (g_entry.rfind("launch", 0) == 0) {
    auto fn = reinterpret_cast<PFN_cuLaunchKernel_v4000>(resolve("cuLaunchKernel", ptsz, ptsz ? 7000 : 4000));
    rc = fn(f, 1, 1, 1, 128, 1, 1, 0, nullptr, kp, ex);
  } else if (g_entry.rfind("ex", 0) == 0) {
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
    rc = fn(&cfg, f, kp, ex);
  } else if (g_entry.rfind("coop", 0) == 0) {
    if (g_extra) die("cooperative launches have no extra form");
    auto fn = reinterpret_cast<PFN_cuLaunchCooperativeKernel_v9000>(resolve("cuLaunchCooperativeKernel", ptsz, 9000));
    rc = fn(f, 1, 1, 1, 128, 1, 1, 0, nullptr, kp);
  } else {
    die("unknown entry");
  }
  (rc == CUDA_SUCCESS ? g_ok : g_failed)++;
  return rc;
}

const char* kFa4 = "kernel_cutlass_kernel_flash_attncuteflash_bwd_sm100FlashAttentionBackwardSm100_object_at__0x7f_0";

// FA4 SM100 backward launch: 1-CTA order Q K V dO dV dK; 2-CTA Q Qt K Kt V dO dOt dV dK; postprocess drops dV dK.
Kernel fa4_kernel(bool two_cta, bool dk_bad, bool dv_bad, bool postprocess) {
  const uint64_t b = 2, s = 256, h = 4, d = 128, base = 0x7f0000000000ULL, step = 0x1000000ULL;
  const CUtensorMap q = encode_map(bshd(base, b, s, h, d)), k = encode_map(bshd(base + step, b, s, h, d)),
                    v = encode_map(bshd(base + 2 * step, b, s, h, d)), dout = encode_map(bshd(base + 3 * step, b, s, h, d));
  const CUtensorMap dv = encode_map(bshd(base + 4 * step, b, s, h, d, dv_bad));
  const CUtensorMap dk = encode_map(bshd(base + 5 * step, b, s, h, d, dk_bad));
  std::vector<CUtensorMap> maps;
  if (two_cta) maps = {q, q, k, k, v, dout, dout};
  else maps = {q, k, v, dout};
  if (!postprocess) {
    maps.push_back(dv);
    maps.push_back(dk);
  }
  return make_kernel(kFa4, maps);
}

// The stand-in driver's entry point that the chosen ENTRY must reach (proves _ptsz routing end to end).
unsigned long via() {
  static auto count = reinterpret_cast<decltype(&fakecuda_launches_via)>(dlsym(g_lib, "fakecuda_launches_via"));
  if (const GraphEntry* g = graph_entry()) return count(g->exact);
  std::string name = g_entry.rfind("launch", 0) == 0 ? "cuLaunchKernel"
                     : g_entry.rfind("ex", 0) == 0   ? "cuLaunchKernelEx"
                                                      : "cuLaunchCooperativeKernel";
  if (g_entry.size() > 5 && g_entry.compare(g_entry.size() - 5, 5, "_ptsz") == 0) name += "_ptsz";
  return count(name.c_str());
}

// Checks cuGetProcAddress/dlsym semantics through tmaguard: NULL stays NULL, statuses pass through, interposed
// entries come back as tmaguard's wrapper of the right name, everything else as the driver's own function.
int getproc_semantics() {
  int bad = 0;
  auto expect = [&](bool ok, const char* what) {
    if (!ok) {
      std::printf("SEMANTICS FAIL: %s\n", what);
      ++bad;
    }
  };
  auto owner = [](void* p, std::string* sym) {
    Dl_info info{};
    if (!p || !dladdr(p, &info) || !info.dli_fname) return std::string("?");
    if (sym) *sym = info.dli_sname ? info.dli_sname : "";
    return std::string(info.dli_fname);
  };
  const bool wrapped = std::getenv("TG_EXPECT_WRAPPED") != nullptr;
  auto v2 = reinterpret_cast<PFN_cuGetProcAddress_v12000>(dlsym(g_lib, "cuGetProcAddress_v2"));
  void* fn = reinterpret_cast<void*>(1);
  CUdriverProcAddressQueryResult st = CU_GET_PROC_ADDRESS_SUCCESS;
  expect(v2("cuNoSuchFunction", &fn, 12000, 0, &st) == CUDA_SUCCESS && !fn && st == CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND,
         "unknown name: SUCCESS, NULL, status 1");
  fn = reinterpret_cast<void*>(1);
  expect(v2("cuLaunchKernel", &fn, 1000, 0, &st) == CUDA_SUCCESS && !fn && st == CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT,
         "version too low: SUCCESS, NULL, status 2");
  expect(v2("cuLaunchKernel", &fn, 99000, 0, &st) == CUDA_ERROR_INVALID_VALUE, "version far above: INVALID_VALUE");
  expect(v2("cuLaunchKernel", &fn, 12000, 0, nullptr) == CUDA_SUCCESS && fn, "NULL status pointer accepted");
  std::string sym;
  const std::string lib_of_launch = owner(fn, &sym);
  if (wrapped) expect(lib_of_launch.find("libtmaguard") != std::string::npos && sym == "cuLaunchKernel", "cuLaunchKernel is ours");
  expect(v2("cuLaunchKernel", &fn, 7000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, nullptr) == CUDA_SUCCESS, "ptsz lookup");
  owner(fn, &sym);
  expect(sym == "cuLaunchKernel_ptsz", "flags=2 gives cuLaunchKernel_ptsz");
  expect(v2("cuInit", &fn, 2000, 0, nullptr) == CUDA_SUCCESS && owner(fn, nullptr).find("libtmaguard") == std::string::npos,
         "non-interposed cuInit comes back as the driver's own");
  void* self = nullptr;
  expect(v2("cuGetProcAddress", &self, 11030, 0, nullptr) == CUDA_SUCCESS && self, "self-lookup 11030");
  owner(self, &sym);
  if (wrapped) expect(sym == "cuGetProcAddress", "self-lookup 11030 gives the 4-argument wrapper");
  expect(v2("cuGetProcAddress", &self, 12000, 0, nullptr) == CUDA_SUCCESS && self, "self-lookup 12000");
  owner(self, &sym);
  if (wrapped) expect(sym == "cuGetProcAddress_v2", "self-lookup 12000 gives the 5-argument wrapper");
  owner(dlsym(g_lib, "cuLaunchKernelEx_ptsz"), &sym);
  if (wrapped) expect(sym == "cuLaunchKernelEx_ptsz" && owner(dlsym(g_lib, "cuLaunchKernelEx_ptsz"), nullptr).find("libtmaguard") != std::string::npos,
                      "dlsym on the libcuda handle gives the wrapper");
  expect(owner(dlsym(g_lib, "cuFuncGetParamInfo"), nullptr).find("libtmaguard") == std::string::npos,
         "dlsym of a non-interposed entry gives the driver's own");
  expect(dlsym(g_lib, "cuNoSuchFunction") == nullptr, "dlsym of an unknown cu name stays NULL");
  std::printf("SEMANTICS %s\n", bad ? "FAILED" : "OK");
  return bad ? 1 : 0;
}

unsigned long ran(const Kernel& k) {
  static auto count = reinterpret_cast<decltype(&fakecuda_launches)>(dlsym(g_lib, "fakecuda_launches"));
  return count(k.handle);
}

int scenario(const std::string& sc) {
  unsigned long total_ran = 0;
  auto run = [&](const Kernel& k, int times = 1) {
    for (int i = 0; i < times; ++i) launch(k);
    total_ran += graph_entry() ? via() : ran(k);  // a graph node "runs" when it reaches the driver
  };
  if (sc == "fa4_ok") run(fa4_kernel(false, false, false, false), 3);
  else if (sc == "fa4_dk_bad") run(fa4_kernel(false, true, false, false), 3);
  else if (sc == "fa4_dv_bad") run(fa4_kernel(false, false, true, false));
  else if (sc == "fa4_2cta_ok") run(fa4_kernel(true, false, false, false));
  else if (sc == "fa4_2cta_dk_bad") run(fa4_kernel(true, true, false, false));
  else if (sc == "fa4_postprocess") run(fa4_kernel(false, true, true, true));
  else if (sc == "fa4_2cta_postprocess") run(fa4_kernel(true, true, true, true));
  else if (sc == "fa4_odd_count") {
    const CUtensorMap m = encode_map(bshd(0x7f0000000000ULL, 2, 256, 4, 128));
    run(make_kernel(kFa4, {m, m, m, m, m}), 2);
  } else if (sc == "unmatched") {
    run(make_kernel("plain_elementwise_kernel", {}), 5);
  } else if (sc == "other_maps_ok") {  // a Triton-like kernel with four healthy maps and an MN-major one
    const CUtensorMap a = encode_map(bshd(0x7f0000000000ULL, 2, 256, 4, 128));
    const CUtensorMap t = encode_map(bshd(0x7f0001000000ULL, 2, 256, 4, 128, true));
    run(make_kernel("matmul_kernel_tma", {a, a, t, a}), 3);
  } else if (sc == "triton_b_transposed" || sc == "triton_ok") {  // C = A @ B.T through three descriptors
    const CUtensorMap a = encode_map(bshd(0x7f0000000000ULL, 2, 256, 4, 128));
    const CUtensorMap b = encode_map(bshd(0x7f0001000000ULL, 2, 256, 4, 128, sc == "triton_b_transposed"));
    const CUtensorMap c = encode_map(bshd(0x7f0002000000ULL, 2, 256, 4, 128));
    run(make_kernel("matmul_kernel_tma", {a, b, c}), 2);
  } else if (sc == "inline_bad_descriptor") {  // inline-filled map the driver would refuse: box > swizzle span
    tmaguard::EncodeArgs a;
    a.dtype = CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
    a.rank = 2;
    a.address = 0x7f0000000000ULL;
    a.dims = {128, 4096};
    a.strides = {256};
    a.box = {64, 128};
    a.element_strides = {1, 1};
    a.swizzle = CU_TENSOR_MAP_SWIZZLE_128B;
    CUtensorMap m;
    tmaguard::encode(a, reinterpret_cast<uint8_t*>(&m));
    uint32_t w2;
    std::memcpy(&w2, reinterpret_cast<uint8_t*>(&m) + 8, 4);
    w2 = (w2 & ~(3u << 13)) | (1u << 13);  // swizzle field 32B, span word to match: 128 B box > 32 B span
    std::memcpy(reinterpret_cast<uint8_t*>(&m) + 8, &w2, 4);
    const uint32_t span = 0x100;
    std::memcpy(reinterpret_cast<uint8_t*>(&m) + 72, &span, 4);
    run(make_kernel("my_inline_tma_kernel", {m}));
  } else if (sc == "threads") {
    const Kernel good = fa4_kernel(false, false, false, false);
    const Kernel other = make_kernel("plain_elementwise_kernel", {});
    std::vector<std::thread> ts;
    for (int t = 0; t < 8; ++t)
      ts.emplace_back([&, t] {
        for (int i = 0; i < 500; ++i) launch(t % 2 ? good : other);
      });
    for (auto& t : ts) t.join();
    total_ran = ran(good) + ran(other);
  } else if (sc == "fa4_mutated_in_place" || sc == "fa4_2cta_mutated_in_place") {
    // Clean launches from the same parameter storage, then dK rewritten in place (same pointers, new bytes), then
    // restored: only the middle launch may be flagged, however warm tmaguard's per-thread caches are.
    const bool two_cta = sc == "fa4_2cta_mutated_in_place";
    Kernel k = fa4_kernel(two_cta, false, false, false);
    const Kernel bad = fa4_kernel(two_cta, true, false, false);
    const std::size_t dk = k.values.size() - 2;  // ..., dv, dk, tail
    const std::vector<uint8_t> good_dk = k.values[dk];
    for (int i = 0; i < 5; ++i) launch(k);
    k.values[dk] = bad.values[dk];
    launch(k);
    k.values[dk] = good_dk;
    for (int i = 0; i < 5; ++i) launch(k);
    total_ran = ran(k);
  } else if (sc == "threads_many") {  // more threads than any fixed table of per-thread counters would hold
    const Kernel good = fa4_kernel(false, false, false, false);
    const Kernel other = make_kernel("plain_elementwise_kernel", {});
    std::vector<std::thread> ts;
    for (int t = 0; t < 100; ++t)
      ts.emplace_back([&, t] {
        for (int i = 0; i < 10; ++i) launch(t % 2 ? good : other);
      });
    for (int t = 0; t < 50; ++t) ts[static_cast<std::size_t>(t)].join();  // half exit before the rest launch more
    for (int i = 0; i < 10; ++i) launch(good);
    for (std::size_t t = 50; t < ts.size(); ++t) ts[t].join();
    total_ran = ran(good) + ran(other);
  } else if (sc == "threads_bad") {
    const Kernel bad = fa4_kernel(false, true, false, false);
    std::vector<std::thread> ts;
    for (int t = 0; t < 8; ++t)
      ts.emplace_back([&] {
        for (int i = 0; i < 200; ++i) launch(bad);
      });
    for (auto& t : ts) t.join();
    total_ran = ran(bad);
  } else if (sc == "fork") {
    const Kernel good = fa4_kernel(false, false, false, false);
    launch(good);
    const pid_t pid = fork();
    if (pid == 0) {
      const Kernel bad = fa4_kernel(false, true, false, false);
      launch(bad);
      launch(good);
      std::printf("CHILD ok=%d failed=%d ran_bad=%lu\n", g_ok.load(), g_failed.load(), ran(bad));
      std::fflush(stdout);
      std::exit(g_failed ? 3 : 0);  // exit, not _Exit: the child's tmaguard summary runs at exit
    }
    int status = 0;
    waitpid(pid, &status, 0);
    launch(good);
    std::printf("CHILD_STATUS exited=%d code=%d signaled=%d sig=%d\n", WIFEXITED(status), WEXITSTATUS(status),
                WIFSIGNALED(status), WIFSIGNALED(status) ? WTERMSIG(status) : 0);
    total_ran = ran(good);
  } else if (sc == "encode_suspicious") {  // accepted-but-suspicious arguments, and one the driver refuses
    auto enc = reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(resolve("cuTensorMapEncodeTiled", false, 12000));
    static auto reg = reinterpret_cast<decltype(&fakecuda_register_memory)>(dlsym(g_lib, "fakecuda_register_memory"));
    reg(0x7e0000000000ULL, 4096);  // a 4 KiB allocation
    alignas(16) static uint8_t host[1024];
    struct Case {
      uint64_t addr, d0, d1, stride;
      cuuint32_t b0, b1;
    } cases[] = {
        {0, 128, 64, 256, 64, 32},                                   // NULL
        {0x7f0000000000ULL, 128, 64, 0, 64, 32},                    // stride 0
        {0x7f0000100000ULL, 128, 64, 128, 64, 32},                  // rows overlap (256 B rows, 128 B apart)
        {0x7f0000200000ULL, 16, 8, 32, 64, 32},                     // box larger than the tensor
        {reinterpret_cast<uint64_t>(host), 128, 2, 256, 64, 2},     // host pointer
        {0x7e0000000000ULL, 128, 64, 256, 64, 32},                  // 16 KiB map on a 4 KiB allocation
        {0x7f0000300000ULL, 128, 64, 256, 128, 32},                 // refused: 256 B inner box > 128B swizzle
        {0x7f0000400000ULL, 128, 64, 256, 64, 32},                  // healthy
    };
    for (const Case& c : cases) {
      CUtensorMap m;
      const cuuint64_t dims[2] = {c.d0, c.d1}, strides[1] = {c.stride};
      const cuuint32_t box[2] = {c.b0, c.b1}, es[2] = {1, 1};
      for (int rep = 0; rep < 2; ++rep) {  // a repeat must not report again
        const CUresult rc = enc(&m, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, reinterpret_cast<void*>(c.addr), dims, strides,
                                box, es, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                                CU_TENSOR_MAP_L2_PROMOTION_L2_128B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
        if (rep == 0) std::printf("ENCODE rc=%d\n", static_cast<int>(rc));
      }
    }
    return 0;
  } else if (sc == "getproc_semantics") {
    return getproc_semantics();
  } else {
    die("unknown scenario");
  }
  std::printf("RESULT ok=%d failed=%d ran=%lu via=%lu\n", g_ok.load(), g_failed.load(), total_ran, via());
  return g_failed ? 3 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 2 && std::string(argv[1]) == "nocuda") {
    std::printf("no CUDA here\n");
    return 0;
  }
  if (argc < 4) die("usage: tg_client PATH ENTRY SCENARIO [--cukernel] [--extra] [--inline]");
  g_path = argv[1];
  g_entry = argv[2];
  for (int i = 4; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--cukernel") g_cukernel = true;
    else if (a == "--extra") g_extra = true;
    else if (a == "--inline") g_inline = true;
    else die("unknown option");
  }
  g_lib = dlopen("libcuda.so.1", RTLD_NOW);
  if (!g_lib) die("cannot dlopen libcuda.so.1");
  auto init = reinterpret_cast<PFN_cuInit_v2000>(g_path == "direct" ? direct_symbol("cuInit") : dlsym(g_lib, "cuInit"));
  if (!init || init(0) != CUDA_SUCCESS) die("cuInit failed");
  // The tensors of every scenario live in [0x7f0000000000, +1 GiB): "device memory" for the stand-in.
  if (auto reg = reinterpret_cast<decltype(&fakecuda_register_memory)>(dlsym(g_lib, "fakecuda_register_memory")))
    reg(0x7f0000000000ULL, 1ULL << 30);
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  return scenario(argv[3]);
}
