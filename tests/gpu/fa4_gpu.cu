// GPU check program: launches the FA4-shaped TMA kernel the ways real stacks do, with descriptors made by the
// driver or filled inline, and reports whether dK/dV came out right. Driven by scripts/gpu/run_checks.py.
//
//   fa4_gpu LAUNCH DESC SCENARIO [--cta2 | --hd256 | --bcast-k]
//   LAUNCH: chevron | launch_ex_cluster | library | driver | driver_ex | driver_extra | graph | graph_node
//   DESC: encode (cuTensorMapEncodeTiled via cudaGetDriverEntryPointByVersion) | inline (no encode call, the
//         driver's byte form) | cute (no encode call, CuTe DSL's form: word 2 bit 1 and the large-tensor flag set, no
//         tile-size or swizzle-span word; tmaguard::encode_in_form, pinned to CuTe DSL's MLIR dumps)
//   SCENARIO: ok | dk_bad (dK seqlen-contiguous) | dv_bad | dk_expand (dK's map with batch stride 0: one batch's
//             storage expand()ed over the batch, so every batch's tiles land on the same bytes)
//   --hd256: head dim 256, the signature of FA4's hd256 kernel (K V Q Qt dO dOt dK dV)
//   --bcast-k: 1-CTA with K broadcast over the batch (stride 0): K's map has rank 3
//   TG_IGNORED_WORDS=...: words the TMA unit does not read set in every map (set_ignored_words)
// Prints "CASE ... launch_rc=N dk=correct|wrong|untouched dv=..." and exits 0 unless CUDA itself failed.
//
//   fa4_gpu gemm LAUNCH DESC SCENARIO
// The CUTLASS-style kernel (cutlass::device_kernel<GemmUniversal<2>>, maps A, B, D inside one 1792-byte Params):
// D = A + B. LAUNCH: chevron | driver (cuLaunchKernel on the handle cudaGetFuncBySymbol gives) | graph (captured);
// SCENARIO: ok | d_bad (D's map describes the transposed view) | mutate (a clean launch, then the same Params with
// D's map swapped for the transposed one). Prints "GEMM ... launch_rc=N sync=N d=correct|wrong|untouched".
//
//   fa4_gpu encode_warnings
// Three encodes the real driver accepts: a healthy map of device memory, a map of host memory, and a map that runs
// past the end of its device allocation. Prints "ENCODES ok_rc=.. host_rc=.. beyond_rc=..".
#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "fa4_kernels.cu"
#include "tmaguard/tensormap.h"

