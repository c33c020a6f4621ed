// Scenarios: FA4 signatures, other kernels, threads, fork, the encode explainer and cuGetProcAddress semantics.
#include <dlfcn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "client.h"
#include "fakecuda.h"
#include "tmaguard/tensormap.h"

namespace client {
namespace {

// Launches `k` `times` times and returns how many of them reached the driver (a graph node "runs" when it does).
unsigned long run(const Kernel& k, int times = 1) {
  for (int i = 0; i < times; ++i) launch(k);
  return graph_entry_chosen() ? via() : ran(k);
}

int fa4(bool two_cta, bool dk_bad, bool dv_bad, bool postprocess, int times) {
  return finish(run(fa4_kernel(two_cta, dk_bad, dv_bad, postprocess), times));
}

int fa4_odd_count() {
  const CUtensorMap m = encode_map(bshd(0x7f0000000000ULL, 2, 256, 4, 128));
  return finish(run(make_kernel(kFa4Name, {m, m, m, m, m}), 2));
}

// A Triton-like kernel with four healthy maps, one of them MN-major.
int other_maps_ok() {
  const CUtensorMap a = encode_map(bshd(0x7f0000000000ULL, 2, 256, 4, 128));
  const CUtensorMap t = encode_map(bshd(0x7f0001000000ULL, 2, 256, 4, 128, true));
  return finish(run(make_kernel("matmul_kernel_tma", {a, a, t, a}), 3));
}

// C = A @ B.T through three descriptors.
int triton(bool b_transposed) {
  const CUtensorMap a = encode_map(bshd(0x7f0000000000ULL, 2, 256, 4, 128));
  const CUtensorMap b = encode_map(bshd(0x7f0001000000ULL, 2, 256, 4, 128, b_transposed));
  const CUtensorMap c = encode_map(bshd(0x7f0002000000ULL, 2, 256, 4, 128));
  return finish(run(make_kernel("matmul_kernel_tma", {a, b, c}), 2));
}

// An inline-filled map the driver would refuse: a 128-byte inner box with a 32B swizzle.
int inline_bad_descriptor() {
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
  return finish(run(make_kernel("my_inline_tma_kernel", {m})));
}

int threads() {
  const Kernel good = fa4_kernel(false, false, false, false);
  const Kernel other = make_kernel("plain_elementwise_kernel", {});
  std::vector<std::thread> ts;
  for (int t = 0; t < 8; ++t)
    ts.emplace_back([&, t] {
      for (int i = 0; i < 500; ++i) launch(t % 2 ? good : other);
    });
  for (auto& t : ts) t.join();
  return finish(ran(good) + ran(other));
}

// Clean launches from the same parameter storage, then dK rewritten in place (same pointers, new bytes), then
// restored: only the middle launch may be flagged, however warm tmaguard's per-thread caches are.
int mutated_in_place(bool two_cta) {
  Kernel k = fa4_kernel(two_cta, false, false, false);
  const Kernel bad = fa4_kernel(two_cta, true, false, false);
  const std::size_t dk = k.values.size() - 2;  // ..., dv, dk, tail
  const std::vector<uint8_t> good_dk = k.values[dk];
  for (int i = 0; i < 5; ++i) launch(k);
  k.values[dk] = bad.values[dk];
  launch(k);
  k.values[dk] = good_dk;
  for (int i = 0; i < 5; ++i) launch(k);
  return finish(ran(k));
}

// One FA4 kernel launched for six layers (TG_LAYERS) in turn, each on its own tensors (its maps' addresses moved by
// the layer), four rounds; then layer 3 with a transposed dK, then every layer again. Clean launches of other layers
// between two launches of one layer must not let the bad one through.
int fa4_layers() {
  const char* n_layers = std::getenv("TG_LAYERS");
  const uint64_t n = n_layers ? std::strtoull(n_layers, nullptr, 10) : 6;
  const Kernel base = fa4_kernel(false, false, false, false);
  const Kernel transposed = fa4_kernel(false, true, false, false);
  const std::size_t dk = base.values.size() - 2;  // ..., dv, dk, tail
  auto moved = [](std::vector<uint8_t> map, uint64_t by) {
    uint64_t addr;
    std::memcpy(&addr, map.data(), 8);
    addr += by;
    std::memcpy(map.data(), &addr, 8);
    return map;
  };
  std::vector<Kernel> layers;
  for (uint64_t l = 0; l < n; ++l) {
    Kernel k = base;
    for (std::size_t i = 0; i < k.values.size(); ++i)
      if (k.sizes[i] == sizeof(CUtensorMap)) k.values[i] = moved(k.values[i], l << 28);
    layers.push_back(k);
  }
  for (int round = 0; round < 4; ++round)
    for (const Kernel& k : layers) launch(k);
  Kernel bad = layers[3];
  bad.values[dk] = moved(transposed.values[dk], 3ULL << 28);
  launch(bad);
  for (const Kernel& k : layers) launch(k);
  const char* steady = std::getenv("TG_STEADY");  // then layer 0 alone, this many times (a kernel that settled)
  for (uint64_t i = 0, s = steady ? std::strtoull(steady, nullptr, 10) : 0; i < s; ++i) launch(layers[0]);
  return finish(ran(base));
}

// More threads than any fixed table of per-thread counters would hold; half exit before the rest launch more.
int threads_many() {
  const Kernel good = fa4_kernel(false, false, false, false);
  const Kernel other = make_kernel("plain_elementwise_kernel", {});
  std::vector<std::thread> ts;
  for (int t = 0; t < 100; ++t)
    ts.emplace_back([&, t] {
      for (int i = 0; i < 10; ++i) launch(t % 2 ? good : other);
    });
  for (int t = 0; t < 50; ++t) ts[static_cast<std::size_t>(t)].join();
  for (int i = 0; i < 10; ++i) launch(good);
  for (std::size_t t = 50; t < ts.size(); ++t) ts[t].join();
  return finish(ran(good) + ran(other));
}

int threads_bad() {
  const Kernel bad = fa4_kernel(false, true, false, false);
  std::vector<std::thread> ts;
  for (int t = 0; t < 8; ++t)
    ts.emplace_back([&] {
      for (int i = 0; i < 200; ++i) launch(bad);
    });
  for (auto& t : ts) t.join();
  return finish(ran(bad));
}

int fork_child_and_parent() {
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
  return finish(ran(good));
}

// Accepted-but-suspicious arguments, arguments that are fine to load through (no warning: a broadcast view, a
// sliding window, a short tensor), and one the driver refuses.
int encode_suspicious() {
  auto enc = reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(resolve("cuTensorMapEncodeTiled", false, 12000));
  static auto reg = reinterpret_cast<decltype(&fakecuda_register_memory)>(fake_api("fakecuda_register_memory"));
  reg(0x7e0000000000ULL, 4096);  // a 4 KiB allocation
  alignas(16) static uint8_t host[1024];
  struct Case {
    uint64_t addr, d0, d1, stride;
    cuuint32_t b0, b1;
  } cases[] = {
      {0, 128, 64, 256, 64, 32},                               // NULL
      {0x7f0000000000ULL, 128, 64, 0, 64, 32},                 // stride 0 (an expand()ed row): no warning
      {0x7f0000100000ULL, 128, 64, 128, 64, 32},               // rows overlap (a sliding window): no warning
      {0x7f0000200000ULL, 16, 8, 32, 64, 32},                  // box larger than the tensor: no warning
      {reinterpret_cast<uint64_t>(host), 128, 2, 256, 64, 2},  // host pointer
      {0x7e0000000000ULL, 128, 64, 256, 64, 32},               // 16 KiB map on a 4 KiB allocation
      {0x7f0000300000ULL, 128, 64, 256, 128, 32},              // refused: 256 B inner box > 128B swizzle
      {0x7f0000400000ULL, 128, 64, 256, 64, 32},               // healthy
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
  expect(
      v2("cuNoSuchFunction", &fn, 12000, 0, &st) == CUDA_SUCCESS && !fn && st == CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND,
      "unknown name: SUCCESS, NULL, status 1");
  fn = reinterpret_cast<void*>(1);
  expect(v2("cuLaunchKernel", &fn, 1000, 0, &st) == CUDA_SUCCESS && !fn &&
             st == CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT,
         "version too low: SUCCESS, NULL, status 2");
  expect(v2("cuLaunchKernel", &fn, 99000, 0, &st) == CUDA_ERROR_INVALID_VALUE, "version far above: INVALID_VALUE");
  expect(v2("cuLaunchKernel", &fn, 12000, 0, nullptr) == CUDA_SUCCESS && fn, "NULL status pointer accepted");
  std::string sym;
  const std::string lib_of_launch = owner(fn, &sym);
  if (wrapped)
    expect(lib_of_launch.find("libtmaguard") != std::string::npos && sym == "cuLaunchKernel", "cuLaunchKernel is ours");
  expect(v2("cuLaunchKernel", &fn, 7000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, nullptr) == CUDA_SUCCESS,
         "ptsz lookup");
  owner(fn, &sym);
  expect(sym == "cuLaunchKernel_ptsz", "flags=2 gives cuLaunchKernel_ptsz");
  expect(v2("cuInit", &fn, 2000, 0, nullptr) == CUDA_SUCCESS &&
             owner(fn, nullptr).find("libtmaguard") == std::string::npos,
         "non-interposed cuInit comes back as the driver's own");
  void* self = nullptr;
  expect(v2("cuGetProcAddress", &self, 11030, 0, nullptr) == CUDA_SUCCESS && self, "self-lookup 11030");
  owner(self, &sym);
  if (wrapped) expect(sym == "cuGetProcAddress", "self-lookup 11030 gives the 4-argument wrapper");
  expect(v2("cuGetProcAddress", &self, 12000, 0, nullptr) == CUDA_SUCCESS && self, "self-lookup 12000");
  owner(self, &sym);
  if (wrapped) expect(sym == "cuGetProcAddress_v2", "self-lookup 12000 gives the 5-argument wrapper");
  owner(dlsym(g_lib, "cuLaunchKernelEx_ptsz"), &sym);
  if (wrapped)
    expect(sym == "cuLaunchKernelEx_ptsz" &&
               owner(dlsym(g_lib, "cuLaunchKernelEx_ptsz"), nullptr).find("libtmaguard") != std::string::npos,
           "dlsym on the libcuda handle gives the wrapper");
  expect(owner(dlsym(g_lib, "cuFuncGetParamInfo"), nullptr).find("libtmaguard") == std::string::npos,
         "dlsym of a non-interposed entry gives the driver's own");
  expect(dlsym(g_lib, "cuNoSuchFunction") == nullptr, "dlsym of an unknown cu name stays NULL");
  std::printf("SEMANTICS %s\n", bad ? "FAILED" : "OK");
  return bad ? 1 : 0;
}

// What a caller passes to one launch: distinct values in every argument, so that a swapped or lost one shows.
struct LaunchCall {
  unsigned grid[3], block[3], shared;
  void** params;
  void** extra;
};
// Launches through the chosen launch ENTRY with exactly `c`; returns whether the stand-in driver received exactly it.
bool reaches_driver_unchanged(const Kernel& k, const LaunchCall& c) {
  static const auto last = reinterpret_cast<decltype(&fakecuda_last_launch)>(fake_api("fakecuda_last_launch"));
  const std::string& e = g_opt.entry;
  const bool ptsz = e.size() > 5 && e.compare(e.size() - 5, 5, "_ptsz") == 0;
  const auto f = static_cast<CUfunction>(k.handle);
  CUlaunchConfig cfg{c.grid[0], c.grid[1], c.grid[2], c.block[0], c.block[1], c.block[2], c.shared, g_stream,
                     nullptr, 0};
  CUresult rc = CUDA_ERROR_UNKNOWN;
  if (e.rfind("launch", 0) == 0)
    rc = reinterpret_cast<PFN_cuLaunchKernel_v4000>(resolve("cuLaunchKernel", ptsz, ptsz ? 7000 : 4000))(
        f, c.grid[0], c.grid[1], c.grid[2], c.block[0], c.block[1], c.block[2], c.shared, g_stream, c.params,
        c.extra);
  else if (e.rfind("ex", 0) == 0)
    rc = reinterpret_cast<PFN_cuLaunchKernelEx_v11060>(resolve("cuLaunchKernelEx", ptsz, 11060))(&cfg, f, c.params,
                                                                                                 c.extra);
  else if (e.rfind("coop", 0) == 0)
    rc = reinterpret_cast<PFN_cuLaunchCooperativeKernel_v9000>(resolve("cuLaunchCooperativeKernel", ptsz, 9000))(
        f, c.grid[0], c.grid[1], c.grid[2], c.block[0], c.block[1], c.block[2], c.shared, g_stream, c.params);
  else
    die("launch_arguments takes a launch entry");
  (rc == CUDA_SUCCESS ? g_ok : g_failed)++;
  FakeLaunchRecord r{};
  last(&r);
  const bool ex = e.rfind("ex", 0) == 0, coop = e.rfind("coop", 0) == 0;
  return rc == CUDA_SUCCESS && r.f == f && std::memcmp(r.grid, c.grid, sizeof r.grid) == 0 &&
         std::memcmp(r.block, c.block, sizeof r.block) == 0 && r.shared_bytes == c.shared && r.stream == g_stream &&
         r.params == c.params && r.extra == (coop ? nullptr : c.extra) && r.config == (ex ? &cfg : nullptr);
}

// Every argument of a launch reaches the driver unchanged, on the full check's path (a kernel's first launch) and
// on the memo's (its repeats): a kernel without maps, FA4's six maps, a Params struct holding two maps, and one without
// parameters launched with an `extra` list.
int launch_arguments() {
  std::vector<uint8_t> params(1792, 0);
  const CUtensorMap a = encode_map(bshd(0x7f0000000000ULL, 2, 256, 4, 128));
  const CUtensorMap b = encode_map(bshd(0x7f0001000000ULL, 2, 256, 4, 128));
  std::memcpy(params.data() + 128, &a, sizeof a);
  std::memcpy(params.data() + 384, &b, sizeof b);
  const Kernel kernels[] = {make_kernel("plain_elementwise_kernel", {}), fa4_kernel(false, false, false, false),
                            make_kernel_raw("cutlass_params_kernel", {params}, {128}),
                            make_kernel_raw("no_params_kernel", {})};
  int checked = 0, wrong = 0;
  for (const Kernel& k : kernels) {
    std::vector<void*> p;
    for (const auto& v : k.values) p.push_back(const_cast<uint8_t*>(v.data()));
    for (unsigned rep = 0; rep < 10; ++rep) {
      void* extra_end[] = {CU_LAUNCH_PARAM_END};
      const LaunchCall c{{3 + rep, 5, 7}, {32, 2, 4}, 48 + 16 * rep, p.empty() ? nullptr : p.data(),
                         p.empty() ? extra_end : nullptr};
      ++checked;
      if (!reaches_driver_unchanged(k, c)) ++wrong;
    }
  }
  std::printf("ARGUMENTS checked=%d wrong=%d\n", checked, wrong);
  return wrong ? 1 : 0;
}

}  // namespace

const std::vector<Scenario>& core_scenarios() {
  static const std::vector<Scenario> v = {
      {"fa4_ok", [] { return fa4(false, false, false, false, 3); }},
      {"fa4_dk_bad", [] { return fa4(false, true, false, false, 3); }},
      {"fa4_dv_bad", [] { return fa4(false, false, true, false, 1); }},
      {"fa4_2cta_ok", [] { return fa4(true, false, false, false, 1); }},
      {"fa4_2cta_dk_bad", [] { return fa4(true, true, false, false, 1); }},
      {"fa4_postprocess", [] { return fa4(false, true, true, true, 1); }},
      {"fa4_2cta_postprocess", [] { return fa4(true, true, true, true, 1); }},
      {"fa4_odd_count", fa4_odd_count},
      {"unmatched", [] { return finish(run(make_kernel("plain_elementwise_kernel", {}), 5)); }},
      {"other_maps_ok", other_maps_ok},
      {"triton_ok", [] { return triton(false); }},
      {"triton_b_transposed", [] { return triton(true); }},
      {"inline_bad_descriptor", inline_bad_descriptor},
      {"threads", threads},
      {"threads_many", threads_many},
      {"threads_bad", threads_bad},
      {"fa4_mutated_in_place", [] { return mutated_in_place(false); }},
      {"fa4_2cta_mutated_in_place", [] { return mutated_in_place(true); }},
      {"fa4_layers", fa4_layers},
      {"fork", fork_child_and_parent},
      {"encode_suspicious", encode_suspicious},
      {"getproc_semantics", getproc_semantics},
      {"launch_arguments", launch_arguments},
  };
  return v;
}

}  // namespace client
