// GPU test kernels (sm_90a) carrying the names and tensor-map signatures of the rest of FlashAttention-4's backward
// family (flash-attention 0251105a): the SM90 kernel (MHA, GQA, varlen K with ptr-shift ragged dK/dV maps), the
// head-dim-256 dQ kernel and the sparse MLA dQ/dQv GEMM; and of its forward kernels (SM90 and SM100: Q K V O). Each really TMA-loads an input and TMA-stores a scaled copy
// through the output maps it is given, so a wrong output map silently lands the stores in the wrong places.
// Built into fa4_family_gpu and, as a cubin, loaded through cudaLibraryLoadData / cuModuleLoadData.
#include "fa4_kernels.cu"

#define FA4_SM90 kernel_cutlass_kernel_flash_attncuteflash_bwd_sm90FlashAttentionBackwardSm90_object_at__tmaguard_0
#define FA4_SM90_GQA \
  kernel_cutlass_kernel_flash_attncuteflash_bwd_sm90FlashAttentionBackwardSm90_object_at__tmaguardgqa_0
#define FA4_SM90_VARLEN \
  kernel_cutlass_kernel_flash_attncuteflash_bwd_sm90FlashAttentionBackwardSm90_object_at__tmaguardvarlen_0
// clang-format off
#define FA4_HD256_DQ kernel_cutlass_kernel_flash_attncutesm100_hd256_2cta_fmha_backward_dqkernelBlackwellFusedMultiHeadAttentionBackwardDQKernel_object_at__tmaguard_0
// clang-format on
#define FA4_SM90_FWD kernel_cutlass_kernel_flash_attncuteflash_fwd_sm90FlashAttentionForwardSm90_object_at__tmaguard_0
#define FA4_SM100_FWD \
  kernel_cutlass_kernel_flash_attncuteflash_fwd_sm100FlashAttentionForwardSm100_object_at__tmaguard_0
#define FA4_MLA kernel_cutlass_kernel_flash_attncuteflash_bwd_mla_dq_dqv_sm100dQdQvGemmKernel_object_at__tmaguard_0
#define FA4_MLA_DQV \
  kernel_cutlass_kernel_flash_attncuteflash_bwd_mla_dq_dqv_sm100dQdQvGemmKernel_object_at__tmaguarddqv_0

namespace {

__device__ void init_barrier(uint64_t* bar) {
  if (threadIdx.x == 0) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(smem_u32(bar)) : "memory");
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
}

__device__ uint8_t* aligned_tile(uint8_t* raw) {
  return reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(raw) + 1023) & ~uintptr_t(1023));
}

// Varlen: sequence blockIdx.z spans rows [cu[z], cu[z + 1]) of a (total, h, d) tensor. Loads 128-row tiles through
// the plain 3D map `src` and stores them, times `factor` x (z + 1) (so a row stored by the wrong sequence's tile
// shows), through the ptr-shift ragged map `dst` at coordinates
// (d, 2^30 - len + row, h, offset + len), the way FA4 SM90 addresses its varlen dK/dV: the bounds check of the ragged
// mode clips every row past the sequence's end.
__device__ void ragged_tiles(const CUtensorMap* src, const CUtensorMap* dst, float factor, const int* cu,
                             uint8_t* tile, uint64_t* bar, uint32_t& phase) {
  const int off = cu[blockIdx.z], len = cu[blockIdx.z + 1] - off;
  const int s0 = blockIdx.x * kTileS, h = blockIdx.y;
  if (s0 >= len) return;
  factor *= static_cast<float>(blockIdx.z + 1);
  for (int dc = 0; dc < 2; ++dc) {
    if (threadIdx.x == 0) {
      asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_u32(bar)), "r"(kTileBytes)
                   : "memory");
      asm volatile(
          "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4}], "
          "[%5];" ::"r"(smem_u32(tile)),
          "l"(reinterpret_cast<uint64_t>(src)), "r"(dc * kTileD), "r"(off + s0), "r"(h), "r"(smem_u32(bar))
          : "memory");
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
    auto* e = reinterpret_cast<__nv_bfloat16*>(tile);
    for (int i = threadIdx.x; i < kTileS * kTileD; i += kThreads) e[i] = __float2bfloat16(__bfloat162float(e[i]) * factor);
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    __syncthreads();
    if (threadIdx.x == 0) {
      asm volatile("cp.async.bulk.tensor.4d.global.shared::cta.tile.bulk_group [%0, {%1, %2, %3, %4}], [%5];" ::"l"(
                       reinterpret_cast<uint64_t>(dst)),
                   "r"(dc * kTileD), "r"((1 << 30) - len + s0), "r"(h), "r"(off + len), "r"(smem_u32(tile))
                   : "memory");
      asm volatile("cp.async.bulk.commit_group;" ::: "memory");
      asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory");
    }
    __syncthreads();
  }
}

}  // namespace

// FlashAttentionBackwardSm90, q heads == kv heads: Q K V dO dK dV (dK before dV). dK = 2 K, dV = 4 V.
extern "C" __global__ void __launch_bounds__(kThreads)
    FA4_SM90(const __grid_constant__ CUtensorMap q, const __grid_constant__ CUtensorMap k,
             const __grid_constant__ CUtensorMap v, const __grid_constant__ CUtensorMap dout,
             const __grid_constant__ CUtensorMap dk, const __grid_constant__ CUtensorMap dv, const float* lse,
             float scale) {
  body(&k, &v, &dk, &dv);
}

