// Decoding and encoding of the 128-byte CUtensorMap, from the words measured on an H200 (driver 580, CUDA 13.0).
#include <gtest/gtest.h>

#include <cstring>

#include "tmaguard/tensormap.h"

using namespace tmaguard;

namespace {

// The reference capture's BASE case: bf16 d{128,4096} s{256} box{64,128} sw128 l2_128.
std::array<uint8_t, 128> base_words() {
  std::array<uint32_t, 32> w{};
  w[0] = 0x52000000;
  w[1] = 0x00007f71;
  w[2] = 0x00046510;
  w[3] = 0x10;
  w[8] = 0x7f;
  w[9] = 0xfff;
  w[13] = 0x3f000000;
  w[14] = 0x7f;
  w[16] = 0x4000;
  w[18] = 0x400;
  std::array<uint8_t, 128> b;
  std::memcpy(b.data(), w.data(), 128);
  return b;
}

EncodeArgs base_args() {
  EncodeArgs a;
  a.dtype = 9;
  a.rank = 2;
  a.address = 0x7f7152000000ULL;
  a.dims = {128, 4096};
  a.strides = {256};
  a.box = {64, 128};
  a.element_strides = {1, 1};
  a.swizzle = 3;
  a.l2_promotion = 2;
  return a;
}

}  // namespace

TEST(Decode, ReferenceBaseDescriptor) {
  const auto b = base_words();
  const DecodeResult r = decode(b.data());
  ASSERT_TRUE(r.ok()) << r.not_a_map;
  const TensorMapView& v = r.view;
  EXPECT_EQ(v.address, 0x7f7152000000ULL);
  EXPECT_EQ(v.dtype, DataType::kBF16);
  EXPECT_EQ(v.rank, 2u);
  EXPECT_EQ(v.dims[0], 128u);
  EXPECT_EQ(v.dims[1], 4096u);
  EXPECT_EQ(v.strides[0], 256u);
  EXPECT_EQ(v.box[0], 64u);
  EXPECT_EQ(v.box[1], 128u);
  EXPECT_EQ(v.swizzle, 3u);
  EXPECT_EQ(v.l2_promotion, 2u);
  EXPECT_EQ(v.tile_bytes, 16384u);
  EXPECT_EQ(v.computed_tile_bytes(), 16384u);
}

TEST(Encode, ReproducesReferenceBytes) {
  uint8_t out[128];
  ASSERT_EQ(encode(base_args(), out), 0);
  const auto b = base_words();
  EXPECT_EQ(std::memcmp(out, b.data(), 128), 0);
}

// Word 2 bit 21 (the large-tensor flag) is a known bit: the bytes decode. It decides whether a would-reject finding
// is an error, so the content hash (the launch key) sees it; provenance does not (CUTLASS and Triton clear it after
// encoding, and the cleared bytes still came from the encode).
TEST(Decode, LargeTensorFlagBit21IsInTheKeyNotInProvenance) {
  auto b = base_words();
  b[10] |= 0x20;  // word 2 bit 21
  const DecodeResult r = decode(b.data());
  ASSERT_TRUE(r.ok()) << r.not_a_map;
  EXPECT_NE(content_hash(b.data()), content_hash(base_words().data()));
  EXPECT_EQ(provenance_hash(b.data()), provenance_hash(base_words().data()));
  EXPECT_EQ(provenance_hash(b.data()), content_hash(base_words().data()));
}

TEST(Decode, HashSeesEveryOtherBit) {
  const auto a = base_words();
  for (int byte = 0; byte < 128; ++byte) {
    for (int bit = 0; bit < 8; ++bit) {
      if (byte == 10 && bit == 5) continue;
      auto b = a;
      b[byte] ^= static_cast<uint8_t>(1u << bit);
      ASSERT_NE(content_hash(a.data()), content_hash(b.data())) << byte << ":" << bit;
    }
  }
}

TEST(Decode, RejectsNonDescriptors) {
  uint8_t zeros[128] = {};
  EXPECT_FALSE(decode(zeros).ok());  // no swizzle-span word
  float floats[32];
  for (int i = 0; i < 32; ++i) floats[i] = 0.5f * static_cast<float>(i);
  EXPECT_FALSE(decode(reinterpret_cast<uint8_t*>(floats)).ok());
  auto b = base_words();
  b[40] = 1;  // globalDim[2] set past rank 2
  EXPECT_EQ(decode(b.data()).not_a_map, "globalDim word 2 set past rank 2");
}

