// GPU check program for the rest of FlashAttention-4's backward family (fa4_family_kernels.cu): launches each kernel
// with its upstream map signature and reports whether its outputs came out right. Driven by run_checks.py.
//
//   fa4_family_gpu KERNEL LAUNCH DESC SCENARIO
//   KERNEL: sm90_fwd | sm100_fwd (Q K V O: O = 2 Q) | sm90 (Q K V dO dK dV) | sm90_gqa (Q K V dO; dK/dV accumulators as pointers) | sm90_varlen (two sequences of
//           700 and 300 tokens; dK/dV ptr-shift ragged maps) | hd256_dq (q k v do kt dQ) | mla (dS dQ dQv) |
//           mla_dqv (dS dQv)
//   LAUNCH: runtime (cudaLaunchKernel) | library (cudaLibraryLoadData + cudaLaunchKernelExC, a 2-CTA cluster: CuTe
//           DSL's path) | driver (cuModuleLoadData + cuLaunchKernel) | graph (captured, replayed 3 times)
//   DESC: encode (cuTensorMapEncodeTiled) | inline (no encode call, the driver's byte form) | cute (CuTe DSL's form)
//   SCENARIO: ok | dk_bad | dv_bad (seqlen-contiguous; sm90_varlen: heads contiguous) | dk_expand (batch stride 0)
//             | dq_bad | dq_expand (hd256_dq) | dq_t | dqv_t | dq_expand | dqv_expand (mla)
//             | q_bad | k_bad (the forwards: Q or K seqlen-contiguous)
// Prints "FAMILY ... launch_rc=N sync=N out=NAME:correct|wrong|untouched,..." and exits 0 unless CUDA itself failed.
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

#include "fa4_family_kernels.cu"
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

constexpr uint16_t kPoison = 0x7fc1;  // a NaN bit pattern no kernel output has
constexpr size_t kSmem = kTileBytes + 1024;
std::string g_desc;
std::mt19937 g_rng(static_cast<unsigned>(std::random_device{}()));

// A device buffer of bf16 and its host copy (random inputs, poisoned outputs).
struct Buf {
  void* dev = nullptr;
  std::vector<uint16_t> host;
};
Buf buffer(size_t elems, bool random) {
  Buf b;
  b.host.assign(elems, kPoison);
  if (random)
    for (auto& x : b.host) {
      const float f = std::uniform_real_distribution<float>(-4.f, 4.f)(g_rng);
      uint32_t bits;
      std::memcpy(&bits, &f, 4);
      x = static_cast<uint16_t>(bits >> 16);
    }
  CHECK_RT(cudaMalloc(&b.dev, elems * 2));
  CHECK_RT(cudaMemcpy(b.dev, b.host.data(), elems * 2, cudaMemcpyHostToDevice));
  return b;
}
uint16_t scaled(uint16_t x, float factor) {  // exact: factors are powers of two
  const uint32_t bits = static_cast<uint32_t>(x) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  f *= factor;
  uint32_t ob;
  std::memcpy(&ob, &f, 4);
  return static_cast<uint16_t>(ob >> 16);
}

// A bf16 map of `addr` with box {64, 128, 1, ...} and 128B swizzle, made the way DESC says.
CUtensorMap make_map(uint64_t addr, std::vector<uint64_t> dims, std::vector<uint64_t> strides) {
  const auto rank = static_cast<uint32_t>(dims.size());
  cuuint32_t box[5] = {64, 128, 1, 1, 1}, es[5] = {1, 1, 1, 1, 1};
  CUtensorMap m;
  if (g_desc == "inline" || g_desc == "cute") {
    tmaguard::EncodeArgs a;
    a.dtype = CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
    a.rank = rank;
    a.address = addr;
    for (uint32_t i = 0; i < rank; ++i) {
      a.dims[i] = dims[i];
      a.box[i] = box[i];
      a.element_strides[i] = 1;
      if (i + 1 < rank) a.strides[i] = strides[i];
    }
    a.swizzle = CU_TENSOR_MAP_SWIZZLE_128B;
    a.l2_promotion = CU_TENSOR_MAP_L2_PROMOTION_L2_128B;
    const auto form = g_desc == "cute" ? tmaguard::Encoder::kCuteDsl : tmaguard::Encoder::kDriver;
    if (tmaguard::encode_in_form(form, a, reinterpret_cast<uint8_t*>(&m)) != 0) {
      std::fprintf(stderr, "encode_in_form refused the map\n");
      std::exit(12);
    }
    return m;
  }
  static PFN_cuTensorMapEncodeTiled_v12000 encode = [] {
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult q;
    CHECK_RT(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault, &q));
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(fn);
  }();
  CHECK_DRV(encode(&m, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, rank, reinterpret_cast<void*>(addr), dims.data(),
                   strides.data(), box, es, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                   CU_TENSOR_MAP_L2_PROMOTION_L2_128B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE));
  return m;
}