// GQA: Q K V dO as maps, dK/dV accumulators as pointers (plain stores: nothing a guard can judge). dK = 2 K, dV = 4 V.
extern "C" __global__ void __launch_bounds__(kThreads)
    FA4_SM90_GQA(const __grid_constant__ CUtensorMap q, const __grid_constant__ CUtensorMap k,
                 const __grid_constant__ CUtensorMap v, const __grid_constant__ CUtensorMap dout,
                 const __nv_bfloat16* kp, const __nv_bfloat16* vp, __nv_bfloat16* dk_accum, __nv_bfloat16* dv_accum,
                 long long n, float scale) {
  for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<long long>(gridDim.x) * blockDim.x) {
    dk_accum[i] = __float2bfloat16(__bfloat162float(kp[i]) * 2.0f);
    dv_accum[i] = __float2bfloat16(__bfloat162float(vp[i]) * 4.0f);
  }
}

// Varlen K: Q K V dO as (total, h, d) maps, dK dV ragged (ptr-shift), cu_seqlens_k. dK = 2 (z + 1) K and
// dV = 4 (z + 1) V for the rows of sequence z.
extern "C" __global__ void __launch_bounds__(kThreads)
    FA4_SM90_VARLEN(const __grid_constant__ CUtensorMap q, const __grid_constant__ CUtensorMap k,
                    const __grid_constant__ CUtensorMap v, const __grid_constant__ CUtensorMap dout,
                    const __grid_constant__ CUtensorMap dk, const __grid_constant__ CUtensorMap dv,
                    const int* cu_seqlens_q, const int* cu_seqlens_k, float scale) {
  extern __shared__ uint8_t raw[];
  __shared__ __align__(8) uint64_t bar;
  uint8_t* tile = aligned_tile(raw);
  init_barrier(&bar);
  uint32_t phase = 0;
  ragged_tiles(&k, &dk, 2.0f, cu_seqlens_k, tile, &bar, phase);
  ragged_tiles(&v, &dv, 4.0f, cu_seqlens_k, tile, &bar, phase);
}

// Head-dim-256 dQ kernel: q k v do kt dQ (kt: K's transposed view). dQ = 2 Q.
extern "C" __global__ void __launch_bounds__(kThreads)
    FA4_HD256_DQ(const __grid_constant__ CUtensorMap q, const __grid_constant__ CUtensorMap k,
                 const __grid_constant__ CUtensorMap v, const __grid_constant__ CUtensorMap dout,
                 const __grid_constant__ CUtensorMap kt, const __grid_constant__ CUtensorMap dq, const float* lse,
                 float scale) {
  extern __shared__ uint8_t raw[];
  __shared__ __align__(8) uint64_t bar;
  uint8_t* tile = aligned_tile(raw);
  init_barrier(&bar);
  uint32_t phase = 0;
  scale_tiles<4>(&q, &dq, 2.0f, tile, &bar, phase, 4);
}

// Sparse MLA dQ/dQv GEMM: dS dQ dQv. dQ = 2 dS[..., :64], dQv = 4 dS[..., :512].
extern "C" __global__ void __launch_bounds__(kThreads)
    FA4_MLA(const __grid_constant__ CUtensorMap ds, const __grid_constant__ CUtensorMap dq,
            const __grid_constant__ CUtensorMap dqv, const int* topk_idx, float scale) {
  extern __shared__ uint8_t raw[];
  __shared__ __align__(8) uint64_t bar;
  uint8_t* tile = aligned_tile(raw);
  init_barrier(&bar);
  uint32_t phase = 0;
  scale_tiles<4>(&ds, &dq, 2.0f, tile, &bar, phase, 1);
  scale_tiles<4>(&ds, &dqv, 4.0f, tile, &bar, phase, 8);
}

// Sparse MLA without dQ: dS dQv.
extern "C" __global__ void __launch_bounds__(kThreads)
    FA4_MLA_DQV(const __grid_constant__ CUtensorMap ds, const __grid_constant__ CUtensorMap dqv, const int* topk_idx,
                float scale) {
  extern __shared__ uint8_t raw[];
  __shared__ __align__(8) uint64_t bar;
  uint8_t* tile = aligned_tile(raw);
  init_barrier(&bar);
  uint32_t phase = 0;
  scale_tiles<4>(&ds, &dqv, 4.0f, tile, &bar, phase, 8);
}

// The forward kernels: Q K V O as maps, then LSE and the scale. O = 2 Q, tile by tile through the Q map as the kernel
// reads it (K-major: the head dim innermost) and the O map: a transposed Q silently puts other elements into O.
#define FA4_FORWARD_BODY                          \
  extern __shared__ uint8_t raw[];                \
  __shared__ __align__(8) uint64_t bar;           \
  uint8_t* tile = aligned_tile(raw);              \
  init_barrier(&bar);                             \
  uint32_t phase = 0;                             \
  scale_tiles<4>(&q, &o, 2.0f, tile, &bar, phase, 2);
extern "C" __global__ void __launch_bounds__(kThreads)
    FA4_SM90_FWD(const __grid_constant__ CUtensorMap q, const __grid_constant__ CUtensorMap k,
                 const __grid_constant__ CUtensorMap v, const __grid_constant__ CUtensorMap o, float* lse, float scale) {
  FA4_FORWARD_BODY
}
extern "C" __global__ void __launch_bounds__(kThreads)
    FA4_SM100_FWD(const __grid_constant__ CUtensorMap q, const __grid_constant__ CUtensorMap k,
                  const __grid_constant__ CUtensorMap v, const __grid_constant__ CUtensorMap o, float* lse, float scale) {
  FA4_FORWARD_BODY
}
