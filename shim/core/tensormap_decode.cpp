// tmaguard core: reading 128 bytes as a CUtensorMap in any known form, and what a decoded map says (ragged
// tensors, the judged view). tensormap.h; the byte layout in docs/tensormap-layout.md.
#include "tmaguard/tensormap.h"
#include "tensormap_words.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

namespace tmaguard {
using namespace words;

bool may_hold_map(const uint8_t b[kTensorMapBytes]) { return reserved_words_clear(b); }

namespace {

DataType data_type_of(uint32_t hw_type, bool tf32) {
  switch (hw_type) {
    case 0: return DataType::kU8;
    case 1: return DataType::kU16;
    case 2: return DataType::kU32;
    case 3: return DataType::kS32;
    case 4: return DataType::kU64;
    case 5: return DataType::kS64;
    case 6: return DataType::kF16;
    case 7: return tf32 ? DataType::kTF32 : DataType::kF32;
    case 8: return tf32 ? DataType::kTF32Ftz : DataType::kF32Ftz;
    case 9: return DataType::kF64;
    case 10: return DataType::kBF16;
    default: return DataType::kUnknown;
  }
}

// One decode, step by step: each step returns false when the bytes are no map under the convention (r.not_a_map
// says why).
struct Decoder {
  uint32_t w[32];
  Convention convention;
  bool hardware;
  DecodeResult r;
  TensorMapView& v = r.view;

  Decoder(const uint8_t b[kTensorMapBytes], Convention c) : convention(c), hardware(c == Convention::kHardware) {
    for (int i = 0; i < 32; ++i) w[i] = load_word(b, i);
  }
  bool fail(std::string why) {
    r.not_a_map = std::move(why);
    return false;
  }
  // Bits outside the fields the TMA unit reads: the strict conventions refuse them (the first one met names why),
  // the hardware one records them in ignored_words and reads on. Only structural defects refuse bytes in every
  // convention. Returns false when the bytes are refused.
  template <typename Why>
  bool unread(int word, bool set, Why&& why) {
    if (!set) return true;
    v.ignored_words |= 1u << word;
    if (hardware) return true;
    return fail(why());
  }
  bool tf32() const { return (w[2] >> 16) & 1; }

  void read_word2() {
    const uint32_t w2 = w[2];
    v.address = (static_cast<uint64_t>(w[1]) << 32) | w[0];
    v.kind = (w2 & 1) ? MapKind::kIm2col : MapKind::kTiled;
    v.rank = ((w2 >> 4) & 7) + 1;
    v.hw_type = (w2 >> 7) & 0xf;
    v.interleave = (w2 >> 11) & 3;
    v.swizzle = (w2 >> 13) & 3;
    v.oob_fill = (w2 >> 15) & 1;
    v.l2_promotion = (w2 >> 17) & 3;
    v.swizzle_atomicity = (w2 >> 19) & 3;
    v.sm100_bits = (w2 >> 19) & 7;
    v.tile_bytes = w[16];
    v.swizzle_span_word = w[18];
    v.dtype = data_type_of(v.hw_type, tf32());
  }

  bool check_reserved() {
    if (!unread(2, w[2] & kReservedWord2Bits, [&] { return fmt::format("reserved bits set in word 2 (0x{:08x})", w[2]); }))
      return false;
    if (tf32() && v.hw_type != 7 && v.hw_type != 8) return fail("tf32 bit on a non-f32 element type");
    if (v.rank > kMaxRank) return fail(fmt::format("rank field {} > 5", v.rank));
    if (!unread(17, w[17] != 0, [] { return std::string("reserved word 17 is not zero"); })) return false;
    for (int i = 19; i < 32; ++i)
      if (!unread(i, w[i] != 0, [&] { return fmt::format("reserved word {} is not zero", i); })) return false;
    return true;
  }

