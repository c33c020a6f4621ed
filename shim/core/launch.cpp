// tmaguard core: reading a launch's arguments (the `extra` form).
#include "tmaguard/launch.h"

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

std::optional<uint32_t> param_base_mod64(const ParamLayout& layout) {
  for (std::size_t i = 0; i < layout.sizes.size(); ++i)
    if (layout.sizes[i] == kTensorMapBytes) return static_cast<uint32_t>((64 - layout.offsets[i] % 64) % 64);
  return std::nullopt;
}

std::vector<uint32_t> window_offsets(const ParamLayout& layout, std::size_t p, std::optional<uint32_t> base_mod64) {
  std::vector<uint32_t> out;
  if (p >= layout.sizes.size() || layout.sizes[p] < kTensorMapBytes) return out;
  const std::size_t first = base_mod64 ? (64 - (*base_mod64 + layout.offsets[p]) % 64) % 64 : 0;
  for (std::size_t r = first; r + kTensorMapBytes <= layout.sizes[p]; r += 64) out.push_back(static_cast<uint32_t>(r));
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

bool template_map(const TensorMapView& v) {
  for (uint32_t i = 0; i < v.rank; ++i)
    if (v.dims[i] != 1) return false;
  return v.rank > 0;
}

std::vector<MapSlot> find_embedded_maps(const ParamLayout& layout, const LaunchArgs& args,
                                        std::optional<uint32_t> base_mod64) {
  std::vector<MapSlot> out;
  for (std::size_t p = 0; p < layout.sizes.size(); ++p) {
    if (layout.sizes[p] <= kTensorMapBytes) continue;
    for (const uint32_t r : window_offsets(layout, p, base_mod64)) {
      const MapSlot slot{static_cast<uint32_t>(p), r};
      const uint8_t* b = map_bytes(layout, slot, args);
      if (!b) break;  // the caller did not provide this parameter's bytes
      if (plausible_map(decode(b))) out.push_back(slot);
    }
  }
  return out;
}

}  // namespace tmaguard
