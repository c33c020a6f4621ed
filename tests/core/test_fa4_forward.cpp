// FlashAttention-4's forward kernels and its newest backward ones (rules/fa4_sm100_fwd.toml, fa4_sm90_fwd.toml,
// fa4_mla_fwd.toml, fa4_family.toml): healthy launches of every map count upstream has are silent; a transposed Q, K,
// V or O, an O over an input, an O whose elements collide are named; kernels no rule knows draw one warning.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "fa4_maps.h"

using namespace tmaguard;
using namespace tmaguard::test;

namespace {

const char* kSm100Fwd = "kernel_cutlass_kernel_flash_attncuteflash_fwd_sm100FlashAttentionForwardSm100_object_at__x_0";
const char* kSm90Fwd = "kernel_cutlass_kernel_flash_attncuteflash_fwd_sm90FlashAttentionForwardSm90_object_at__x_0";
const char* kHd256Fwd =
    "kernel_cutlass_kernel_flash_attncutesm100_hd256_2cta_fmha_forwardBlackwellFusedMultiHeadAttentionForward_object_"
    "at__x_0";
const char* kMlaFwd = "kernel_cutlass_kernel_flash_attncuteflash_fwd_mla_sm100FlashAttentionMLAForwardSm100_object_at__x_0";
const char* kMlaDk = "kernel_cutlass_kernel_flash_attncuteflash_bwd_mla_dk_sm100dKGemmKernel_object_at__x_0";

// One forward launch: Q (b, s_q, h, d), K and V (b, s_k, h_k, d / dv), O (b, s_q, h, dv); the sequence lengths (384,
// 512) differ from every head dim (a transposed tensor whose sequence is as long as its head dim looks healthy).
struct Fwd {
  T q, k, v, o;
};
Fwd fwd(uint64_t d, uint64_t dv, uint64_t h = 4, uint64_t h_k = 4) {
  return {bshd(2, 384, h, d), bshd(2, 512, h_k, d), bshd(2, 512, h_k, dv), bshd(2, 384, h, dv)};
}
// Q K V O at their own addresses (params interleave scalars, as CuTe DSL numbers them); `o_at`: O's address.
std::vector<TensorMapParam> qkvo(const Fwd& f, bool with_o = true, uint64_t o_at = kBase + 3 * kStep) {
  std::vector<TensorMapParam> m{map(10, kBase, f.q), map(11, kBase + kStep, f.k), map(12, kBase + 2 * kStep, f.v)};
  if (with_o) m.push_back(map(13, o_at, f.o));
  return m;
}

}  // namespace

// Every healthy configuration of the SM100, head-dim-256 and SM90 forwards is silent: MHA, GQA, head dims 64 to 256,
// (192, 128), varlen Q without an O map, block-scaled Q/K with their scale-factor maps after O.
TEST(Fa4Forward, HealthyLaunchesAreSilent) {
  for (const auto& [d, dv] : std::vector<std::pair<uint64_t, uint64_t>>{{64, 64}, {128, 128}, {192, 128}}) {
    for (const Fwd& f : {fwd(d, dv), fwd(d, dv, 8, 2)}) {
      EXPECT_TRUE(judge(qkvo(f), kSm100Fwd).findings.empty()) << d << "/" << dv;
      EXPECT_TRUE(judge(qkvo(f, false), kSm100Fwd).findings.empty()) << d << "/" << dv;
      EXPECT_TRUE(judge(qkvo(f), kSm90Fwd, Arch{9, 0}).findings.empty()) << d << "/" << dv;
      std::vector<TensorMapParam> scaled = qkvo(f);
      scaled.push_back(map(20, kBase + 6 * kStep, bshd(2, 256, 4, 64)));
      scaled.push_back(map(21, kBase + 7 * kStep, bshd(2, 512, 4, 64)));
      EXPECT_TRUE(judge(scaled, kSm100Fwd).findings.empty()) << d << "/" << dv;
    }
  }
  EXPECT_TRUE(judge(qkvo(fwd(256, 256)), kHd256Fwd).findings.empty());
  EXPECT_TRUE(judge(qkvo(fwd(256, 256), false), kHd256Fwd).findings.empty());
  // varlen: Q K V (total, h, d); SM90 stores O through a ptr-shift ragged map, judged as the tensor under it
  const std::vector<TensorMapParam> varlen{map(10, kBase, thd(1000, 8, 128)), map(11, kBase + kStep, thd(3000, 8, 128)),
                                           map(12, kBase + 2 * kStep, thd(3000, 8, 128)),
                                           ragged(13, kBase + 3 * kStep, 8, 128)};
  EXPECT_TRUE(judge(varlen, kSm90Fwd, Arch{9, 0}).findings.empty()) << rules_of(judge(varlen, kSm90Fwd)).size();
}

