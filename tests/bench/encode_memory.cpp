// Memory bound check: resident memory before and after N distinct cuTensorMapEncodeTiled calls through tmaguard
// (stand-in driver). Provenance is kept in a fixed table, so growth must stay bounded whatever N is.
// Prints "MEMORY encodes=N rss_before_kib=... rss_after_kib=... growth_kib=...".
#include <cuda.h>
#include <cudaTypedefs.h>
#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "rss.h"

int main(int argc, char** argv) {
  const long n = argc > 1 ? std::atol(argv[1]) : 10000000;
  void* lib = dlopen("libcuda.so.1", RTLD_NOW);
  if (!lib) return 2;
  reinterpret_cast<PFN_cuInit_v2000>(dlsym(lib, "cuInit"))(0);
  auto enc = reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(dlsym(lib, "cuTensorMapEncodeTiled"));
  const cuuint64_t dims[2] = {128, 4096}, strides[1] = {256};
  const cuuint32_t box[2] = {64, 128}, es[2] = {1, 1};
  CUtensorMap m;
  auto one = [&](long i) {
    return enc(&m, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, reinterpret_cast<void*>(0x7f0000000000ULL + 16ULL * i), dims,
               strides, box, es, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
               CU_TENSOR_MAP_L2_PROMOTION_L2_128B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  };
  for (long i = 0; i < 10000; ++i) one(i);  // warm: tables allocated, pages touched
  const long before = rss_kib();
  for (long i = 0; i < n; ++i)
    if (one(i) != CUDA_SUCCESS) return 3;
  const long after = rss_kib();
  std::printf("MEMORY encodes=%ld rss_before_kib=%ld rss_after_kib=%ld growth_kib=%ld\n", n, before, after,
              after - before);
  return 0;
}
