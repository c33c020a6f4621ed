// tmaguard: what a launch hands a kernel, seen as tensor maps. Pure: parameter layout and argument pointers in,
// descriptor bytes and layout keys out. The shim's own workings (the struct search, the launch key) are in
// shim/core/struct_search.h and shim/core/launch_key.h.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "tmaguard/place.h"
#include "tmaguard/tensormap.h"

namespace tmaguard {

//! One tensor map of a launch, decoded, with where it came from.
struct TensorMapParam {
  MapPlace place;
  DecodeResult decoded;
  bool embedded = false;    // a window inside a larger parameter (a CUTLASS Params struct)
  bool named_only = false;  // a place a rule names ("param:N+OFFSET") that the search did not find a map at: read on
                            // every launch, but not counted among the launch's maps (rules' map order)
};

//! A kernel's parameters take at most this many bytes (CUDA 12.1 and later), so at most this many parameters.
inline constexpr long kParamSpaceBytes = 32764;
inline constexpr long kMaxParamIndex = kParamSpaceBytes - 1;

//! The parameter block as the driver reports it (cuFuncGetParamInfo / cuKernelGetParamInfo).
struct ParamLayout {
  std::vector<std::size_t> offsets;
  std::vector<std::size_t> sizes;
};

//! A launch's parameters in either form the driver takes, and the one way to read them: kernelParams (one pointer
//! per parameter) or the `extra` packed buffer (buffer_size: what the caller declared with
//! CU_LAUNCH_PARAM_BUFFER_SIZE). Every reader of a launch's parameters (the memo's compare, the full check, the
//! struct search, the device audit) goes through bytes() or param().
struct LaunchArgs {
  void* const* kernel_params = nullptr;
  const uint8_t* buffer = nullptr;
  std::size_t buffer_size = 0;
  bool size_declared = false;  // the caller gave CU_LAUNCH_PARAM_BUFFER_SIZE

