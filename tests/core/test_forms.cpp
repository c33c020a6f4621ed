// Descriptor forms other encoders write (docs/descriptor-forms.md): every golden vector of each form decodes to the
// arguments it was made from, is named by its encoder, re-encodes byte for byte, and the generic checks judge it by
// what its form fills in.
//   tests/data/cute_dsl_golden.txt      CuTe DSL's host fill (FlashAttention-4's encoder), transcribed from its MLIR
//                                       pass dumps by tests/data/gen_cute_dsl_golden.py
//   tests/data/device_built_h200.txt    descriptors built on an H200 by PTX tensormap.replace, the way Triton's
//                                       device-side descriptors are (scripts/gpu-check, section device_forms)
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>

#include "golden_file.h"
#include "tmaguard/descriptor_checks.h"
#include "tmaguard/launch.h"
#include "tmaguard/tensormap.h"

using namespace tmaguard;
using namespace golden;

namespace {

std::string data(const char* name) { return std::string(TG_DATA_DIR) + "/" + name; }

// The fields every form carries, compared with the arguments the vector was made from.
void expect_fields(const TensorMapView& v, const EncodeArgs& a, const std::string& line) {
  EXPECT_EQ(v.address, a.address) << line;
  EXPECT_EQ(static_cast<uint32_t>(v.dtype), a.dtype) << line;
  ASSERT_EQ(v.rank, a.rank) << line;
  for (uint32_t i = 0; i < a.rank; ++i) {
    EXPECT_EQ(v.dims[i], a.dims[i]) << line;
    EXPECT_EQ(v.box[i], a.box[i]) << line;
    EXPECT_EQ(v.element_strides[i], a.element_strides[i]) << line;
    if (i + 1 < a.rank) EXPECT_EQ(v.strides[i], a.strides[i]) << line;
  }
  EXPECT_EQ(v.swizzle, a.swizzle) << line;
  EXPECT_EQ(v.interleave, a.interleave) << line;
}

}  // namespace

TEST(CuteDslForm, EveryGoldenVectorDecodesAsCuteDslAndReencodes) {
  const auto cases = load(data("cute_dsl_golden.txt"));
  ASSERT_GE(cases.size(), 90u) << "golden file missing or truncated";
  int large = 0;
  for (const Case& c : cases) {
    const EncodeArgs a = args_of(c);
    const auto ref = bytes_of(c.f.at("map"));
    ASSERT_EQ(ref.size(), 128u);
    const DecodeResult r = decode(ref.data());
    ASSERT_TRUE(r.ok()) << r.not_a_map << ": " << c.line;
    EXPECT_EQ(r.view.encoder, Encoder::kCuteDsl) << c.line;
    EXPECT_TRUE(r.view.word2_bit1);
    EXPECT_EQ(r.view.l2_promotion, 2u);
    EXPECT_EQ(r.view.tile_bytes, 0u);
    EXPECT_EQ(r.view.large_tensor_flag(), c.f.at("large") == "1") << c.line;
    large += r.view.large_tensor_flag();
    expect_fields(r.view, a, c.line);
    uint8_t mine[128];
    ASSERT_EQ(encode_in_form(Encoder::kCuteDsl, a, mine), 0) << c.line;
    EXPECT_EQ(std::memcmp(mine, ref.data(), 128), 0) << c.line;
    // A healthy CuTe DSL map draws nothing from the generic checks on sm_90 or sm_100; inside a structure it counts.
    for (const int major : {9, 10}) {
      std::vector<Finding> out;
      check_descriptor("k", {{1, 0}, r}, Arch{major, 0}, out);
      EXPECT_TRUE(out.empty()) << out[0].rule << ": " << out[0].observed << "\n" << c.line;
    }
    // Where maps are only searched for: a whole parameter and device memory take it; a structure does not (CuTe DSL
    // passes each map as a parameter of its own, and only the driver's form is taken inside structures).
    EXPECT_TRUE(read_map(ref.data(), MapEvidence::kParameter).ok()) << c.line;
    EXPECT_TRUE(read_map(ref.data(), MapEvidence::kDeviceMemory).ok()) << c.line;
    EXPECT_FALSE(read_map(ref.data(), MapEvidence::kInStruct).ok()) << c.line;
  }
  EXPECT_GT(large, 10) << "both sides of the 128 KiB large-tensor threshold are covered";
  EXPECT_LT(large, static_cast<int>(cases.size()) - 10);
}

// The driver's own checks, which CuTe DSL's inline encoder skips, are what tmaguard applies to its bytes: a box wider
// than its swizzle span is refused on sm_90 (error) and warned about elsewhere, in CuTe DSL's words.
TEST(CuteDslForm, ABrokenInlineEncodeIsJudgedByTheDriversRules) {
  EncodeArgs a;
  a.dtype = 9;
  a.rank = 2;
  a.address = 0x7f0000000000ULL;
  a.dims = {128, 64};  // 16 KiB: below the large-tensor threshold, so the rules are provable on sm_90
  a.strides = {256};
  a.box = {64, 128};
  a.element_strides = {1, 1};
  a.swizzle = 3;
  a.l2_promotion = 2;
  uint8_t b[128];
  ASSERT_EQ(encode_in_form(Encoder::kCuteDsl, a, b), 0);
  uint32_t w13 = 127u << 24;  // box[0] = 128 bf16 = 256 B > the 128B swizzle span
  std::memcpy(b + 52, &w13, 4);
  const DecodeResult r = decode(b);
  ASSERT_TRUE(r.ok()) << r.not_a_map;
  ASSERT_EQ(r.view.encoder, Encoder::kCuteDsl);
  for (const int major : {9, 10}) {
    std::vector<Finding> out;
    check_descriptor("k", {{1, 0}, r}, Arch{major, 0}, out);
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(out[0].rule, "tmap-driver-would-reject");
    EXPECT_EQ(out[0].severity, major == 9 ? Severity::kError : Severity::kWarning);
    EXPECT_NE(out[0].hint.find("CuTe DSL's host code"), std::string::npos) << out[0].hint;
  }
  // A NULL address in CuTe DSL's form is an error everywhere.
  std::memset(b, 0, 8);
  const DecodeResult null = decode(b);
  ASSERT_TRUE(null.ok());
  std::vector<Finding> out;
  check_descriptor("k", {{1, 0}, null}, Arch{10, 0}, out);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].rule, "tmap-null-address");
  EXPECT_EQ(out[0].severity, Severity::kError);
}