// A transposed Q or K: the QK^T GEMM reads both K-major, so the pair is an error whichever it is, and the finding
// names the transposed one where the dims tell.
TEST(Fa4Forward, TransposedQOrKIsAnErrorNamingIt) {
  for (const char* kernel : {kSm100Fwd, kSm90Fwd, kHd256Fwd}) {
    const uint64_t d = kernel == kHd256Fwd ? 256 : 128;
    Fwd f = fwd(d, d);
    f.q = bshd(2, 384, 4, d, true);
    Judgement j = judge(qkvo(f), kernel);
    ASSERT_EQ(rules_of(j), std::vector<std::string>{"fa4-fwd-qk-not-k-major!"}) << kernel;
    EXPECT_EQ(j.findings[0].tensor, "Q");
    EXPECT_NE(j.findings[0].observed.find("Q is transposed"), std::string::npos) << j.findings[0].observed;
    EXPECT_NE(j.findings[0].hint.find("q.contiguous()"), std::string::npos);
    f = fwd(d, d);
    f.k = bshd(2, 512, 4, d, true);  // a KV cache kept (b, h, d, s)
    j = judge(qkvo(f, kernel == kSm90Fwd), kernel);  // SM90 always stores O through a map
    ASSERT_EQ(rules_of(j), std::vector<std::string>{"fa4-fwd-qk-not-k-major!"}) << kernel;
    EXPECT_EQ(j.findings[0].tensor, "K") << "the finding names the map at fault";
    EXPECT_EQ(j.findings[0].place, (MapPlace{11, 0}));
    EXPECT_NE(j.findings[0].observed.find("K is transposed"), std::string::npos) << j.findings[0].observed;
  }
  // Q and K transposed with one sequence length for both (s_q == s_k == 256): the dims cannot tell which, so both
  // are named; and the self-attention case where they agree (both transposed) hides behind V's check.
  Fwd f = fwd(128, 128);
  f.q = bshd(2, 256, 4, 128, true);
  f.o = bshd(2, 256, 4, 128);
  f.k = bshd(2, 256, 4, 128);
  f.v = bshd(2, 256, 4, 128);
  const Judgement j = judge(qkvo(f), kSm100Fwd);
  ASSERT_EQ(rules_of(j), std::vector<std::string>{"fa4-fwd-qk-not-k-major!"});
  EXPECT_EQ(j.findings[0].tensor, "Q");
  EXPECT_NE(j.findings[0].observed.find("Q or K is transposed"), std::string::npos) << j.findings[0].observed;
}

// V transposed (its head dim not contiguous) is an error; O's dims past the innermost not Q's is an error on SM90 (a
// row-major tile is stored through it) and a warning on SM100 (the kernel stores with O's layout as traced).
TEST(Fa4Forward, TransposedVAndO) {
  Fwd f = fwd(128, 128);
  f.v = bshd(2, 512, 4, 128, true);
  for (const char* kernel : {kSm100Fwd, kSm90Fwd})
    EXPECT_EQ(rules_of(judge(qkvo(f), kernel)), std::vector<std::string>{"fa4-fwd-v-not-k-major!"}) << kernel;
  f = fwd(128, 128);
  f.o = bshd(2, 384, 4, 128, true);
  EXPECT_EQ(rules_of(judge(qkvo(f), kSm90Fwd, Arch{9, 0})), std::vector<std::string>{"fa4-fwd-o-not-row-major!"});
  EXPECT_EQ(rules_of(judge(qkvo(f), kSm100Fwd)), std::vector<std::string>{"fa4-fwd-o-layout?"});
  EXPECT_EQ(rules_of(judge(qkvo(f), kHd256Fwd)), std::vector<std::string>{"fa4-fwd-o-layout?"});
  // A sliced V (every other head of a wider tensor, its own strides): healthy; the same slice transposed is not.
  f = fwd(128, 128);
  f.v = {{128, 512, 4, 2}, {2 * 8 * 128, 2 * 2 * 128, 2 * 512 * 8 * 128}};
  EXPECT_TRUE(judge(qkvo(f), kSm100Fwd).findings.empty());
}

// O over an input (out=q, one buffer for q and out) or over itself (a stride-0 or overlapping view) is an error on
// every forward kernel.
TEST(Fa4Forward, OOverAnInputOrItself) {
  const Fwd f = fwd(128, 128);
  for (const char* kernel : {kSm100Fwd, kSm90Fwd, kHd256Fwd}) {
    const Fwd g = kernel == kHd256Fwd ? fwd(256, 256) : f;
    EXPECT_EQ(rules_of(judge(qkvo(g, true, kBase), kernel)), std::vector<std::string>{"fa4-fwd-o-overlaps-input!"})
        << kernel;
    EXPECT_EQ(rules_of(judge(qkvo(g, true, kBase + 2 * kStep + 1024), kernel)),
              std::vector<std::string>{"fa4-fwd-o-overlaps-input!"})
        << kernel;
  }
  Fwd rows = f;
  rows.o.strides[0] = 2 * 64;  // each row 128 wide, rows 64 apart: neighbours share half their bytes
  EXPECT_EQ(rules_of(judge(qkvo(rows), kSm100Fwd)), std::vector<std::string>{"fa4-fwd-o-aliased!"});
}