  //! The caller's kernelParams as they are (nullptr: the extra form).
  static LaunchArgs of_params(void* const* kernel_params) { return LaunchArgs{kernel_params, nullptr, 0, true}; }
  //! Whether bytes() can read anything: kernelParams, or a buffer whose size the caller declared (tmaguard never
  //! reads past what the caller declares).
  bool readable() const { return kernel_params || (buffer && size_declared); }
  //! The `n` bytes at `place` (a parameter place) for this launch, or nullptr when the caller did not provide them
  //! (a NULL parameter pointer, a place outside the declared buffer or outside the parameter's own size).
  const uint8_t* bytes(const ParamLayout& layout, const MapPlace& place, std::size_t n) const {
    if (place.param >= layout.sizes.size() || place.offset + n > layout.sizes[place.param]) return nullptr;
    if (kernel_params) {
      const auto* p = static_cast<const uint8_t*>(kernel_params[place.param]);
      return p ? p + place.offset : nullptr;
    }
    const std::size_t off = layout.offsets[place.param] + place.offset;
    if (!buffer || off + n > buffer_size || off + n < off) return nullptr;
    return buffer + off;
  }
  //! The 128 bytes of a map's place for this launch (bytes()).
  const uint8_t* map(const ParamLayout& layout, const MapPlace& place) const {
    return bytes(layout, place, kTensorMapBytes);
  }
  //! `offset` bytes into parameter `i` through kernelParams, unchecked: only for places already known to lie inside
  //! their parameter (the memo's). nullptr in the extra form or for a NULL parameter pointer.
  __attribute__((always_inline)) const uint8_t* param(std::size_t i, std::size_t offset = 0) const {
    if (!kernel_params) return nullptr;
    const auto* p = static_cast<const uint8_t*>(kernel_params[i]);
    return p ? p + offset : nullptr;
  }
};

//! The `extra` list of a launch: BUFFER_POINTER / BUFFER_SIZE pairs up to CU_LAUNCH_PARAM_END (or NULL), read at
//! most `max_pairs` deep. Without a BUFFER_SIZE the declared size is 0: nothing past the pointer is read (the
//! buffer may be 16 bytes long).
LaunchArgs parse_extra(void* const* extra, int max_pairs = 64);

// ---- tensor maps inside larger parameters (CUTLASS 3.x passes one Params struct holding its CUtensorMaps)

//! Offsets inside parameter `p` where a CUtensorMap can sit: every multiple of 64 with 128 bytes left. A structure
//! holding a CUtensorMap member is at least 64-byte aligned (CUtensorMap is alignas(64) in CUDA 12, alignas(128) in
//! CUDA 13), so the driver places it at a 64-byte-aligned address and its maps sit at multiples of 64 from its
//! start, whatever the parameter block's own base (an H200 puts PyTorch's grouped GEMM Params at offset 112 of a
//! block at 0x210, its maps at +128, +384, +1152). Nothing here depends on any other kernel.
std::vector<uint32_t> window_offsets(const ParamLayout& layout, std::size_t p);

//! How much bytes must prove before they count as a tensor map, by where they sit. A window that is not a map must
//! never become an error-severity finding (a float array or padding aborting a healthy job), and a map where one is
//! known to sit must never escape judgment because of bytes the TMA unit does not read:
//!   kKnown         a kernel a rule names (its 128-byte parameters, the maps found in its structures, the places its
//!                  rules name): the fields the TMA unit reads, as it reads them (Convention::kHardware). A rule that
//!                  names a kernel declares its 128-byte parameters tensor maps.
//!   kParameter     a whole 128-byte parameter of a kernel no rule names (only searched): strict; in the driver's form
//!                  its tile-size word must match its own box, in any other form it must hold a non-NULL address and
//!                  fields the driver would encode (so it cannot draw an error from the generic checks)
//!   kInStruct      a 64-byte-aligned window inside a larger parameter: strict and the driver's form only, its
//!                  tile-size word right (CUTLASS's Params; no other encoder is known to put maps in structures)
//!   kDeviceMemory  device memory read back after a kernel: the device convention (stale stride words allowed), any
//!                  known form, as kParameter (Triton's device-built descriptors)
//! Everywhere, in a form other than the driver's: NULL address, every dim 1 and every stride 0 (a region of zeros
//! with a stray value) is no map. (The driver's form has its two redundant words; CUTLASS's per-group templates,
//! NULL and every dim 1, are driver-encoded maps.)
enum class MapEvidence : uint8_t { kKnown, kParameter, kInStruct, kDeviceMemory };
const char* to_string(MapEvidence e);
//! Decodes 128 bytes under the rules of `where` (not_a_map says why bytes do not count).
DecodeResult read_map(const uint8_t bytes[kTensorMapBytes], MapEvidence where);

//! A per-group template map (CUTLASS's ptr-array/grouped GEMMs keep maps with every dim 1 that device code
//! rewrites before use): not a layout to judge.
bool template_map(const TensorMapView& v);
//! A template map inside a structure (any record with `embedded` and `decoded`): shown, never judged, by a rule
//! or by the generic descriptor checks.
template <typename M>
bool unjudged_template(const M& m) {
  return m.embedded && m.decoded.ok() && template_map(m.decoded.view);
}

// ---- tensor maps in device memory (read back after the kernel: the shim's device_audit)

//! The most bytes past a pointer the device audit reads (TMAGUARD_DEVICE_READ_BYTES' bound; a rule cannot name a
//! device place further than this).
inline constexpr std::size_t kDeviceReadMaxBytes = 65536;

//! The tensor maps in `n` bytes read from device address `address` (bytes[0] is at `address`): every 128-byte window
//! at a 64-byte-aligned device address that reads as a map under MapEvidence::kDeviceMemory (any known form,
//! device-built included; stride words past the rank may hold a template's values). Returns each one's
//! offset from `address`; a window that overlaps an earlier map is not looked at.
struct DeviceWindow {
  uint32_t at;
  DecodeResult decoded;
};
std::vector<DeviceWindow> find_device_maps(const uint8_t* bytes, std::size_t n, uint64_t address);

//! The key of a (kernel, tensor-map layout): every map's place and layout fields, never its address (so that
//! re-allocations do not make a layout new). Inspect mode writes one record per key, for maps in the parameters and
//! maps read back from device memory alike.
uint64_t layout_key(std::string_view kernel, const std::vector<TensorMapParam>& maps);

}  // namespace tmaguard
