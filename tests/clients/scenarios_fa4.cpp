// Scenarios: every FlashAttention-4 backward configuration upstream has, as a stand-in kernel whose parameters
// follow the kernel's argument order (TMA atoms as 128-byte maps; other tensors as CuTe DSL passes them, a pointer
// plus dynamic shape and stride words; scalars), and descriptors with Blackwell-only features.
//
//   TG_FA4_CONFIG: 1cta_hd64 | 1cta_hd96 | 1cta_hd128 | 2cta_hd128 | 2cta_hd192 | hd256 | gqa4 | gqa7 | varlen4 |
//                  varlen7 | broadcast_k (SM100); sm90 | sm90_gqa | sm90_varlen (ragged dK/dV) | hd256_dq |
//                  mla | mla_dqv (sparse MLA dQ/dQv) | unknown_family (a backward class no preset knows)
//   TG_FA4_BAD:    none | dk | dv | dq   (a seqlen-contiguous dK, dV or dQ; sm90_varlen: heads contiguous)
//                  | dk_expand | dv_expand | dq_expand (one batch's dK, dV or dQ expand()ed over the batch: batch
//                  stride 0) | dq_t | dqv_t | dqv_expand (MLA)
#include <cstdlib>
#include <cstring>
#include <string>

#include "client.h"
#include "tmaguard/tensormap.h"

