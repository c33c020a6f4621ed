// The FA4 SM100 backward guard and the generic descriptor check, on descriptors built with the H200-pinned encoder.
#include <gtest/gtest.h>

#include <cstring>

#include "tmaguard/descriptor_checks.h"

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
  return {{static_cast<uint32_t>(param), 0}, decode(bytes)};
}

const Arch kSm90{9, 0};  // the H200 the driver rules were measured on
const Arch kSm100{10, 0};
}  // namespace

TEST(Descriptor, HealthyMapIsClean) {
  std::vector<Finding> out;
  check_descriptor("k", bshd(0, 0x7f0000000000ULL, 2, 256, 4, 128), kSm90, out);
  check_descriptor("k", bshd(0, 0x7f0000000000ULL, 2, 256, 4, 128, true), kSm90, out);
  EXPECT_TRUE(out.empty());
}

TEST(Descriptor, NullAddressAndDriverRules) {
  std::vector<Finding> out;
  check_descriptor("k", bshd(3, 0, 2, 256, 4, 128), kSm90, out);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].rule, "tmap-null-address");
  EXPECT_EQ(out[0].tensor, "param 3");

  TensorMapParam m = bshd(2, 0x7f0000000000ULL, 2, 256, 4, 128);
  m.decoded.view.swizzle = 1;  // as an inline encoder might write: 128 B inner box, 32B swizzle
  out.clear();
  check_descriptor("k", m, kSm90, out);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].rule, "tmap-driver-would-reject");
  EXPECT_EQ(out[0].observed, "boxDim[0]=64 x 2 B = 128 B exceeds the 32B swizzle span (32 B)");

  // The tile-size word is not read by the TMA unit (measured on an H200): whatever it holds, nothing to judge.
  m = bshd(2, 0x7f0000000000ULL, 2, 256, 4, 128);
  m.decoded.view.tile_bytes = 4;
  out.clear();
  check_descriptor("k", m, kSm90, out);
  EXPECT_TRUE(out.empty());

  m = bshd(2, 0x7f0000000000ULL, 2, 256, 4, 128);
  m.decoded.view.address = 0x7f0000000008ULL;
  out.clear();
  check_descriptor("k", m, kSm90, out);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].observed, "globalAddress=0x7f0000000008 must be 16-byte aligned");
}

// The architecture policy: the driver's rules measured on sm_90 are errors only there; a NULL address is an error
// everywhere; Blackwell-only bits, im2col-family maps, unknown element types and an unknown GPU never draw one.
TEST(Descriptor, DriverRulesAreErrorsOnlyOnTheArchitectureTheyWereMeasuredOn) {
  TensorMapParam bad = bshd(2, 0x7f0000000000ULL, 2, 256, 4, 128);
  bad.decoded.view.swizzle = 1;  // 128 B inner box, 32B swizzle: the H200's driver refuses it
  for (const Arch& arch : {kSm90, kSm100, Arch{12, 0}, Arch{}}) {
    std::vector<Finding> out;
    check_descriptor("k", bad, arch, out);
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(out[0].rule, "tmap-driver-would-reject");
    EXPECT_EQ(out[0].severity, arch.measured() ? Severity::kError : Severity::kWarning) << arch.major;
    if (!arch.measured()) EXPECT_NE(out[0].observed.find("(a warning"), std::string::npos) << out[0].observed;
    out.clear();
    check_descriptor("k", bshd(3, 0, 2, 256, 4, 128), arch, out);
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(out[0].severity, Severity::kError) << "a NULL address is wrong on every architecture";
  }
}

TEST(Descriptor, BlackwellOnlyFeaturesNeverDrawAnError) {
  for (const Arch& arch : {kSm90, kSm100}) {
    for (uint32_t bits : {1u, 2u, 3u, 4u, 7u}) {  // swizzle atomicity (19-20), large-tensor flag (21)
      TensorMapParam m = bshd(2, 0x7f0000000000ULL, 2, 256, 4, 128);
      m.decoded.view.sm100_bits = bits;
      m.decoded.view.swizzle = 1;  // and something the sm_90 driver would refuse
      std::vector<Finding> out;
      check_descriptor("k", m, arch, out);
      for (const Finding& f : out) EXPECT_EQ(f.severity, Severity::kWarning) << f.rule << " bits " << bits;
      m.decoded.view.tile_bytes = 4;
      out.clear();
      check_descriptor("k", m, arch, out);
      for (const Finding& f : out) EXPECT_EQ(f.severity, Severity::kWarning) << f.rule << " bits " << bits;
    }
    TensorMapParam unknown = bshd(2, 0x7f0000000000ULL, 2, 256, 4, 128);
    unknown.decoded.view.dtype = DataType::kUnknown;  // a packed 4/6-bit type
    unknown.decoded.view.hw_type = 13;
    std::vector<Finding> out;
    check_descriptor("k", unknown, arch, out);
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(out[0].severity, Severity::kWarning);
  }
}

