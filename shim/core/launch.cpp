// tmaguard core: reading a launch's arguments (the `extra` form).
#include "launch_key.h"
#include "struct_search.h"
#include "tmaguard/launch.h"

#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <cstdint>

namespace tmaguard {

LaunchArgs parse_extra(void* const* extra, int max_pairs) {
  // CU_LAUNCH_PARAM_END is ((void*)0x00), BUFFER_POINTER 0x01, BUFFER_SIZE 0x02 (cuda.h); spelled here so the pure
  // core needs no CUDA header.
  const auto end = reinterpret_cast<void*>(0x00), pointer = reinterpret_cast<void*>(0x01),
             size = reinterpret_cast<void*>(0x02);
  LaunchArgs a;
  for (int i = 0; extra && i < 2 * max_pairs && extra[i] != end; i += 2) {
    if (extra[i] == pointer) {
      a.buffer = static_cast<const uint8_t*>(extra[i + 1]);
    } else if (extra[i] == size && extra[i + 1]) {
      a.buffer_size = *static_cast<const std::size_t*>(extra[i + 1]);
      a.size_declared = true;
    }
  }
  return a;
}

std::vector<uint32_t> window_offsets(const ParamLayout& layout, std::size_t p) {
  std::vector<uint32_t> out;
  if (p >= layout.sizes.size() || layout.sizes[p] < kTensorMapBytes) return out;
  for (std::size_t r = 0; r + kTensorMapBytes <= layout.sizes[p]; r += 64) out.push_back(static_cast<uint32_t>(r));
  return out;
}

namespace {
uint32_t load_word2(const uint8_t* b) {
  uint32_t w;
  __builtin_memcpy(&w, b + 8, 4);
  return w;
}
}  // namespace

DecodeResult read_map(const uint8_t b[kTensorMapBytes], MapEvidence where) {
  const Convention c = where == MapEvidence::kKnown          ? Convention::kHardware
                       : where == MapEvidence::kDeviceMemory ? Convention::kDevice
                                                             : Convention::kStrict;
  DecodeResult d = decode(b, c);
  if (!d.ok()) return d;
  const TensorMapView& v = d.view;
  auto no_map = [&](std::string why) {
    d.not_a_map = std::move(why);
    return d;
  };
  if (v.address == 0 && v.encoder != Encoder::kDriver) {  // (the driver's form: CUTLASS's NULL templates are maps)
    bool empty = true;
    for (uint32_t i = 0; i < v.rank; ++i) empty &= v.dims[i] == 1 && (i == 0 || v.strides[i - 1] == 0);
    if (empty) return no_map("NULL address, every dim 1 and every stride 0: no tensor is described");
  }
  if (where == MapEvidence::kKnown) return d;
  if (v.encoder == Encoder::kDriver) {  // its tile-size word must match its own box (the driver always writes it so)
    if (v.tile_bytes == 0 || v.tile_bytes != v.computed_tile_bytes())
      return no_map(fmt::format("a tile-size word of {} where its box gives {}: not taken for a map in {}",
                                v.tile_bytes, v.computed_tile_bytes(), to_string(where)));
    return d;
  }
  if (where == MapEvidence::kInStruct || v.encoder == Encoder::kUnknown ||
      (where == MapEvidence::kParameter && v.encoder == Encoder::kDeviceBuilt))
    return no_map(fmt::format("{} form: not taken for a map in {}", to_string(v.encoder), to_string(where)));
  // Forms without the driver's redundant words must carry their own encoder's fingerprint and describe a tensor the
  // driver itself would accept: CuTe DSL's host fill always writes L2 promotion 128B and never element strides,
  // interleave or an OOB fill; tensormap.replace has no L2-promotion field, and a word 2 of zeros (rank 1, uint8,
  // no swizzle) is what a float array with a round value in word 13 looks like; a user-space address (below 2^57:
  // CuTe DSL keeps 57 bits), not NULL; more than one element.
  const bool fingerprint =
      v.encoder == Encoder::kCuteDsl
          ? v.l2_promotion == 2 && v.interleave == 0 && v.oob_fill == 0 &&
                std::all_of(v.element_strides.begin(), v.element_strides.begin() + v.rank,
                            [](uint32_t e) { return e == 1; })
          : v.l2_promotion == 0 && load_word2(b) != 0;
  if (!fingerprint)
    return no_map(fmt::format("{} form without its encoder's fingerprint: not taken for a map in {}",
                              to_string(v.encoder), to_string(where)));
  if (v.address == 0 || v.address >= (1ULL << 57))
    return no_map(fmt::format("{} form with address 0x{:x}: not taken for a map in {}", to_string(v.encoder),
                              v.address, to_string(where)));
  if (std::all_of(v.dims.begin(), v.dims.begin() + v.rank, [](uint64_t d) { return d == 1; }))
    return no_map(fmt::format("{} form describing one element: not taken for a map in {}", to_string(v.encoder),
                              to_string(where)));
  if (const EncodeProblem p = validate_encode(v.encode_args()))
    return no_map(fmt::format("{} form the driver would refuse ({}): not taken for a map in {}", to_string(v.encoder),
                              p.message, to_string(where)));
  return d;
}

bool template_map(const TensorMapView& v) { return template_args(v.encode_args()); }

namespace {
// Empty places watched per kernel at most (each costs a look at its word 13 on every launch): more is said once.
constexpr std::size_t kMaxWatched = 256;
// Places of one launch's parameters asked whether they hold a device address, at most (each is a pointer query).
constexpr std::size_t kMaxPointerPlaces = 64;
}  // namespace

StructSearch search_structs(const ParamLayout& layout, const LaunchArgs& args,
                            const std::vector<MapPlace>& watched_before) {
  StructSearch out;
  out.watch_limit = kMaxWatched;
  for (std::size_t p = 0; p < layout.sizes.size(); ++p) {
    if (layout.sizes[p] <= kTensorMapBytes) continue;
    std::vector<MapPlace> empty;  // this parameter's empty places
    const bool watchable = layout.sizes[p] % kMapStructAlignment == 0;
    for (const uint32_t r : window_offsets(layout, p)) {
      const MapPlace place{static_cast<uint32_t>(p), r};
      const uint8_t* b = args.map(layout, place);
      if (!b) {  // the caller did not provide this parameter's bytes (or not all of them)
        out.incomplete = true;
        break;
      }
      if (may_hold_map(b) && read_map(b, MapEvidence::kInStruct).ok())
        out.maps.push_back(place);
      else if (watchable && unfilled_place(b))
        empty.push_back(place);
    }
    // A place that overlaps a map found here cannot hold another one (maps do not overlap): not watched.
    for (const MapPlace& e : empty) {
      const bool overlaps =
          std::any_of(out.maps.begin(), out.maps.end(), [&](const MapPlace& m) { return m.overlaps(e); });
      if (overlaps) continue;
      if (out.watch.size() < kMaxWatched)
        out.watch.push_back(e);
      else
        out.watch_truncated = true;
    }
  }
  // A place watched before that holds other data now stays watched (a map may still appear there), unless a map
  // found now overlaps it.
  for (const MapPlace& w : watched_before) {
    const bool overlaps = std::any_of(out.maps.begin(), out.maps.end(), [&](const MapPlace& m) { return m.overlaps(w); });
    if (!overlaps && out.watch.size() < kMaxWatched && std::find(out.watch.begin(), out.watch.end(), w) == out.watch.end())
      out.watch.push_back(w);
  }
  return out;
}

std::vector<MapPlace> pointer_places(const ParamLayout& layout) {
  std::vector<MapPlace> out;
  for (std::size_t p = 0; p < layout.sizes.size() && out.size() < kMaxPointerPlaces; ++p)
    if (layout.sizes[p] == 8) out.push_back({static_cast<uint32_t>(p), 0});
  for (std::size_t p = 0; p < layout.sizes.size() && out.size() < kMaxPointerPlaces; ++p) {
    if (layout.sizes[p] <= kTensorMapBytes) continue;
    for (std::size_t o = 0; o + 8 <= layout.sizes[p] && out.size() < kMaxPointerPlaces; o += 8)
      out.push_back({static_cast<uint32_t>(p), static_cast<uint32_t>(o)});
  }
  return out;
}

std::vector<DeviceWindow> find_device_maps(const uint8_t* bytes, std::size_t n, uint64_t address) {
  std::vector<DeviceWindow> out;
  std::size_t r = (64 - address % 64) % 64;  // the first 64-byte-aligned device address
  while (r + kTensorMapBytes <= n) {
    const uint8_t* b = bytes + r;
    if (may_hold_map(b)) {
      DecodeResult d = read_map(b, MapEvidence::kDeviceMemory);
      if (d.ok()) {
        out.push_back({static_cast<uint32_t>(r), std::move(d)});
        r += kTensorMapBytes;
        continue;
      }
    }
    r += 64;
  }
  return out;
}

uint64_t layout_key(std::string_view kernel, const std::vector<TensorMapParam>& maps) {
  uint64_t key = std::hash<std::string_view>{}(kernel);
  for (const TensorMapParam& m : maps) {
    const MapPlace& p = m.place;
    key = launch_key_fold(key, (uint64_t{p.param} << 32) | p.offset);
    if (p.on_device()) key = launch_key_fold(key, (uint64_t{1} << 63) | p.at);
    if (!m.decoded.ok()) {
      key = launch_key_fold(key, 1);
      continue;
    }
    const TensorMapView& v = m.decoded.view;
    key = launch_key_fold(key, (static_cast<uint64_t>(v.dtype) << 40) | (static_cast<uint64_t>(v.kind) << 32) |
                                   (v.rank << 8) | (v.swizzle << 4) | v.interleave);
    for (uint32_t i = 0; i < v.rank; ++i)
      key = launch_key_fold(launch_key_fold(launch_key_fold(key, v.dims[i]), v.strides[i]),
                            (uint64_t{v.box[i]} << 8) | v.element_strides[i]);
  }
  return key;
}

}  // namespace tmaguard
