// tmaguard core: the check kinds of the rule language, one row each: keys, parsing of its own keys, evaluation.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "rules_model.h"

namespace tmaguard {
namespace {

std::string dims_str(const TensorMapView& v) {
  return fmt::format("{{{}}}", fmt::join(v.dims.begin(), v.dims.begin() + v.rank, ","));
}
std::string strides_str(const TensorMapView& v) {
  return fmt::format("{{{}}}", fmt::join(v.strides.begin(), v.strides.begin() + (v.rank ? v.rank - 1 : 0), ","));
}

bool known_dtype(std::string_view v) {
  constexpr int kApiTypes = 16;  // CUtensorMapDataType values 0..15
  for (int t = 0; t < kApiTypes; ++t)
    if (v == to_string(static_cast<DataType>(t))) return true;
  return false;
}
bool known_swizzle(std::string_view v) {
  constexpr uint32_t kSwizzleModes = 7;  // CUtensorMapSwizzle values 0..6
  for (uint32_t s = 0; s < kSwizzleModes; ++s)
    if (v == swizzle_name(s)) return true;
  return false;
}

bool no_keys(CheckKeys&, Check&) { return true; }

bool parse_dtypes(CheckKeys& k, Check& c) {
  auto v = k.names("allowed", known_dtype, "data type (e.g. bfloat16, float16, float32, uint8)");
  if (v) c.allowed = std::move(*v);
  return v.has_value();
}
bool parse_swizzles(CheckKeys& k, Check& c) {
  auto v = k.names("allowed", known_swizzle, "swizzle (none, 32B, 64B, 128B, ...)");
  if (v) c.allowed = std::move(*v);
  return v.has_value();
}
bool parse_rank(CheckKeys& k, Check& c) {
  const auto v = k.integer(
      "equals", [](int64_t x) { return x >= 1 && x <= kMaxRank; }, "'equals' = 1..5");
  if (v) c.number = static_cast<uint64_t>(*v);
  return v.has_value();
}
bool parse_alignment(CheckKeys& k, Check& c) {
  const auto v = k.integer(
      "bytes", [](int64_t x) { return x >= 1 && (x & (x - 1)) == 0; }, "'bytes', a power of two");
  if (v) c.number = static_cast<uint64_t>(*v);
  return v.has_value();
}

using Result = std::optional<CheckFailure>;

Result same_innermost(const Check& c, const TensorMapView& av, const TensorMapView* b) {
  const TensorMapView& bv = *b;
  if (av.dims[0] == bv.dims[0]) return std::nullopt;
  return CheckFailure{
      fmt::format("{} K-major: innermost dimension (dim 0) equal to {}'s dim 0 = {}", c.a, c.b, bv.dims[0]),
      fmt::format("{} dim 0 = {} ({} dims {}, {} dims {}){}", c.a, av.dims[0], c.a, dims_str(av), c.b, dims_str(bv),
                  av.rank > 1 && av.dims[1] == bv.dims[0]
                      ? fmt::format(": {} is transposed (MN-major; its contiguous dim is {}'s dim 1)", c.a, c.b)
                      : "")};
}

Result same_dims(const Check& c, const TensorMapView& av, const TensorMapView* b) {
  if (av.rank == b->rank && av.dims == b->dims) return std::nullopt;
  return CheckFailure{fmt::format("{} has the dims of {} = {}", c.a, c.b, dims_str(*b)),
                      fmt::format("{} dims {}", c.a, dims_str(av))};
}

Result same_strides(const Check& c, const TensorMapView& av, const TensorMapView* b) {
  if (av.rank == b->rank && av.strides == b->strides) return std::nullopt;
  return CheckFailure{fmt::format("{} has the byte strides of {} = {}", c.a, c.b, strides_str(*b)),
                      fmt::format("{} strides {}", c.a, strides_str(av))};
}

Result dtype(const Check& c, const TensorMapView& av, const TensorMapView*) {
  if (std::find(c.allowed.begin(), c.allowed.end(), to_string(av.dtype)) != c.allowed.end()) return std::nullopt;
  return CheckFailure{fmt::format("{} is {}", c.a, fmt::join(c.allowed, " or ")),
                      fmt::format("{} is {}", c.a, to_string(av.dtype))};
}

Result swizzle(const Check& c, const TensorMapView& av, const TensorMapView*) {
  if (std::find(c.allowed.begin(), c.allowed.end(), swizzle_name(av.swizzle)) != c.allowed.end()) return std::nullopt;
  return CheckFailure{fmt::format("{} swizzle {}", c.a, fmt::join(c.allowed, " or ")),
                      fmt::format("{} swizzle {}", c.a, swizzle_name(av.swizzle))};
}

Result rank(const Check& c, const TensorMapView& av, const TensorMapView*) {
  if (av.rank == c.number) return std::nullopt;
  return CheckFailure{fmt::format("{} has rank {}", c.a, c.number), fmt::format("{} has rank {}", c.a, av.rank)};
}

Result alignment(const Check& c, const TensorMapView& av, const TensorMapView*) {
  if (av.address % c.number == 0) return std::nullopt;
  return CheckFailure{
      fmt::format("{}'s global address is a multiple of {} bytes", c.a, c.number),
      fmt::format("address 0x{:x} (offset {} from a {}-byte boundary)", av.address, av.address % c.number, c.number)};
}

Result strides_increasing(const Check& c, const TensorMapView& av, const TensorMapView*) {
  const uint64_t es = static_cast<uint64_t>(element_size(av.dtype));
  uint64_t prev = av.dims[0] * es;
  for (uint32_t i = 0; i + 1 < av.rank; ++i) {
    if (av.strides[i] < prev)
      return CheckFailure{
          fmt::format("{}'s rows do not overlap: stride of dim {} >= extent of the dims inside it = {} bytes", c.a,
                      i + 1, prev),
          fmt::format("stride of dim {} = {} bytes (strides {}, dims {})", i + 1, av.strides[i], strides_str(av),
                      dims_str(av))};
    prev = av.strides[i] * av.dims[i + 1];
  }
  return std::nullopt;
}

Result no_overlap(const Check& c, const TensorMapView& av, const TensorMapView* b) {
  const std::optional<ByteRange> ra = map_range(av.encode_args()), rb = map_range(b->encode_args());
  if (!ra || !rb) return std::nullopt;  // a map built on address wraparound: no claim about its bytes
  const uint64_t a0 = ra->first, a1 = ra->end, b0 = rb->first, b1 = rb->end;
  if (!(a0 < b1 && b0 < a1)) return std::nullopt;
  return CheckFailure{fmt::format("{} and {} do not share memory", c.a, c.b),
                      fmt::format("{} spans [0x{:x}, 0x{:x}) and {} spans [0x{:x}, 0x{:x})", c.a, a0, a1, c.b, b0, b1)};
}

}  // namespace

const std::vector<CheckKind>& check_kinds() {
  static const std::vector<CheckKind> kinds = {
      {"same_innermost", true, {}, no_keys, same_innermost},
      {"same_dims", true, {}, no_keys, same_dims},
      {"same_strides", true, {}, no_keys, same_strides},
      {"dtype", false, {"allowed"}, parse_dtypes, dtype},
      {"swizzle", false, {"allowed"}, parse_swizzles, swizzle},
      {"rank", false, {"equals"}, parse_rank, rank},
      {"alignment", false, {"bytes"}, parse_alignment, alignment},
      {"strides_increasing", false, {}, no_keys, strides_increasing},
      {"no_overlap", true, {}, no_keys, no_overlap},
  };
  return kinds;
}

const CheckKind* find_check_kind(std::string_view name) {
  for (const CheckKind& k : check_kinds())
    if (name == k.name) return &k;
  return nullptr;
}

}  // namespace tmaguard
