// Pins the encoder (shared with the stand-in driver) and the decoder to the real driver: every case in
// tests/data/encode_golden_h200.txt was encoded by cuTensorMapEncode* on an H200 (driver 580.159, CUDA 13.0)
// by scripts/gpu/capture_encode.cpp. For each case: same CUresult; on success the same 128 bytes, and the
// decoder returns every argument.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>

#include "golden_file.h"
#include "tmaguard/tensormap.h"

using namespace tmaguard;

namespace {

using namespace golden;

// TMAGUARD_GOLDEN names another capture (scripts/gpu-check makes a fresh, larger one on the GPU it runs on).
std::string golden_path() {
  const char* p = std::getenv("TMAGUARD_GOLDEN");
  return p && *p ? p : std::string(TG_DATA_DIR) + "/encode_golden_h200.txt";
}

std::vector<Case> load() { return golden::load(golden_path()); }

}  // namespace

TEST(Golden, StandInEncoderMatchesTheH200Driver) {
  const auto cases = load();
  ASSERT_GT(cases.size(), 5000u) << "golden file missing or truncated: " << golden_path();
  int checked = 0, accepted = 0, unmodelled = 0, disagreements = 0;
  for (const Case& c : cases) {
    if (c.kind == "replace") continue;
    const EncodeArgs a = args_of(c);
    const int want = std::stoi(c.f.at("rc"));
    uint8_t out[128];
    const int got = encode(a, out);
    ++checked;
    if (got != want) {
      // The driver has undocumented extra rules for interleaved im2col maps (about 1 in 8 such cases); the
      // stand-in applies the documented ones. Counted, and held below a bound, instead of hidden.
      if (a.kind != MapKind::kTiled && a.interleave != 0) {
        ++unmodelled;
        continue;
      }
      ++disagreements;
      ADD_FAILURE() << "rc " << got << " vs driver " << want << ": " << c.line.substr(0, 300);
      continue;
    }
    if (want != 0) continue;
    ++accepted;
    const auto ref = bytes_of(c.f.at("map"));
    ASSERT_EQ(ref.size(), 128u);
    EXPECT_EQ(std::memcmp(out, ref.data(), 128), 0) << c.line.substr(0, 300);
  }
  EXPECT_EQ(disagreements, 0);
  EXPECT_LE(unmodelled, checked / 200);  // measured: 17 of 6000
  EXPECT_GT(accepted, checked / 2);
  std::printf("golden: %d cases, %d accepted by the driver, %d interleaved-im2col rc cases not modelled\n", checked,
              accepted, unmodelled);
}

TEST(Golden, DecoderRecoversEveryArgumentFromDriverBytes) {
  int decoded = 0;
  for (const Case& c : load()) {
    if (c.kind == "replace" || c.f.at("rc") != "0") continue;
    const EncodeArgs a = args_of(c);
    const auto ref = bytes_of(c.f.at("map"));
    const DecodeResult r = decode(ref.data());
    ASSERT_TRUE(r.ok()) << r.not_a_map << ": " << c.line.substr(0, 300);
    const TensorMapView& v = r.view;
    ++decoded;
    EXPECT_EQ(v.address, a.address);
    EXPECT_EQ(static_cast<uint32_t>(v.dtype), a.dtype);
    EXPECT_EQ(v.rank, a.rank);
    for (uint32_t i = 0; i < a.rank; ++i) {
      EXPECT_EQ(v.dims[i], a.dims[i]);
      EXPECT_EQ(v.element_strides[i], a.element_strides[i]);
      if (i + 1 < a.rank) EXPECT_EQ(v.strides[i], a.strides[i]);
      if (a.kind == MapKind::kTiled) EXPECT_EQ(v.box[i], a.box[i]);
    }
    if (a.kind != MapKind::kTiled) {
      EXPECT_EQ(v.kind, MapKind::kIm2col);
      EXPECT_EQ(v.channels_per_pixel, a.channels_per_pixel);
      EXPECT_EQ(v.pixels_per_column, a.pixels_per_column);
      const uint32_t n = a.kind == MapKind::kIm2colWide ? 1 : a.rank - 2;
      for (uint32_t i = 0; i < n; ++i) {
        EXPECT_EQ(v.lower_corner[i], a.lower_corner[i]);
        EXPECT_EQ(v.upper_corner[i], a.upper_corner[i]);
      }
    }
    EXPECT_EQ(v.interleave, a.interleave);
    EXPECT_EQ(v.swizzle, a.swizzle);
    EXPECT_EQ(v.l2_promotion, a.l2_promotion);
    EXPECT_EQ(v.oob_fill, a.oob_fill);
    EXPECT_EQ(v.tile_bytes, v.computed_tile_bytes());
    if (::testing::Test::HasFailure()) FAIL() << c.line.substr(0, 300);
  }
  EXPECT_GT(decoded, 2500);
}

TEST(Golden, ReplaceAddressChangesOnlyTheAddressWords) {
  int seen = 0;
  for (const Case& c : load()) {
    if (c.kind != "replace" || c.f.at("rc") != "0") continue;
    ++seen;
    const auto b = bytes_of(c.f.at("map"));
    const DecodeResult r = decode(b.data());
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r.view.address, std::stoull(c.f.at("addr"), nullptr, 16));
  }
  EXPECT_EQ(seen, 3);
}
