// The FA4 SM100 backward guard and the generic descriptor check, on descriptors built with the H200-pinned encoder.
#include <gtest/gtest.h>

#include "tmaguard/checks.h"
#include "tmaguard/rules.h"

using namespace tmaguard;

namespace {

// torch (b, s, h, d) bf16; mn = seqlen-contiguous view. Box/swizzle as FA4 uses for head dim 128.
TensorMapParam bshd(int param, uint64_t addr, uint64_t b, uint64_t s, uint64_t h, uint64_t d, bool mn = false,
                    uint32_t dtype = 9) {
  EncodeArgs a;
  a.dtype = dtype;
  a.rank = 4;
  a.address = addr;
  if (!mn) {
    a.dims = {d, s, h, b};
    a.strides = {2 * h * d, 2 * d, 2 * s * h * d};
  } else {
    a.dims = {s, d, h, b};
    a.strides = {2 * s, 2 * s * d, 2 * s * h * d};
  }
  a.box = {static_cast<uint32_t>(128 / element_size(static_cast<DataType>(dtype))), 128, 1, 1};
  a.element_strides = {1, 1, 1, 1};
  a.swizzle = 3;
  uint8_t bytes[128];
  EXPECT_EQ(encode(a, bytes), 0);
  return {param, 0, decode(bytes)};
}

std::vector<TensorMapParam> fa4(bool dk_mn, bool dv_mn, bool two_cta = false) {
  std::vector<TensorMapParam> m;
  const int n = two_cta ? 9 : 6;
  for (int i = 0; i < n - 2; ++i) m.push_back(bshd(i + 1, 0x7f0000000000ULL + i * 0x100000ULL, 2, 256, 4, 128));
  m.push_back(bshd(n - 1, 0x7f1000000000ULL, 2, 256, 4, 128, dv_mn));
  m.push_back(bshd(n, 0x7f2000000000ULL, 2, 256, 4, 128, dk_mn));
  return m;
}

const std::string kName =
    "kernel_cutlass_kernel_flash_attncuteflash_bwd_sm100FlashAttentionBackwardSm100_object_at__x_0";

// The FA4 guard is the built-in rule preset (rules/fa4_sm100_bwd.toml), evaluated as the shim does.
std::vector<Finding> fa4_check(const std::vector<TensorMapParam>& maps, const std::string& name = kName) {
  static const auto rules = parse_rules(builtin_rules_text(), "built-in").rules;
  std::vector<Finding> out;
  evaluate_rules(*rules, rules_for_kernel(*rules, name), name, maps, out);
  return out;
}

}  // namespace

TEST(Fa4, PresetParsesAndMatchesKernelNames) {
  const RulesResult r = parse_rules(builtin_rules_text(), "built-in");
  ASSERT_TRUE(r.errors.empty()) << r.errors.front();
  EXPECT_EQ(rule_count(*r.rules), 3u);
  EXPECT_EQ(rules_for_kernel(*r.rules, kName).size(), 3u);
  EXPECT_EQ(rules_for_kernel(
                *r.rules, "kernel_cutlass_kernel_xrexcutedslranker_fa4flash_bwd_sm100FlashAttentionBackwardSm100_o_0")
                .size(),
            3u);
  EXPECT_TRUE(
      rules_for_kernel(*r.rules, "kernel_cutlass_kernel_flash_attncuteflash_bwd_sm90FlashAttentionBackwardSm90_0")
          .empty());
}

TEST(Fa4, KMajorIsClean) {
  EXPECT_TRUE(fa4_check(fa4(false, false)).empty());
  EXPECT_TRUE(fa4_check(fa4(false, false, true)).empty());
}