// torch (b, s, h, d) bf16: the K-major map {d, s, h, b}; mn: the same memory seqlen-contiguous; expand: batch
// stride 0 (one batch's storage expand()ed over the batch).
CUtensorMap bshd(const Buf& t, uint64_t b, uint64_t s, uint64_t h, uint64_t d, bool mn = false, bool expand = false) {
  const uint64_t addr = reinterpret_cast<uint64_t>(t.dev), batch = expand ? 0 : 2 * s * h * d;
  if (mn) return make_map(addr, {s, d, h, b}, {2 * s, 2 * s * d, batch});
  return make_map(addr, {d, s, h, b}, {2 * h * d, 2 * d, batch});
}

std::vector<char> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    std::fprintf(stderr, "cannot read %s\n", path.c_str());
    std::exit(13);
  }
  return std::vector<char>(std::istreambuf_iterator<char>(in), {});
}

const char* verdict(const Buf& out, const std::vector<uint16_t>& want) {
  std::vector<uint16_t> got(want.size());
  CHECK_RT(cudaMemcpy(got.data(), out.dev, got.size() * 2, cudaMemcpyDeviceToHost));
  bool untouched = true, correct = true;
  for (size_t i = 0; i < got.size(); ++i) {
    if (got[i] != kPoison) untouched = false;
    if (got[i] != want[i]) correct = false;
  }
  return correct ? "correct" : untouched ? "untouched" : "wrong";
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 5) {
    std::fprintf(stderr, "usage: fa4_family_gpu KERNEL LAUNCH DESC SCENARIO\n");
    return 2;
  }
  const std::string kernel = argv[1], launch = argv[2], scenario = argv[4];
  g_desc = argv[3];
  CHECK_RT(cudaSetDevice(0));
  CHECK_RT(cudaFree(nullptr));
  constexpr uint64_t B = 2;
  std::vector<void*> args;
  std::vector<std::pair<std::string, std::pair<const Buf*, std::vector<uint16_t>>>> outputs;  // name, buffer, want
  std::vector<CUtensorMap> maps;
  maps.reserve(8);  // args point into it
  auto map_arg = [&](const CUtensorMap& m) {
    maps.push_back(m);
    args.push_back(&maps.back());
  };
  std::vector<Buf> bufs;
  bufs.reserve(8);
  auto buf = [&](size_t n, bool random) -> Buf& { return bufs.emplace_back(buffer(n, random)); };
  std::vector<uint64_t> words;  // scalar and pointer arguments (stable addresses)
  words.reserve(8);
  auto word_arg = [&](uint64_t w) {
    words.push_back(w);
    args.push_back(&words.back());
  };
  float scale = 0.125f;
  dim3 grid, block(kThreads);
  const void* host_fn = nullptr;
  std::string name;

  if (kernel == "sm90_fwd" || kernel == "sm100_fwd") {
    // (b, s, h, d) with s_q 384, s_k 512, head dim 128: Q K V O maps, LSE, scale. O = 2 Q.
    const uint64_t S = 384, SK = 512, H = 4, D = 128, n = B * S * H * D, nk = B * SK * H * D;
    Buf &q = buf(n, true), &k = buf(nk, true), &v = buf(nk, true), &o = buf(n, false);
    map_arg(bshd(q, B, S, H, D, scenario == "q_bad"));
    map_arg(bshd(k, B, SK, H, D, scenario == "k_bad"));
    map_arg(bshd(v, B, SK, H, D));
    map_arg(bshd(o, B, S, H, D));
    word_arg(reinterpret_cast<uint64_t>(v.dev));  // LSE (unused)
    args.push_back(&scale);
    std::vector<uint16_t> w(n);
    for (size_t i = 0; i < n; ++i) w[i] = scaled(q.host[i], 2.f);
    outputs.push_back({"O", {&o, w}});
    grid = dim3(S / kTileS, H, B);
    const bool sm90 = kernel == "sm90_fwd";
    host_fn = sm90 ? reinterpret_cast<const void*>(&FA4_SM90_FWD) : reinterpret_cast<const void*>(&FA4_SM100_FWD);
    name = sm90 ? "kernel_cutlass_kernel_flash_attncuteflash_fwd_sm90FlashAttentionForwardSm90_object_at__tmaguard_0"
                : "kernel_cutlass_kernel_flash_attncuteflash_fwd_sm100FlashAttentionForwardSm100_object_at__tmaguard_0";
  } else if (kernel == "sm90" || kernel == "sm90_gqa") {
    const uint64_t S = 256, H = 4, D = 128, n = B * S * H * D;
    Buf &q = buf(n, true), &k = buf(n, true), &v = buf(n, true), &dout = buf(n, true);
    Buf &dk = buf(n, false), &dv = buf(n, false);
    map_arg(bshd(q, B, S, H, D));
    map_arg(bshd(k, B, S, H, D));
    map_arg(bshd(v, B, S, H, D));
    map_arg(bshd(dout, B, S, H, D));
    std::vector<uint16_t> wk(n), wv(n);
    for (size_t i = 0; i < n; ++i) {
      wk[i] = scaled(k.host[i], 2.f);
      wv[i] = scaled(v.host[i], 4.f);
    }
    outputs.push_back({"dK", {&dk, wk}});
    outputs.push_back({"dV", {&dv, wv}});
    if (kernel == "sm90") {
      map_arg(bshd(dk, B, S, H, D, scenario == "dk_bad", scenario == "dk_expand"));
      map_arg(bshd(dv, B, S, H, D, scenario == "dv_bad"));
      word_arg(reinterpret_cast<uint64_t>(q.dev));  // LSE (unused)
      args.push_back(&scale);
      grid = dim3(S / kTileS, H, B);
      host_fn = reinterpret_cast<const void*>(&FA4_SM90);
      name = "kernel_cutlass_kernel_flash_attncuteflash_bwd_sm90FlashAttentionBackwardSm90_object_at__tmaguard_0";
    } else {
      for (const Buf* p : {&k, &v, &dk, &dv}) word_arg(reinterpret_cast<uint64_t>(p->dev));
      word_arg(n);
      args.push_back(&scale);
      grid = dim3(64);
      host_fn = reinterpret_cast<const void*>(&FA4_SM90_GQA);
      name = "kernel_cutlass_kernel_flash_attncuteflash_bwd_sm90FlashAttentionBackwardSm90_object_at__tmaguardgqa_0";
    }
  } else if (kernel == "sm90_varlen") {
    // Two sequences of 700 and 300 tokens, (total, h, d); dK/dV hold 128 rows more than the tokens (they must stay
    // poisoned: the ragged bounds clip every row past the last sequence's end).
    const uint64_t H = 64, D = 128, total = 1000, pad = 128, st = 2 * H * D;
    const int cu_host[3] = {0, 700, 1000};
    Buf &q = buf(total * H * D, true), &k = buf(total * H * D, true), &v = buf(total * H * D, true),
        &dout = buf(total * H * D, true);
    Buf &dk = buf((total + pad) * H * D, false), &dv = buf((total + pad) * H * D, false);
    int* cu = nullptr;
    CHECK_RT(cudaMalloc(&cu, sizeof cu_host));
    CHECK_RT(cudaMemcpy(cu, cu_host, sizeof cu_host, cudaMemcpyHostToDevice));
    auto thd = [&](const Buf& t) { return make_map(reinterpret_cast<uint64_t>(t.dev), {D, total, H}, {st, 2 * D}); };
    // quack's create_ragged_tensor_for_tma(ptr_shift=True): the address 2^30 rows before the tensor, the ragged mode
    // 2^30 rows, one more mode of 2^31 - 1 with the row stride. bad: the heads contiguous, (total, d, h) memory.
    auto ragged = [&](const Buf& t, bool bad) {
      const uint64_t shifted = reinterpret_cast<uint64_t>(t.dev) - (1ULL << 30) * st;
      if (bad) return make_map(shifted, {H, 1ULL << 30, D, (1ULL << 31) - 1}, {st, 2 * H, st});
      return make_map(shifted, {D, 1ULL << 30, H, (1ULL << 31) - 1}, {st, 2 * D, st});
    };
    for (const Buf* t : {&q, &k, &v, &dout}) map_arg(thd(*t));
    map_arg(ragged(dk, scenario == "dk_bad"));
    map_arg(ragged(dv, scenario == "dv_bad"));
    word_arg(reinterpret_cast<uint64_t>(cu));  // cu_seqlens_q
    word_arg(reinterpret_cast<uint64_t>(cu));  // cu_seqlens_k
    args.push_back(&scale);
    std::vector<uint16_t> wk((total + pad) * H * D, kPoison), wv = wk;
    for (uint64_t t = 0; t < total; ++t) {
      const float z = t < 700 ? 1.f : 2.f;
      for (uint64_t i = t * H * D; i < (t + 1) * H * D; ++i) {
        wk[i] = scaled(k.host[i], 2.f * z);
        wv[i] = scaled(v.host[i], 4.f * z);
      }
    }
    outputs.push_back({"dK", {&dk, wk}});
    outputs.push_back({"dV", {&dv, wv}});
    grid = dim3((700 + kTileS - 1) / kTileS, H, 2);
    host_fn = reinterpret_cast<const void*>(&FA4_SM90_VARLEN);
    name = "kernel_cutlass_kernel_flash_attncuteflash_bwd_sm90FlashAttentionBackwardSm90_object_at__tmaguardvarlen_0";
  } else if (kernel == "hd256_dq") {
    const uint64_t S = 512, H = 4, D = 256, n = B * S * H * D;
    Buf &q = buf(n, true), &k = buf(n, true), &v = buf(n, true), &dout = buf(n, true), &dq = buf(n, false);
    map_arg(bshd(q, B, S, H, D));
    map_arg(bshd(k, B, S, H, D));
    map_arg(bshd(v, B, S, H, D));
    map_arg(bshd(dout, B, S, H, D));
    map_arg(bshd(k, B, S, H, D, true));  // kt: K's transposed view
    map_arg(bshd(dq, B, S, H, D, scenario == "dq_bad", scenario == "dq_expand"));
    word_arg(reinterpret_cast<uint64_t>(q.dev));  // LSE (unused)
    args.push_back(&scale);
    std::vector<uint16_t> w(n);
    for (size_t i = 0; i < n; ++i) w[i] = scaled(q.host[i], 2.f);
    outputs.push_back({"dQ", {&dq, w}});
    grid = dim3(S / kTileS, H, B);
    host_fn = reinterpret_cast<const void*>(&FA4_HD256_DQ);
    name = "kernel_cutlass_kernel_flash_attncutesm100_hd256_2cta_fmha_backward_dqkernelBlackwellFusedMultiHead"
           "AttentionBackwardDQKernel_object_at__tmaguard_0";
  } else if (kernel == "mla" || kernel == "mla_dqv") {
    // dS (b, s, h, top_k = 512); dQ (b, s, h, 64) = 2 dS[..., :64]; dQv (b, s, h, 512) = 4 dS.
    const uint64_t S = 256, H = 4, topk = 512, dqd = 64, dvd = 512;
    Buf& ds = buf(B * S * H * topk, true);
    map_arg(bshd(ds, B, S, H, topk));
    auto output = [&](uint64_t d, float factor, const std::string& what, const std::string& label) {
      Buf& o = buf(B * S * H * d, false);
      map_arg(bshd(o, B, S, H, d, scenario == what + "_t", scenario == what + "_expand"));
      std::vector<uint16_t> w(B * S * H * d);
      for (size_t row = 0; row < B * S * H; ++row)
        for (size_t i = 0; i < d; ++i) w[row * d + i] = scaled(ds.host[row * topk + i], factor);
      outputs.push_back({label, {&o, w}});
    };
    if (kernel == "mla") output(dqd, 2.f, "dq", "dQ");
    output(dvd, 4.f, "dqv", "dQv");
    word_arg(reinterpret_cast<uint64_t>(ds.dev));  // top-k indices (unused)
    args.push_back(&scale);
    grid = dim3(S / kTileS, H, B);
    host_fn = kernel == "mla" ? reinterpret_cast<const void*>(&FA4_MLA) : reinterpret_cast<const void*>(&FA4_MLA_DQV);
    name = std::string("kernel_cutlass_kernel_flash_attncuteflash_bwd_mla_dq_dqv_sm100dQdQvGemmKernel_object_at__") +
           (kernel == "mla" ? "tmaguard_0" : "tmaguarddqv_0");
  } else {
    std::fprintf(stderr, "unknown kernel %s\n", kernel.c_str());
    return 2;
  }

  const std::string cubin_path = std::string(argv[0]) + ".cubin";
  int launch_rc = 0;
  if (launch == "runtime") {
    launch_rc = static_cast<int>(cudaLaunchKernel(host_fn, grid, block, args.data(), kSmem, nullptr));
  } else if (launch == "library") {
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = grid;
    cfg.blockDim = block;
    cfg.dynamicSmemBytes = kSmem;
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeClusterDimension;
    attr[0].val.clusterDim.x = grid.x % 2 == 0 ? 2 : 1;
    attr[0].val.clusterDim.y = 1;
    attr[0].val.clusterDim.z = 1;
    cfg.attrs = attr;
    cfg.numAttrs = 1;
    const std::vector<char> cubin = read_file(cubin_path);
    cudaLibrary_t lib;
    cudaKernel_t kern;
    CHECK_RT(cudaLibraryLoadData(&lib, cubin.data(), nullptr, nullptr, 0, nullptr, nullptr, 0));
    CHECK_RT(cudaLibraryGetKernel(&kern, lib, name.c_str()));
    launch_rc = static_cast<int>(cudaLaunchKernelExC(&cfg, reinterpret_cast<const void*>(kern), args.data()));
  } else if (launch == "driver") {
    const std::vector<char> cubin = read_file(cubin_path);
    CUmodule mod;
    CUfunction f;
    CHECK_DRV(cuModuleLoadData(&mod, cubin.data()));
    CHECK_DRV(cuModuleGetFunction(&f, mod, name.c_str()));
    launch_rc = static_cast<int>(
        cuLaunchKernel(f, grid.x, grid.y, grid.z, block.x, 1, 1, kSmem, nullptr, args.data(), nullptr));
  } else if (launch == "graph") {  // captured once, replayed: the capture-time launch is the one checked
    cudaStream_t s;
    CHECK_RT(cudaStreamCreate(&s));
    cudaGraph_t g;
    CHECK_RT(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    launch_rc = static_cast<int>(cudaLaunchKernel(host_fn, grid, block, args.data(), kSmem, s));
    const cudaError_t end = cudaStreamEndCapture(s, &g);
    if (launch_rc == 0 && end == cudaSuccess) {
      cudaGraphExec_t ge;
      CHECK_RT(cudaGraphInstantiate(&ge, g, 0));
      for (int i = 0; i < 3; ++i) CHECK_RT(cudaGraphLaunch(ge, s));
      CHECK_RT(cudaStreamSynchronize(s));
    } else if (launch_rc == 0) {
      launch_rc = static_cast<int>(end);
    }
  } else {
    std::fprintf(stderr, "unknown launch %s\n", launch.c_str());
    return 2;
  }
  const cudaError_t sync = cudaDeviceSynchronize();
  std::string out;
  for (const auto& [label, o] : outputs)
    out += (out.empty() ? "" : ",") + label + ":" + verdict(*o.first, o.second);
  std::printf("FAMILY kernel=%s launch=%s desc=%s scenario=%s launch_rc=%d sync=%d out=%s\n", kernel.c_str(),
              launch.c_str(), g_desc.c_str(), scenario.c_str(), launch_rc, static_cast<int>(sync), out.c_str());
  return 0;
}
