// Scenario fa4_forward: FlashAttention-4's forward kernels (and the sparse MLA dK GEMM) as stand-in kernels whose
// parameters follow the upstream argument order: the tensors as CuTe DSL passes them (a pointer plus dynamic shape and
// stride words), then the TMA atoms as 128-byte maps, then scalars.
//
//   TG_FWD_CONFIG: sm100 | sm100_gqa | sm100_varlen (Q K V: O stored without a map) | hd256 | sm90 | mla_gather
//                  (Q Qv O) | mla_dense (Q Qv K V Vt O) | mla_dk (dS Q) | unknown (a forward class no preset knows)
//   TG_FWD_BAD:    none | q | k | v | o (that tensor transposed: its sequence contiguous) | o_over_q (O at Q's
//                  address: out=q) | o_expand (one batch's O expand()ed over the batch) | sliced (V every other head
//                  of a wider tensor: healthy) | ds (mla_dk: dS heads-contiguous)
//   TG_FWD_CACHED: 1 = the kernel launches twice with healthy maps first, then once with TG_FWD_BAD's (a compile-
//                  cache hit after a healthy trace, FA #2886); otherwise twice with TG_FWD_BAD's.
#include <cstdlib>
#include <cstring>
#include <string>

#include "client.h"

namespace client {
namespace {

constexpr uint64_t kBase = 0x7f0000000000ULL, kStep = 0x1000000ULL;

std::vector<uint8_t> map_param(const Tensor& t, uint32_t inner = 64) {
  MapShape s;
  s.box = {inner, 128, 1, 1, 1};
  s.swizzle = inner == 64 ? CU_TENSOR_MAP_SWIZZLE_128B : CU_TENSOR_MAP_SWIZZLE_64B;
  const CUtensorMap m = encode_map(t, s);
  return param_bytes(&m, sizeof m);
}

// The maps of one forward launch, innermost-first tensors in upstream's kernel order.
struct Launch {
  std::string name;
  std::vector<Tensor> maps;
  std::vector<uint32_t> inner;  // per map (default 64)
};

std::string fwd_name(const std::string& module, const std::string& cls) {
  return "kernel_cutlass_kernel_flash_attncute" + module + cls + "_object_at__0x7f_0";
}

// Q K V O of a (b, s, h, d) attention; `bad` breaks one of them.
Launch attention(const std::string& cfg, const std::string& bad) {
  const bool gqa = cfg == "sm100_gqa", hd256 = cfg == "hd256", varlen = cfg == "sm100_varlen";
  const uint64_t B = 2, S = 384, SK = 512, H = gqa ? 8 : 4, HK = gqa ? 2 : 4, D = hd256 ? 256 : 128;
  Launch l;
  l.name = cfg == "sm90"      ? fwd_name("flash_fwd_sm90", "FlashAttentionForwardSm90")
           : hd256            ? fwd_name("sm100_hd256_2cta_fmha_forward", "BlackwellFusedMultiHeadAttentionForward")
           : cfg == "unknown" ? fwd_name("flash_fwd_sm100_hd512", "FlashAttentionForwardSm100Hd512")
                              : fwd_name("flash_fwd_sm100", "FlashAttentionForwardSm100");
  if (varlen) {  // (total, h, d): dims {d, total, h}
    auto thd = [&](uint64_t addr, uint64_t total, uint64_t h, bool t) {
      return t ? Tensor{addr, {total, D, h}, {2 * total, 2 * total * D}} : Tensor{addr, {D, total, h}, {2 * h * D, 2 * D}};
    };
    l.maps = {thd(kBase, 1000, H, bad == "q"), thd(kBase + kStep, 3000, HK, bad == "k"),
              thd(kBase + 2 * kStep, 3000, HK, bad == "v")};
    return l;
  }
  Tensor v = bshd(kBase + 2 * kStep, B, SK, HK, D, bad == "v");
  if (bad == "sliced") v = {v.addr, {D, SK, HK, B}, {2 * 2 * HK * D, 2 * 2 * D, 2 * SK * 2 * HK * D}};
  Tensor o = bshd(bad == "o_over_q" ? kBase : kBase + 3 * kStep, B, S, H, D, bad == "o");
  if (bad == "o_expand") o.strides[2] = 0;
  l.maps = {bshd(kBase, B, S, H, D, bad == "q"), bshd(kBase + kStep, B, SK, HK, D, bad == "k"), v, o};
  return l;
}

// FlashAttentionMLAForwardSm100 (Q Qv [K V Vt] O) and dKGemmKernel (dS Q).
Launch mla(const std::string& cfg, const std::string& bad) {
  const uint64_t B = 2, S = 64, H = 128, SK = 2048;
  Launch l;
  if (cfg == "mla_dk") {
    l.name = fwd_name("flash_bwd_mla_dk_sm100", "dKGemmKernel");
    const uint64_t T = 4096, topk = 2048;  // dS (tokens, heads, top_k), Q (tokens, heads, 512)
    const Tensor ds = bad == "ds" ? Tensor{kBase, {H, topk, T}, {2 * H, 2 * topk * H}}
                                  : Tensor{kBase, {topk, H, T}, {2 * topk, 2 * topk * H}};
    l.maps = {ds, Tensor{kBase + kStep, {512, H, T}, {2 * 512, 2 * 512 * H}}};
    return l;
  }
  l.name = fwd_name("flash_fwd_mla_sm100", "FlashAttentionMLAForwardSm100");
  const Tensor q = bshd(kBase, B, S, H, 64, bad == "q"), qv = bshd(kBase + kStep, B, S, H, 512);
  Tensor o = bshd(bad == "o_over_q" ? kBase + kStep : kBase + 4 * kStep, B, S, H, 512, bad == "o");
  if (bad == "o_expand") o.strides[2] = 0;
  if (cfg == "mla_gather") {
    l.maps = {q, qv, o};
    l.inner = {64, 64, 64};
    return l;
  }
  const Tensor k = bshd(kBase + 2 * kStep, B, SK, 1, 64, bad == "k"), v = bshd(kBase + 3 * kStep, B, SK, 1, 512);
  l.maps = {q, qv, k, v, v, o};
  l.inner = {64, 64, 64, 64, 32, 64};  // Vt: V's memory, another box
  return l;
}

Kernel kernel_of(const Launch& l) {
  std::vector<std::vector<uint8_t>> p;
  for (const Tensor& t : l.maps) p.push_back(tensor_param(t.addr, 8));  // mQ, mK, ... as CuTe DSL flattens them
  p.push_back(tensor_param(kBase + 9 * kStep, 4));                      // mLSE
  for (std::size_t i = 0; i < l.maps.size(); ++i)
    p.push_back(map_param(l.maps[i], i < l.inner.size() ? l.inner[i] : 64));
  const float scale = 0.0883883f;
  p.push_back(param_bytes(&scale, 4));
  return make_kernel_raw(l.name, p);
}

int fa4_forward() {
  const char* c = std::getenv("TG_FWD_CONFIG");
  const char* b = std::getenv("TG_FWD_BAD");
  const char* cached = std::getenv("TG_FWD_CACHED");
  if (!c) die("TG_FWD_CONFIG is not set");
  const std::string cfg = c, bad = b ? b : "none";
  auto build = [&](const std::string& what) {
    return cfg.rfind("mla", 0) == 0 ? mla(cfg, what) : attention(cfg, what);
  };
  const Kernel k = kernel_of(build(bad));
  if (cached && std::strcmp(cached, "1") == 0) {
    Kernel healthy = kernel_of(build("none"));
    healthy.handle = k.handle;  // one kernel: traced with healthy tensors, then a cache hit with these
    launch(healthy);
    launch(healthy);
    launch(k);
  } else {
    launch(k);
    launch(k);
  }
  return finish(ran(k));
}

}  // namespace

const std::vector<Scenario>& fa4_forward_scenarios() {
  static const std::vector<Scenario> s = {{"fa4_forward", fa4_forward}};
  return s;
}

}  // namespace client