TEST(Fa4, SeqlenContiguousDkIsReportedWithFix) {
  const auto out = fa4_check(fa4(true, false));
  ASSERT_EQ(out.size(), 1u);
  const Finding& f = out[0];
  EXPECT_EQ(f.rule, "fa4-dk-not-k-major");
  EXPECT_EQ(f.severity, Severity::kError);
  EXPECT_EQ(f.tensor, "dK");
  EXPECT_EQ(f.param_index, 6);
  EXPECT_EQ(f.expected, "dK K-major: innermost dimension (dim 0) equal to K's dim 0 = 128");
  EXPECT_EQ(f.observed,
            "dK dim 0 = 256 (dK dims {256,128,4,2}, K dims {128,256,4,2}): dK is transposed (MN-major; its contiguous "
            "dim is K's dim 1)");
  EXPECT_NE(f.hint.find("torch.empty_like(k)"), std::string::npos);
  ASSERT_TRUE(f.tensor_map.has_value());
  EXPECT_EQ(f.tensor_map->dims[0], 256u);
}

TEST(Fa4, OnlyDvWrongIn2Cta) {
  const auto out = fa4_check(fa4(false, true, true));
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].rule, "fa4-dv-not-k-major");
  EXPECT_EQ(out[0].tensor, "dV");
  EXPECT_EQ(out[0].param_index, 8);
  EXPECT_NE(out[0].hint.find("torch.empty_like(v)"), std::string::npos);
}

TEST(Fa4, ShapeAndDtype) {
  auto maps = fa4(false, false);
  maps[5] = bshd(6, 0x7f2000000000ULL, 2, 512, 4, 128);            // dK with another seqlen
  maps[4] = bshd(5, 0x7f1000000000ULL, 2, 256, 4, 128, false, 7);  // dV float32
  const auto out = fa4_check(maps);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].rule, "fa4-dv-dtype");
  EXPECT_EQ(out[0].observed, "dV is float32");
  EXPECT_EQ(out[1].rule, "fa4-dk-shape-mismatch");
  EXPECT_EQ(out[1].observed, "dK dims {128,512,4,2}");
}

TEST(Fa4, PostprocessAndUnknownCounts) {
  auto maps = fa4(true, true);
  maps.resize(4);  // dKV postprocess: Q K V dO only
  EXPECT_TRUE(fa4_check(maps).empty());
  maps.resize(5);
  const auto out = fa4_check(maps);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].rule, "fa4-unexpected-map-count");
  EXPECT_EQ(out[0].severity, Severity::kWarning);
  EXPECT_EQ(out[0].observed, "5 tensor-map parameters");
}

TEST(Descriptor, HealthyMapIsClean) {
  std::vector<Finding> out;
  check_descriptor("k", bshd(0, 0x7f0000000000ULL, 2, 256, 4, 128), out);
  check_descriptor("k", bshd(0, 0x7f0000000000ULL, 2, 256, 4, 128, true), out);
  EXPECT_TRUE(out.empty());
}

TEST(Descriptor, NullAddressAndDriverRules) {
  std::vector<Finding> out;
  check_descriptor("k", bshd(3, 0, 2, 256, 4, 128), out);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].rule, "tmap-null-address");
  EXPECT_EQ(out[0].tensor, "param 3");

  TensorMapParam m = bshd(2, 0x7f0000000000ULL, 2, 256, 4, 128);
  m.decoded.view.swizzle = 1;  // as an inline encoder might write: 128 B inner box, 32B swizzle
  out.clear();
  check_descriptor("k", m, out);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].rule, "tmap-driver-would-reject");
  EXPECT_EQ(out[0].observed, "boxDim[0]=64 x 2 B = 128 B exceeds the 32B swizzle span (32 B)");

  m = bshd(2, 0x7f0000000000ULL, 2, 256, 4, 128);
  m.decoded.view.tile_bytes = 4;
  out.clear();
  check_descriptor("k", m, out);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].rule, "tmap-tile-bytes-mismatch");

  m = bshd(2, 0x7f0000000000ULL, 2, 256, 4, 128);
  m.decoded.view.address = 0x7f0000000008ULL;
  out.clear();
  check_descriptor("k", m, out);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].observed, "globalAddress=0x7f0000000008 must be 16-byte aligned");
}
