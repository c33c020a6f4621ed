// Scenarios: tensor maps inside structure parameters, as CUTLASS 3.x passes them (one Params struct per kernel,
// each TMA copy atom's CUtensorMap 128-byte aligned inside it), and large parameters that hold none.
//
//   cutlass_params       device_kernel<GemmUniversal>(Params): A B C D maps at +128 +384 +896 +1152 of a 1792-byte
//                        struct among pointers and scalars; TG_STRUCT_BAD=d transposes D; 5 launches, then D
//                        rewritten in place (transposed) for a sixth when TG_STRUCT_MUTATE=1
//   grouped_templates    the grouped (ptr-array) GEMM form: A and B are per-group templates (every dim 1, NULL
//                        address) that device code rewrites; D real
//   large_param_no_maps  a 3144-byte parameter (multi_tensor_apply's size) of pointers, sizes and zeros
//   cutlass_first_unreadable  the cutlass_params kernel's first launch passes its buffer without
//                        CU_LAUNCH_PARAM_BUFFER_SIZE (no bytes tmaguard may read, so nothing to search), then 3
//                        ordinary launches follow
//   pointer_array_first  an unrelated kernel whose 128-byte parameter is no map (PyTorch's Array<char*, 16>, 8-byte
//                        aligned at offset 8) launches first; then the cutlass_params kernel, 3 launches
//   cutlass_first_changes TG_FIRST=zero: the first launch passes an all-zero Params (a warm-up), =without_d: one
//                        without D's map, =partial: the extra form with BUFFER_SIZE covering only the first 600 bytes
//                        of the struct; then 3 ordinary launches (TG_STRUCT_BAD=d: D transposed)
//   lists_rewritten      PyTorch's foreach kernels: a 3368-byte TensorListMetadata (8-byte aligned) and a 3456-byte
//                        list (a multiple of 64 by chance), each first launched with 20 tensors and zeros, then
//                        rewritten with other bytes on each of 200 launches; then (TG_STRUCT_BAD=d) the 3456-byte
//                        one holds a transposed D map at +2048, a place that was empty at its first launch
//   struct_moves         the grouped form (A, B per-group templates, C and D real) launched as a training loop does:
//                        C and D 1 MiB further on each of TG_MOVES steps (default 10), then one launch each with D
//                        8 bytes off the driver's alignment, with template A given an address, and with D NULL
//   maps_everywhere      an 8960-byte parameter whose launch i holds one map at +128*i and zeros (70 launches):
//                        a new map in a watched place on every launch
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>

#include "client.h"
#include "tmaguard/tensormap.h"

