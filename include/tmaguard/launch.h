// tmaguard: what a launch hands a kernel, seen as tensor maps. Pure: parameter layout and argument pointers in,
// descriptor bytes and keys out. The shim collects with these functions; the fuzzers drive them with arbitrary
// layouts.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "tmaguard/tensormap.h"

namespace tmaguard {

//! Where a tensor map sits among a kernel's parameters: a whole 128-byte parameter (offset 0), or a 128-byte
//! window at `offset` inside a larger parameter (a CUTLASS Params struct).
struct MapSlot {
  uint32_t param = 0;
  uint32_t offset = 0;
  bool operator==(const MapSlot& o) const { return param == o.param && offset == o.offset; }
};

//! One tensor map of a launch, decoded, with where it came from.
struct TensorMapParam {
  int param_index = -1;
  uint32_t offset = 0;  // byte offset inside the parameter (0 for a whole 128-byte parameter)
  DecodeResult decoded;
  bool embedded = false;  // a window inside a larger parameter (a CUTLASS Params struct)
};

//! The parameter block as the driver reports it (cuFuncGetParamInfo / cuKernelGetParamInfo).
struct ParamLayout {
  std::vector<std::size_t> offsets;
  std::vector<std::size_t> sizes;
};

//! A launch's arguments in either form the driver takes: kernelParams (one pointer per parameter) or the `extra`
//! packed buffer. buffer_size is what the caller declared (CU_LAUNCH_PARAM_BUFFER_SIZE).
struct LaunchArgs {
  void* const* kernel_params = nullptr;
  const uint8_t* buffer = nullptr;
  std::size_t buffer_size = 0;
  bool size_declared = false;  // the caller gave CU_LAUNCH_PARAM_BUFFER_SIZE
};

//! The `extra` list of a launch: BUFFER_POINTER / BUFFER_SIZE pairs up to CU_LAUNCH_PARAM_END (or NULL), read at
//! most `max_pairs` deep. Without a BUFFER_SIZE the declared size is 0: nothing past the pointer is read (the
//! buffer may be 16 bytes long).
LaunchArgs parse_extra(void* const* extra, int max_pairs = 64);

//! The 128 bytes of `slot` for this launch, or nullptr when the caller did not provide them (a NULL parameter
//! pointer, a slot outside the declared buffer or outside the parameter's own size).
inline const uint8_t* map_bytes(const ParamLayout& layout, const MapSlot& slot, const LaunchArgs& args) {
  if (slot.param >= layout.sizes.size() || slot.offset + kTensorMapBytes > layout.sizes[slot.param]) return nullptr;
  if (args.kernel_params) {
    const auto* p = static_cast<const uint8_t*>(args.kernel_params[slot.param]);
    return p ? p + slot.offset : nullptr;
  }
  const std::size_t off = layout.offsets[slot.param] + slot.offset;
  if (!args.buffer || off + kTensorMapBytes > args.buffer_size || off + kTensorMapBytes < off) return nullptr;
  return args.buffer + off;
}

// ---- tensor maps inside larger parameters (CUTLASS 3.x passes one Params struct holding its CUtensorMaps)

//! The parameter block's base address mod 64, as the driver's placement of this kernel's 128-byte parameters
//! reveals it: a CUtensorMap parameter sits at a 64-byte-aligned address (an H200 reported offsets 112, 240, ...
//! from a block at 0x210). nullopt when the kernel has no 128-byte parameter.
std::optional<uint32_t> param_base_mod64(const ParamLayout& layout);

//! Offsets inside parameter `p` where a CUtensorMap can legally sit: every 64-byte-aligned absolute position with
//! 128 bytes left. With the base unknown, the parameter itself is taken as 64-byte aligned (a struct holding an
//! aligned CUtensorMap is).
std::vector<uint32_t> window_offsets(const ParamLayout& layout, std::size_t p, std::optional<uint32_t> base_mod64);

//! Bytes inside a structure are a tensor map only when they decode and their inner box spans a multiple of 16 bytes
//! (every TMA box does), and, in the driver's form, their tile-size word equals the size their own box gives (the
//! driver always writes it so); in a form without that word (CuTe DSL's, device-built), their address is not NULL
//! and the driver would accept their fields. A window of struct fields (pointers, small integers, zeros, padding)
//! essentially never passes (tests/core/test_launch.cpp measures 0 in 4 million).
bool plausible_map(const DecodeResult& d);

//! A per-group template map (CUTLASS's ptr-array/grouped GEMMs keep maps with every dim 1 that device code
//! rewrites before use): not a layout to judge.
bool template_map(const TensorMapView& v);
//! A template map inside a structure (any record with `embedded` and `decoded`): shown, never judged, by a rule
//! or by the generic descriptor checks.
template <typename M>
bool unjudged_template(const M& m) {
  return m.embedded && m.decoded.ok() && template_map(m.decoded.view);
}

//! Every plausible map inside every parameter larger than 128 bytes, for this launch's argument bytes, in
//! parameter order and, inside a parameter, offset order.
std::vector<MapSlot> find_embedded_maps(const ParamLayout& layout, const LaunchArgs& args,
                                        std::optional<uint32_t> base_mod64);

// ---- the clean-launch key: ONE definition, used by the launch fast path and by the full check alike. A key
// that the two computed differently would make the clean cache silently never hit.

//! Folds one map's content hash into a launch key.
inline uint64_t launch_key_fold(uint64_t key, uint64_t map_hash) {
  return key ^ (map_hash + 0x9e3779b97f4a7c15ULL + (key << 6) + (key >> 2));
}
//! The key of a launch: the kernel's identity folded with the content hash of each map, in slot order.
//! `bytes_of(i)` returns map i's bytes (nullptr: not available, and then there is no key). `hash_out`, when
//! given, receives each map's hash for reuse (provenance lookups).
template <typename BytesOf>
inline bool launch_key(uint64_t kernel_identity, std::size_t n, BytesOf&& bytes_of, uint64_t* key,
                       uint64_t* hash_out = nullptr) {
  uint64_t k = kernel_identity;
  for (std::size_t i = 0; i < n; ++i) {
    const uint8_t* p = bytes_of(i);
    if (!p) return false;
    const uint64_t h = content_hash(p);
    if (hash_out) hash_out[i] = h;
    k = launch_key_fold(k, h);
  }
  *key = k;
  return true;
}

}  // namespace tmaguard
