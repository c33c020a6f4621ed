// GPU test kernels (sm_90a) carrying FlashAttention-4 SM100 backward's name and tensor-map signature. They really
// TMA-load K and V and TMA-store dK = 2*K and dV = 4*V, tile by tile, through the dK/dV descriptors they are given:
// with a K-major dK the output is exact; with a seqlen-contiguous dK the stores land in the wrong places (or are
// clipped), silently, which is the bug tmaguard exists for. Also the empty kernels the overhead benchmark launches.
// Built into the test programs and, as a cubin, loaded through cudaLibraryLoadData / cuModuleLoadData.
#include <cuda.h>
#include <cuda_bf16.h>
#include <cstddef>
#include <cstdint>

#define FA4_1CTA kernel_cutlass_kernel_flash_attncuteflash_bwd_sm100FlashAttentionBackwardSm100_object_at__tmaguard_0
// clang-format off
#define FA4_HD256 kernel_cutlass_kernel_flash_attncutesm100_hd256_2cta_fmha_backward_dkdvkernelBlackwellFusedMultiHeadAttentionBackwardDKDVKernel_object_at__tmaguard_0
// clang-format on
#define FA4_BCAST kernel_cutlass_kernel_flash_attncuteflash_bwd_sm100FlashAttentionBackwardSm100_object_at__tmaguardbk_0
#define FA4_2CTA \
  kernel_cutlass_kernel_flash_attncuteflash_bwd_sm100FlashAttentionBackwardSm100_object_at__tmaguard2cta_0

namespace {

constexpr int kTileS = 128, kTileD = 64, kThreads = 128;
constexpr uint32_t kTileBytes = kTileS * kTileD * 2;

__device__ __forceinline__ uint32_t smem_u32(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// Loads `dtiles` 128 x 64 tiles of src (rank 4, or rank 3 for a broadcast source whose batch mode the map drops),
// scales them and TMA-stores them through dst (rank 4).
template <int kSrcRank>
__device__ void scale_tiles(const CUtensorMap* src, const CUtensorMap* dst, float factor, uint8_t* tile, uint64_t* bar,
                            uint32_t& phase, int dtiles) {
  const int s0 = blockIdx.x * kTileS, h = blockIdx.y, b = blockIdx.z;
  for (int dc = 0; dc < dtiles; ++dc) {
    if (threadIdx.x == 0) {
      asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_u32(bar)), "r"(kTileBytes)
                   : "memory");
      if constexpr (kSrcRank == 4) {
        asm volatile(
            "cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4, "
            "%5}], [%6];" ::"r"(smem_u32(tile)),
            "l"(reinterpret_cast<uint64_t>(src)), "r"(dc * kTileD), "r"(s0), "r"(h), "r"(b), "r"(smem_u32(bar))
            : "memory");
      } else {
        asm volatile(
            "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, "
            "%4}], [%5];" ::"r"(smem_u32(tile)),
            "l"(reinterpret_cast<uint64_t>(src)), "r"(dc * kTileD), "r"(s0), "r"(h), "r"(smem_u32(bar))
            : "memory");
      }
    }
    uint32_t done = 0;
    while (!done) {
      asm volatile(
          "{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }"
          : "=r"(done)
          : "r"(smem_u32(bar)), "r"(phase)
          : "memory");
    }
    phase ^= 1;
    // Element-wise, so the 128B swizzle of the tile does not matter.
    auto* e = reinterpret_cast<__nv_bfloat16*>(tile);
    for (int i = threadIdx.x; i < kTileS * kTileD; i += kThreads) e[i] = __float2bfloat16(__bfloat162float(e[i]) * factor);
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    __syncthreads();
    if (threadIdx.x == 0) {
      asm volatile("cp.async.bulk.tensor.4d.global.shared::cta.tile.bulk_group [%0, {%1, %2, %3, %4}], [%5];" ::"l"(
                       reinterpret_cast<uint64_t>(dst)),
                   "r"(dc * kTileD), "r"(s0), "r"(h), "r"(b), "r"(smem_u32(tile))
                   : "memory");
      asm volatile("cp.async.bulk.commit_group;" ::: "memory");
      asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory");
    }
    __syncthreads();
  }
}