#define CHECK_RT(x)                                                 \
  do {                                                              \
    cudaError_t e_ = (x);                                           \
    if (e_ != cudaSuccess) {                                        \
      std::fprintf(stderr, "%s: %s\n", #x, cudaGetErrorString(e_)); \
      std::exit(10);                                                \
    }                                                               \
  } while (0)
#define CHECK_DRV(x)                                                       \
  do {                                                                     \
    CUresult r_ = (x);                                                     \
    if (r_ != CUDA_SUCCESS) {                                              \
      std::fprintf(stderr, "%s: CUresult %d\n", #x, static_cast<int>(r_)); \
      std::exit(11);                                                       \
    }                                                                      \
  } while (0)

namespace {

constexpr uint64_t B = 2, H = 4;
uint64_t S = 256;  // sequence length: 512 with --hd256 (at S == D a transposed dK's map is byte-identical to a
                   // healthy dK of another torch layout: no descriptor check can tell them apart)
uint64_t D = 128;  // head dim: 256 with --hd256
size_t kElems = B * S * H * D;
constexpr uint16_t kPoison = 0x7fc1;  // a NaN bit pattern no kernel output has
constexpr size_t kSmem = kTileBytes + 1024;

std::string g_desc;

// The byte form of a descriptor filled inline: the driver's, or CuTe DSL's.
tmaguard::Encoder form() { return g_desc == "cute" ? tmaguard::Encoder::kCuteDsl : tmaguard::Encoder::kDriver; }

// torch (b, s, h, d) bf16: K-major dims {d, s, h, b}; "mn" = the same memory viewed seqlen-contiguous; rank 3: the
// batch mode dropped (a tensor broadcast over the batch, stride 0).
CUtensorMap make_map(void* addr, bool mn, int rank = 4, bool expand = false) {
  cuuint64_t dims[4] = {D, S, H, B}, strides[3] = {2 * H * D, 2 * D, expand ? 0 : 2 * S * H * D};
  if (mn) {
    dims[0] = S;
    dims[1] = D;
    strides[0] = 2 * S;
    strides[1] = 2 * S * D;
  }
  const cuuint32_t box[4] = {64, 128, 1, 1}, es[4] = {1, 1, 1, 1};
  CUtensorMap m;
  if (g_desc == "inline" || g_desc == "cute") {  // what CuTe DSL's generated host code does: fill the bytes
    tmaguard::EncodeArgs a;
    a.dtype = CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
    a.rank = static_cast<uint32_t>(rank);
    a.address = reinterpret_cast<uint64_t>(addr);
    for (int i = 0; i < rank; ++i) {
      a.dims[i] = dims[i];
      a.box[i] = box[i];
      a.element_strides[i] = 1;
      if (i + 1 < rank) a.strides[i] = strides[i];
    }
    a.swizzle = CU_TENSOR_MAP_SWIZZLE_128B;
    a.l2_promotion = CU_TENSOR_MAP_L2_PROMOTION_L2_128B;
    if (tmaguard::encode_in_form(form(), a, reinterpret_cast<uint8_t*>(&m)) != 0) std::exit(12);
    return m;
  }
  static PFN_cuTensorMapEncodeTiled_v12000 encode = [] {
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult q;
    CHECK_RT(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault, &q));
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(fn);
  }();
  CHECK_DRV(encode(&m, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, static_cast<cuuint32_t>(rank), addr, dims, strides, box, es,
                   CU_TENSOR_MAP_INTERLEAVE_NONE,
                   CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_128B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE));
  return m;
}

// TG_IGNORED_WORDS: words the TMA unit does not read, set in every map after it was made (measured on an H200: the
// stores land right with any of these): w15 | w17 | w19 | w19_31 | w31 | w2_top | w16 | w18 | w16_w18.
void set_ignored_words(CUtensorMap& m) {
  const char* v = std::getenv("TG_IGNORED_WORDS");
  if (!v || !*v) return;
  auto* b = reinterpret_cast<uint8_t*>(&m);
  auto word = [&](int i, uint32_t x) { std::memcpy(b + 4 * i, &x, 4); };
  const std::string w = v;
  if (w == "w15") word(15, 0xdeadbeef);
  else if (w == "w17") word(17, 0x12345678);
  else if (w == "w19") word(19, 0xffffffff);
  else if (w == "w19_31")
    for (int i = 19; i < 32; ++i) word(i, 0x9e3779b9u * static_cast<uint32_t>(i));
  else if (w == "w31") word(31, 1);
  else if (w == "w2_top") b[11] = 0xff;
  else if (w == "w16") word(16, 7);
  else if (w == "w18") word(18, 3);
  else if (w == "w16_w18") {
    word(16, 7);
    word(18, 3);
  } else {
    std::fprintf(stderr, "unknown TG_IGNORED_WORDS '%s'\n", v);
    std::exit(14);
  }
}

std::vector<char> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    std::fprintf(stderr, "cannot read %s\n", path.c_str());
    std::exit(13);
  }
  return std::vector<char>(std::istreambuf_iterator<char>(in), {});
}

const char* verdict(const std::vector<uint16_t>& out, const std::vector<uint16_t>& in, float factor) {
  bool untouched = true, correct = true;
  for (size_t i = 0; i < out.size(); ++i) {
    const uint32_t bits = static_cast<uint32_t>(in[i]) << 16;
    float f;
    std::memcpy(&f, &bits, 4);
    f *= factor;  // exact: a power of two
    uint32_t ob;
    std::memcpy(&ob, &f, 4);
    const uint16_t want = static_cast<uint16_t>(ob >> 16);
    if (out[i] != kPoison) untouched = false;
    if (out[i] != want) correct = false;
  }
  return correct ? "correct" : untouched ? "untouched" : "wrong";
}

}  // namespace

