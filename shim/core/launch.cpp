// tmaguard core: reading a launch's arguments (the `extra` form).
#include "tmaguard/launch.h"

#include <functional>

#include <algorithm>
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

bool plausible_map(const DecodeResult& d) {
  if (!d.ok()) return false;
  // Every TMA box's inner span is a multiple of 16 bytes: a struct of zeros with a 1 and a 16 in the right words
  // would otherwise read as a 1-byte, rank-1 map.
  const TensorMapView& v = d.view;
  const uint64_t inner = v.kind == MapKind::kTiled ? v.box[0] : v.channels_per_pixel;
  if (inner * static_cast<uint64_t>(element_size(v.dtype)) % 16 != 0) return false;
  switch (v.encoder) {
    case Encoder::kDriver:  // its tile-size word must match its own box (the driver always writes it so)
      return v.tile_bytes != 0 && v.tile_bytes == v.computed_tile_bytes();
    case Encoder::kCuteDsl:
    case Encoder::kDeviceBuilt:
      // Forms without the driver's redundant words: inside a structure, only a map the driver itself would accept,
      // at a non-NULL address, counts (decode() already demanded a TMA box).
      return v.address != 0 && !validate_encode(v.encode_args());
    default:
      return false;
  }
}

bool template_map(const TensorMapView& v) { return template_args(v.encode_args()); }

StructSearch search_structs(const ParamLayout& layout, const LaunchArgs& args) {
  StructSearch out;
  for (std::size_t p = 0; p < layout.sizes.size(); ++p) {
    if (layout.sizes[p] <= kTensorMapBytes) continue;
    std::vector<MapPlace> empty;  // this parameter's empty places
    const bool watchable = layout.sizes[p] % kMapStructAlignment == 0;
    for (const uint32_t r : window_offsets(layout, p)) {
      const MapPlace place{static_cast<uint32_t>(p), r};
      const uint8_t* b = map_bytes(layout, place, args);
      if (!b) {  // the caller did not provide this parameter's bytes (or not all of them)
        out.incomplete = true;
        break;
      }
      if (may_hold_map(b) && plausible_map(decode(b)))
        out.maps.push_back(place);
      else if (watchable && still_empty(layout, place, args))
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
      DecodeResult d = decode(b, Convention::kDevice);
      if (plausible_map(d)) {
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