  bool check_past_rank() {
    for (uint32_t i = v.rank; i < kMaxRank; ++i)
      if (!unread(static_cast<int>(8 + i), w[8 + i] != 0,
                  [&] { return fmt::format("globalDim word {} set past rank {}", i, v.rank); }))
        return false;
    for (uint32_t i = v.rank - 1; i < 4; ++i) {
      if (!w[3 + i] && !((w[7] >> (4 * i)) & 0xf)) continue;
      if (convention == Convention::kDevice) {
        v.stale_strides_past_rank = true;
        continue;
      }
      if (!unread(static_cast<int>(3 + i), true,
                  [&] { return fmt::format("stride word {} set past rank {}", i, v.rank); }))
        return false;
    }
    if (!unread(7, (w[7] >> 16) != 0, [] { return std::string("reserved bits set in the stride high-nibble word"); }))
      return false;
    if (!unread(13, ((w[13] & 0x7fff) >> (3 * v.rank)) != 0, [] { return std::string("element stride set past rank"); }))
      return false;
    return unread(13, (w[13] & 0x00ff8000u) != 0, [] { return std::string("reserved bits set in word 13"); });
  }

  void read_extents() {
    for (uint32_t i = 0; i < v.rank; ++i) {
      v.dims[i] = static_cast<uint64_t>(w[8 + i]) + 1;
      v.element_strides[i] = ((w[13] >> (3 * i)) & 7) + 1;
    }
    for (uint32_t i = 0; i + 1 < v.rank; ++i)
      v.strides[i] = ((static_cast<uint64_t>((w[7] >> (4 * i)) & 0xf) << 32) | w[3 + i]) * 16;
  }

  bool read_box() {
    if (v.kind == MapKind::kTiled) {
      if (!unread(15, w[15] != 0, [] { return std::string("word 15 set on a tiled map"); })) return false;
      v.box[0] = (w[13] >> 24) + 1;
      for (uint32_t i = 1; i < v.rank; ++i) v.box[i] = ((w[14] >> (8 * (i - 1))) & 0xff) + 1;
      return unread(14, v.rank < kMaxRank && (w[14] >> (8 * (v.rank - 1))) != 0,
                    [] { return std::string("box dimension set past rank"); });
    }
    if (v.rank < 3) return fail("im2col map with rank < 3");
    v.channels_per_pixel = (w[13] >> 24) + 1;
    v.pixels_per_column = w[15] + 1;
    if (w[15] > 1023) return fail("pixelsPerColumn field > 1024");
    v.box[0] = v.channels_per_pixel;
    v.box[1] = v.pixels_per_column;
    const int bits = corner_bits(v.rank);
    for (uint32_t i = 0; i < v.rank - 2; ++i) {
      v.lower_corner[i] = sign_extend(w[14] >> (bits * i), bits);
      v.upper_corner[i] = sign_extend(w[14] >> (16 + bits * i), bits);
    }
    return true;
  }

  // The form: who filled which words (tensormap.h, Encoder). Where only the fields the unit reads count, the
  // driver's form needs both of its words right.
  void read_form() {
    unread(16, hardware && w[16] != 0 && w[16] != v.computed_tile_bytes(), [] { return std::string(); });
    unread(18, hardware && w[18] != 0 && w[18] != swizzle_span_word(v.swizzle), [] { return std::string(); });
    const bool cute_marker = (w[2] & kCuteDslMarker) != 0;
    v.word2_bit1 = cute_marker;
    if (!cute_marker && w[18] == swizzle_span_word(v.swizzle) && (!hardware || w[16] == v.computed_tile_bytes()))
      v.encoder = Encoder::kDriver;
    else if (w[16] == 0 && w[18] == 0)
      v.encoder = cute_marker ? Encoder::kCuteDsl : Encoder::kDeviceBuilt;
    else
      v.encoder = Encoder::kUnknown;
  }