TEST(Descriptor, BytesWithBlackwellBitsDecodeAndStayWarnings) {
  // Word 2 of a real sm_90 descriptor with swizzle 128B_ATOM_64B-style atomicity bits and the large-tensor flag set,
  // as an sm_100 encoder may write it: it still decodes (bits 19-21 never make bytes invalid) and, on any
  // architecture, draws no error even with a box the sm_90 driver refuses (128 B inner box, 32B swizzle).
  EncodeArgs a;
  a.dtype = 9;
  a.rank = 2;
  a.address = 0x7f0000000000ULL;
  a.dims = {128, 4096};
  a.strides = {256};
  a.box = {64, 128};
  a.element_strides = {1, 1};
  a.swizzle = 3;
  uint8_t b[128];
  ASSERT_EQ(encode(a, b), 0);
  uint32_t w2;
  std::memcpy(&w2, b + 8, 4);
  w2 = (w2 & ~(3u << 13)) | 1u << 13 | 7u << 19;
  std::memcpy(b + 8, &w2, 4);
  const DecodeResult d = decode(b, Convention::kHardware);
  ASSERT_TRUE(d.ok()) << d.not_a_map;
  EXPECT_EQ(d.view.sm100_bits, 7u);
  for (const Arch& arch : {kSm90, kSm100, Arch{}}) {
    std::vector<Finding> out;
    check_descriptor("k", {{1, 0}, d}, arch, out);
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(out[0].severity, Severity::kWarning);
  }
}

// Found by fuzz_decode: a form word holding a value no encoder writes (word 18 = 6, not the swizzle-span word) is
// taken by the strict convention as a map of unknown form and named by the hardware one as a word the unit ignores;
// both read the same layout.
TEST(Descriptor, AWrongFormWordIsAnUnknownFormStrictlyAndAnIgnoredWordForTheHardware) {
  uint8_t b[128] = {};
  const uint32_t words[][2] = {{0, 0x97a2a267u}, {1, 0x000009d7u}, {13, 0x7f000000u}, {18, 6u}};
  for (const auto& [i, w] : words) std::memcpy(b + 4 * i, &w, 4);
  const DecodeResult strict = decode(b), hw = decode(b, Convention::kHardware);
  ASSERT_TRUE(strict.ok()) << strict.not_a_map;
  ASSERT_TRUE(hw.ok()) << hw.not_a_map;
  EXPECT_EQ(strict.view.encoder, Encoder::kUnknown);
  EXPECT_EQ(strict.view.ignored_words, 0u);
  EXPECT_EQ(hw.view.ignored_words, 1u << 18);
  EXPECT_EQ(hw.view.address, strict.view.address);
  EXPECT_EQ(hw.view.dims, strict.view.dims);
  EXPECT_EQ(hw.view.box, strict.view.box);
}

// The Blackwell driver's large-tensor-flag hazard (NVIDIA 595.71.05 release notes): the flag over a tensor spanning
// under 128 KiB, on compute capability 10.0 or later with a driver up to 13.1 or the 13.2/13.3 forward-compatibility
// ones, is an error; anywhere else the flag is a fact, never a finding.
TEST(Descriptor, LargeFlagOverASmallTensorOnAnAffectedPlatform) {
  auto flagged = [](uint64_t s) {
    TensorMapParam m = bshd(0, 0x7f0000000000ULL, 1, s, 1, 128);  // 256-byte rows
    uint8_t bytes[128];
    EXPECT_EQ(encode(m.decoded.view.encode_args(), bytes), 0);
    bytes[10] |= 1u << 5;  // word 2 bit 21: bit 85
    m.decoded = decode(bytes);
    EXPECT_TRUE(m.decoded.view.large_tensor_flag());
    return m;
  };
  auto rules = [](const TensorMapParam& m, const Arch& a) {
    std::vector<Finding> out;
    check_descriptor("k", m, a, out);
    std::vector<std::string> r;
    for (const Finding& f : out) r.push_back(f.rule + (f.severity == Severity::kError ? "!" : "?"));
    return r;
  };
  const TensorMapParam small = flagged(100), big = flagged(512);  // 25,600 and 131,072 bytes
  for (const int driver : {12080, 13000, 13010, 13020, 13030})
    for (const Arch a : {Arch{10, 0, driver}, Arch{10, 3, driver}, Arch{12, 0, driver}}) {
      EXPECT_EQ(rules(small, a), std::vector<std::string>{"tmap-large-flag-small-tensor!"}) << a.major << " " << driver;
      EXPECT_EQ(large_flag_hazard(small.decoded.view, a), std::optional<uint64_t>(25600));
      EXPECT_TRUE(rules(big, a).empty()) << "128 KiB and more: the flag is right there";
    }
  for (const Arch a : {Arch{10, 0, 13040}, Arch{10, 0, 13100}, Arch{10, 0, 0}, Arch{9, 0, 13010}, Arch{0, 0, 13010}})
    EXPECT_TRUE(rules(small, a).empty()) << a.major << " " << a.driver;
  EXPECT_TRUE(rules(bshd(0, 0x7f0000000000ULL, 1, 100, 1, 128), Arch{10, 0, 13010}).empty()) << "the flag clear";
  std::vector<Finding> out;
  check_descriptor("k", small, Arch{10, 0, 13010}, out);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_NE(out[0].observed.find("spans 25600 bytes, on sm_100 with driver 13.1 (13010)"), std::string::npos)
      << out[0].observed;
  EXPECT_NE(out[0].hint.find("~(1ull << 21)"), std::string::npos);
}
