// Many distinct kernels: what tmaguard keeps per known kernel, and what a kernel's first launch costs (stand-in
// driver). Defines N kernels (alternately FA4's backward signature with six maps, matched by the built-in rules, and a
// CUTLASS-style 1792-byte Params struct holding three maps, searched on its first launch), launches each once (the
// first launch: kernel facts, signature match, struct search, the full check), then each again (a repeat: the
// kernel table, not the thread's 16 memo entries). Run with and without tmaguard preloaded; prints
//   KERNELS n=N rss_defined_kib=... rss_after_first_kib=... per_kernel_bytes=... first_us_median=... first_us_p99=...
//           first_us_max=... repeat_ns_median=...
//   KERNELS_FIRST fa4_us_median=... fa4_us_p99=... struct_us_median=... struct_us_p99=...
// per_kernel_bytes is the growth over the first launches, per kernel (the stand-in's own definitions are made
// before, so it is tmaguard's). Prints numbers; asserts nothing.
#include <cuda.h>
#include <cudaTypedefs.h>
#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "fakecuda.h"
#include "rss.h"

namespace {

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[static_cast<std::size_t>(p * static_cast<double>(v.size() - 1))];
}

}  // namespace

int main(int argc, char** argv) {
  const long n = argc > 1 ? std::atol(argv[1]) : 100000;
  void* lib = dlopen("libcuda.so.1", RTLD_NOW);
  if (!lib) return 2;
  reinterpret_cast<PFN_cuInit_v2000>(dlsym(lib, "cuInit"))(0);
  auto launch = reinterpret_cast<PFN_cuLaunchKernel_v4000>(dlsym(lib, "cuLaunchKernel"));
  auto enc = reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(dlsym(lib, "cuTensorMapEncodeTiled"));
  auto reg = reinterpret_cast<decltype(&fakecuda_register_memory)>(dlsym(lib, "fakecuda_register_memory"));
  auto define = reinterpret_cast<decltype(&fakecuda_define_kernel)>(dlsym(lib, "fakecuda_define_kernel"));
  auto define_aligned =
      reinterpret_cast<decltype(&fakecuda_define_kernel_aligned)>(dlsym(lib, "fakecuda_define_kernel_aligned"));
  reg(0x7f0000000000ULL, 1ULL << 40);
  CUtensorMap maps[6];
  for (int i = 0; i < 6; ++i) {
    const cuuint64_t dims[4] = {128, 256, 4, 2}, strides[3] = {1024, 256, 262144};
    const cuuint32_t box[4] = {64, 128, 1, 1}, es[4] = {1, 1, 1, 1};
    if (enc(&maps[i], CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 4, reinterpret_cast<void*>(0x7f0000000000ULL + (i << 24)),
            dims, strides, box, es, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
            CU_TENSOR_MAP_L2_PROMOTION_L2_128B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) != CUDA_SUCCESS)
      return 3;
  }
  int nval = 1024;
  float scale = 1.0f;
  uint64_t tail = 0;
  void* fa4_args[] = {&nval, &maps[0], &maps[1], &maps[2], &scale, &maps[3], &maps[4], &maps[5], &tail};
  alignas(128) static uint8_t params[1792] = {};
  for (std::size_t off = 0; off + 8 <= sizeof params; off += 8) {
    const uint64_t v = off % 24 == 0 ? 0x7f0000100000ULL + off * 64 : off % 24 == 8 ? off / 8 : 0;
    std::memcpy(params + off, &v, 8);
  }
  for (const std::size_t off : {128, 384, 896}) std::memcpy(params + off, &maps[off % 3], sizeof(CUtensorMap));
  void* struct_args[] = {params};
  const std::size_t fa4_sizes[] = {4, 128, 128, 128, 4, 128, 128, 128, 8}, st_sizes[] = {1792}, st_align[] = {128};

  std::vector<CUfunction> kernels(static_cast<std::size_t>(n));
  for (long i = 0; i < n; ++i) {
    const std::string id = std::to_string(i);
    kernels[static_cast<std::size_t>(i)] = static_cast<CUfunction>(
        i % 2 ? define_aligned(("_ZN7cutlass13device_kernelINS_4gemm6kernel8GemmK" + id + "EEEvNT_6ParamsE").c_str(),
                               1, st_sizes, st_align, 0)
              : define(("kernel_cutlass_kernel_flash_attncuteflash_bwd_sm100FlashAttentionBackwardSm100_k" + id)
                           .c_str(),
                       9, fa4_sizes, 0));
  }
  using clk = std::chrono::steady_clock;
  auto once = [&](long i) {
    const auto t0 = clk::now();
    const CUresult rc = launch(kernels[static_cast<std::size_t>(i)], 1, 1, 1, 32, 1, 1, 0, nullptr,
                               i % 2 ? struct_args : fa4_args, nullptr);
    return rc == CUDA_SUCCESS ? std::chrono::duration<double, std::micro>(clk::now() - t0).count() : -1.0;
  };
  const long defined = rss_kib();
  std::vector<double> first, repeat;
  first.reserve(static_cast<std::size_t>(n));
  repeat.reserve(static_cast<std::size_t>(n));
  for (long i = 0; i < n; ++i) first.push_back(once(i));
  const long after_first = rss_kib();
  for (long i = 0; i < n; ++i) repeat.push_back(once(i));
  const long after_repeat = rss_kib();
  if (std::any_of(first.begin(), first.end(), [](double t) { return t < 0; })) return 4;
  std::vector<double> fa4_first, struct_first;
  for (long i = 0; i < n; ++i) (i % 2 ? struct_first : fa4_first).push_back(first[static_cast<std::size_t>(i)]);
  std::printf("KERNELS n=%ld rss_defined_kib=%ld rss_after_first_kib=%ld rss_after_repeat_kib=%ld per_kernel_bytes=%.0f "
              "first_us_median=%.2f first_us_p99=%.2f first_us_max=%.2f repeat_ns_median=%.0f\n",
              n, defined, after_first, after_repeat,
              1024.0 * static_cast<double>(after_first - defined) / static_cast<double>(n), percentile(first, 0.5),
              percentile(first, 0.99), percentile(first, 1.0), 1000 * percentile(repeat, 0.5));
  std::printf("KERNELS_FIRST fa4_us_median=%.2f fa4_us_p99=%.2f struct_us_median=%.2f struct_us_p99=%.2f\n",
              percentile(fa4_first, 0.5), percentile(fa4_first, 0.99), percentile(struct_first, 0.5),
              percentile(struct_first, 0.99));
  return 0;
}