int encode_warnings() {
  CHECK_RT(cudaSetDevice(0));
  CHECK_RT(cudaFree(nullptr));
  g_desc = "encode";
  void* dev = nullptr;
  CHECK_RT(cudaMalloc(&dev, kElems * 2));
  void* host = std::aligned_alloc(4096, kElems * 2);
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult q;
  CHECK_RT(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault, &q));
  auto encode = reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(fn);
  auto enc = [&](void* addr, uint64_t batch) {
    const cuuint64_t dims[4] = {D, S, H, batch}, strides[3] = {2 * H * D, 2 * D, 2 * S * H * D};
    const cuuint32_t box[4] = {64, 128, 1, 1}, es[4] = {1, 1, 1, 1};
    CUtensorMap m;
    return static_cast<int>(encode(&m, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 4, addr, dims, strides, box, es,
                                   CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                                   CU_TENSOR_MAP_L2_PROMOTION_L2_128B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE));
  };
  const int ok = enc(dev, B), on_host = enc(host, B), beyond = enc(dev, 8 * B);  // 8x the batch: 4 MiB of 512 KiB
  std::printf("ENCODES ok_rc=%d host_rc=%d beyond_rc=%d\n", ok, on_host, beyond);
  std::free(host);
  return 0;
}

// Row-major M x N bf16 as a 2D map {N, M} (K-major, as A and B are), or the transposed view {M, N} of the same
// memory (what a D allocated with the other layout looks like to the epilogue).
CUtensorMap make_map_2d(void* addr, uint64_t m, uint64_t n, bool transposed) {
  const cuuint64_t dims[2] = {transposed ? m : n, transposed ? n : m}, strides[1] = {2 * (transposed ? m : n)};
  const cuuint32_t box[2] = {64, 64}, es[2] = {1, 1};
  CUtensorMap map;
  if (g_desc == "inline" || g_desc == "cute") {
    tmaguard::EncodeArgs a;
    a.dtype = CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
    a.rank = 2;
    a.address = reinterpret_cast<uint64_t>(addr);
    for (int i = 0; i < 2; ++i) {
      a.dims[i] = dims[i];
      a.box[i] = box[i];
      a.element_strides[i] = 1;
    }
    a.strides[0] = strides[0];
    a.swizzle = CU_TENSOR_MAP_SWIZZLE_128B;
    a.l2_promotion = CU_TENSOR_MAP_L2_PROMOTION_L2_128B;
    if (tmaguard::encode_in_form(form(), a, reinterpret_cast<uint8_t*>(&map)) != 0) std::exit(12);
    return map;
  }
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult q;
  CHECK_RT(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault, &q));
  CHECK_DRV(reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(fn)(
      &map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, addr, dims, strides, box, es, CU_TENSOR_MAP_INTERLEAVE_NONE,
      CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_128B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE));
  return map;
}

