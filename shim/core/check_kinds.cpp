// tmaguard core: the check kinds of the rule language, one row each: keys, parsing of its own keys, evaluation.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "rules_model.h"

namespace tmaguard {
namespace {

std::string dims_str(const TensorMapView& v) {
  std::string s = "{";
  for (uint32_t i = 0; i < v.rank; ++i)
    s += (i ? "," : "") + ((v.ragged_dims >> i) & 1 ? std::string("ragged") : std::to_string(v.dims[i]));
  return s + "}";
}

// Dim i of `a` and dim j of `b` are the same extent: equal, or one of them a ragged mode (a sequence's length, which
// the map does not carry: it matches any).
bool same_extent(const TensorMapView& a, uint32_t i, const TensorMapView& b, uint32_t j) {
  return a.dims[i] == b.dims[j] || ((a.ragged_dims >> i) & 1) || ((b.ragged_dims >> j) & 1);
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

bool known_encoder(std::string_view v) {
  for (const Encoder e : {Encoder::kDriver, Encoder::kCuteDsl, Encoder::kDeviceBuilt, Encoder::kUnknown})
    if (v == to_string(e)) return true;
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
bool parse_encoders(CheckKeys& k, Check& c) {
  auto v = k.names("allowed", known_encoder, "encoder (driver, CuTe DSL, device-built, unknown)");
  if (v) c.allowed = std::move(*v);
  return v.has_value();
}
bool parse_rank(CheckKeys& k, Check& c) {
  const auto v = k.integer(
      "equals", [](int64_t x) { return x >= 1 && x <= kMaxRank; }, "'equals' = 1..5");
  if (v) c.number = static_cast<uint64_t>(*v);
  return v.has_value();
}
bool parse_dim(CheckKeys& k, Check& c) {
  const auto v = k.integer(
      "dim", [](int64_t x) { return x >= 0 && x < kMaxRank; }, "'dim' = 0..4");
  if (!v) return false;
  c.number = static_cast<uint64_t>(*v);
  const auto w = k.optional_integer(
      "dim_b", [](int64_t x) { return x >= 0 && x < kMaxRank; }, "'dim_b' = 0..4");
  c.number_b = w ? static_cast<uint64_t>(*w) : c.number;
  return true;
}
bool parse_alignment(CheckKeys& k, Check& c) {
  const auto v = k.integer(
      "bytes", [](int64_t x) { return x >= 1 && (x & (x - 1)) == 0; }, "'bytes', a power of two");
  if (v) c.number = static_cast<uint64_t>(*v);
  return v.has_value();
}

using Result = std::optional<CheckFailure>;

// Pair kinds are evaluated once per name in `b` (rules_eval.cpp passes a check whose `b` holds just that name).
const std::string& bname(const Check& c) { return c.b.front(); }

Result same_innermost(const Check& c, const TensorMapView& av, const TensorMapView* b) {
  const TensorMapView& bv = *b;
  if (av.ragged_dims & 1)  // a's contiguous dim is its ragged (sequence) mode: never the head dim
    return CheckFailure{
        fmt::format("{} K-major: innermost dimension (dim 0) equal to {}'s dim 0 = {}", c.a, bname(c), bv.dims[0]),
        fmt::format("{}'s dim 0 is its ragged (sequence) dim ({} dims {}, {} dims {}): {} is transposed", c.a, c.a,
                    dims_str(av), bname(c), dims_str(bv), c.a)};
  if (av.dims[0] == bv.dims[0] || (bv.ragged_dims & 1)) return std::nullopt;
  return CheckFailure{
      fmt::format("{} K-major: innermost dimension (dim 0) equal to {}'s dim 0 = {}", c.a, bname(c), bv.dims[0]),
      fmt::format("{} dim 0 = {} ({} dims {}, {} dims {}){}", c.a, av.dims[0], c.a, dims_str(av), bname(c),
                  dims_str(bv),
                  av.rank > 1 && av.dims[1] == bv.dims[0]
                      ? fmt::format(": {} is transposed (MN-major; its contiguous dim is {}'s dim 1)", c.a, bname(c))
                      : "")};
}

Result same_dims(const Check& c, const TensorMapView& av, const TensorMapView* b) {
  bool same = av.rank == b->rank;
  for (uint32_t i = 0; same && i < av.rank; ++i) same = same_extent(av, i, *b, i);
  if (same) return std::nullopt;
  return CheckFailure{fmt::format("{} has the dims of {} = {}", c.a, bname(c), dims_str(*b)),
                      fmt::format("{} dims {}", c.a, dims_str(av))};
}

Result same_strides(const Check& c, const TensorMapView& av, const TensorMapView* b) {
  if (av.rank == b->rank && av.strides == b->strides) return std::nullopt;
  return CheckFailure{fmt::format("{} has the byte strides of {} = {}", c.a, bname(c), strides_str(*b)),
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

Result encoder(const Check& c, const TensorMapView& av, const TensorMapView*) {
  if (std::find(c.allowed.begin(), c.allowed.end(), to_string(av.encoder)) != c.allowed.end()) return std::nullopt;
  return CheckFailure{fmt::format("{} written by {}", c.a, fmt::join(c.allowed, " or ")),
                      fmt::format("{} is in the {} form", c.a, to_string(av.encoder))};
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

// A map a kernel stores through needs bytes of its own for every element: no broadcast dimension, no overlapping
// rows (tensormap.h: aliasing).
Result distinct_elements(const Check& c, const TensorMapView& av, const TensorMapView*) {
  const std::optional<EncodeProblem> p = aliasing(av.encode_args());
  if (!p) return std::nullopt;
  return CheckFailure{fmt::format("{}'s elements have bytes of their own (no stride-0 dimension, no overlapping rows)",
                                  c.a),
                      fmt::format("{} {} (dims {}, strides {})", c.a, p->message, dims_str(av), strides_str(av))};
}

Result same_address(const Check& c, const TensorMapView& av, const TensorMapView* b) {
  if (av.address == b->address) return std::nullopt;
  return CheckFailure{fmt::format("{} and {} have the same global address", c.a, bname(c)),
                      fmt::format("{} at 0x{:x}, {} at 0x{:x}", c.a, av.address, bname(c), b->address)};
}

Result distinct_address(const Check& c, const TensorMapView& av, const TensorMapView* b) {
  if (av.address != b->address) return std::nullopt;
  return CheckFailure{fmt::format("{} and {} have different global addresses", c.a, bname(c)),
                      fmt::format("both at 0x{:x}", av.address)};
}

// The dims of `a` include those of `b` (as a multiset): `a` has b's dims, in any order, plus the dims b's map
// dropped (TMA drops stride-0 modes, so a broadcast K has a map of lower rank than a contiguous dK).
Result permutation_of(const Check& c, const TensorMapView& av, const TensorMapView* b) {
  std::vector<uint32_t> rest;  // a's dims not matched yet (ragged ones last: they match any extent)
  for (uint32_t i = 0; i < av.rank; ++i)
    if (!((av.ragged_dims >> i) & 1)) rest.push_back(i);
  for (uint32_t i = 0; i < av.rank; ++i)
    if ((av.ragged_dims >> i) & 1) rest.push_back(i);
  bool ok = av.rank >= b->rank;
  for (uint32_t j = 0; ok && j < b->rank; ++j) {
    const auto it =
        std::find_if(rest.begin(), rest.end(), [&](uint32_t i) { return same_extent(av, i, *b, j); });
    if (it == rest.end())
      ok = false;
    else
      rest.erase(it);
  }
  if (ok) return std::nullopt;
  return CheckFailure{
      fmt::format("{}'s dims are {}'s, in any order, plus any that {} drops (broadcast)", c.a, bname(c), bname(c)),
      fmt::format("{} dims {}, {} dims {}", c.a, dims_str(av), bname(c), dims_str(*b))};
}

// b's dims appear in a's in the same order (a is b with its broadcast-dropped dims put back).
Result dims_extend(const Check& c, const TensorMapView& av, const TensorMapView* b) {
  uint32_t j = 0;
  for (uint32_t i = 0; i < av.rank && j < b->rank; ++i)
    if (same_extent(av, i, *b, j)) ++j;
  if (j == b->rank && av.rank >= b->rank) return std::nullopt;
  return CheckFailure{fmt::format("{} has the dims of {} = {}, in that order (plus any {} drops as broadcast)", c.a,
                                  bname(c), dims_str(*b), bname(c)),
                      fmt::format("{} dims {}", c.a, dims_str(av))};
}

// a's dims past its innermost are b's dims past its innermost, in any order (two outputs of one GEMM over the same
// rows: heads, sequence, batch; their innermost dims differ). A map of a broadcast (stride-0) tensor drops that mode
// (TMA takes no stride-0 mode): where the ranks differ, the lower rank's outer dims must be among the higher's.
Result same_outer_dims(const Check& c, const TensorMapView& av, const TensorMapView* b) {
  const bool a_wider = av.rank >= b->rank;
  const TensorMapView &wide = a_wider ? av : *b, &narrow = a_wider ? *b : av;
  std::vector<uint32_t> rest;
  for (uint32_t i = 1; i < wide.rank; ++i) rest.push_back(i);
  bool ok = true;
  for (uint32_t j = 1; ok && j < narrow.rank; ++j) {
    const auto it =
        std::find_if(rest.begin(), rest.end(), [&](uint32_t i) { return same_extent(wide, i, narrow, j); });
    if (it == rest.end())
      ok = false;
    else
      rest.erase(it);
  }
  if (ok) return std::nullopt;
  auto outer = [](const TensorMapView& v) {
    TensorMapView o = v;
    for (uint32_t i = 0; i + 1 < v.rank; ++i) o.dims[i] = v.dims[i + 1];
    o.ragged_dims = static_cast<uint8_t>(v.ragged_dims >> 1);
    o.rank = v.rank ? v.rank - 1 : 0;
    return dims_str(o);
  };
  return CheckFailure{fmt::format("{}'s dims past its innermost are {}'s past its innermost = {}, in any order", c.a,
                                  bname(c), outer(*b)),
                      fmt::format("{} dims {} (past its innermost {})", c.a, dims_str(av), outer(av))};
}

Result same_dim(const Check& c, const TensorMapView& av, const TensorMapView* b) {
  const uint64_t x = c.number < av.rank ? av.dims[c.number] : 0, y = c.number_b < b->rank ? b->dims[c.number_b] : 0;
  if (x != 0 && y != 0 && same_extent(av, static_cast<uint32_t>(c.number), *b, static_cast<uint32_t>(c.number_b)))
    return std::nullopt;
  auto dim = [](const TensorMapView& v, uint64_t i) {
    return i >= v.rank               ? fmt::format("absent (rank {})", v.rank)
           : (v.ragged_dims >> i) & 1 ? std::string("ragged")
                                      : fmt::format("{}", v.dims[i]);
  };
  return CheckFailure{fmt::format("{} dim {} equals {} dim {}", c.a, c.number, bname(c), c.number_b),
                      fmt::format("{} dim {} = {}, {} dim {} = {}", c.a, c.number, dim(av, c.number), bname(c),
                                  c.number_b, dim(*b, c.number_b))};
}

Result same_dtype(const Check& c, const TensorMapView& av, const TensorMapView* b) {
  if (av.dtype == b->dtype && av.dtype != DataType::kUnknown) return std::nullopt;
  return CheckFailure{fmt::format("{} has the element type of {} ({})", c.a, bname(c), to_string(b->dtype)),
                      fmt::format("{} is {}", c.a, to_string(av.dtype))};
}

Result no_overlap(const Check& c, const TensorMapView& av, const TensorMapView* b) {
  if (av.ragged_dims || b->ragged_dims) return std::nullopt;  // a ragged tensor's extent is per sequence: no claim
  const std::optional<ByteRange> ra = map_range(av.encode_args()), rb = map_range(b->encode_args());
  if (!ra || !rb) return std::nullopt;  // a map built on address wraparound: no claim about its bytes
  const uint64_t a0 = ra->first, a1 = ra->end, b0 = rb->first, b1 = rb->end;
  if (!(a0 < b1 && b0 < a1)) return std::nullopt;
  return CheckFailure{
      fmt::format("{} and {} do not share memory", c.a, bname(c)),
      fmt::format("{} spans [0x{:x}, 0x{:x}) and {} spans [0x{:x}, 0x{:x})", c.a, a0, a1, bname(c), b0, b1)};
}

// Two outputs of one launch need bytes of their own: the stores of one must not land on the other's (dK and dV as
// one buffer, or views that overlap). Views into one packed buffer that interleave without sharing a byte are fine.
Result disjoint_elements(const Check& c, const TensorMapView& av, const TensorMapView* b) {
  std::optional<bool> share;
  if (av.address == b->address && av.address != 0)
    share = true;  // both hold the element at their base
  else if (!av.ragged_dims && !b->ragged_dims) {  // a ragged tensor's extent is per sequence: no other claim
    const EncodeArgs ea = av.encode_args(), eb = b->encode_args();
    const std::optional<ByteRange> ra = map_range(ea), rb = map_range(eb);
    if (ra && rb && (ra->end <= rb->first || rb->end <= ra->first)) return std::nullopt;  // their bytes lie apart
    share = maps_share_bytes(ea, eb);
  }
  if (!share || !*share) return std::nullopt;
  return CheckFailure{fmt::format("{} and {} have bytes of their own (no element of one is an element of the other)",
                                  c.a, bname(c)),
                      fmt::format("{} at 0x{:x} (dims {}, strides {}) and {} at 0x{:x} (dims {}, strides {}) address "
                                  "the same bytes",
                                  c.a, av.address, dims_str(av), strides_str(av), bname(c), b->address, dims_str(*b),
                                  strides_str(*b))};
}

// One of a's dims is b's dim N (a dK holds K's head dim somewhere, whatever order or padding the rest has).
Result has_dim_of(const Check& c, const TensorMapView& av, const TensorMapView* b) {
  const auto j = static_cast<uint32_t>(c.number);
  if (j < b->rank)
    for (uint32_t i = 0; i < av.rank; ++i)
      if (same_extent(av, i, *b, j)) return std::nullopt;
  return CheckFailure{fmt::format("one of {}'s dims is {}'s dim {}", c.a, bname(c), c.number),
                      fmt::format("{} dims {}, {} dims {}", c.a, dims_str(av), bname(c), dims_str(*b))};
}

// Two operands contracted over one dim (FA4's Q and K over the head dim): at most one of them transposed still has the
// other's innermost dim among its dims. The signature of such a pair, which holds whichever of the two is transposed.
Result innermost_shared(const Check& c, const TensorMapView& av, const TensorMapView* b) {
  for (uint32_t i = 0; i < av.rank; ++i)
    if (b->rank && same_extent(av, i, *b, 0)) return std::nullopt;
  for (uint32_t j = 0; j < b->rank; ++j)
    if (av.rank && same_extent(av, 0, *b, j)) return std::nullopt;
  return CheckFailure{fmt::format("{}'s innermost dim is one of {}'s dims, or {}'s innermost one of {}'s", c.a,
                                  bname(c), bname(c), c.a),
                      fmt::format("{} dims {}, {} dims {}", c.a, dims_str(av), bname(c), dims_str(*b))};
}

// Both operands keep the dim they are contracted over innermost (FA4's forward compiles Q and K K-major): a.dims[0] ==
// b.dims[0]. Neither is assumed healthy, so the failure names the transposed one only where the dims tell (its dim 1
// is the other's dim 0 and not the other way round), else both.
Result both_innermost(const Check& c, const TensorMapView& av, const TensorMapView* b) {
  const TensorMapView& bv = *b;
  if (av.rank && bv.rank && same_extent(av, 0, bv, 0)) return std::nullopt;
  const bool a_t = av.rank > 1 && bv.rank && same_extent(av, 1, bv, 0);
  const bool b_t = bv.rank > 1 && av.rank && same_extent(bv, 1, av, 0);
  const std::string which = a_t == b_t ? fmt::format("{} or {} is transposed (its contiguous dim is not the one both "
                                                     "are contracted over)",
                                                     c.a, bname(c))
                            : a_t      ? fmt::format("{} is transposed (its contiguous dim is {}'s dim 1)", c.a, c.a)
                                       : fmt::format("{} is transposed (its contiguous dim is {}'s dim 1)", bname(c),
                                                     bname(c));
  return CheckFailure{fmt::format("{} and {} both innermost in the dim they are contracted over (dim 0 equal)", c.a,
                                  bname(c)),
                      fmt::format("{} dims {}, {} dims {}: {}", c.a, dims_str(av), bname(c), dims_str(bv), which),
                      b_t && !a_t};
}

}  // namespace

const std::vector<CheckKind>& check_kinds() {
  // Never destroyed: tmaguard's own threads (the device audit's worker) may read it while the process exits.
  static const std::vector<CheckKind>& kinds = *new std::vector<CheckKind>{
      {"same_innermost", true, {}, no_keys, same_innermost, true},
      {"same_dims", true, {}, no_keys, same_dims, true},
      {"same_strides", true, {}, no_keys, same_strides, true},
      {"dtype", false, {"allowed"}, parse_dtypes, dtype, true},
      {"swizzle", false, {"allowed"}, parse_swizzles, swizzle, true},
      {"encoder", false, {"allowed"}, parse_encoders, encoder, true},
      {"rank", false, {"equals"}, parse_rank, rank, true},
      {"alignment", false, {"bytes"}, parse_alignment, alignment},
      {"strides_increasing", false, {}, no_keys, strides_increasing, true},
      {"distinct_elements", false, {}, no_keys, distinct_elements},
      {"no_overlap", true, {}, no_keys, no_overlap},
      {"disjoint_elements", true, {}, no_keys, disjoint_elements},
      {"has_dim_of", true, {"dim"}, parse_dim, has_dim_of, true},
      {"same_address", true, {}, no_keys, same_address},
      {"distinct_address", true, {}, no_keys, distinct_address},
      {"permutation_of", true, {}, no_keys, permutation_of, true},
      {"dims_extend", true, {}, no_keys, dims_extend, true},
      {"same_outer_dims", true, {}, no_keys, same_outer_dims, true},
      {"same_dim", true, {"dim", "dim_b"}, parse_dim, same_dim, true},
      {"same_dtype", true, {}, no_keys, same_dtype, true},
      {"innermost_shared", true, {}, no_keys, innermost_shared, true},
      {"both_innermost", true, {}, no_keys, both_innermost, true},
  };
  return kinds;
}

std::vector<std::string> check_kind_names() {
  std::vector<std::string> out;
  for (const CheckKind& k : check_kinds()) out.emplace_back(k.name);
  return out;
}

const CheckKind* find_check_kind(std::string_view name) {
  for (const CheckKind& k : check_kinds())
    if (name == k.name) return &k;
  return nullptr;
}

}  // namespace tmaguard