  // Every TMA box spans a multiple of 16 bytes in its inner dimension (the driver refuses anything else): bytes that
  // do not describe one are no map. Without the driver's two redundant words, a form must also name a known element
  // type. (A zero-filled region reads as a 1-byte box of uint8; small integers with a 16 where the span word goes,
  // as a driver-form map of 1-byte boxes: both fail here.) Under the hardware convention an impossible box is the
  // driver-rule check's to judge (descriptor_checks.cpp).
  bool check_box_span() {
    if (hardware) return true;
    const uint64_t inner = v.kind == MapKind::kTiled ? v.box[0] : v.channels_per_pixel;
    const uint64_t es = static_cast<uint64_t>(element_size(v.dtype));
    if ((es == 0 && v.encoder != Encoder::kDriver) || (es != 0 && inner * es % 16 != 0))
      return fail(fmt::format("not a TMA box: {} of {} x {} B ({})",
                              v.kind == MapKind::kTiled ? "an inner box" : "channelsPerPixel", inner,
                              es == 0 ? std::string("?") : std::to_string(es), form_words(w)));
    return true;
  }
};

}  // namespace

DecodeResult decode(const uint8_t b[kTensorMapBytes], Convention convention) {
  Decoder d(b, convention);
  d.read_word2();
  if (!d.check_reserved() || !d.check_past_rank()) return std::move(d.r);
  d.read_extents();
  if (!d.read_box()) return std::move(d.r);
  d.read_form();
  d.check_box_span();
  return std::move(d.r);
}


std::optional<RaggedTensor> ragged_tensor(const TensorMapView& v) {
  constexpr uint64_t kRows = 1ULL << 30, kLimit = (1ULL << 31) - 1, kTritonLimit = 0x7fff0000ULL;
  const uint64_t es = static_cast<uint64_t>(element_size(v.dtype));
  if (v.kind != MapKind::kTiled || v.rank < 3 || v.rank > kMaxRank || es == 0) return std::nullopt;
  auto stride_of = [&](uint32_t i) { return i == 0 ? es : v.strides[i - 1]; };
  // The ragged mode below `end`: extent 2^30, byte stride `stride`.
  auto ragged_mode = [&](uint32_t end, uint64_t stride) -> int {
    for (uint32_t j = 0; j < end; ++j)
      if (v.dims[j] == kRows && stride_of(j) == stride) return static_cast<int>(j);
    return -1;
  };
  auto without_last = [&](uint32_t extra, int dim, uint64_t base) {
    RaggedTensor r;
    r.dim = static_cast<uint32_t>(dim);
    r.tensor = v;
    TensorMapView& t = r.tensor;
    for (uint32_t i = v.rank - extra; i < v.rank; ++i) {
      t.dims[i] = 0;
      t.box[i] = 0;
      t.element_strides[i] = 0;
      t.strides[i - 1] = 0;
    }
    t.rank = v.rank - extra;
    t.address = base;
    t.ragged_dims = static_cast<uint8_t>(1u << dim);
    return r;
  };
  const uint32_t last = v.rank - 1;
  if (v.rank >= 4 && v.dims[last] >= kTritonLimit && v.dims[last - 1] >= kTritonLimit &&
      v.dims[last] <= kLimit && v.dims[last - 1] <= kLimit) {
    const uint64_t a = stride_of(last - 1), b = stride_of(last);
    if (a + b == es << 34)
      for (const uint64_t stride : {a, b})
        if (const int j = ragged_mode(last - 1, stride); j >= 0) {
          RaggedTensor r = without_last(2, j, v.address);
          r.form = Ragged::kWraparound;
          return r;
        }
  }
  if (v.dims[last] == kLimit) {
    const uint64_t stride = stride_of(last);
    if (const int j = ragged_mode(last, stride); j >= 0) {
      RaggedTensor r = without_last(1, j, v.address + kRows * stride);  // (mod 2^64, as the hardware adds)
      r.form = Ragged::kPtrShift;
      return r;
    }
  }
  return std::nullopt;
}

TensorMapView judged_view(const TensorMapView& v) {
  if (std::optional<RaggedTensor> r = ragged_tensor(v)) return r->tensor;
  return v;
}


}  // namespace tmaguard
