// Does a TMA store write past the end of its map's innermost extent, to the end of a 16-byte chunk? (Triton #11583
// reports it on an H100: int8 N=466 into out[:, :466] of a (32, 512) buffer overwrote 14 neighbouring columns.)
//
// A (32, 512) uint8 buffer, zero. A map over its first 466 columns (dims {466, 32}, row stride 512 B, box {256, 32});
// one CTA stores a tile of 0xAB at columns 256..511 of the map, which the map clips at 466. Counted per run: bytes
// written at columns 466 and up (past the map's extent), and below 256 (outside the tile). Controls: extent 480 (a
// chunk boundary) and a tile at columns 0..255 (inside the extent).
//
//   nvcc -arch=sm_90a -o tma_store_spill tests/gpu/tma_store_spill.cu -lcuda && ./tma_store_spill
#include <cuda.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <vector>

constexpr int kRows = 32, kCols = 512, kBox = 256;

__global__ void store_tile(const __grid_constant__ CUtensorMap map, int col0) {
  __shared__ alignas(128) uint8_t tile[kRows * kBox];
  for (int i = threadIdx.x; i < kRows * kBox; i += blockDim.x) tile[i] = 0xAB;
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  __syncthreads();
  if (threadIdx.x == 0) {
    const uint32_t smem = static_cast<uint32_t>(__cvta_generic_to_shared(tile));
    asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%1, %2}], [%3];" ::"l"(&map), "r"(col0),
                 "r"(0), "r"(smem)
                 : "memory");
    asm volatile("cp.async.bulk.commit_group;" ::: "memory");
    asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
  }
}

int run(uint64_t extent, int col0) {
  uint8_t* d = nullptr;
  if (cudaMalloc(&d, kRows * kCols) != cudaSuccess || cudaMemset(d, 0, kRows * kCols) != cudaSuccess) return 1;
  CUtensorMap map;
  const cuuint64_t dims[2] = {extent, kRows}, strides[1] = {kCols};
  const cuuint32_t box[2] = {kBox, kRows}, es[2] = {1, 1};
  const CUresult rc = cuTensorMapEncodeTiled(&map, CU_TENSOR_MAP_DATA_TYPE_UINT8, 2, d, dims, strides, box, es,
                                             CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_NONE,
                                             CU_TENSOR_MAP_L2_PROMOTION_NONE, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (rc != CUDA_SUCCESS) return std::printf("encode failed: %d\n", static_cast<int>(rc)), 1;
  store_tile<<<1, 128>>>(map, col0);
  if (cudaDeviceSynchronize() != cudaSuccess) return std::printf("kernel failed\n"), 1;
  std::vector<uint8_t> h(kRows * kCols);
  cudaMemcpy(h.data(), d, h.size(), cudaMemcpyDeviceToHost);
  cudaFree(d);
  long past = 0, before = 0, inside = 0, last = -1;
  for (int r = 0; r < kRows; ++r)
    for (int c = 0; c < kCols; ++c) {
      if (h[r * kCols + c] != 0xAB) continue;
      if (c >= static_cast<int>(extent)) ++past, last = last > c ? last : c;
      else if (c < col0) ++before;
      else ++inside;
    }
  std::printf("SPILL extent=%llu tile_cols=%d..%d inside=%ld past_extent=%ld (per row %ld, last column %ld) "
              "outside_tile=%ld\n",
              static_cast<unsigned long long>(extent), col0, col0 + kBox - 1, inside, past, past / kRows, last, before);
  return 0;
}

int main() {
  int bad = 0;
  bad |= run(466, 256);  // the report's case: the map's extent ends 2 bytes into a 16-byte chunk
  bad |= run(480, 256);  // control: the extent ends on a chunk boundary
  bad |= run(466, 0);    // control: the tile lies inside the extent
  bad |= run(470, 256);  // another mid-chunk end
  return bad;
}