// The form words tell who wrote a descriptor; bytes whose form words match no encoder still decode (their layout
// fields are the hardware's) as Encoder::kUnknown, which the generic checks only warn about.
TEST(Decode, FormWordsNameTheEncoder) {
  auto b = base_words();
  EXPECT_EQ(decode(b.data()).view.encoder, Encoder::kDriver);
  b[72] = 0x00;
  b[73] = 0x02;  // span 0x200 with a 128B swizzle field
  DecodeResult r = decode(b.data());
  ASSERT_TRUE(r.ok()) << r.not_a_map;
  EXPECT_EQ(r.view.encoder, Encoder::kUnknown);
  b = base_words();
  std::memset(b.data() + 64, 0, 4);  // tile-size word empty
  std::memset(b.data() + 72, 0, 4);  // swizzle-span word empty
  r = decode(b.data());
  ASSERT_TRUE(r.ok()) << r.not_a_map;
  EXPECT_EQ(r.view.encoder, Encoder::kDeviceBuilt);
  b[8] |= 2;  // word 2 bit 1: CuTe DSL's marker
  r = decode(b.data());
  ASSERT_TRUE(r.ok()) << r.not_a_map;
  EXPECT_EQ(r.view.encoder, Encoder::kCuteDsl);
  EXPECT_TRUE(r.view.word2_bit1);
  b = base_words();
  b[8] |= 2;  // the marker with the driver's words filled: no known encoder writes that
  EXPECT_EQ(decode(b.data()).view.encoder, Encoder::kUnknown);
  b[8] |= 4;  // bit 2 stays reserved
  EXPECT_EQ(decode(b.data()).not_a_map, "reserved bits set in word 2 (0x00046516)");
}

// A zero-filled region, or a real descriptor's empty tail, reads as a 1-byte uint8 box in the forms without tile
// words: never a map.
TEST(Decode, ZeroAndZeroPaddedRegionsAreNotMaps) {
  uint8_t zeros[128] = {};
  const DecodeResult z = decode(zeros);
  ASSERT_FALSE(z.ok());
  EXPECT_EQ(z.not_a_map,
            "not a TMA box: an inner box of 1 x 1 B (word 2 bit 1 = 0, tile-size word 0x0, swizzle-span word 0x0)");
  uint8_t tail[128] = {};
  const auto b = base_words();
  std::memcpy(tail, b.data() + 64, 64);  // the second half of a map, then zeros
  EXPECT_FALSE(decode(tail).ok());
  uint8_t cute_null[128] = {};
  const uint32_t marker = 2;  // CuTe DSL's bit alone, everything else 0
  std::memcpy(cute_null + 8, &marker, 4);
  EXPECT_FALSE(decode(cute_null).ok());
}

TEST(Encode, RoundTripsAllFieldsRank5) {
  EncodeArgs a;
  a.dtype = 12;  // tf32_ftz
  a.rank = 5;
  a.address = 0x7f0000001000ULL;
  a.dims = {64, 33, 7, 5, 3};
  a.strides = {256, 256 * 33, 256 * 33 * 7 + 64, (1ULL << 37) + 512};
  a.box = {32, 16, 4, 2, 1};
  a.element_strides = {1, 2, 3, 1, 1};
  a.interleave = 0;
  a.swizzle = 3;
  a.l2_promotion = 3;
  a.oob_fill = 1;
  uint8_t out[128];
  ASSERT_EQ(encode(a, out), 0);
  const DecodeResult r = decode(out);
  ASSERT_TRUE(r.ok()) << r.not_a_map;
  EXPECT_EQ(r.view.dtype, DataType::kTF32Ftz);
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(r.view.dims[i], a.dims[i]);
    EXPECT_EQ(r.view.box[i], a.box[i]);
    EXPECT_EQ(r.view.element_strides[i], a.element_strides[i]);
    if (i < 4) EXPECT_EQ(r.view.strides[i], a.strides[i]);
  }
  EXPECT_EQ(r.view.oob_fill, 1u);
  EXPECT_EQ(r.view.l2_promotion, 3u);
}