namespace client {
namespace {

constexpr uint64_t kBase = 0x7f0000000000ULL, kStep = 0x1000000ULL;
const char* const kCutlass = "_ZN7cutlass13device_kernelINS_4gemm6kernel13GemmUniversalIiEEEEvNT_6ParamsE";

// A 2-D bf16 matrix (rows x cols, row-major) as a TMA map: dims {cols, rows}; transposed: the same memory seen
// column-major.
CUtensorMap matrix(uint64_t addr, uint64_t rows, uint64_t cols, bool transposed = false) {
  Tensor t = transposed ? Tensor{addr, {rows, cols}, {2 * rows}} : Tensor{addr, {cols, rows}, {2 * cols}};
  MapShape s;
  s.box = {64, 64};
  return encode_map(t, s);
}

CUtensorMap template_map() {
  tmaguard::EncodeArgs a;  // what CUTLASS's grouped GEMM keeps per group before device code fills it in
  a.dtype = CU_TENSOR_MAP_DATA_TYPE_UINT16;
  a.rank = 2;
  a.address = 0;
  a.dims = {1, 1};
  a.strides = {16};
  a.box = {64, 128};
  a.element_strides = {1, 1};
  a.swizzle = CU_TENSOR_MAP_SWIZZLE_128B;
  CUtensorMap m;
  if (tmaguard::encode(a, reinterpret_cast<uint8_t*>(&m)) != 0) die("template encode failed");
  return m;
}

template <typename T>
void put(std::vector<uint8_t>& s, std::size_t at, const T& v) {
  std::memcpy(s.data() + at, &v, sizeof v);
}

// The Params struct: problem shape and scalars up front, pointers between the maps, as CUTLASS's are laid out.
std::vector<uint8_t> params(const CUtensorMap& a, const CUtensorMap& b, const CUtensorMap* c, const CUtensorMap& d) {
  std::vector<uint8_t> s(1792, 0);
  const int32_t shape[4] = {512, 256, 128, 1};
  put(s, 0, shape);
  put(s, 16, 1.0f);
  put(s, 20, 0.0f);
  put(s, 32, kBase + 7 * kStep);  // a workspace pointer
  put(s, 128, a);
  put(s, 264, uint64_t{512});
  put(s, 384, b);
  put(s, 520, kBase + 8 * kStep);
  if (c) put(s, 896, *c);
  put(s, 1152, d);
  put(s, 1288, uint64_t{0x7fffffffULL});
  return s;
}

int cutlass_params() {
  const char* bad = std::getenv("TG_STRUCT_BAD");
  const bool d_bad = bad && std::string(bad) == "d";
  const CUtensorMap a = matrix(kBase, 512, 128), b = matrix(kBase + kStep, 256, 128), c = matrix(kBase + 2 * kStep, 512, 256);
  const CUtensorMap d = matrix(kBase + 3 * kStep, 512, 256, d_bad);
  Kernel k = make_kernel_raw(kCutlass, {params(a, b, &c, d)}, {128});
  for (int i = 0; i < 5; ++i) launch(k);
  if (const char* m = std::getenv("TG_STRUCT_MUTATE"); m && std::string(m) == "1") {
    put(k.values[0], 1152, matrix(kBase + 3 * kStep, 512, 256, true));  // same storage, D now transposed
    launch(k);
  }
  return finish(ran(k));
}

int grouped_templates() {
  const CUtensorMap d = matrix(kBase + 3 * kStep, 512, 256);
  const Kernel k = make_kernel_raw(kCutlass, {params(template_map(), template_map(), nullptr, d)}, {128});
  for (int i = 0; i < 3; ++i) launch(k);
  return finish(ran(k));
}

int struct_moves() {
  const CUtensorMap c = matrix(kBase + 2 * kStep, 512, 256), d = matrix(kBase + 3 * kStep, 512, 256);
  Kernel k = make_kernel_raw(kCutlass, {params(template_map(), template_map(), &c, d)}, {128});
  auto address = [&](std::size_t at) {
    uint64_t a;
    std::memcpy(&a, k.values[0].data() + at, 8);
    return a;
  };
  auto place = [&](std::size_t at, uint64_t a) { put(k.values[0], at, a); };
  const char* n = std::getenv("TG_MOVES");
  const int steps = n ? std::atoi(n) : 10;
  launch(k);
  for (int step = 1; step <= steps; ++step) {
    for (const std::size_t at : {std::size_t{896}, std::size_t{1152}}) place(at, address(at) + 0x100000);
    launch(k);
  }
  const uint64_t d_was = address(1152);
  place(1152, d_was + 8);
  launch(k);
  place(1152, d_was);
  place(128, kBase + 9 * kStep);  // template A with an address: moved, yet still a template (not judged)
  launch(k);
  place(128, 0);
  place(1152, 0);
  launch(k);
  return finish(ran(k));
}

int large_param_no_maps() {
  std::vector<uint8_t> s(3144, 0);  // multi_tensor_apply's TensorListMetadata: pointers, sizes, block-to-tensor maps
  for (std::size_t i = 0; i < 110; ++i) put(s, 8 * i, kBase + i * 0x4000);
  for (std::size_t i = 0; i < 110; ++i) put(s, 880 + 8 * i, int64_t{4096 + int64_t(i)});
  for (std::size_t i = 0; i < 320; ++i) s[1760 + i] = static_cast<uint8_t>(i % 7);
  for (std::size_t i = 0; i < 320; ++i) put(s, 2080 + 2 * i, static_cast<uint16_t>(i));
  const Kernel k = make_kernel_raw("multi_tensor_apply_kernel", {s, std::vector<uint8_t>(4, 1)}, {8, 4});
  for (int i = 0; i < 3; ++i) launch(k);
  return finish(ran(k));
}

int cutlass_first_unreadable() {
  const char* bad = std::getenv("TG_STRUCT_BAD");
  const CUtensorMap a = matrix(kBase, 512, 128), b = matrix(kBase + kStep, 256, 128), c = matrix(kBase + 2 * kStep, 512, 256);
  const CUtensorMap d = matrix(kBase + 3 * kStep, 512, 256, bad && std::string(bad) == "d");
  const Kernel k = make_kernel_raw(kCutlass, {params(a, b, &c, d)}, {128});
  std::vector<uint8_t> buffer(112 + 1792);  // the struct where the driver puts it (offset 112)
  std::memcpy(buffer.data() + 112, k.values[0].data(), 1792);
  void* extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, buffer.data(), CU_LAUNCH_PARAM_END};
  auto fn = reinterpret_cast<PFN_cuLaunchKernel_v4000>(resolve("cuLaunchKernel", false, 4000));
  const CUresult rc = fn(static_cast<CUfunction>(k.handle), 1, 1, 1, 128, 1, 1, 0, nullptr, nullptr, extra);
  (rc == CUDA_SUCCESS ? g_ok : g_failed)++;
  for (int i = 0; i < 3; ++i) launch(k);
  return finish(ran(k));
}

int pointer_array_first() {
  std::vector<uint8_t> pointers(128, 0);  // Array<char*, 16>: two tensors, the rest NULL
  put(pointers, 0, kBase + 9 * kStep);
  put(pointers, 8, kBase + 10 * kStep);
  const Kernel elementwise =
      make_kernel_raw("_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_11FillFunctorIfEENS_6detail5ArrayIPcLi16EEEEEviT0_T1_",
                      {std::vector<uint8_t>(8, 1), pointers}, {8, 8});
  launch(elementwise);
  const char* bad = std::getenv("TG_STRUCT_BAD");
  const CUtensorMap a = matrix(kBase, 512, 128), b = matrix(kBase + kStep, 256, 128), c = matrix(kBase + 2 * kStep, 512, 256);
  const CUtensorMap d = matrix(kBase + 3 * kStep, 512, 256, bad && std::string(bad) == "d");
  const Kernel k = make_kernel_raw(kCutlass, {params(a, b, &c, d)}, {128});
  for (int i = 0; i < 3; ++i) launch(k);
  return finish(ran(k) + ran(elementwise));
}

int cutlass_first_changes() {
  const std::string first = std::getenv("TG_FIRST") ? std::getenv("TG_FIRST") : "zero";
  const char* bad = std::getenv("TG_STRUCT_BAD");
  const CUtensorMap a = matrix(kBase, 512, 128), b = matrix(kBase + kStep, 256, 128), c = matrix(kBase + 2 * kStep, 512, 256);
  const CUtensorMap d = matrix(kBase + 3 * kStep, 512, 256, bad && std::string(bad) == "d");
  Kernel k = make_kernel_raw(kCutlass, {params(a, b, &c, d)}, {128});
  const std::vector<uint8_t> real = k.values[0];
  if (first == "partial") {
    std::vector<uint8_t> buffer(112 + 1792);
    std::memcpy(buffer.data() + 112, real.data(), 1792);
    std::size_t size = 112 + 600;  // the caller declares less than the struct: C and D are out of reach
    void* extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, buffer.data(), CU_LAUNCH_PARAM_BUFFER_SIZE, &size,
                     CU_LAUNCH_PARAM_END};
    auto fn = reinterpret_cast<PFN_cuLaunchKernel_v4000>(resolve("cuLaunchKernel", false, 4000));
    const CUresult rc = fn(static_cast<CUfunction>(k.handle), 1, 1, 1, 128, 1, 1, 0, nullptr, nullptr, extra);
    (rc == CUDA_SUCCESS ? g_ok : g_failed)++;
  } else {
    if (first == "zero")
      std::fill(k.values[0].begin(), k.values[0].end(), 0);
    else  // without_d
      std::fill(k.values[0].begin() + 1152, k.values[0].begin() + 1280, 0);
    launch(k);
    k.values[0] = real;
  }
  for (int i = 0; i < 3; ++i) launch(k);
  return finish(ran(k));
}