// The large-tensor flag (word 2 bit 21) is explained in the record and never makes a map invalid; the driver's
// rules, never measured with it set, only warn about such a map.
TEST(CuteDslForm, LargeTensorFlagIsKnownNotReserved) {
  EncodeArgs a;
  a.dtype = 9;
  a.rank = 2;
  a.address = 0x7f0000000000ULL;
  a.dims = {4096, 4096};
  a.strides = {8192};
  a.box = {64, 256};
  a.element_strides = {1, 1};
  a.swizzle = 3;
  a.l2_promotion = 2;
  uint8_t b[128];
  ASSERT_EQ(encode_in_form(Encoder::kCuteDsl, a, b), 0);
  const DecodeResult r = decode(b);
  ASSERT_TRUE(r.ok()) << r.not_a_map;
  EXPECT_TRUE(r.view.large_tensor_flag());
  std::vector<Finding> out;
  check_descriptor("k", {{1, 0}, r}, Arch{9, 0}, out);
  EXPECT_TRUE(out.empty());
  uint32_t w13 = 127u << 24;  // and now a box the driver refuses
  std::memcpy(b + 52, &w13, 4);
  check_descriptor("k", {{1, 0}, decode(b)}, Arch{9, 0}, out);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].severity, Severity::kWarning);
  EXPECT_NE(out[0].observed.find("large-tensor flag"), std::string::npos) << out[0].observed;
}

TEST(DeviceBuiltForm, EveryCapturedDescriptorDecodesAsDeviceBuilt) {
  // TMAGUARD_DEVICE_GOLDEN names a fresh capture (scripts/gpu-check, section device_forms).
  const char* fresh = std::getenv("TMAGUARD_DEVICE_GOLDEN");
  const auto cases = load(fresh && *fresh ? fresh : data("device_built_h200.txt"));
  ASSERT_GE(cases.size(), 8u) << "golden file missing or truncated";
  for (const Case& c : cases) {
    const auto ref = bytes_of(c.f.at("map"));
    ASSERT_EQ(ref.size(), 128u);
    const DecodeResult r = decode(ref.data());
    ASSERT_TRUE(r.ok()) << r.not_a_map << ": " << c.line;
    const std::string want = c.f.at("form");
    EXPECT_EQ(to_string(r.view.encoder), want == "device" ? std::string("device-built") : want) << c.line;
    if (c.f.count("dtype")) {
      const EncodeArgs a = args_of(c);
      expect_fields(r.view, a, c.line);
      if (want == "device") {
        uint8_t mine[128];
        ASSERT_EQ(encode_in_form(Encoder::kDeviceBuilt, a, mine), 0) << c.line;
        EXPECT_EQ(std::memcmp(mine, ref.data(), 128), 0) << c.line;
      }
    }
    for (const int major : {9, 10}) {
      std::vector<Finding> out;
      check_descriptor("k", {{1, 0}, r}, Arch{major, 0}, out);
      EXPECT_TRUE(out.empty()) << out[0].rule << ": " << out[0].observed << "\n" << c.line;
    }
  }
}

// A form tmaguard does not know (CuTe DSL's marker with the driver's words filled): where maps are only searched for
// it is no map, so it draws nothing, not even for its NULL address; where a rule names the kernel its layout fields
// are read as the TMA unit reads them and judged like any map's (a NULL address is an error there).
TEST(UnknownForm, IsNoMapWhereSearchedAndJudgedWhereKnown) {
  EncodeArgs a;
  a.dtype = 9;
  a.rank = 2;
  a.address = 0;
  a.dims = {128, 64};
  a.strides = {256};
  a.box = {64, 128};
  a.element_strides = {1, 1};
  a.swizzle = 3;
  uint8_t b[128];
  ASSERT_EQ(encode(a, b), 0);
  b[8] |= 2;  // CuTe DSL's marker with the driver's words filled
  for (const MapEvidence e : {MapEvidence::kParameter, MapEvidence::kInStruct, MapEvidence::kDeviceMemory}) {
    const DecodeResult r = read_map(b, e);
    EXPECT_FALSE(r.ok()) << to_string(e);
    EXPECT_EQ(r.not_a_map, std::string("unknown form: not taken for a map in ") + to_string(e));
  }
  const DecodeResult known = read_map(b, MapEvidence::kKnown);
  ASSERT_TRUE(known.ok()) << known.not_a_map;
  EXPECT_EQ(known.view.encoder, Encoder::kUnknown);
  EXPECT_EQ(known.view.ignored_words, 0u) << "its tile-size and swizzle-span words agree with its fields";
  std::vector<Finding> out;
  check_descriptor("k", {{1, 0}, known}, Arch{9, 0}, out);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].rule, "tmap-null-address");
  EXPECT_EQ(out[0].severity, Severity::kError);
}
