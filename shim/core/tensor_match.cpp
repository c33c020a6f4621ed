// tmaguard core: a tensor map against a declared tensor (tensor_match.h).
#include "tmaguard/tensor_match.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstring>
#include <optional>
#include <vector>

namespace tmaguard {
namespace {

// One dim of the tensor, in bytes: what the map's dims are matched against.
struct TensorDim {
  int index;        // in the declaration's order
  uint64_t stride;  // bytes
  uint64_t extent;
  uint64_t start = 0;  // the map's start along it
};

// One dim of the map that walks more than one element.
struct MapDim {
  int index;
  uint64_t stride;  // bytes (dim 0: the element size)
  uint64_t extent;
};

// A map dim placed on a tensor dim: at `factor` times that dim's stride.
struct Placed {
  const MapDim* dim;
  uint64_t factor;
};

std::vector<TensorDim> tensor_dims(const DeclaredTensor& t) {
  std::vector<TensorDim> dims;
  for (int j = 0; j < t.rank; ++j)
    if (t.shape[j] > 1 && t.strides[j] > 0)
      dims.push_back({j, static_cast<uint64_t>(t.strides[j]) * t.element_size, static_cast<uint64_t>(t.shape[j])});
  std::sort(dims.begin(), dims.end(), [](const TensorDim& a, const TensorDim& b) { return a.stride < b.stride; });
  return dims;
}

std::vector<MapDim> map_dims(const TensorMapView& m) {
  std::vector<MapDim> dims;
  for (uint32_t i = 0; i < m.rank && i < kMaxRank; ++i) {
    const uint64_t stride = i == 0 ? static_cast<uint64_t>(element_size(m.dtype)) : m.strides[i - 1];
    // A ragged dim's extent is a sequence's, not the map's (tensormap.h: ragged_tensor): it is not judged.
    const bool ragged = (m.ragged_dims >> i) & 1;
    if (m.dims[i] > 1 && !ragged) dims.push_back({static_cast<int>(i), stride, m.dims[i]});
  }
  return dims;
}

// Dims that overlap in memory (one's stride under the span of the dims inside it): the start cannot be read back as
// coordinates, nor a walk judged.
bool overlapping(const std::vector<TensorDim>& dims, uint32_t element_size) {
  uint64_t span = element_size;  // from the first byte of an element to the end of the last the dims inside reach
  for (const TensorDim& d : dims) {
    if (d.stride < span) return true;
    span += (d.extent - 1) * d.stride;
  }
  return false;
}

// The map's start as coordinates of the tensor's dims (outermost first); false when it is no element of the tensor.
bool place_start(uint64_t offset, std::vector<TensorDim>& dims) {
  for (auto d = dims.rbegin(); d != dims.rend(); ++d) {
    d->start = std::min(offset / d->stride, d->extent - 1);
    offset -= d->start * d->stride;
  }
  return offset == 0;
}

// Whether byte `offset` (from the tensor's data pointer) lies inside one of its elements; `dims` do not overlap, so
// the coordinates of the element under it are found outermost first.
bool inside_element(uint64_t offset, const std::vector<TensorDim>& dims, uint32_t element_size) {
  for (auto d = dims.rbegin(); d != dims.rend(); ++d) offset -= std::min(offset / d->stride, d->extent - 1) * d->stride;
  return offset < element_size;
}

TensorMatch mismatch(std::string why) { return {TensorFit::kMismatch, std::move(why)}; }

// Places every map dim on a tensor dim: its own stride, else a multiple of one inside that dim's extent (a split).
std::optional<std::string> place_map_dims(const std::vector<MapDim>& map, const std::vector<TensorDim>& dims,
                                          std::vector<std::vector<Placed>>& on) {
  for (const MapDim& m : map) {
    bool placed = false;
    for (std::size_t j = 0; j < dims.size() && !placed; ++j)
      if (m.stride == dims[j].stride) on[j].push_back({&m, 1}), placed = true;
    for (std::size_t j = dims.size(); j-- > 0 && !placed;) {
      const uint64_t f = m.stride / dims[j].stride;
      if (m.stride % dims[j].stride == 0 && f > 1 && f < dims[j].extent) on[j].push_back({&m, f}), placed = true;
    }
    if (!placed)
      return fmt::format("map dim {}'s stride, {} bytes, walks none of the tensor's dims", m.index, m.stride);
  }
  return std::nullopt;
}

// How far tensor dim j's coordinate can reach from its start when dims j+1.. are contiguous with it and walked by
// nothing else (a merge): the merged extent, and the last dim merged.
uint64_t merged_room(const std::vector<TensorDim>& dims, const std::vector<std::vector<Placed>>& on, std::size_t j,
                     uint64_t need, std::size_t* last) {
  uint64_t extent = dims[j].extent, at = dims[j].start;  // the merged dim's extent and the map's start along it
  std::size_t k = j;
  while (extent - at < need && k + 1 < dims.size() && on[k + 1].empty() &&
         dims[k + 1].stride == dims[k].stride * dims[k].extent) {
    ++k;
    at += dims[k].start * extent;
    extent *= dims[k].extent;
  }
  *last = k;
  return extent - at;
}

// The map dims placed on tensor dim j: a slice, a split of it (factors 1, d1, d1*d2, ...) or, for one map dim, a
// merge with the dims contiguous above it.
std::optional<std::string> check_tensor_dim(const std::vector<TensorDim>& dims, std::vector<std::vector<Placed>>& on,
                                            std::size_t j, const DeclaredTensor& t) {
  std::vector<Placed>& p = on[j];
  std::sort(p.begin(), p.end(), [](const Placed& a, const Placed& b) { return a.factor < b.factor; });
  uint64_t expect = 1;
  for (const Placed& x : p) {
    if (x.factor != expect)
      return fmt::format("map dim {}'s stride, {} bytes, walks dim {} of the tensor in steps of {} elements of it",
                         x.dim->index, x.dim->stride, dims[j].index, x.factor);
    expect *= x.dim->extent;
  }
  const uint64_t need = expect;  // the coordinates the map walks along this dim
  std::size_t last = j;
  const uint64_t room = p.size() == 1 ? merged_room(dims, on, j, need, &last) : dims[j].extent - dims[j].start;
  if (need <= room) {
    for (std::size_t k = j + 1; k <= last; ++k) on[k].push_back({nullptr, 0});  // merged: walked by no other dim
    return std::nullopt;
  }
  std::vector<int> walking;
  for (const Placed& x : p) walking.push_back(x.dim->index);
  return fmt::format("map dim{} {} walk{} {} elements along dim {} of the tensor from index {}, past its end (size {})",
                     walking.size() > 1 ? "s" : "", fmt::join(walking, " and "), walking.size() > 1 ? "" : "s", need,
                     dims[j].index, dims[j].start, t.shape[dims[j].index]);
}

}  // namespace

std::string declaration_problem(const DeclaredTensor& t) {
  if (t.rank < 0 || t.rank > kMaxDeclaredRank) return fmt::format("rank {} (at most {})", t.rank, kMaxDeclaredRank);
  if (t.element_size == 0 || t.element_size > 16) return fmt::format("element size {} bytes", t.element_size);
  for (int j = 0; j < t.rank; ++j)
    if (t.shape[j] < 0 || t.strides[j] < 0)
      return fmt::format("dim {} has extent {} and stride {} (neither may be negative)", j, t.shape[j], t.strides[j]);
  // Each dim's reach below 2^64 before it is added (a product of two 63-bit values fits in 128 bits; a sum of such
  // products, times the element size, may not), so that no sum wraps and the span is what the tensor spans.
  constexpr unsigned __int128 kMemory = static_cast<unsigned __int128>(1) << 64;
  unsigned __int128 last = 0;
  for (int j = 0; j < t.rank; ++j) {
    if (t.shape[j] == 0) return "";  // no element: nothing to compare a map with
    last += static_cast<unsigned __int128>(t.shape[j] - 1) * static_cast<uint64_t>(t.strides[j]);
    if (last >= kMemory) return fmt::format("its elements would run past the end of memory (dim {} reaches 2^64)", j);
  }
  if ((last + 1) * t.element_size + t.data > ~uint64_t{0}) return "its elements would run past the end of memory";
  return "";
}

uint64_t tensor_span(const DeclaredTensor& t) {
  uint64_t last = 0;
  for (int j = 0; j < t.rank && j < kMaxDeclaredRank; ++j) {
    if (t.shape[j] == 0) return 0;
    last += static_cast<uint64_t>(t.shape[j] - 1) * static_cast<uint64_t>(t.strides[j]);
  }
  return (last + 1) * t.element_size;
}

bool points_into(uint64_t address, const DeclaredTensor& t) {
  return address >= t.data && address - t.data < tensor_span(t);
}

TensorMatch match_tensor(const TensorMapView& map, const DeclaredTensor& t) {
  if (map.kind != MapKind::kTiled) return {TensorFit::kNotJudged, "only tiled maps are compared with tensors"};
  if (static_cast<uint32_t>(element_size(map.dtype)) != t.element_size)
    return {TensorFit::kNotJudged,
            fmt::format("the map's elements are {} bytes, the tensor's {}", element_size(map.dtype), t.element_size)};
  std::vector<TensorDim> dims = tensor_dims(t);
  if (overlapping(dims, t.element_size)) return {TensorFit::kNotJudged, "the tensor's dims overlap in memory"};
  if (!points_into(map.address, t) || !place_start(map.address - t.data, dims))
    return mismatch(fmt::format("the map starts at 0x{:x}, which is no element of the tensor", map.address));
  const std::vector<MapDim> walk = map_dims(map);
  std::vector<std::vector<Placed>> on(dims.size());
  if (auto why = place_map_dims(walk, dims, on)) return mismatch(*why);
  for (std::size_t j = 0; j < dims.size(); ++j) {
    const bool merged = !on[j].empty() && on[j].front().dim == nullptr;
    if (merged && on[j].size() > 1)
      return mismatch(
          fmt::format("dim {} of the tensor is both merged into another map dim and walked by its own", dims[j].index));
    if (merged || on[j].empty()) continue;
    if (auto why = check_tensor_dim(dims, on, j, t)) return mismatch(*why);
  }
  return {TensorFit::kDescribes, ""};
}

std::optional<std::string> store_spill(const TensorMapView& map, const DeclaredTensor& t) {
  const uint64_t es = static_cast<uint64_t>(element_size(map.dtype));
  if (map.kind != MapKind::kTiled || map.interleave != 0 || map.rank == 0 || es != t.element_size) return std::nullopt;
  const uint64_t row = map.dims[0] * es, chunk_end = (row + 15) / 16 * 16;
  const std::vector<TensorDim> dims = tensor_dims(t);
  if (row == chunk_end || !points_into(map.address, t) || overlapping(dims, t.element_size)) return std::nullopt;
  uint64_t last_row = map.address - t.data;  // the map's last row, from the tensor's data pointer
  for (uint32_t i = 1; i < map.rank && i < kMaxRank; ++i)
    if (!((map.ragged_dims >> i) & 1)) last_row += (map.dims[i] - 1) * map.strides[i - 1];
  for (const uint64_t first : {map.address - t.data, last_row})
    for (uint64_t b = row; b < chunk_end; b += es)
      if (!inside_element(first + b, dims, t.element_size))
        return fmt::format(
            "its rows are {} bytes, which ends inside a 16-byte chunk: a TMA store through it writes bytes {}-{} of "
            "each "
            "row, and byte {} of the row at byte {} of the tensor is none of its elements",
            row, row, chunk_end - 1, b, first);
  return std::nullopt;
}

namespace {

std::string tensor_name(const DeclaredTensor& t) { return std::string(t.name, strnlen(t.name, kDeclaredNameBytes)); }

std::optional<Finding> spill_finding(std::string_view kernel, const TensorMapParam& map, const DeclaredTensor& t) {
  const TensorMapView v = judged_view(map.decoded.view);
  const std::optional<std::string> why = store_spill(v, t);
  if (!why) return std::nullopt;
  const std::string name = tensor_name(t);
  Finding f = make_finding(FindingId::kMapStoreSpill, kernel, name, &map);
  f.expected = fmt::format("a stored map whose rows end on a 16-byte chunk, or whose chunks' rest is {}'s own: {}",
                           name, describe_tensor(t));
  f.observed = fmt::format("map {}: {}", describe_map_walk(v), *why);
  f.hint = fmt::format(
      "the store will overwrite the bytes after each row of {} up to the chunk's end (elements outside the view): "
      "store into a buffer whose rows are a multiple of 16 bytes and copy the view out, or pad the view's last dim",
      name);
  return f;
}

}  // namespace

std::optional<Finding> tensor_finding(std::string_view kernel, const TensorMapParam& map, const DeclaredTensor* tensors,
                                      std::size_t n, bool stored) {
  if (!map.decoded.ok()) return std::nullopt;
  const TensorMapView v = judged_view(map.decoded.view);  // a ragged map: the tensor under it
  const DeclaredTensor* named = nullptr;
  std::string why;
  for (std::size_t i = 0; i < n; ++i) {
    if (!points_into(v.address, tensors[i])) continue;
    const TensorMatch m = match_tensor(v, tensors[i]);
    if (m.fit == TensorFit::kDescribes && stored) return spill_finding(kernel, map, tensors[i]);
    if (m.fit != TensorFit::kMismatch) return std::nullopt;
    if (!named || (tensors[i].data == v.address && named->data != v.address)) named = &tensors[i], why = m.why;
  }
  if (!named) return std::nullopt;
  const std::string name = tensor_name(*named);
  Finding f = make_finding(FindingId::kMapTensorMismatch, kernel, name, &map);
  f.expected = fmt::format("a map that walks {}'s own elements: {}", name, describe_tensor(*named));
  f.observed = fmt::format("map {}: {}", describe_map_walk(v), why);
  f.hint = fmt::format(
      "the map was built for other memory than {} (from its shape as if it were contiguous, or from a compact layout "
      "over a view): build it from the tensor's own strides (tensor.stride()), or pass tensor.contiguous()",
      name);
  return f;
}

std::size_t maps_into_tensors(const std::vector<TensorMapParam>& maps, const DeclaredTensor* tensors, std::size_t n) {
  return static_cast<std::size_t>(std::count_if(maps.begin(), maps.end(), [&](const TensorMapParam& m) {
    if (!m.decoded.ok()) return false;
    const uint64_t address = judged_view(m.decoded.view).address;
    return std::any_of(tensors, tensors + n, [&](const DeclaredTensor& t) { return points_into(address, t); });
  }));
}

std::string describe_tensor(const DeclaredTensor& t) {
  const int rank = std::clamp(t.rank, 0, kMaxDeclaredRank);
  const std::vector<int64_t> shape(t.shape.begin(), t.shape.begin() + rank);
  const std::vector<int64_t> strides(t.strides.begin(), t.strides.begin() + rank);
  return fmt::format("{} (shape [{}], strides [{}] elements, {}-byte elements, at 0x{:x})", tensor_name(t),
                     fmt::join(shape, ", "), fmt::join(strides, ", "), t.element_size, t.data);
}

std::string describe_map_walk(const TensorMapView& map) {
  std::vector<uint64_t> dims, strides;
  for (uint32_t i = 0; i < map.rank && i < kMaxRank; ++i) {
    dims.push_back(map.dims[i]);
    strides.push_back(i == 0 ? static_cast<uint64_t>(element_size(map.dtype)) : map.strides[i - 1]);
  }
  return fmt::format("dims [{}], byte strides [{}] (innermost first), at 0x{:x}", fmt::join(dims, ", "),
                     fmt::join(strides, ", "), map.address);
}

}  // namespace tmaguard
