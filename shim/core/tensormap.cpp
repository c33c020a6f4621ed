// tmaguard core: CUtensorMap encode/decode and the driver's argument rules (layout in tensormap-layout notes).
#include "tmaguard/tensormap.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

namespace tmaguard {
namespace {

// Hardware element-type code stored in word 2 bits 10:7, indexed by CUtensorMapDataType (sm90 types only).
constexpr uint32_t kHwType[13] = {0, 1, 2, 3, 4, 5, 6, 7, 9, 10, 8, 7, 8};
constexpr uint32_t kTf32Bit = 1u << 16;
// Word 2: bit 1 is CuTe DSL's (its host code sets it, the driver never does); bits 2-3 and 22-31 are reserved in
// every form seen (bits 19-21 are Blackwell swizzle atomicity and the large-tensor flag).
constexpr uint32_t kCuteDslMarker = 1u << 1;
constexpr uint32_t kReservedWord2Bits = 0xffc0000cu;

uint32_t load_word(const uint8_t* b, int i) {
  uint32_t w;
  std::memcpy(&w, b + 4 * i, 4);
  return w;
}
void store_word(uint8_t* b, int i, uint32_t w) { std::memcpy(b + 4 * i, &w, 4); }

int corner_bits(uint32_t rank) { return rank == 3 ? 16 : rank == 4 ? 8 : 5; }
int32_t corner_limit(uint32_t rank) { return rank == 3 ? 32768 : rank == 4 ? 128 : 16; }
int32_t sign_extend(uint32_t v, int bits) {
  const uint32_t m = 1u << (bits - 1);
  v &= (1u << bits) - 1;
  return static_cast<int32_t>((v ^ m) - m);
}

EncodeProblem problem(std::string field, std::string msg) { return {std::move(field), std::move(msg)}; }

// The words that tell the forms apart, for messages.
std::string form_words(const uint32_t w[32]) {
  return fmt::format("word 2 bit 1 = {}, tile-size word 0x{:x}, swizzle-span word 0x{:x}", (w[2] >> 1) & 1, w[16],
                     w[18]);
}

}  // namespace

const char* to_string(DataType t) {
  switch (t) {
    case DataType::kU8: return "uint8";
    case DataType::kU16: return "uint16";
    case DataType::kU32: return "uint32";
    case DataType::kS32: return "int32";
    case DataType::kU64: return "uint64";
    case DataType::kS64: return "int64";
    case DataType::kF16: return "float16";
    case DataType::kF32: return "float32";
    case DataType::kF64: return "float64";
    case DataType::kBF16: return "bfloat16";
    case DataType::kF32Ftz: return "float32_ftz";
    case DataType::kTF32: return "tfloat32";
    case DataType::kTF32Ftz: return "tfloat32_ftz";
    case DataType::k16U4Align8B: return "16u4_align8b";
    case DataType::k16U4Align16B: return "16u4_align16b";
    case DataType::k16U6Align16B: return "16u6_align16b";
    default: return "unknown";
  }
}

int element_size(DataType t) {
  static constexpr int kSize[13] = {1, 2, 4, 4, 8, 8, 2, 4, 8, 2, 4, 4, 4};
  const auto i = static_cast<unsigned>(t);
  return i < 13 ? kSize[i] : 0;
}

bool is_float(DataType t) {
  const auto i = static_cast<unsigned>(t);
  return i >= 6 && i <= 12;
}

uint32_t swizzle_span_word(uint32_t swizzle) { return swizzle == 0 ? 0x10u : (0x80u << swizzle); }
uint32_t swizzle_span(uint32_t swizzle) { return swizzle == 0 ? 0 : swizzle <= 3 ? (16u << swizzle) : 128u; }
const char* swizzle_name(uint32_t s) {
  static const char* kNames[] = {"none",         "32B", "64B", "128B", "128B_atom_32B", "128B_atom_32B_flip_8B",
                                 "128B_atom_64B"};
  return s < 7 ? kNames[s] : "invalid";
}
const char* interleave_name(uint32_t il) {
  static const char* kNames[] = {"none", "16B", "32B"};
  return il < 3 ? kNames[il] : "invalid";
}

EncodeProblem validate_encode(const EncodeArgs& a) {
  const bool im2col = a.kind != MapKind::kTiled;
  if (a.rank < 1 || a.rank > 5) return problem("tensorRank", fmt::format("tensorRank={} must be 1..5", a.rank));
  if (im2col && a.rank < 3) return problem("tensorRank", fmt::format("tensorRank={} must be 3..5 for im2col", a.rank));
  if (a.dtype > 12)
    return problem("tensorDataType",
                   fmt::format("tensorDataType={} is not supported on this GPU (sm90 accepts 0..12)", a.dtype));
  if (a.interleave > 2)
    return problem("interleave", fmt::format("interleave={} is not a CUtensorMapInterleave", a.interleave));
  if (a.swizzle > 3)
    return problem("swizzle", fmt::format("swizzle={} ({}) is not supported on this GPU (sm90 accepts 0..3)", a.swizzle,
                                          swizzle_name(a.swizzle)));
  if (a.l2_promotion > 3) return problem("l2Promotion", fmt::format("l2Promotion={} must be 0..3", a.l2_promotion));
  if (a.oob_fill > 1) return problem("oobFill", fmt::format("oobFill={} must be 0 or 1", a.oob_fill));
  if (a.interleave && a.rank < 3)
    return problem("interleave",
                   fmt::format("interleave {} needs tensorRank >= 3, got {}", interleave_name(a.interleave), a.rank));
  if (a.address % 16)
    return problem("globalAddress", fmt::format("globalAddress=0x{:x} must be 16-byte aligned", a.address));
  if (a.interleave == 2 && a.address % 32)
    return problem("globalAddress",
                   fmt::format("globalAddress=0x{:x} must be 32-byte aligned with interleave 32B", a.address));
  const auto dt = static_cast<DataType>(a.dtype);
  if (a.oob_fill == 1 && !is_float(dt))
    return problem("oobFill", fmt::format("oobFill NaN needs a floating-point type, got {}", to_string(dt)));
  for (uint32_t i = 0; i < a.rank; ++i) {
    if (a.dims[i] == 0 || a.dims[i] > (1ULL << 32))
      return problem(fmt::format("globalDim[{}]", i), fmt::format("globalDim[{}]={} must be 1..2^32", i, a.dims[i]));
  }
  for (uint32_t i = 0; i + 1 < a.rank; ++i) {
    const uint64_t s = a.strides[i];
    if (s % 16)
      return problem(fmt::format("globalStrides[{}]", i),
                     fmt::format("globalStrides[{}]={} must be a multiple of 16", i, s));
    if (a.interleave == 2 && s % 32)
      return problem(fmt::format("globalStrides[{}]", i),
                     fmt::format("globalStrides[{}]={} must be a multiple of 32 with interleave 32B", i, s));
    if (s >= (1ULL << 40))
      return problem(fmt::format("globalStrides[{}]", i), fmt::format("globalStrides[{}]={} must be < 2^40", i, s));
  }
  for (uint32_t i = 0; i < a.rank; ++i) {
    if (a.element_strides[i] < 1 || a.element_strides[i] > 8)
      return problem(fmt::format("elementStrides[{}]", i),
                     fmt::format("elementStrides[{}]={} must be 1..8", i, a.element_strides[i]));
  }
  const uint64_t es = static_cast<uint64_t>(element_size(dt));
  uint64_t tile = es;
  const char* inner_name = im2col ? "channelsPerPixel" : "boxDim[0]";
  const uint64_t inner = im2col ? a.channels_per_pixel : a.box[0];
  if (!im2col) {
    for (uint32_t i = 0; i < a.rank; ++i) {
      if (a.box[i] < 1 || a.box[i] > 256)
        return problem(fmt::format("boxDim[{}]", i), fmt::format("boxDim[{}]={} must be 1..256", i, a.box[i]));
    }
  } else {
    if (a.channels_per_pixel < 1 || a.channels_per_pixel > 256)
      return problem("channelsPerPixel", fmt::format("channelsPerPixel={} must be 1..256", a.channels_per_pixel));
    if (a.pixels_per_column < 1 || a.pixels_per_column > 1024)
      return problem("pixelsPerColumn", fmt::format("pixelsPerColumn={} must be 1..1024", a.pixels_per_column));
  }
  if ((inner * es) % 16)
    return problem(inner_name, fmt::format("{}={} x {} B = {} B must be a multiple of 16 bytes", inner_name, inner, es,
                                           inner * es));
  if (a.interleave == 0 && a.swizzle && inner * es > swizzle_span(a.swizzle))
    return problem(inner_name, fmt::format("{}={} x {} B = {} B exceeds the {} swizzle span ({} B)", inner_name, inner,
                                           es, inner * es, swizzle_name(a.swizzle), swizzle_span(a.swizzle)));
  if (im2col) {
    const int32_t lim = corner_limit(a.rank);
    const uint32_t spatial = a.rank - 2;
    const uint32_t n = a.kind == MapKind::kIm2colWide ? 1 : spatial;
    for (uint32_t i = 0; i < n; ++i) {
      for (const auto* c : {&a.lower_corner, &a.upper_corner}) {
        const int32_t v = (*c)[i];
        if (v < -lim || v >= lim)
          return problem(c == &a.lower_corner ? "pixelBoxLowerCorner" : "pixelBoxUpperCorner",
                         fmt::format("{}[{}]={} must be in [{}, {}] for rank {}",
                                     c == &a.lower_corner ? "pixelBoxLowerCorner" : "pixelBoxUpperCorner", i, v, -lim,
                                     lim - 1, a.rank));
      }
    }
    if (a.kind == MapKind::kIm2colWide && a.wide_mode > 1)
      return problem("mode", fmt::format("mode={} must be 0 (W) or 1 (W128)", a.wide_mode));
    if (a.interleave == 0) {
      // The driver computes each bounding-box extent in 32 bits (dim 2^32 with a net-zero corner wraps to 0).
      for (uint32_t i = 0; i < spatial; ++i) {
        const int32_t lo = i < n ? a.lower_corner[i] : 0, up = i < n ? a.upper_corner[i] : 0;
        const auto extent = static_cast<int32_t>(static_cast<uint32_t>(
            a.dims[i + 1] + static_cast<uint64_t>(static_cast<int64_t>(up) - static_cast<int64_t>(lo))));
        if (extent <= 0)
          return problem("pixelBoxLowerCorner",
                         fmt::format("bounding box has zero area: globalDim[{}]={} + upper {} - lower {} <= 0", i + 1,
                                     a.dims[i + 1], up, lo));
      }
    }
    tile = es * a.channels_per_pixel * a.pixels_per_column;
  } else {
    for (uint32_t i = 0; i < a.rank; ++i) tile *= a.box[i] / a.element_strides[i];
  }
  if (tile > kMaxTileBytesSm90)
    return problem("boxDim", fmt::format("tile of {} B exceeds the {} B limit", tile, kMaxTileBytesSm90));
  return {};
}

EncodeArgs encode_args(MapKind kind, uint32_t dtype, uint32_t rank, uint64_t address, const uint64_t* dims,
                       const uint64_t* strides, const uint32_t* element_strides, uint32_t interleave, uint32_t swizzle,
                       uint32_t l2_promotion, uint32_t oob_fill) {
  EncodeArgs a;
  a.kind = kind;
  a.dtype = dtype;
  a.rank = rank;
  a.address = address;
  const uint32_t n = rank < kMaxRank ? rank : kMaxRank;
  for (uint32_t i = 0; i < n; ++i) {
    if (dims) a.dims[i] = dims[i];
    if (element_strides) a.element_strides[i] = element_strides[i];
    if (strides && i + 1 < n) a.strides[i] = strides[i];
  }
  a.interleave = interleave;
  a.swizzle = swizzle;
  a.l2_promotion = l2_promotion;
  a.oob_fill = oob_fill;
  return a;
}

std::optional<uint64_t> footprint_bytes(const EncodeArgs& a) {
  const uint64_t es = static_cast<uint64_t>(element_size(static_cast<DataType>(a.dtype)));
  uint64_t end = es;
  for (uint32_t i = 0; i < a.rank && i < kMaxRank; ++i) {
    if (!a.dims[i]) continue;
    uint64_t span = 0;
    if (__builtin_mul_overflow(a.dims[i] - 1, i == 0 ? es : a.strides[i - 1], &span) ||
        __builtin_add_overflow(end, span, &end))
      return std::nullopt;
  }
  return end;
}

std::optional<ByteRange> map_range(const EncodeArgs& a) {
  // Triton's ragged descriptors (triton.tools.ragged_tma) give a dimension of 2^30 rows the byte stride of another
  // and move the base address below the tensor (or wrap it, mod 2^64): their accesses stay inside the tensor
  // through the coordinates the kernel uses, not through the map's nominal range.
  constexpr uint64_t kVirtualRows = 1ULL << 30;
  const uint32_t r = a.rank < kMaxRank ? a.rank : kMaxRank;
  for (uint32_t i = 1; i < r; ++i)
    for (uint32_t j = i + 1; j < r; ++j)
      if (a.strides[i - 1] != 0 && a.strides[i - 1] == a.strides[j - 1] &&
          (a.dims[i] >= kVirtualRows || a.dims[j] >= kVirtualRows))
        return std::nullopt;
  const std::optional<uint64_t> fp = footprint_bytes(a);
  uint64_t end = 0;
  if (!fp || __builtin_add_overflow(a.address, *fp, &end)) return std::nullopt;
  return ByteRange{a.address, end};
}

bool template_args(const EncodeArgs& a) {
  const uint32_t r = a.rank < kMaxRank ? a.rank : kMaxRank;
  return r > 0 && std::all_of(a.dims.begin(), a.dims.begin() + r, [](uint64_t d) { return d == 1; });
}

std::vector<EncodeProblem> encode_warnings(const EncodeArgs& a) {
  std::vector<EncodeProblem> out;
  if (template_args(a)) return out;  // describes no tensor yet: nothing to warn about
  if (a.address == 0)
    out.push_back({"globalAddress", "globalAddress is NULL: the driver encodes it, every access through the map faults",
                   kNullAddress});
  return out;
}

std::optional<EncodeProblem> aliasing(const EncodeArgs& a) {
  const uint32_t r = a.rank < kMaxRank ? a.rank : kMaxRank;
  if (template_args(a)) return std::nullopt;
  // A map built on address wraparound (Triton's ragged descriptors) overlaps its own rows by design.
  if (!map_range(a)) return std::nullopt;
  const uint64_t es = static_cast<uint64_t>(element_size(static_cast<DataType>(a.dtype)));
  // Rows overlap when a dimension's stride is smaller than the bytes spanned by the dimensions with smaller
  // strides. Judged in stride order, not argument order: FA4's K-major maps are {d, s, h, b} with strides
  // {2hd, 2d, 2shd}, not increasing yet perfectly valid.
  uint32_t order[kMaxRank];
  uint32_t n = 0;
  for (uint32_t i = 0; i + 1 < r; ++i) {
    if (a.strides[i] == 0 && a.dims[i + 1] > 1)
      return EncodeProblem{fmt::format("globalStrides[{}]", i),
                           fmt::format("globalStrides[{}] = 0: dimension {} is broadcast ({} indices share the same "
                                       "bytes)",
                                       i, i + 1, a.dims[i + 1]),
                           kZeroStride};
    if (a.strides[i] != 0) order[n++] = i;
  }
  for (uint32_t k = 1; k < n; ++k)  // insertion sort by stride (at most 4 entries)
    for (uint32_t j = k; j > 0 && a.strides[order[j]] < a.strides[order[j - 1]]; --j) std::swap(order[j], order[j - 1]);
  uint64_t span = a.dims[0] * es;  // bytes spanned by dim 0 and every dimension already placed
  for (uint32_t k = 0; k < n; ++k) {
    const uint32_t i = order[k];
    if (a.dims[i + 1] > 1 && a.strides[i] < span)
      return EncodeProblem{fmt::format("globalStrides[{}]", i),
                           fmt::format("globalStrides[{}] = {} < {} bytes spanned by the dimensions with smaller "
                                       "strides: rows overlap",
                                       i, a.strides[i], span),
                           kOverlappingRows};
    span = std::max(span, a.strides[i] * a.dims[i + 1]);
  }
  return std::nullopt;
}

int encode(const EncodeArgs& a, uint8_t out[kTensorMapBytes], EncodeProblem* problem_out) {
  const EncodeProblem p = validate_encode(a);
  std::memset(out, 0, kTensorMapBytes);
  store_word(out, 0, static_cast<uint32_t>(a.address));
  store_word(out, 1, static_cast<uint32_t>(a.address >> 32));
  if (p) {
    if (problem_out) *problem_out = p;
    return 1;
  }
  const bool im2col = a.kind != MapKind::kTiled;
  const uint32_t hw = kHwType[a.dtype];
  const bool tf32 = a.dtype == 11 || a.dtype == 12;
  uint32_t w2 = (im2col ? 1u : 0u) | ((a.rank - 1) << 4) | (hw << 7) | (tf32 ? kTf32Bit : 0) | (a.interleave << 11) |
                (a.swizzle << 13) | (a.oob_fill << 15) | (a.l2_promotion << 17);
  store_word(out, 2, w2);
  uint32_t w7 = 0;
  for (uint32_t i = 0; i + 1 < a.rank; ++i) {
    const uint64_t q = a.strides[i] / 16;
    store_word(out, 3 + static_cast<int>(i), static_cast<uint32_t>(q));
    w7 |= static_cast<uint32_t>((q >> 32) & 0xf) << (4 * i);
  }
  store_word(out, 7, w7);
  for (uint32_t i = 0; i < a.rank; ++i) store_word(out, 8 + static_cast<int>(i), static_cast<uint32_t>(a.dims[i] - 1));
  uint32_t w13 = 0;
  for (uint32_t i = 0; i < a.rank; ++i) w13 |= (a.element_strides[i] - 1) << (3 * i);
  const uint32_t es = static_cast<uint32_t>(element_size(static_cast<DataType>(a.dtype)));
  uint32_t tile = es;
  if (!im2col) {
    w13 |= (a.box[0] - 1) << 24;
    uint32_t w14 = 0;
    for (uint32_t i = 1; i < a.rank; ++i) w14 |= (a.box[i] - 1) << (8 * (i - 1));
    store_word(out, 14, w14);
    for (uint32_t i = 0; i < a.rank; ++i) tile *= a.box[i] / a.element_strides[i];
  } else {
    w13 |= (a.channels_per_pixel - 1) << 24;
    const int bits = corner_bits(a.rank);
    const uint32_t mask = (1u << bits) - 1;
    const uint32_t n = a.kind == MapKind::kIm2colWide ? 1 : a.rank - 2;
    uint32_t w14 = 0;
    for (uint32_t i = 0; i < n; ++i) {
      w14 |= (static_cast<uint32_t>(a.lower_corner[i]) & mask) << (bits * i);
      w14 |= (static_cast<uint32_t>(a.upper_corner[i]) & mask) << (16 + bits * i);
    }
    store_word(out, 14, w14);
    store_word(out, 15, a.pixels_per_column - 1);
    tile = es * a.channels_per_pixel * a.pixels_per_column;
  }
  store_word(out, 13, w13);
  store_word(out, 16, tile);
  store_word(out, 18, swizzle_span_word(a.swizzle));
  return 0;
}

uint64_t TensorMapView::computed_tile_bytes() const {
  const uint64_t es = static_cast<uint64_t>(element_size(dtype));
  if (kind != MapKind::kTiled) return es * channels_per_pixel * pixels_per_column;
  uint64_t t = es;
  for (uint32_t i = 0; i < rank; ++i) t *= box[i] / element_strides[i];
  return t;
}

EncodeArgs TensorMapView::encode_args() const {
  EncodeArgs a;
  a.kind = kind;
  a.dtype = static_cast<uint32_t>(dtype);
  a.rank = rank;
  a.address = address;
  a.dims = dims;
  a.strides = strides;
  a.box = box;
  a.element_strides = element_strides;
  a.lower_corner = lower_corner;
  a.upper_corner = upper_corner;
  a.channels_per_pixel = channels_per_pixel;
  a.pixels_per_column = pixels_per_column;
  a.interleave = interleave;
  a.swizzle = swizzle;
  a.l2_promotion = l2_promotion;
  a.oob_fill = oob_fill;
  return a;
}

bool may_hold_map(const uint8_t b[kTensorMapBytes]) {
  uint32_t reserved = load_word(b, 2) & kReservedWord2Bits;
  reserved |= load_word(b, 17);
  for (int i = 19; i < 32; ++i) reserved |= load_word(b, i);
  return reserved == 0;
}

DecodeResult decode(const uint8_t b[kTensorMapBytes], Convention convention) {
  DecodeResult r;
  TensorMapView& v = r.view;
  uint32_t w[32];
  for (int i = 0; i < 32; ++i) w[i] = load_word(b, i);
  const bool hardware = convention == Convention::kHardware;
  v.address = (static_cast<uint64_t>(w[1]) << 32) | w[0];
  const uint32_t w2 = w[2];
  v.kind = (w2 & 1) ? MapKind::kIm2col : MapKind::kTiled;
  v.rank = ((w2 >> 4) & 7) + 1;
  v.hw_type = (w2 >> 7) & 0xf;
  const bool tf32 = (w2 >> 16) & 1;
  v.interleave = (w2 >> 11) & 3;
  v.swizzle = (w2 >> 13) & 3;
  v.oob_fill = (w2 >> 15) & 1;
  v.l2_promotion = (w2 >> 17) & 3;
  v.swizzle_atomicity = (w2 >> 19) & 3;
  v.sm100_bits = (w2 >> 19) & 7;
  v.tile_bytes = w[16];
  v.swizzle_span_word = w[18];
  switch (v.hw_type) {
    case 0: v.dtype = DataType::kU8; break;
    case 1: v.dtype = DataType::kU16; break;
    case 2: v.dtype = DataType::kU32; break;
    case 3: v.dtype = DataType::kS32; break;
    case 4: v.dtype = DataType::kU64; break;
    case 5: v.dtype = DataType::kS64; break;
    case 6: v.dtype = DataType::kF16; break;
    case 7: v.dtype = tf32 ? DataType::kTF32 : DataType::kF32; break;
    case 8: v.dtype = tf32 ? DataType::kTF32Ftz : DataType::kF32Ftz; break;
    case 9: v.dtype = DataType::kF64; break;
    case 10: v.dtype = DataType::kBF16; break;
    default: v.dtype = DataType::kUnknown; break;
  }
  auto fail = [&](std::string why) {
    r.not_a_map = std::move(why);
    return r;
  };
  // Bits outside the fields the TMA unit reads: the strict conventions refuse them (the first one met names why), the
  // hardware one records them in ignored_words and reads on. Only structural defects refuse bytes in every convention.
  auto unread = [&](int word, bool set, auto&& why) {
    if (!set) return false;
    v.ignored_words |= 1u << word;
    if (hardware) return false;
    r.not_a_map = why();
    return true;
  };
  if (unread(2, w2 & kReservedWord2Bits, [&] { return fmt::format("reserved bits set in word 2 (0x{:08x})", w2); }))
    return r;
  if (tf32 && v.hw_type != 7 && v.hw_type != 8) return fail("tf32 bit on a non-f32 element type");
  if (v.rank > kMaxRank) return fail(fmt::format("rank field {} > 5", v.rank));
  if (unread(17, w[17] != 0, [] { return std::string("reserved word 17 is not zero"); })) return r;
  for (int i = 19; i < 32; ++i)
    if (unread(i, w[i] != 0, [&] { return fmt::format("reserved word {} is not zero", i); })) return r;
  for (uint32_t i = v.rank; i < kMaxRank; ++i)
    if (unread(static_cast<int>(8 + i), w[8 + i] != 0,
               [&] { return fmt::format("globalDim word {} set past rank {}", i, v.rank); }))
      return r;
  for (uint32_t i = v.rank - 1; i < 4; ++i) {
    if (!w[3 + i] && !((w[7] >> (4 * i)) & 0xf)) continue;
    if (convention == Convention::kDevice) {
      v.stale_strides_past_rank = true;
      continue;
    }
    if (unread(static_cast<int>(3 + i), true,
               [&] { return fmt::format("stride word {} set past rank {}", i, v.rank); }))
      return r;
  }
  if (unread(7, (w[7] >> 16) != 0, [] { return std::string("reserved bits set in the stride high-nibble word"); }))
    return r;
  if (unread(13, ((w[13] & 0x7fff) >> (3 * v.rank)) != 0, [] { return std::string("element stride set past rank"); }))
    return r;
  if (unread(13, (w[13] & 0x00ff8000u) != 0, [] { return std::string("reserved bits set in word 13"); })) return r;
  for (uint32_t i = 0; i < v.rank; ++i) {
    v.dims[i] = static_cast<uint64_t>(w[8 + i]) + 1;
    v.element_strides[i] = ((w[13] >> (3 * i)) & 7) + 1;
  }
  for (uint32_t i = 0; i + 1 < v.rank; ++i)
    v.strides[i] = ((static_cast<uint64_t>((w[7] >> (4 * i)) & 0xf) << 32) | w[3 + i]) * 16;
  if (v.kind == MapKind::kTiled) {
    if (unread(15, w[15] != 0, [] { return std::string("word 15 set on a tiled map"); })) return r;
    v.box[0] = (w[13] >> 24) + 1;
    for (uint32_t i = 1; i < v.rank; ++i) v.box[i] = ((w[14] >> (8 * (i - 1))) & 0xff) + 1;
    if (unread(14, v.rank < kMaxRank && (w[14] >> (8 * (v.rank - 1))) != 0,
               [] { return std::string("box dimension set past rank"); }))
      return r;
  } else {
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
  }
  unread(16, hardware && w[16] != 0 && w[16] != v.computed_tile_bytes(), [] { return std::string(); });
  unread(18, hardware && w[18] != 0 && w[18] != swizzle_span_word(v.swizzle), [] { return std::string(); });
  // The form: who filled which words (tensormap.h, Encoder). Where only the fields the unit reads count, the driver's
  // form needs both of its words right.
  const bool cute_marker = (w2 & kCuteDslMarker) != 0;
  v.word2_bit1 = cute_marker;
  if (!cute_marker && w[18] == swizzle_span_word(v.swizzle) && (!hardware || w[16] == v.computed_tile_bytes()))
    v.encoder = Encoder::kDriver;
  else if (w[16] == 0 && w[18] == 0)
    v.encoder = cute_marker ? Encoder::kCuteDsl : Encoder::kDeviceBuilt;
  else
    v.encoder = Encoder::kUnknown;
  if (hardware) return r;  // an impossible box is the driver-rule check's to judge (checks.cpp)
  // Every TMA box spans a multiple of 16 bytes in its inner dimension (the driver refuses anything else): bytes that
  // do not describe one are no map. Without the driver's two redundant words, a form must also name a known element
  // type. (A zero-filled region reads as a 1-byte box of uint8; small integers with a 16 where the span word goes,
  // as a driver-form map of 1-byte boxes: both fail here.)
  const uint64_t inner = v.kind == MapKind::kTiled ? v.box[0] : v.channels_per_pixel;
  const uint64_t es = static_cast<uint64_t>(element_size(v.dtype));
  if ((es == 0 && v.encoder != Encoder::kDriver) || (es != 0 && inner * es % 16 != 0))
    return fail(fmt::format("not a TMA box: {} of {} x {} B ({})",
                            v.kind == MapKind::kTiled ? "an inner box" : "channelsPerPixel", inner,
                            es == 0 ? std::string("?") : std::to_string(es), form_words(w)));
  return r;
}

const char* to_string(Ragged r) {
  switch (r) {
    case Ragged::kPtrShift: return "ptr-shift";
    case Ragged::kWraparound: return "wraparound";
    default: return "none";
  }
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

const char* to_string(Encoder e) {
  switch (e) {
    case Encoder::kDriver: return "driver";
    case Encoder::kCuteDsl: return "CuTe DSL";
    case Encoder::kDeviceBuilt: return "device-built";
    default: return "unknown";
  }
}

int encode_in_form(Encoder form, const EncodeArgs& a, uint8_t out[kTensorMapBytes]) {
  if (form == Encoder::kDriver) return encode(a, out);
  const int rc = encode(a, out);  // the driver's layout of every field, and its acceptance rules
  if (rc != 0 || form == Encoder::kUnknown || a.kind != MapKind::kTiled) return rc ? rc : 1;
  store_word(out, 16, 0);
  store_word(out, 18, 0);
  uint32_t w2 = load_word(out, 2);
  if (form == Encoder::kDeviceBuilt) {
    // tensormap.replace has no L2-promotion field: a zero-filled descriptor keeps 0 there.
    store_word(out, 2, w2 & ~(3u << 17));
    return 0;
  }
  // CuTe DSL (tests/data/cute_dsl_golden.txt cites the MLIR dumps this follows): no element strides, interleave or
  // OOB fill are written; the address is stored as ((addr / 16) & (2^53 - 1)) << 4; bit 21 is set when the tensor
  // spans at least 128 KiB (dims[0] x element size + sum over i >= 1 of (dims[i] - 1) x strides[i-1]).
  for (uint32_t i = 0; i < a.rank; ++i)
    if (a.element_strides[i] != 1) return 1;
  if (a.interleave != 0 || a.oob_fill != 0) return 1;
  const uint64_t q0 = ((a.address / 16) & ((1ULL << 53) - 1)) << 4;
  store_word(out, 0, static_cast<uint32_t>(q0));
  store_word(out, 1, static_cast<uint32_t>(q0 >> 32));
  uint64_t span = a.dims[0] * static_cast<uint64_t>(element_size(static_cast<DataType>(a.dtype)));
  for (uint32_t i = 1; i < a.rank; ++i) span += (a.dims[i] - 1) * a.strides[i - 1];
  w2 |= kCuteDslMarker;
  if (span >= (128u << 10)) w2 |= 1u << 21;
  store_word(out, 2, w2);
  store_word(out, 13, load_word(out, 13) & 0xff000000u);
  return 0;
}

}  // namespace tmaguard