// Launches that do not carry the forward's signature draw one warning and no error; map counts no signature has one
// warning naming the kernel; the two-map launches (K V, or Q O) are known and not judged.
TEST(Fa4Forward, SignatureAndMapCounts) {
  Fwd f = fwd(128, 128);
  f.k = bshd(2, 512, 4, 96);  // Q and K share no dim: not FA4's QK^T
  const Judgement j = judge(qkvo(f), kSm100Fwd);
  ASSERT_EQ(rules_of(j), std::vector<std::string>{"fa4-unrecognized-signature?"});
  EXPECT_NE(j.findings[0].observed.find("innermost dim"), std::string::npos) << j.findings[0].observed;
  std::vector<TensorMapParam> five = qkvo(fwd(128, 128));
  five.push_back(map(20, kBase + 6 * kStep, bshd(2, 256, 4, 64)));
  EXPECT_EQ(rules_of(judge(five, kSm100Fwd)), std::vector<std::string>{"fa4-sm100-fwd-unexpected-map-count?"});
  std::vector<TensorMapParam> two = qkvo(fwd(128, 128), false);
  two.pop_back();
  EXPECT_TRUE(judge(two, kSm100Fwd).findings.empty());
  EXPECT_TRUE(judge(two, kSm90Fwd, Arch{9, 0}).findings.empty());
  EXPECT_EQ(rules_of(judge(two, kHd256Fwd)), std::vector<std::string>{"fa4-hd256-fwd-unexpected-map-count?"});
}

// The MLA forward: top-k gather (Q Qv O) and dense (Q Qv K V Vt O, + P) launches.
TEST(Fa4Forward, MlaForward) {
  const T q = bshd(2, 64, 128, 64), qv = bshd(2, 64, 128, 512), o = bshd(2, 64, 128, 512);
  const T k = bshd(2, 2048, 1, 64), v = bshd(2, 2048, 1, 512);
  auto gather = [&](uint64_t o_at, const T& out) {
    return std::vector<TensorMapParam>{map(10, kBase, q), map(11, kBase + kStep, qv), map(12, o_at, out)};
  };
  EXPECT_TRUE(judge(gather(kBase + 3 * kStep, o), kMlaFwd).findings.empty());
  EXPECT_EQ(rules_of(judge(gather(kBase + kStep, o), kMlaFwd)), std::vector<std::string>{"fa4-fwd-o-overlaps-input!"});
  EXPECT_EQ(rules_of(judge(gather(kBase + 3 * kStep, bshd(2, 64, 128, 512, true)), kMlaFwd)),
            std::vector<std::string>{"fa4-fwd-o-layout?"});
  auto dense = [&](const T& kk, bool with_p, bool p_aliased = false) {
    std::vector<TensorMapParam> m{map(10, kBase, q),
                                  map(11, kBase + kStep, qv),
                                  map(12, kBase + 2 * kStep, kk),
                                  map(13, kBase + 3 * kStep, v),
                                  map(14, kBase + 3 * kStep, v, 32),
                                  map(15, kBase + 4 * kStep, o)};
    T p = bshd(2, 64, 128, 2048);
    if (p_aliased) p.strides[0] = 2 * 1024;
    if (with_p) m.push_back(map(16, kBase + 5 * kStep, p));
    return m;
  };
  EXPECT_TRUE(judge(dense(k, false), kMlaFwd).findings.empty());
  EXPECT_TRUE(judge(dense(k, true), kMlaFwd).findings.empty());
  EXPECT_EQ(rules_of(judge(dense(bshd(2, 2048, 1, 64, true), false), kMlaFwd)),
            std::vector<std::string>{"fa4-fwd-qk-not-k-major!"});
  EXPECT_EQ(rules_of(judge(dense(k, true, true), kMlaFwd)), std::vector<std::string>{"fa4-mla-fwd-p-aliased!"});
}