int gemm(const std::string& launch, const std::string& scenario) {
  constexpr uint64_t M = 256, N = 512;
  CHECK_RT(cudaSetDevice(0));
  CHECK_RT(cudaFree(nullptr));
  std::mt19937 rng(static_cast<unsigned>(std::random_device{}()));
  std::vector<uint16_t> ha(M * N), hb(M * N), want(M * N), poison(M * N, kPoison);
  for (size_t i = 0; i < M * N; ++i) {  // small integers: their bf16 sums are exact
    const float fa = static_cast<float>(static_cast<int>(rng() % 33) - 16), fb = static_cast<float>(rng() % 17);
    const float fs = fa + fb;
    uint32_t ba, bb, bs;
    std::memcpy(&ba, &fa, 4);
    std::memcpy(&bb, &fb, 4);
    std::memcpy(&bs, &fs, 4);
    ha[i] = static_cast<uint16_t>(ba >> 16);
    hb[i] = static_cast<uint16_t>(bb >> 16);
    want[i] = static_cast<uint16_t>(bs >> 16);
  }
  void *a, *b, *d;
  for (void** p : {&a, &b, &d}) CHECK_RT(cudaMalloc(p, M * N * 2));
  CHECK_RT(cudaMemcpy(a, ha.data(), M * N * 2, cudaMemcpyHostToDevice));
  CHECK_RT(cudaMemcpy(b, hb.data(), M * N * 2, cudaMemcpyHostToDevice));
  GemmOp::Params params;
  std::memset(&params, 0, sizeof params);
  params.m = static_cast<int>(M);
  params.n = static_cast<int>(N);
  params.k = 1;
  params.l = 1;
  params.ptr_a = a;
  params.ptr_b = b;
  params.ptr_d = d;
  params.stride_a = params.stride_b = static_cast<long long>(N);
  for (unsigned i = 0; i < 9; ++i) params.sched0[i] = i % 3 == 0 ? reinterpret_cast<uint64_t>(d) + i * 256 : i;
  for (unsigned i = 0; i < 16; ++i) params.sched1[i] = i % 2 ? (M / 64) * (N / 64) : 0;
  for (unsigned i = 0; i < 80; ++i) params.sched2[i] = i % 5 == 0 ? reinterpret_cast<uint64_t>(b) : 0x3f800000u * (i % 2);
  for (unsigned i = 0; i < 64; ++i) params.sched3[i] = i < 4 ? 132 : 0;
  params.tma_a = make_map_2d(a, M, N, false);
  params.tma_b = make_map_2d(b, M, N, false);
  params.tma_d = make_map_2d(d, M, N, scenario == "d_bad");
  const dim3 grid(N / 64, M / 64), block(kThreads);
  const size_t smem = 2 * 64 * 64 * 2 + 1024;
  const void* stub = reinterpret_cast<const void*>(&cutlass::device_kernel<GemmOp>);
  auto run_once = [&]() -> int {
    CHECK_RT(cudaMemcpy(d, poison.data(), M * N * 2, cudaMemcpyHostToDevice));
    if (launch == "chevron") {
      cutlass::device_kernel<GemmOp><<<grid, block, smem>>>(params);
      return static_cast<int>(cudaGetLastError());
    }
    if (launch == "driver") {
      cudaFunction_t f;
      CHECK_RT(cudaGetFuncBySymbol(&f, stub));
      void* args[] = {&params};
      return static_cast<int>(cuLaunchKernel(reinterpret_cast<CUfunction>(f), grid.x, grid.y, 1, block.x, 1, 1,
                                             static_cast<unsigned>(smem), nullptr, args, nullptr));
    }
    if (launch == "graph") {
      cudaStream_t s;
      CHECK_RT(cudaStreamCreate(&s));
      cudaGraph_t g;
      CHECK_RT(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
      cutlass::device_kernel<GemmOp><<<grid, block, smem, s>>>(params);
      int rc = static_cast<int>(cudaGetLastError());
      const cudaError_t end = cudaStreamEndCapture(s, &g);
      if (rc == 0 && end == cudaSuccess) {
        cudaGraphExec_t ge;
        CHECK_RT(cudaGraphInstantiate(&ge, g, 0));
        for (int i = 0; i < 3; ++i) CHECK_RT(cudaGraphLaunch(ge, s));
        CHECK_RT(cudaStreamSynchronize(s));
      } else if (rc == 0) {
        rc = static_cast<int>(end);
      }
      return rc;
    }
    std::fprintf(stderr, "unknown launch %s\n", launch.c_str());
    std::exit(2);
  };
  auto result = [&]() {
    std::vector<uint16_t> out(M * N);
    CHECK_RT(cudaMemcpy(out.data(), d, M * N * 2, cudaMemcpyDeviceToHost));
    bool untouched = true, correct = true;
    for (size_t i = 0; i < out.size(); ++i) {
      if (out[i] != kPoison) untouched = false;
      if (out[i] != want[i]) correct = false;
    }
    return correct ? "correct" : untouched ? "untouched" : "wrong";
  };
  if (scenario == "mutate") {  // the same kernel, the same Params object, only D's map changed between launches
    const int rc = run_once();
    const int sync = static_cast<int>(cudaDeviceSynchronize());
    std::printf("GEMM_FIRST launch_rc=%d sync=%d d=%s\n", rc, sync, result());
    std::fflush(stdout);
    params.tma_d = make_map_2d(d, M, N, true);
  }
  const int rc = run_once();
  const int sync = static_cast<int>(cudaDeviceSynchronize());
  std::printf("GEMM launch=%s desc=%s scenario=%s launch_rc=%d sync=%d d=%s\n", launch.c_str(), g_desc.c_str(),
              scenario.c_str(), rc, sync, result());
  return 0;
}

int main(int argc, char** argv) {
  if (argc == 2 && std::string(argv[1]) == "encode_warnings") return encode_warnings();
  if (argc == 5 && std::string(argv[1]) == "gemm") {
    g_desc = argv[3];
    return gemm(argv[2], argv[4]);
  }
  if (argc < 4) {
    std::fprintf(stderr, "usage: fa4_gpu LAUNCH DESC SCENARIO [--cta2 | --hd256 | --bcast-k]\n");
    return 2;
  }
  const std::string launch = argv[1], scenario = argv[3];
  g_desc = argv[2];
  const std::string variant = argc > 4 ? argv[4] : "";
  const bool cta2 = variant == "--cta2", hd256 = variant == "--hd256", bcast = variant == "--bcast-k";
  if (hd256) {
    D = 256;
    S = 512;
  }
  kElems = B * S * H * D;
  const size_t k_elems = bcast ? S * H * D : kElems;  // a broadcast K holds one batch
  CHECK_RT(cudaSetDevice(0));
  CHECK_RT(cudaFree(nullptr));

  std::mt19937 rng(static_cast<unsigned>(std::random_device{}()));
  std::vector<uint16_t> hk(k_elems), hv(kElems), poison(kElems, kPoison);
  for (auto* v : {&hk, &hv})
    for (auto& x : *v) {
      const float f = std::uniform_real_distribution<float>(-4.f, 4.f)(rng);
      uint32_t bits;
      std::memcpy(&bits, &f, 4);
      x = static_cast<uint16_t>(bits >> 16);
    }
  void *q, *k, *v, *dout, *dk, *dv;
  for (void** p : {&q, &k, &v, &dout, &dk, &dv}) CHECK_RT(cudaMalloc(p, kElems * 2));
  CHECK_RT(cudaMemcpy(k, hk.data(), k_elems * 2, cudaMemcpyHostToDevice));
  CHECK_RT(cudaMemcpy(v, hv.data(), kElems * 2, cudaMemcpyHostToDevice));
  CHECK_RT(cudaMemcpy(dk, poison.data(), kElems * 2, cudaMemcpyHostToDevice));
  CHECK_RT(cudaMemcpy(dv, poison.data(), kElems * 2, cudaMemcpyHostToDevice));

  CUtensorMap mq = make_map(q, false), mk = make_map(k, false, bcast ? 3 : 4), mv = make_map(v, false),
              mdo = make_map(dout, false);
  CUtensorMap mdk = make_map(dk, scenario == "dk_bad", 4, scenario == "dk_expand"),
              mdv = make_map(dv, scenario == "dv_bad");
  for (CUtensorMap* m : {&mq, &mk, &mv, &mdo, &mdk, &mdv}) set_ignored_words(*m);
  int seqlen = static_cast<int>(S);
  float scale = 0.125f;
  long long tail = 7;
  void* args1[] = {&seqlen, &mq, &mk, &mv, &scale, &mdo, &mdv, &mdk, &tail};
  void* args2[] = {&seqlen, &mq, &mq, &mk, &scale, &mk, &mv, &mdo, &mdo, &mdv, &mdk, &tail};
  void* args256[] = {&seqlen, &mk, &mv, &mq, &mq, &scale, &mdo, &mdo, &mdk, &mdv, &tail};
  void** args = cta2 ? args2 : hd256 ? args256 : args1;
  const void* host_fn = cta2    ? reinterpret_cast<const void*>(&FA4_2CTA)
                        : hd256 ? reinterpret_cast<const void*>(&FA4_HD256)
                        : bcast ? reinterpret_cast<const void*>(&FA4_BCAST)
                                : reinterpret_cast<const void*>(&FA4_1CTA);
  const char* name =
      cta2    ? "kernel_cutlass_kernel_flash_attncuteflash_bwd_sm100FlashAttentionBackwardSm100_object_at__tmaguard2cta_0"
      : hd256 ? "kernel_cutlass_kernel_flash_attncutesm100_hd256_2cta_fmha_backward_dkdvkernelBlackwellFusedMultiHead"
                "AttentionBackwardDKDVKernel_object_at__tmaguard_0"
      : bcast ? "kernel_cutlass_kernel_flash_attncuteflash_bwd_sm100FlashAttentionBackwardSm100_object_at__tmaguardbk_0"
              : "kernel_cutlass_kernel_flash_attncuteflash_bwd_sm100FlashAttentionBackwardSm100_object_at__tmaguard_0";
  const dim3 grid(S / kTileS, H, B), block(kThreads);
  const std::string cubin_path = std::string(argv[0]) + ".cubin";

  int launch_rc = 0;
  if (launch == "chevron") {
    if (cta2)
      FA4_2CTA<<<grid, block, kSmem>>>(seqlen, mq, mq, mk, scale, mk, mv, mdo, mdo, mdv, mdk, tail);
    else if (hd256)
      FA4_HD256<<<grid, block, kSmem>>>(seqlen, mk, mv, mq, mq, scale, mdo, mdo, mdk, mdv, tail);
    else if (bcast)
      FA4_BCAST<<<grid, block, kSmem>>>(seqlen, mq, mk, mv, scale, mdo, mdv, mdk, tail);
    else
      FA4_1CTA<<<grid, block, kSmem>>>(seqlen, mq, mk, mv, scale, mdo, mdv, mdk, tail);
    launch_rc = static_cast<int>(cudaGetLastError());
  } else if (launch == "launch_ex_cluster" || launch == "library") {
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = grid;
    cfg.blockDim = block;
    cfg.dynamicSmemBytes = kSmem;
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeClusterDimension;
    attr[0].val.clusterDim.x = 2;
    attr[0].val.clusterDim.y = 1;
    attr[0].val.clusterDim.z = 1;
    cfg.attrs = attr;
    cfg.numAttrs = 1;
    const void* fn = host_fn;
    if (launch == "library") {  // the CuTe DSL path: runtime library API, CUkernel handle
      const std::vector<char> cubin = read_file(cubin_path);
      cudaLibrary_t lib;
      cudaKernel_t kern;
      CHECK_RT(cudaLibraryLoadData(&lib, cubin.data(), nullptr, nullptr, 0, nullptr, nullptr, 0));
      CHECK_RT(cudaLibraryGetKernel(&kern, lib, name));
      fn = reinterpret_cast<const void*>(kern);
    }
    launch_rc = static_cast<int>(cudaLaunchKernelExC(&cfg, fn, args));
  } else if (launch == "driver" || launch == "driver_ex" || launch == "driver_extra") {
    const std::vector<char> cubin = read_file(cubin_path);
    CUmodule mod;
    CUfunction f;
    CHECK_DRV(cuModuleLoadData(&mod, cubin.data()));
    CHECK_DRV(cuModuleGetFunction(&f, mod, name));
    if (launch == "driver") {
      launch_rc =
          static_cast<int>(cuLaunchKernel(f, grid.x, grid.y, grid.z, block.x, 1, 1, kSmem, nullptr, args, nullptr));
    } else if (launch == "driver_extra") {  // the packed-buffer form, laid out by cuFuncGetParamInfo
      std::vector<uint8_t> buf;
      const size_t nargs = cta2 ? sizeof(args2) / sizeof(void*) : hd256 ? sizeof(args256) / sizeof(void*) : sizeof(args1) / sizeof(void*);
      for (size_t i = 0; i < nargs; ++i) {
        size_t off = 0, size = 0;
        CHECK_DRV(cuFuncGetParamInfo(f, i, &off, &size));
        if (buf.size() < off + size) buf.resize(off + size);
        std::memcpy(buf.data() + off, args[i], size);
      }
      size_t size = buf.size();
      void* extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, buf.data(), CU_LAUNCH_PARAM_BUFFER_SIZE, &size,
                       CU_LAUNCH_PARAM_END};
      launch_rc =
          static_cast<int>(cuLaunchKernel(f, grid.x, grid.y, grid.z, block.x, 1, 1, kSmem, nullptr, nullptr, extra));
    } else {
      CUlaunchAttribute attr{};
      attr.id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
      attr.value.clusterDim.x = 2;
      attr.value.clusterDim.y = attr.value.clusterDim.z = 1;
      CUlaunchConfig cfg{};
      cfg.gridDimX = grid.x;
      cfg.gridDimY = grid.y;
      cfg.gridDimZ = grid.z;
      cfg.blockDimX = block.x;
      cfg.blockDimY = cfg.blockDimZ = 1;
      cfg.sharedMemBytes = kSmem;
      cfg.attrs = &attr;
      cfg.numAttrs = 1;
      launch_rc = static_cast<int>(cuLaunchKernelEx(&cfg, f, args, nullptr));
    }
  } else if (launch == "graph") {  // captured once, replayed: the capture-time launch is the one checked
    cudaStream_t s;
    CHECK_RT(cudaStreamCreate(&s));
    cudaGraph_t g;
    CHECK_RT(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    FA4_1CTA<<<grid, block, kSmem, s>>>(seqlen, mq, mk, mv, scale, mdo, mdv, mdk, tail);
    launch_rc = static_cast<int>(cudaGetLastError());
    const cudaError_t end = cudaStreamEndCapture(s, &g);
    if (launch_rc == 0 && end == cudaSuccess) {
      cudaGraphExec_t ge;
      CHECK_RT(cudaGraphInstantiate(&ge, g, 0));
      for (int i = 0; i < 5; ++i) CHECK_RT(cudaGraphLaunch(ge, s));
      CHECK_RT(cudaStreamSynchronize(s));
    } else if (launch_rc == 0) {
      launch_rc = static_cast<int>(end);
    }
  } else if (launch == "graph_node") {  // a graph built node by node (no capture): checked when the node is added
    cudaGraph_t g;
    CHECK_RT(cudaGraphCreate(&g, 0));
    cudaKernelNodeParams kp = {};
    kp.func = const_cast<void*>(host_fn);
    kp.gridDim = grid;
    kp.blockDim = block;
    kp.sharedMemBytes = kSmem;
    kp.kernelParams = args;
    cudaGraphNode_t node;
    launch_rc = static_cast<int>(cudaGraphAddKernelNode(&node, g, nullptr, 0, &kp));
    if (launch_rc == 0) {
      cudaGraphExec_t ge;
      CHECK_RT(cudaGraphInstantiate(&ge, g, 0));
      for (int i = 0; i < 3; ++i) CHECK_RT(cudaGraphLaunch(ge, nullptr));
    }
  } else {
    std::fprintf(stderr, "unknown launch %s\n", launch.c_str());
    return 2;
  }
  const cudaError_t sync = cudaDeviceSynchronize();
  std::vector<uint16_t> ok(kElems), ov(kElems);
  CHECK_RT(cudaMemcpy(ok.data(), dk, kElems * 2, cudaMemcpyDeviceToHost));
  CHECK_RT(cudaMemcpy(ov.data(), dv, kElems * 2, cudaMemcpyDeviceToHost));
  // dK = 2 K for every batch (a broadcast K: the same batch for all).
  std::vector<uint16_t> hk_full(kElems);
  for (size_t i = 0; i < kElems; ++i) hk_full[i] = hk[i % k_elems];
  std::printf("CASE launch=%s desc=%s scenario=%s%s launch_rc=%d sync=%d dk=%s dv=%s\n", launch.c_str(), g_desc.c_str(),
              scenario.c_str(), variant.empty() ? "" : (" " + variant.substr(2)).c_str(), launch_rc,
              static_cast<int>(sync), verdict(ok, hk_full, 2.0f), verdict(ov, hv, 4.0f));
  return 0;
}