// dK = 2 K and dV = 4 V, tile by tile, through the maps the kernel is given; `dtiles` = head dim / 64.
template <int kKRank = 4>
__device__ void body(const CUtensorMap* k, const CUtensorMap* v, const CUtensorMap* dk, const CUtensorMap* dv,
                     int dtiles = 2) {
  extern __shared__ uint8_t raw[];
  __shared__ __align__(8) uint64_t bar;
  uint8_t* tile = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(raw) + 1023) & ~uintptr_t(1023));
  if (threadIdx.x == 0) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(smem_u32(&bar)) : "memory");
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  uint32_t phase = 0;
  scale_tiles<kKRank>(k, dk, 2.0f, tile, &bar, phase, dtiles);
  scale_tiles<4>(v, dv, 4.0f, tile, &bar, phase, dtiles);
}

}  // namespace

// 1-CTA signature: Q K V dO dV dK among scalars, as CuTe DSL flattens it.
extern "C" __global__ void __launch_bounds__(kThreads)
    FA4_1CTA(int seqlen, const __grid_constant__ CUtensorMap q, const __grid_constant__ CUtensorMap k,
             const __grid_constant__ CUtensorMap v, float scale, const __grid_constant__ CUtensorMap dout,
             const __grid_constant__ CUtensorMap dv, const __grid_constant__ CUtensorMap dk, long long tail) {
  body(&k, &v, &dk, &dv);
}

// 2-CTA signature: Q Qt K Kt V dO dOt dV dK.
extern "C" __global__ void __launch_bounds__(kThreads)
    FA4_2CTA(int seqlen, const __grid_constant__ CUtensorMap q, const __grid_constant__ CUtensorMap qt,
             const __grid_constant__ CUtensorMap k, float scale, const __grid_constant__ CUtensorMap kt,
             const __grid_constant__ CUtensorMap v, const __grid_constant__ CUtensorMap dout,
             const __grid_constant__ CUtensorMap doutt, const __grid_constant__ CUtensorMap dv,
             const __grid_constant__ CUtensorMap dk, long long tail) {
  body(&k, &v, &dk, &dv);
}

// Head dim 256 (BlackwellFusedMultiHeadAttentionBackwardDKDVKernel's signature): K V Q Qt dO dOt dK dV.
extern "C" __global__ void __launch_bounds__(kThreads)
    FA4_HD256(int seqlen, const __grid_constant__ CUtensorMap k, const __grid_constant__ CUtensorMap v,
              const __grid_constant__ CUtensorMap q, const __grid_constant__ CUtensorMap qt, float scale,
              const __grid_constant__ CUtensorMap dout, const __grid_constant__ CUtensorMap doutt,
              const __grid_constant__ CUtensorMap dk, const __grid_constant__ CUtensorMap dv, long long tail) {
  body(&k, &v, &dk, &dv, 4);
}

// 1-CTA with a broadcast K (stride 0 over the batch): K's map has rank 3, dK's rank 4.
extern "C" __global__ void __launch_bounds__(kThreads)
    FA4_BCAST(int seqlen, const __grid_constant__ CUtensorMap q, const __grid_constant__ CUtensorMap k,
              const __grid_constant__ CUtensorMap v, float scale, const __grid_constant__ CUtensorMap dout,
              const __grid_constant__ CUtensorMap dv, const __grid_constant__ CUtensorMap dk, long long tail) {
  body<3>(&k, &v, &dk, &dv);
}