// The bytes of a tensor list: `n` pointers, their sizes, then zeros.
std::vector<uint8_t> tensor_list(std::size_t size, std::size_t n) {
  std::vector<uint8_t> s(size, 0);
  for (std::size_t i = 0; i < n; ++i) put(s, 8 * i, kBase + i * 0x4000);
  for (std::size_t i = 0; i < n; ++i) put(s, 880 + 8 * i, int64_t{4096 + int64_t(i)});
  return s;
}

int lists_rewritten() {
  const char* bad = std::getenv("TG_STRUCT_BAD");
  Kernel odd = make_kernel_raw("_ZN2at6native18multi_tensor_apply_kernelILi1EEEvNS0_18TensorListMetadataILi1EEE",
                               {tensor_list(3368, 20), std::vector<uint8_t>(4, 1)}, {8, 4});
  Kernel even = make_kernel_raw("_ZN2at6native18multi_tensor_apply_kernelILi2EEEvNS0_18TensorListMetadataILi2EEE",
                                {tensor_list(3456, 20), std::vector<uint8_t>(4, 1)}, {8, 4});
  launch(odd);
  launch(even);
  uint64_t x = 0x9e3779b97f4a7c15ULL;  // xorshift: new pointers, sizes and block maps on every launch
  for (int i = 0; i < 200; ++i) {
    for (Kernel* k : {&odd, &even})
      for (std::size_t at = 0; at + 8 <= k->values[0].size(); at += 8) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        put(k->values[0], at, x);
      }
    launch(odd);
    launch(even);
  }
  if (bad && std::string(bad) == "d") {
    even.values[0] = tensor_list(3456, 20);
    put(even.values[0], 2048, matrix(kBase + 3 * kStep, 512, 256, true));
    launch(even);
  }
  return finish(ran(odd) + ran(even));
}

int maps_everywhere() {
  Kernel k = make_kernel_raw("maps_everywhere_kernel", {std::vector<uint8_t>(8960, 0)}, {128});
  for (std::size_t i = 0; i < 70; ++i) {
    std::fill(k.values[0].begin(), k.values[0].end(), 0);
    put(k.values[0], 128 * i, matrix(kBase + i * kStep, 512, 256));
    launch(k);
  }
  return finish(ran(k));
}

}  // namespace

const std::vector<Scenario>& struct_scenarios() {
  static const std::vector<Scenario> v = {
      {"cutlass_params", cutlass_params},
      {"grouped_templates", grouped_templates},
      {"large_param_no_maps", large_param_no_maps},
      {"cutlass_first_unreadable", cutlass_first_unreadable},
      {"pointer_array_first", pointer_array_first},
      {"cutlass_first_changes", cutlass_first_changes},
      {"lists_rewritten", lists_rewritten},
      {"maps_everywhere", maps_everywhere},
      {"struct_moves", struct_moves},
  };
  return v;
}

}  // namespace client
