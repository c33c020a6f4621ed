// Host cost of a launch and of an encode, as the caller sees it: per-call steady_clock timing of cuLaunchKernel
// (an empty kernel no rule matches, an empty kernel with 4 tensor maps, the FA4-shaped kernel with 6) and of
// cuTensorMapEncodeTiled. Run with and without libtmaguard.so preloaded; scripts/gpu/run_checks.py alternates the
// two and prints the difference. Prints one line per measurement: "BENCH name median_ns p99_ns calls".
#include <cuda.h>
#include <cuda_runtime.h>
#include <cudaTypedefs.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace {
using clk = std::chrono::steady_clock;

void report(const char* name, std::vector<double>& ns) {
  std::sort(ns.begin(), ns.end());
  std::printf("BENCH %s median_ns=%.1f p99_ns=%.1f calls=%zu\n", name, ns[ns.size() / 2], ns[ns.size() * 99 / 100],
              ns.size());
}

#define CK(x)                                                                 \
  do {                                                                        \
    CUresult r_ = (x);                                                        \
    if (r_ != CUDA_SUCCESS) {                                                 \
      std::fprintf(stderr, "%s: %d\n", #x, static_cast<int>(r_));             \
      std::exit(1);                                                           \
    }                                                                         \
  } while (0)
}  // namespace

int main(int argc, char** argv) {
  const int n = argc > 1 ? std::atoi(argv[1]) : 100000;
  cudaSetDevice(0);
  cudaFree(nullptr);
  std::ifstream in(std::string(argv[0]) + ".cubin", std::ios::binary);
  const std::vector<char> cubin(std::istreambuf_iterator<char>(in), {});
  CUmodule mod;
  CK(cuModuleLoadData(&mod, cubin.data()));
  CUfunction plain, tma4, fa4;
  CK(cuModuleGetFunction(&plain, mod, "bench_plain_kernel"));
  CK(cuModuleGetFunction(&tma4, mod, "bench_tma4_kernel"));
  CK(cuModuleGetFunction(&fa4, mod, "kernel_cutlass_kernel_flash_attncuteflash_bwd_sm100FlashAttentionBackwardSm100_bench_0"));

  void* buf;
  cudaMalloc(&buf, 64 << 20);
  const cuuint64_t dims[4] = {128, 256, 4, 2}, strides[3] = {1024, 256, 262144};
  const cuuint32_t box[4] = {64, 128, 1, 1}, es[4] = {1, 1, 1, 1};
  auto encode = [&](CUtensorMap* m, size_t off) {
    return cuTensorMapEncodeTiled(m, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 4, static_cast<char*>(buf) + off, dims, strides,
                                  box, es, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                                  CU_TENSOR_MAP_L2_PROMOTION_L2_128B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  };
  CUtensorMap maps[6];
  for (int i = 0; i < 6; ++i) CK(encode(&maps[i], static_cast<size_t>(i) << 21));

  int ni = 1, seqlen = 256;
  float* fp = nullptr;
  float scale = 0.1f;
  long long tail = 0;
  void* a_plain[] = {&ni, &fp};
  void* a_tma4[] = {&maps[0], &maps[1], &maps[2], &maps[3], &ni};
  void* a_fa4[] = {&seqlen, &maps[0], &maps[1], &maps[2], &scale, &maps[3], &maps[4], &maps[5], &tail};
  struct K {
    const char* name;
    CUfunction f;
    void** args;
  } ks[] = {{"launch_unmatched", plain, a_plain}, {"launch_tma4", tma4, a_tma4}, {"launch_fa4_6maps", fa4, a_fa4}};
  std::vector<double> ns(static_cast<size_t>(n));
  for (const K& k : ks) {
    for (int w = 0; w < 2000; ++w) CK(cuLaunchKernel(k.f, 1, 1, 1, 32, 1, 1, 0, nullptr, k.args, nullptr));
    CK(cuCtxSynchronize());
    for (int i = 0; i < n; ++i) {
      const auto t0 = clk::now();
      const CUresult r = cuLaunchKernel(k.f, 1, 1, 1, 32, 1, 1, 0, nullptr, k.args, nullptr);
      const auto t1 = clk::now();
      if (r != CUDA_SUCCESS) return 1;
      ns[static_cast<size_t>(i)] = std::chrono::duration<double, std::nano>(t1 - t0).count();
      if ((i & 255) == 255) cuCtxSynchronize();  // keep the launch queue short; not timed
    }
    report(k.name, ns);
  }
  CUtensorMap m;
  for (int i = 0; i < n; ++i) {
    const auto t0 = clk::now();
    const CUresult r = encode(&m, static_cast<size_t>(i & 63) << 12);
    const auto t1 = clk::now();
    if (r != CUDA_SUCCESS) return 1;
    ns[static_cast<size_t>(i)] = std::chrono::duration<double, std::nano>(t1 - t0).count();
  }
  report("encode_tiled", ns);
  return 0;
}