// dKGemmKernel: dS (tokens, heads, top_k) and Q (tokens, heads, dim) compiled MN-major (top_k, dim contiguous).
TEST(Fa4Forward, SparseMlaDkGemm) {
  const T ds{{2048, 128, 4096}, {2 * 2048, 2 * 2048 * 128}}, q{{512, 128, 4096}, {2 * 512, 2 * 512 * 128}};
  EXPECT_TRUE(judge({map(3, kBase, ds), map(5, kBase + kStep, q)}, kMlaDk).findings.empty());
  const T ds_t{{128, 2048, 4096}, {2 * 128, 2 * 2048 * 128}};  // heads contiguous: (tokens, top_k, heads)
  const Judgement j = judge({map(3, kBase, ds_t), map(5, kBase + kStep, q)}, kMlaDk);
  ASSERT_EQ(rules_of(j), std::vector<std::string>{"fa4-mla-dk-operand-layout!"});
  EXPECT_EQ(j.findings[0].tensor, "dS");
  // float16: not the kernel's signature (it asserts bfloat16): one warning
  EXPECT_EQ(rules_of(judge({map(3, kBase, ds, 64, 6), map(5, kBase + kStep, q)}, kMlaDk)),
            std::vector<std::string>{"fa4-unrecognized-signature?"});
}

// Every FA4 class name at 0251105a is known; any other FlashAttention...Forward/Backward class with maps draws one
// warning; a known name followed by more letters or digits is another class.
TEST(Fa4Forward, UnknownKernelsAreNeverSilent) {
  const std::vector<TensorMapParam> maps = qkvo(fwd(128, 128));
  auto name = [](const std::string& module, const std::string& cls) {
    return "kernel_cutlass_kernel_flash_attncute" + module + cls + "_object_at__x_0";
  };
  for (const auto& [module, cls, rule] : std::vector<std::tuple<std::string, std::string, std::string>>{
           {"flash_fwd_sm100_hd512", "FlashAttentionForwardSm100Hd512", "fa4-unknown-forward-kernel?"},
           {"flash_fwd_decode_sm100", "FlashAttentionDecodeForwardSm100", "fa4-unknown-forward-kernel?"},
           {"flash_fwd_sm100", "FlashAttentionForwardSm1000", "fa4-unknown-forward-kernel?"},
           {"flash_fwd_sm120_tma", "FlashAttentionForwardSm120Tma", "fa4-unknown-forward-kernel?"},
           {"fmha_fp8", "BlackwellFusedMultiHeadAttentionForwardFp8", "fa4-unknown-forward-kernel?"},
           {"flash_bwd_sm100_hd512", "FlashAttentionBackwardSm100Hd512", "fa4-unknown-backward-kernel?"},
           {"flash_bwd_sm90", "FlashAttentionBackwardSm900", "fa4-unknown-backward-kernel?"}}) {
    EXPECT_EQ(rules_of(judge(maps, name(module, cls).c_str())), std::vector<std::string>{rule}) << cls;
  }
  for (const auto& [module, cls] : std::vector<std::pair<std::string, std::string>>{
           {"flash_bwd_mla_sm100", "FlashAttentionSparseMLABackwardSm100"},
           {"flash_fwd_combine", "FlashAttentionForwardCombine"},
           {"flash_bwd_postprocess", "FlashAttentionBackwardPostprocess"},
           {"flash_fwd_sm120", "FlashAttentionForwardSm120"}}) {
    const std::string n = name(module, cls);
    for (const Finding& f : judge(maps, n.c_str()).findings)
      EXPECT_EQ(f.rule.find("fa4-unknown"), std::string::npos) << cls << ": " << f.rule;
  }
  // a kernel with no maps says nothing, known or not
  EXPECT_TRUE(judge({}, name("flash_fwd_sm100_hd512", "FlashAttentionForwardSm100Hd512").c_str()).findings.empty());
}

// K and V expand()ed over the batch (one KV for every sequence of the batch, as the backward's broadcast K): their
// maps drop the stride-0 batch mode. Healthy, whichever of them is broadcast; V transposed beside a broadcast K is
// still an error.
TEST(Fa4Forward, BroadcastKOrVIsHealthy) {
  const T k_b{{128, 512, 4}, {2 * 4 * 128, 2 * 128}}, v_b{{128, 512, 4}, {2 * 4 * 128, 2 * 128}};
  for (const auto& [k, v] : std::vector<std::pair<T, T>>{{k_b, bshd(2, 512, 4, 128)}, {bshd(2, 512, 4, 128), v_b},
                                                         {k_b, v_b}}) {
    Fwd f = fwd(128, 128);
    f.k = k;
    f.v = v;
    for (const char* kernel : {kSm100Fwd, kSm90Fwd})
      EXPECT_TRUE(judge(qkvo(f), kernel).findings.empty()) << kernel << ": " << rules_of(judge(qkvo(f), kernel)).size();
  }
  Fwd f = fwd(128, 128);
  f.k = k_b;
  f.v = bshd(2, 512, 4, 128, true);
  EXPECT_EQ(rules_of(judge(qkvo(f), kSm100Fwd)), std::vector<std::string>{"fa4-fwd-v-not-k-major!"});
}