// A CUTLASS 3.x-style kernel: cutlass::device_kernel<Op>(Op::Params), one by-value Params struct holding the tensor
// maps among scalars, laid out like PyTorch's grouped GEMM (1792 bytes, maps at 128, 384 and 1152). It computes
// D = A + B (row-major M x N bf16, 64 x 64 tiles): TMA loads of A and B, TMA store of D, all through the maps inside
// the struct. A D map of the transposed view (the bug class a CUTLASS epilogue suffers) silently scrambles D.
namespace cutlass {
namespace gemm {
namespace kernel {
template <int kStages>
struct GemmUniversal {
  struct Params {
    int m, n, k, l;                  // 0
    const void *ptr_a, *ptr_b;       // 16
    void* ptr_d;                     // 32
    long long stride_a, stride_b;    // 40
    unsigned long long sched0[9];    // 56: tile-scheduler fields (pointers, counts)
    CUtensorMap tma_a;               // 128
    unsigned long long sched1[16];   // 256
    CUtensorMap tma_b;               // 384
    unsigned long long sched2[80];   // 512: epilogue fusion arguments
    CUtensorMap tma_d;               // 1152
    unsigned long long sched3[64];   // 1280
  };
};
}  // namespace kernel
}  // namespace gemm

template <typename Op>
__global__ void __launch_bounds__(kThreads) device_kernel(const __grid_constant__ typename Op::Params params) {
  extern __shared__ uint8_t raw[];
  __shared__ __align__(8) uint64_t bar;
  constexpr uint32_t kTile = 64 * 64 * 2;
  uint8_t* ta = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(raw) + 1023) & ~uintptr_t(1023));
  uint8_t* tb = ta + kTile;
  const int n0 = blockIdx.x * 64, m0 = blockIdx.y * 64;
  if (threadIdx.x == 0) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(smem_u32(&bar)) : "memory");
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_u32(&bar)), "r"(2 * kTile)
                 : "memory");
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], "
        "[%4];" ::"r"(smem_u32(ta)),
        "l"(reinterpret_cast<uint64_t>(&params.tma_a)), "r"(n0), "r"(m0), "r"(smem_u32(&bar))
        : "memory");
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], "
        "[%4];" ::"r"(smem_u32(tb)),
        "l"(reinterpret_cast<uint64_t>(&params.tma_b)), "r"(n0), "r"(m0), "r"(smem_u32(&bar))
        : "memory");
  }
  uint32_t done = 0;
  while (!done) {
    asm volatile("{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }"
                 : "=r"(done)
                 : "r"(smem_u32(&bar)), "r"(0u)
                 : "memory");
  }
  // Element-wise (A and B share the 128B swizzle), so the tile layout does not matter.
  auto* a = reinterpret_cast<__nv_bfloat16*>(ta);
  const auto* b = reinterpret_cast<const __nv_bfloat16*>(tb);
  for (int i = threadIdx.x; i < 64 * 64; i += kThreads) a[i] = __float2bfloat16(__bfloat162float(a[i]) + __bfloat162float(b[i]));
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  __syncthreads();
  if (threadIdx.x == 0) {
    asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group [%0, {%1, %2}], [%3];" ::"l"(
                     reinterpret_cast<uint64_t>(&params.tma_d)),
                 "r"(n0), "r"(m0), "r"(smem_u32(ta))
                 : "memory");
    asm volatile("cp.async.bulk.commit_group;" ::: "memory");
    asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory");
  }
}
}  // namespace cutlass
using GemmOp = cutlass::gemm::kernel::GemmUniversal<2>;
static_assert(sizeof(GemmOp::Params) == 1792 && offsetof(GemmOp::Params, tma_a) == 128 &&
                  offsetof(GemmOp::Params, tma_b) == 384 && offsetof(GemmOp::Params, tma_d) == 1152,
              "the Params layout of PyTorch's grouped GEMM");

// Overhead benchmark kernels: no rule matches / four maps (Triton-like) / the FA4 signature / a CUTLASS-style
// Params struct holding three maps / a 3144-byte struct without maps (PyTorch's multi_tensor_apply); all empty.
struct alignas(64) BenchStructParams {
  unsigned char bytes[1792];
};
struct BenchLargeParams {
  unsigned long long words[393];  // 3144 bytes
};
extern "C" __global__ void bench_struct3_kernel(const __grid_constant__ BenchStructParams p) {}
extern "C" __global__ void bench_large_param_kernel(const __grid_constant__ BenchLargeParams p) {}
extern "C" __global__ void bench_plain_kernel(int n, float* out) {}
extern "C" __global__ void bench_tma4_kernel(const __grid_constant__ CUtensorMap a,
                                             const __grid_constant__ CUtensorMap b,
                                             const __grid_constant__ CUtensorMap c,
                                             const __grid_constant__ CUtensorMap d, int m) {}
extern "C" __global__ void kernel_cutlass_kernel_flash_attncuteflash_bwd_sm100FlashAttentionBackwardSm100_bench_0(
    int seqlen, const __grid_constant__ CUtensorMap q, const __grid_constant__ CUtensorMap k,
    const __grid_constant__ CUtensorMap v, float scale, const __grid_constant__ CUtensorMap dout,
    const __grid_constant__ CUtensorMap dv, const __grid_constant__ CUtensorMap dk, long long tail) {}
