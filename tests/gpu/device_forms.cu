// GPU check program: descriptors built on the device with PTX tensormap.replace, exactly the way Triton lowers
// tl.make_tensor_descriptor (TMAToLLVM.cpp: zero-fill 128 bytes of shared memory, replace global_address, rank - 1,
// each box_dim, global_dim, global_stride (bytes), element_stride, then elemtype, interleave_layout, swizzle_mode,
// fill_mode, and tensormap.cp_fenceproxy to global memory), plus CUTLASS's per-group update of a driver-encoded
// template in global memory (global_address, global_dim, global_stride replaced). Prints one golden line per
// descriptor (tests/data/device_built_h200.txt's format: the arguments, then map=<128 bytes in hex>).
//
//   device_forms
#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#define CHECK(x)                                                                              \
  do {                                                                                        \
    cudaError_t e_ = (x);                                                                     \
    if (e_ != cudaSuccess) {                                                                  \
      std::fprintf(stderr, "%s: %s\n", #x, cudaGetErrorString(e_));                           \
      std::exit(10);                                                                          \
    }                                                                                         \
  } while (0)

struct Geometry {
  uint64_t addr;
  uint32_t rank;
  uint32_t dims[5], box[5], es[5];
  uint64_t strides[4];
};

__device__ __forceinline__ uint32_t smem_u32(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// ord is an immediate in PTX: one replace per dimension index.
#define TG_REPLACE_DIM(field, type, cons, ord, val)                                                                \
  asm volatile("tensormap.replace.tile." field ".shared::cta.b1024." type " [%0], " #ord ", %1;" ::"r"(s), cons(val) \
               : "memory")

template <int kRankM1, int kElem, int kInterleave, int kSwizzle, int kFill>
__global__ void build(Geometry g, uint8_t* out) {
  __shared__ alignas(128) uint32_t desc[32];
  const uint32_t s = smem_u32(desc);
  if (threadIdx.x < 32) desc[threadIdx.x] = 0;
  __syncwarp();
  if (threadIdx.x == 0) {
    asm volatile("tensormap.replace.tile.global_address.shared::cta.b1024.b64 [%0], %1;" ::"r"(s), "l"(g.addr)
                 : "memory");
    asm volatile("tensormap.replace.tile.rank.shared::cta.b1024.b32 [%0], %1;" ::"r"(s), "n"(kRankM1) : "memory");
    const uint32_t rank = kRankM1 + 1;
    if (rank > 0) TG_REPLACE_DIM("box_dim", "b32", "r", 0, g.box[0]);
    if (rank > 1) TG_REPLACE_DIM("box_dim", "b32", "r", 1, g.box[1]);
    if (rank > 2) TG_REPLACE_DIM("box_dim", "b32", "r", 2, g.box[2]);
    if (rank > 3) TG_REPLACE_DIM("box_dim", "b32", "r", 3, g.box[3]);
    if (rank > 4) TG_REPLACE_DIM("box_dim", "b32", "r", 4, g.box[4]);
    if (rank > 0) TG_REPLACE_DIM("global_dim", "b32", "r", 0, g.dims[0]);
    if (rank > 1) TG_REPLACE_DIM("global_dim", "b32", "r", 1, g.dims[1]);
    if (rank > 2) TG_REPLACE_DIM("global_dim", "b32", "r", 2, g.dims[2]);
    if (rank > 3) TG_REPLACE_DIM("global_dim", "b32", "r", 3, g.dims[3]);
    if (rank > 4) TG_REPLACE_DIM("global_dim", "b32", "r", 4, g.dims[4]);
    if (rank > 1) TG_REPLACE_DIM("global_stride", "b64", "l", 0, g.strides[0]);
    if (rank > 2) TG_REPLACE_DIM("global_stride", "b64", "l", 1, g.strides[1]);
    if (rank > 3) TG_REPLACE_DIM("global_stride", "b64", "l", 2, g.strides[2]);
    if (rank > 4) TG_REPLACE_DIM("global_stride", "b64", "l", 3, g.strides[3]);
    if (rank > 0) TG_REPLACE_DIM("element_stride", "b32", "r", 0, g.es[0]);
    if (rank > 1) TG_REPLACE_DIM("element_stride", "b32", "r", 1, g.es[1]);
    if (rank > 2) TG_REPLACE_DIM("element_stride", "b32", "r", 2, g.es[2]);
    if (rank > 3) TG_REPLACE_DIM("element_stride", "b32", "r", 3, g.es[3]);
    if (rank > 4) TG_REPLACE_DIM("element_stride", "b32", "r", 4, g.es[4]);
    asm volatile("tensormap.replace.tile.elemtype.shared::cta.b1024.b32 [%0], %1;" ::"r"(s), "n"(kElem) : "memory");
    asm volatile("tensormap.replace.tile.interleave_layout.shared::cta.b1024.b32 [%0], %1;" ::"r"(s), "n"(kInterleave)
                 : "memory");
    asm volatile("tensormap.replace.tile.swizzle_mode.shared::cta.b1024.b32 [%0], %1;" ::"r"(s), "n"(kSwizzle)
                 : "memory");
    asm volatile("tensormap.replace.tile.fill_mode.shared::cta.b1024.b32 [%0], %1;" ::"r"(s), "n"(kFill) : "memory");
  }
  __syncwarp();
  if (threadIdx.x < 32)
    asm volatile(
        "tensormap.cp_fenceproxy.global.shared::cta.tensormap::generic.release.gpu.sync.aligned [%0], [%1], 128;" ::"l"(
            out),
        "r"(s)
        : "memory");
}

// CUTLASS's grouped GEMM: a driver-encoded template in global memory gets a group's address, dims and strides.
__global__ void update_template(uint8_t* map, uint64_t addr, uint32_t dim1, uint64_t stride0) {
  if (threadIdx.x == 0) {
    asm volatile("tensormap.replace.tile.global_address.global.b1024.b64 [%0], %1;" ::"l"(map), "l"(addr) : "memory");
    asm volatile("tensormap.replace.tile.global_dim.global.b1024.b32 [%0], 1, %1;" ::"l"(map), "r"(dim1) : "memory");
    asm volatile("tensormap.replace.tile.global_stride.global.b1024.b64 [%0], 0, %1;" ::"l"(map), "l"(stride0)
                 : "memory");
  }
}

namespace {

// CUtensorMapDataType (what the golden line's dtype= holds) of a PTX tensormap elemtype code.
int api_dtype(int ptx_elem) {
  static const int kApi[] = {0, 1, 2, 3, 4, 5, 6, 7, 10, 8, 9, 11, 12};  // u8 .. bf16, tf32, tf32.ftz
  return ptx_elem < 13 ? kApi[ptx_elem] : -1;
}

std::string list(const uint32_t* v, uint32_t n) {
  std::string s;
  for (uint32_t i = 0; i < n; ++i) s += (i ? "," : "") + std::to_string(v[i]);
  return s;
}
std::string list64(const uint64_t* v, uint32_t n) {
  std::string s;
  for (uint32_t i = 0; i < n; ++i) s += (i ? "," : "") + std::to_string(v[i]);
  return s.empty() ? "-" : s;
}

void print(const char* source, const char* form, int dtype, const Geometry& g, int il, int sw, int l2, int oob,
           const uint8_t* bytes) {
  std::printf("tiled rc=0 dtype=%d rank=%u addr=0x%llx dims=%s strides=%s box=%s es=%s il=%d sw=%d l2=%d oob=%d "
              "form=%s source=%s map=",
              dtype, g.rank, static_cast<unsigned long long>(g.addr), list(g.dims, g.rank).c_str(),
              list64(g.strides, g.rank - 1).c_str(), list(g.box, g.rank).c_str(), list(g.es, g.rank).c_str(), il, sw,
              l2, oob, form, source);
  for (int i = 0; i < 128; ++i) std::printf("%02x", bytes[i]);
  std::printf("\n");
}

template <int kRankM1, int kElem, int kInterleave, int kSwizzle, int kFill>
void one(uint8_t* dev, Geometry g) {
  g.rank = kRankM1 + 1;
  build<kRankM1, kElem, kInterleave, kSwizzle, kFill><<<1, 128>>>(g, dev);
  CHECK(cudaGetLastError());
  CHECK(cudaDeviceSynchronize());
  uint8_t host[128];
  CHECK(cudaMemcpy(host, dev, 128, cudaMemcpyDeviceToHost));
  print("tensormap.replace_as_Triton_lowers_it", "device", api_dtype(kElem), g, kInterleave, kSwizzle, 0, kFill, host);
}

Geometry geo(uint64_t addr, std::vector<uint32_t> dims, std::vector<uint64_t> strides, std::vector<uint32_t> box,
             std::vector<uint32_t> es = {}) {
  Geometry g{};
  g.addr = addr;
  g.rank = static_cast<uint32_t>(dims.size());
  for (size_t i = 0; i < dims.size(); ++i) {
    g.dims[i] = dims[i];
    g.box[i] = box[i];
    g.es[i] = es.empty() ? 1 : es[i];
  }
  for (size_t i = 0; i < strides.size(); ++i) g.strides[i] = strides[i];
  return g;
}

}  // namespace

int main() {
  CHECK(cudaSetDevice(0));
  uint8_t* dev = nullptr;
  CHECK(cudaMalloc(&dev, 256));
  void* tensor = nullptr;
  CHECK(cudaMalloc(&tensor, 64 << 20));
  const uint64_t base = reinterpret_cast<uint64_t>(tensor);
  // FA4's dK (b=2, s=512, h=4, d=128, bf16), K-major and transposed; a Triton matmul operand; other types and ranks.
  one<3, 10, 0, 3, 0>(dev, geo(base, {128, 512, 4, 2}, {1024, 256, 524288}, {64, 128, 1, 1}));
  one<3, 10, 0, 3, 0>(dev, geo(base, {512, 128, 4, 2}, {1024, 131072, 524288}, {64, 128, 1, 1}));
  one<1, 10, 0, 3, 0>(dev, geo(base, {4096, 4096}, {8192}, {64, 64}));
  one<2, 6, 0, 3, 0>(dev, geo(base + 4096, {1024, 512, 3}, {2048, 1048576}, {64, 128, 1}));
  one<1, 7, 0, 2, 0>(dev, geo(base, {256, 64}, {1024}, {16, 32}));
  one<0, 0, 0, 0, 0>(dev, geo(base, {4096}, {}, {256}));
  one<1, 11, 0, 1, 0>(dev, geo(base, {64, 64}, {256}, {8, 8}));
  one<1, 8, 0, 0, 1>(dev, geo(base, {64, 64}, {256}, {32, 16}, {1, 2}));
  one<4, 9, 0, 0, 0>(dev, geo(base, {16, 4, 4, 4, 4}, {128, 512, 2048, 8192}, {16, 2, 2, 2, 2}));
  one<2, 10, 1, 0, 0>(dev, geo(base, {8, 64, 64}, {16, 1024}, {8, 8, 8}));
  // A driver-encoded template (every dim 1, as CUTLASS's grouped GEMMs keep them) updated on the device.
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult q;
  CHECK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault, &q));
  CUtensorMap tmpl;
  const cuuint64_t dims[2] = {1, 1}, strides[1] = {16};
  const cuuint32_t box[2] = {64, 128}, es[2] = {1, 1};
  if (reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(fn)(
          &tmpl, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, tensor, dims, strides, box, es, CU_TENSOR_MAP_INTERLEAVE_NONE,
          CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_128B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) != 0) {
    std::fprintf(stderr, "template encode failed\n");
    return 11;
  }
  CHECK(cudaMemcpy(dev + 128, &tmpl, 128, cudaMemcpyHostToDevice));
  update_template<<<1, 32>>>(dev + 128, base + 8192, 256, 512);
  CHECK(cudaGetLastError());
  CHECK(cudaDeviceSynchronize());
  uint8_t host[128];
  CHECK(cudaMemcpy(host, dev + 128, 128, cudaMemcpyDeviceToHost));
  // dim 0 stays 1 (the template's), dim 1 and stride 0 are the group's.
  print("driver_template_updated_by_tensormap.replace", "driver", 9, geo(base + 8192, {1, 256}, {512}, {64, 128}), 0, 3,
        2, 0, host);
  return 0;
}
