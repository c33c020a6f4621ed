// tmaguard core: the driver's encode rules for a CUtensorMap and the encoders of each form (tensormap.h; the byte
// layout in docs/tensormap-layout.md).
#include "tmaguard/tensormap.h"
#include "tensormap_words.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

namespace tmaguard {
using namespace words;

namespace {

// The driver's encode rules, one group per function, in the driver's own order; each returns the first problem.
EncodeProblem check_scalars(const EncodeArgs& a) {
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
  if (EncodeProblem p = address_problem(a.address, a.interleave)) return p;
  const auto dt = static_cast<DataType>(a.dtype);
  if (a.oob_fill == 1 && !is_float(dt))
    return problem("oobFill", fmt::format("oobFill NaN needs a floating-point type, got {}", to_string(dt)));
  return {};
}

EncodeProblem check_extents(const EncodeArgs& a) {
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
  return {};
}

EncodeProblem check_box(const EncodeArgs& a, uint64_t es) {
  const bool im2col = a.kind != MapKind::kTiled;
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
  return {};
}

EncodeProblem check_im2col(const EncodeArgs& a) {
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
  return {};
}

}  // namespace

EncodeProblem address_problem(uint64_t address, uint32_t interleave) {
  if (address % 16)
    return problem("globalAddress", fmt::format("globalAddress=0x{:x} must be 16-byte aligned", address));
  if (interleave == 2 && address % 32)
    return problem("globalAddress",
                   fmt::format("globalAddress=0x{:x} must be 32-byte aligned with interleave 32B", address));
  return {};
}

EncodeProblem validate_encode(const EncodeArgs& a) {
  const uint64_t es = static_cast<uint64_t>(element_size(static_cast<DataType>(a.dtype)));
  for (auto* step : {check_scalars, check_extents})
    if (EncodeProblem p = step(a)) return p;
  if (EncodeProblem p = check_box(a, es)) return p;
  uint64_t tile = es;
  if (a.kind != MapKind::kTiled) {
    if (EncodeProblem p = check_im2col(a)) return p;
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