namespace client {
namespace {

constexpr uint64_t kBase = 0x7f0000000000ULL, kStep = 0x1000000ULL;

std::vector<uint8_t> as_param(const CUtensorMap& m) { return param_bytes(&m, sizeof m); }
std::vector<uint8_t> tensor_arg(uint64_t ptr, int words) { return tensor_param(ptr, words); }
std::vector<uint8_t> f32(float x) { return param_bytes(&x, 4); }
std::vector<uint8_t> i32(int32_t x) { return param_bytes(&x, 4); }

// The map of a tensor: bf16, inner box of `inner` elements (64 -> 128B swizzle, 32 -> 64B, 16 -> 32B).
CUtensorMap tmap(const Tensor& t, uint32_t inner = 64, uint32_t rows = 128) {
  MapShape s;
  s.box = {inner, rows, 1, 1, 1};
  s.swizzle = inner == 64   ? CU_TENSOR_MAP_SWIZZLE_128B
              : inner == 32 ? CU_TENSOR_MAP_SWIZZLE_64B
                            : CU_TENSOR_MAP_SWIZZLE_32B;
  return encode_map(t, s);
}

// (total, h, d) varlen tensor: dims {d, total, h}.
Tensor thd(uint64_t addr, uint64_t total, uint64_t h, uint64_t d) { return {addr, {d, total, h}, {2 * h * d, 2 * d}}; }

int run_config() {
  const char* c = std::getenv("TG_FA4_CONFIG");
  const char* b = std::getenv("TG_FA4_BAD");
  if (!c) die("TG_FA4_CONFIG is not set");
  const std::string cfg = c, bad = b ? b : "none";
  const bool dk_bad = bad == "dk", dv_bad = bad == "dv";
  // dK or dV as the kernel's output: transposed for "dk"/"dv", its batch stride 0 for "dk_expand"/"dv_expand".
  auto out = [&](uint64_t addr, uint64_t b, uint64_t s, uint64_t h, uint64_t d, bool is_dk) {
    Tensor t = bshd(addr, b, s, h, d, is_dk ? dk_bad : dv_bad);
    if (bad == (is_dk ? "dk_expand" : "dv_expand")) t.strides[2] = 0;
    return t;
  };
  const uint64_t B = 2, S = 256, SK = 512, H = 4;
  std::vector<std::vector<uint8_t>> p;  // the kernel's parameters, in order
  std::string name = kFa4Name;
  // FlashAttentionBackwardSm100 (flash_bwd_sm100.py): tiled MMAs and layouts are static (no parameter); the TMA
  // atoms come in the order Q, Qt, K, Kt, V, dO, dOt, dV, dK, then LSE, dPsum, dQaccum, scale, varlen and scheduler
  // arguments.
  auto sm100 = [&](uint64_t hd, uint64_t hdv, bool two_cta, bool tma_store, const Tensor& q, const Tensor& k,
                   const Tensor& v, const Tensor& dout, uint32_t inner) {
    const CUtensorMap mq = tmap(q, inner), mk = tmap(k, inner), mv = tmap(v, hdv == 64 ? 64 : inner),
                      mdo = tmap(dout, hdv == 64 ? 64 : inner);
    p.push_back(as_param(mq));
    if (two_cta) p.push_back(as_param(tmap(q, 32)));
    p.push_back(as_param(mk));
    if (two_cta) p.push_back(as_param(tmap(k, 32)));
    p.push_back(as_param(mv));
    p.push_back(as_param(mdo));
    if (two_cta) p.push_back(as_param(tmap(dout, 32)));
    if (tma_store) {
      const uint32_t epi = hd >= 128 ? 64 : 32;
      p.push_back(as_param(tmap(out(kBase + 4 * kStep, B, SK, H, hdv, false), epi)));
      p.push_back(as_param(tmap(out(kBase + 5 * kStep, B, SK, H, hd, true), epi)));
    }
    p.push_back(tensor_arg(kBase + 6 * kStep, 4));  // LSE
    p.push_back(tensor_arg(kBase + 7 * kStep, 4));  // dPsum
    p.push_back(tensor_arg(kBase + 8 * kStep, 4));  // dQaccum
    p.push_back(f32(0.125f));                       // softmax_scale
    p.push_back(i32(static_cast<int32_t>(S)));      // tile scheduler parameters
  };
  if (cfg == "1cta_hd64" || cfg == "1cta_hd96" || cfg == "1cta_hd128") {
    const uint64_t hd = cfg == "1cta_hd64" ? 64 : cfg == "1cta_hd96" ? 96 : 128;
    const uint32_t inner = hd == 64 ? 32 : hd == 96 ? 16 : 64;
    sm100(hd, hd, false, true, bshd(kBase, B, S, H, hd), bshd(kBase + kStep, B, SK, H, hd),
          bshd(kBase + 2 * kStep, B, SK, H, hd), bshd(kBase + 3 * kStep, B, S, H, hd), inner);
  } else if (cfg == "2cta_hd128" || cfg == "2cta_hd192") {
    const uint64_t hd = cfg == "2cta_hd128" ? 128 : 192, hdv = 128;
    sm100(hd, hdv, true, true, bshd(kBase, B, S, H, hd), bshd(kBase + kStep, B, SK, H, hd),
          bshd(kBase + 2 * kStep, B, SK, H, hdv), bshd(kBase + 3 * kStep, B, S, H, hdv), 64);
  } else if (cfg == "broadcast_k") {  // K expanded over the batch (stride 0): its map drops the batch mode
    const Tensor k{kBase + kStep, {128, SK, H}, {2 * H * 128, 2 * 128}};
    sm100(128, 128, false, true, bshd(kBase, B, S, H, 128), k, bshd(kBase + 2 * kStep, B, SK, H, 128),
          bshd(kBase + 3 * kStep, B, S, H, 128), 64);
  } else if (cfg == "gqa4" || cfg == "gqa7") {  // 8 query heads on 2 KV heads: fp32 accumulators, postprocess
    sm100(128, 128, cfg == "gqa7", false, bshd(kBase, B, S, 8, 128), bshd(kBase + kStep, B, SK, 2, 128),
          bshd(kBase + 2 * kStep, B, SK, 2, 128), bshd(kBase + 3 * kStep, B, S, 8, 128), 64);
  } else if (cfg == "varlen4" || cfg == "varlen7") {  // MHA with cu_seqlens_q and cu_seqlens_k: dK/dV plain stores
    sm100(128, 128, cfg == "varlen7", false, thd(kBase, 512, H, 128), thd(kBase + kStep, 1024, H, 128),
          thd(kBase + 2 * kStep, 1024, H, 128), thd(kBase + 3 * kStep, 512, H, 128), 64);
    p.push_back(tensor_arg(kBase + 9 * kStep, 1));   // cu_seqlens_q
    p.push_back(tensor_arg(kBase + 10 * kStep, 1));  // cu_seqlens_k
  } else if (cfg == "hd256") {
    // BlackwellFusedMultiHeadAttentionBackwardDKDVKernel.dkdv_bwd (sm100_hd256_2cta_fmha_backward_dkdvkernel.py):
    // tma_atom_K, K_in, K_ref, tma_atom_V, V_in, tma_atom_Q, Q_in, Q_ref, tma_atom_QT, QT_in, tma_atom_dO, dO_in,
    // tma_atom_dOT, dOT_in, dK, dV, tma_atom_dK, dK_tma, tma_atom_dV, dV_tma, LSE, scale, sum_OdO, problem shape,
    // scheduler. Q's map keeps the (h_r, h_k) modes of GQA (4 query heads per KV head), K's drops the stride-0 h_r.
    name =
        "kernel_cutlass_kernel_flash_attncutesm100_hd256_2cta_fmha_backward_dkdvkernelBlackwellFusedMultiHead"
        "AttentionBackwardDKDVKernel_object_at__0x7f_0";
    const uint64_t hd = 256, hr = 4, hk = 2;
    const Tensor q{kBase, {hd, S, hr, hk, B}, {2 * hd * hr * hk, 2 * hd, 2 * hd * hr, 2 * S * hd * hr * hk}};
    const Tensor dout{kBase + 3 * kStep, q.dims, q.strides};
    const Tensor k = bshd(kBase + kStep, B, SK, hk, hd), v = bshd(kBase + 2 * kStep, B, SK, hk, hd);
    p.push_back(as_param(tmap(k)));
    p.push_back(tensor_arg(k.addr, 6));
    p.push_back(tensor_arg(k.addr, 6));
    p.push_back(as_param(tmap(v)));
    p.push_back(tensor_arg(v.addr, 6));
    p.push_back(as_param(tmap(q)));
    p.push_back(tensor_arg(q.addr, 8));
    p.push_back(tensor_arg(q.addr, 8));
    p.push_back(as_param(tmap(q, 32)));
    p.push_back(tensor_arg(q.addr, 8));
    p.push_back(as_param(tmap(dout)));
    p.push_back(tensor_arg(dout.addr, 8));
    p.push_back(as_param(tmap(dout, 32)));
    p.push_back(tensor_arg(dout.addr, 8));
    p.push_back(tensor_arg(kBase + 5 * kStep, 6));  // dK
    p.push_back(tensor_arg(kBase + 4 * kStep, 6));  // dV
    p.push_back(as_param(tmap(out(kBase + 5 * kStep, B, SK, hk, hd, true))));
    p.push_back(tensor_arg(kBase + 5 * kStep, 6));
    p.push_back(as_param(tmap(out(kBase + 4 * kStep, B, SK, hk, hd, false))));
    p.push_back(tensor_arg(kBase + 4 * kStep, 6));
    p.push_back(tensor_arg(kBase + 6 * kStep, 4));  // LSE
    p.push_back(f32(0.0625f));
    p.push_back(tensor_arg(kBase + 7 * kStep, 4));  // sum_OdO
    for (int32_t v32 : {256, 512, 256, 4, 2, 2}) p.push_back(i32(v32));
  } else if (cfg == "sm90" || cfg == "sm90_gqa") {
    // FlashAttentionBackwardSm90 (flash_bwd_sm90.py): Q K V dO, then dK dV (dK first) when q heads equal kv heads.
    name = "kernel_cutlass_kernel_flash_attncuteflash_bwd_sm90FlashAttentionBackwardSm90_object_at__0x7f_0";
    const bool gqa = cfg == "sm90_gqa";
    const uint64_t hq = gqa ? 8 : H, hk = gqa ? 2 : H;
    p.push_back(as_param(tmap(bshd(kBase, B, S, hq, 128))));
    p.push_back(as_param(tmap(bshd(kBase + kStep, B, SK, hk, 128))));
    p.push_back(as_param(tmap(bshd(kBase + 2 * kStep, B, SK, hk, 128))));
    p.push_back(as_param(tmap(bshd(kBase + 3 * kStep, B, S, hq, 128))));
    if (!gqa) {
      p.push_back(as_param(tmap(out(kBase + 5 * kStep, B, SK, H, 128, true))));
      p.push_back(as_param(tmap(out(kBase + 4 * kStep, B, SK, H, 128, false))));
    } else {
      p.push_back(tensor_arg(kBase + 5 * kStep, 4));  // dKaccum, dVaccum (fp32)
      p.push_back(tensor_arg(kBase + 4 * kStep, 4));
    }
    p.push_back(tensor_arg(kBase + 6 * kStep, 4));  // LSE
    p.push_back(tensor_arg(kBase + 7 * kStep, 4));  // dPsum
    p.push_back(tensor_arg(kBase + 8 * kStep, 4));  // dQaccum
    p.push_back(f32(0.125f));
  } else if (cfg == "sm90_varlen") {
    // The same with cu_seqlens_k: Q K V dO (total, h, d); dK/dV through quack's ragged maps (ptr_shift=True): dims
    // {d, 2^30, h, 2^31 - 1}, strides {S, Sh, S}, address base - 2^30 S. dk/dv: the heads contiguous instead.
    name = "kernel_cutlass_kernel_flash_attncuteflash_bwd_sm90FlashAttentionBackwardSm90_object_at__0x7f_0";
    const uint64_t h = 8, d = 128, total = 1000;
    auto ragged = [&](uint64_t base, bool transposed) {
      const uint64_t st = 2 * h * d;
      const Tensor t = transposed ? Tensor{base - (1ULL << 30) * st, {h, 1ULL << 30, d, (1ULL << 31) - 1}, {st, 2 * h, st}}
                                  : Tensor{base - (1ULL << 30) * st, {d, 1ULL << 30, h, (1ULL << 31) - 1}, {st, 2 * d, st}};
      return tmap(t);
    };
    p.push_back(as_param(tmap(thd(kBase, total, h, d))));
    p.push_back(as_param(tmap(thd(kBase + kStep, total, h, d))));
    p.push_back(as_param(tmap(thd(kBase + 2 * kStep, total, h, d))));
    p.push_back(as_param(tmap(thd(kBase + 3 * kStep, total, h, d))));
    p.push_back(as_param(ragged(kBase + 5 * kStep, dk_bad)));
    p.push_back(as_param(ragged(kBase + 4 * kStep, dv_bad)));
    p.push_back(tensor_arg(kBase + 9 * kStep, 1));   // cu_seqlens_q
    p.push_back(tensor_arg(kBase + 10 * kStep, 1));  // cu_seqlens_k
    p.push_back(f32(0.125f));
  } else if (cfg == "hd256_dq") {
    // BlackwellFusedMultiHeadAttentionBackwardDQKernel (sm100_hd256_2cta_fmha_backward_dqkernel.py): q k v do kt dQ,
    // kt K's transposed view at K's address. dq: a seqlen-contiguous dQ; dq_expand: one batch's dQ over the batch.
    name =
        "kernel_cutlass_kernel_flash_attncutesm100_hd256_2cta_fmha_backward_dqkernelBlackwellFusedMultiHeadAttention"
        "BackwardDQKernel_object_at__0x7f_0";
    // (s_q = 384, not 256: a seqlen-contiguous dQ whose seqlen equals the head dim has Q's dims, see README)
    const uint64_t hd = 256, SQ = 384;
    const Tensor k = bshd(kBase + kStep, B, SK, H, hd);
    p.push_back(as_param(tmap(bshd(kBase, B, SQ, H, hd))));
    p.push_back(as_param(tmap(k)));
    p.push_back(as_param(tmap(bshd(kBase + 2 * kStep, B, SK, H, hd))));
    p.push_back(as_param(tmap(bshd(kBase + 3 * kStep, B, SQ, H, hd))));
    p.push_back(as_param(tmap(bshd(k.addr, B, SK, H, hd, true))));  // kt
    Tensor dq = bshd(kBase + 5 * kStep, B, SQ, H, hd, bad == "dq");
    if (bad == "dq_expand") dq.strides[2] = 0;
    p.push_back(as_param(tmap(dq)));
    p.push_back(tensor_arg(kBase + 6 * kStep, 4));  // LSE
    p.push_back(f32(0.0625f));
  } else if (cfg == "mla" || cfg == "mla_dqv") {
    // dQdQvGemmKernel (flash_bwd_mla_dq_dqv_sm100.py): dS (b, s_q, h, top_k), then dQ (mla only) and dQv
    // (b, s_q, h, d) with d 64 and 512. dq_t / dqv_t: seqlen-contiguous; dq_expand / dqv_expand: batch stride 0.
    name = "kernel_cutlass_kernel_flash_attncuteflash_bwd_mla_dq_dqv_sm100dQdQvGemmKernel_object_at__0x7f_0";
    const uint64_t topk = 2048;
    p.push_back(as_param(tmap(bshd(kBase, B, S * 3, H, topk))));  // s_q 768: not a head dim
    auto output = [&](uint64_t addr, uint64_t d, const std::string& what) {
      Tensor t = bshd(addr, B, S * 3, H, d, bad == what + "_t");
      if (bad == what + "_expand") t.strides[2] = 0;
      p.push_back(as_param(tmap(t)));
    };
    if (cfg == "mla") output(kBase + kStep, 64, "dq");
    output(kBase + 2 * kStep, 512, "dqv");
    p.push_back(tensor_arg(kBase + 3 * kStep, 4));  // top-k indices
    p.push_back(f32(0.0625f));
  } else if (cfg == "unknown_family") {
    // A backward class of the family no preset knows (a renamed fork): its maps are Q K V dO dK dV.
    name = "kernel_cutlass_kernel_flash_attncuteflash_bwd_sm110FlashAttentionBackwardSm110_object_at__0x7f_0";
    for (int i = 0; i < 6; ++i) p.push_back(as_param(tmap(bshd(kBase + i * kStep, B, S, H, 128))));
  } else {
    die("unknown TG_FA4_CONFIG");
  }
  const Kernel k = make_kernel_raw(name, p);
  launch(k);
  launch(k);
  return finish(ran(k));
}

// Descriptors an sm_100 encoder may write: swizzle-atomicity bits and the large-tensor flag (word 2 bits 19-21), a
// packed element type the H200's driver does not know, an im2col map (im2col-wide reads the same), each also with a
// rule of the sm_90 driver broken. None may draw an error, on any architecture.
int blackwell_features() {
  tmaguard::EncodeArgs a;
  a.dtype = CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
  a.rank = 2;
  a.address = kBase;
  a.dims = {128, 4096};
  a.strides = {256};
  a.box = {64, 128};
  a.element_strides = {1, 1};
  a.swizzle = CU_TENSOR_MAP_SWIZZLE_128B;
  auto word2 = [](CUtensorMap& m, uint32_t set, uint32_t clear) {
    uint32_t w;
    std::memcpy(&w, reinterpret_cast<uint8_t*>(&m) + 8, 4);
    w = (w & ~clear) | set;
    std::memcpy(reinterpret_cast<uint8_t*>(&m) + 8, &w, 4);
  };
  // A 32B swizzle for a 128 B inner box (the sm_90 rules refuse it), its swizzle-span word consistent.
  auto refused_swizzle = [&](CUtensorMap& m) {
    word2(m, 1u << 13, 3u << 13);
    const uint32_t span = 0x100;
    std::memcpy(reinterpret_cast<uint8_t*>(&m) + 72, &span, 4);
  };
  std::vector<CUtensorMap> maps;
  for (uint32_t bits : {1u, 2u, 3u, 4u, 5u, 7u}) {  // atomicity 1..3 (swizzle modes 4-6), and bit 21
    CUtensorMap m;
    tmaguard::encode(a, reinterpret_cast<uint8_t*>(&m));
    word2(m, bits << 19, 0);
    refused_swizzle(m);
    maps.push_back(m);
  }
  CUtensorMap packed;  // element-type code 13: none the H200's driver knows (a packed 4/6-bit type)
  tmaguard::encode(a, reinterpret_cast<uint8_t*>(&packed));
  word2(packed, 13u << 7, 0xfu << 7);
  maps.push_back(packed);
  tmaguard::EncodeArgs ic;  // an im2col map with a swizzle the sm_90 rules would refuse
  ic.kind = tmaguard::MapKind::kIm2col;
  ic.dtype = CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
  ic.rank = 4;
  ic.address = kBase;
  ic.dims = {64, 32, 32, 8};
  ic.strides = {128, 4096, 131072};
  ic.element_strides = {1, 1, 1, 1};
  ic.channels_per_pixel = 64;
  ic.pixels_per_column = 128;
  ic.swizzle = CU_TENSOR_MAP_SWIZZLE_128B;
  CUtensorMap im;
  if (tmaguard::encode(ic, reinterpret_cast<uint8_t*>(&im)) != 0) die("im2col encode failed");
  refused_swizzle(im);
  maps.push_back(im);
  const Kernel k = make_kernel("sm100_kernel_with_blackwell_maps", maps);
  launch(k);
  // And an FA4 backward launch whose maps all carry the large-tensor flag (bit 21).
  Kernel f = fa4_kernel(false, false, false, false);
  for (auto& v : f.values)
    if (v.size() == 128) {
      uint32_t w;
      std::memcpy(&w, v.data() + 8, 4);
      w |= 1u << 21;
      std::memcpy(v.data() + 8, &w, 4);
    }
  launch(f);
  return finish(ran(k) + ran(f));
}

// FA4 1-CTA launched the way a training loop launches it: the same layouts, every tensor at another address each
// step (TG_MOVES steps, default 10; the summary counts them in launches_moved), then three moves that are wrong, one
// launch each: dV onto dK, dK 8 bytes off the driver's alignment, dO NULL. Each map's address is its bytes 0..7.
// TG_SHAPES=2: the steps alternate between two sequence lengths (256 and 512), two layouts of the one kernel.
int fa4_moves() {
  Kernel k = fa4_kernel(false, false, false, false);
  const std::size_t dout = 5, dv = 6, dk = 7, params[] = {1, 2, 3, 5, 6, 7};  // Q K V dO dV dK
  std::vector<std::vector<uint8_t>> other = k.values;  // the same tensors at seqlen 512
  for (std::size_t i = 0; i < 6; ++i) {
    uint64_t a;
    std::memcpy(&a, k.values[params[i]].data(), 8);
    other[params[i]] = as_param(encode_map(bshd(a, 2, 512, 4, 128)));
  }
  auto address = [&](std::size_t p) {
    uint64_t a;
    std::memcpy(&a, k.values[p].data(), 8);
    return a;
  };
  auto place = [&](std::size_t p, uint64_t a) { std::memcpy(k.values[p].data(), &a, 8); };
  const char* n = std::getenv("TG_MOVES");
  const char* shapes = std::getenv("TG_SHAPES");
  const int steps = n ? std::atoi(n) : 10;
  const bool two = shapes && std::atoi(shapes) == 2;
  launch(k);
  for (int step = 1; step <= steps; ++step) {
    for (const std::size_t p : params) {
      const uint64_t to = address(p) + 0x100000;  // 1 MiB on, inside each tensor's 16 MiB
      if (two) std::swap(k.values[p], other[p]);  // the other sequence length, at its own last address
      place(p, to);
    }
    launch(k);
  }
  if (two && steps % 2)
    for (const std::size_t p : params) std::swap(k.values[p], other[p]);  // back to seqlen 256's maps
  const uint64_t dv_was = address(dv), dk_was = address(dk), dout_was = address(dout);
  place(dv, dk_was);
  launch(k);
  place(dv, dv_was);
  place(dk, dk_was + 8);
  launch(k);
  place(dk, dk_was);
  place(dout, 0);
  launch(k);
  place(dout, dout_was);
  return finish(ran(k));
}

}  // namespace

const std::vector<Scenario>& fa4_scenarios() {
  static const std::vector<Scenario> v = {
      {"fa4_config", run_config},
      {"blackwell_features", blackwell_features},
      {"fa4_moves", fa4_moves},
  };
  return v;
}

}  // namespace client