TEST(Validate, ExplainsTheFirstBrokenRuleInOneLine) {
  EncodeArgs a = base_args();
  a.box[0] = 128;  // 256 B > 128 B swizzle span
  EXPECT_EQ(validate_encode(a).message, "boxDim[0]=128 x 2 B = 256 B exceeds the 128B swizzle span (128 B)");
  a = base_args();
  a.strides[0] = 264;
  EXPECT_EQ(validate_encode(a).message, "globalStrides[0]=264 must be a multiple of 16");
  a = base_args();
  a.address += 8;
  EXPECT_EQ(validate_encode(a).field, "globalAddress");
  a = base_args();
  a.dims[0] = (1ULL << 32);
  EXPECT_FALSE(validate_encode(a));  // 2^32 is accepted by the driver
  a.dims[0] = (1ULL << 32) + 1;
  EXPECT_EQ(validate_encode(a).field, "globalDim[0]");
}

TEST(Aliasing, ValidPermutedLayoutsAreNotFlaggedSharedBytesAre) {
  // FA4's K-major dK: dims {d, s, h, b}, strides {2hd, 2d, 2shd}: not increasing, and valid.
  EncodeArgs a;
  a.dtype = 9;
  a.rank = 4;
  a.address = 0x7f0000000000ULL;
  a.dims = {128, 256, 4, 2};
  a.strides = {1024, 256, 262144};
  a.box = {64, 128, 1, 1};
  a.element_strides = {1, 1, 1, 1};
  EXPECT_FALSE(aliasing(a));
  EXPECT_TRUE(encode_warnings(a).empty());
  a.strides = {1024, 128, 262144};  // heads 128 B apart but each head row is 256 B: overlap
  auto w = aliasing(a);
  ASSERT_TRUE(w);
  EXPECT_EQ(w->kind, kOverlappingRows);
  EXPECT_EQ(w->message, "globalStrides[1] = 128 < 256 bytes spanned by the dimensions with smaller strides: rows overlap");
  EXPECT_TRUE(encode_warnings(a).empty()) << "loading through overlapping rows is fine: no encode warning";
  a.strides = {1024, 256, 0};  // one batch expand()ed over 2
  w = aliasing(a);
  ASSERT_TRUE(w);
  EXPECT_EQ(w->kind, kZeroStride);
  EXPECT_EQ(w->message, "globalStrides[2] = 0: dimension 3 is broadcast (2 indices share the same bytes)");
  a.dims[3] = 1;  // a stride of 0 over a dimension of one index shares nothing
  EXPECT_FALSE(aliasing(a));
  a.dims = {1, 1, 1, 1};  // a template: describes no tensor yet
  a.strides = {0, 0, 0};
  EXPECT_FALSE(aliasing(a));
  a.dims = {128, 256, 4, 2};
  a.strides = {1024, 256, 262144};
  a.address = 0;
  ASSERT_EQ(encode_warnings(a).size(), 1u);
  EXPECT_EQ(encode_warnings(a)[0].kind, kNullAddress);
}

// may_hold_map rules bytes out by the words no form sets: each bit of word 2's reserved bits (2-3, 22-31), of word 17
// and of words 19-31, set alone in a real descriptor, rules it out; any other bit set alone does not.
TEST(MayHoldMap, EachReservedBitAloneRulesAMapOutAndNoOtherBitDoes) {
  const auto base = base_words();
  ASSERT_TRUE(may_hold_map(base.data()));
  int ruled_out = 0;
  for (int word = 0; word < 32; ++word)
    for (int bit = 0; bit < 32; ++bit) {
      auto b = base;
      uint32_t w;
      std::memcpy(&w, b.data() + 4 * word, 4);
      w ^= 1u << bit;
      std::memcpy(b.data() + 4 * word, &w, 4);
      const bool reserved = word == 17 || word >= 19 || (word == 2 && (bit == 2 || bit == 3 || bit >= 22));
      EXPECT_EQ(may_hold_map(b.data()), !reserved) << "word " << word << " bit " << bit;
      ruled_out += reserved;
    }
  EXPECT_EQ(ruled_out, 12 + 32 * 14);
}
