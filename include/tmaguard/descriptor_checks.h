// tmaguard: the built-in check run on every tensor-map parameter. Pure: decoded bytes in, findings out.
// Kernel-specific rules (the FA4 guard among them) live in rules.h.
#pragma once

#include <optional>
#include <string_view>
#include <vector>

#include "tmaguard/finding.h"
#include "tmaguard/launch.h"

namespace tmaguard {

//! The GPU a launch runs on: compute capability of the current context's device (0.0: unknown), and the driver's
//! version as cuDriverGetVersion gives it (13010 for 13.1; 0: unknown).
struct Arch {
  int major = 0, minor = 0;
  int driver = 0;
  bool known() const { return major > 0; }
  //! The architecture the driver limits tmaguard encodes were measured on (an H200, sm_90, driver 580).
  bool measured() const { return major == 9; }
};

//! The span under which a large-tensor flag set by an affected driver may make a kernel fault: 128 KiB.
inline constexpr uint64_t kLargeFlagSpan = 128 * 1024;
//! A GPU and driver that NVIDIA's 595.71.05 release notes (known issues) name: Blackwell (compute capability 10.0 and
//! later) with a driver up to 13.1 (13010), or a CUDA 13.2 / 13.3 forward-compatibility driver (13020, 13030), whose
//! cuTensorMapEncodeTiled / Im2col* may set the large-tensor flag (bit 85: word 2 bit 21) over a small tensor that is
//! not dense; kernels then fault at random (illegal address, XID 13). An unknown GPU or driver is not named.
bool large_flag_platform(const Arch& arch);
//! The map's footprint in bytes when it carries the large-tensor flag over less than kLargeFlagSpan on such a platform
//! (the map CUTLASS 4.3.4 and Triton clear bit 85 of after encoding); nullopt otherwise.
std::optional<uint64_t> large_flag_hazard(const TensorMapView& v, const Arch& arch);

//! Generic sanity of one decoded descriptor: what the real driver would have refused to encode.
//!
//! Architecture policy: a finding is an error only where it is provably wrong for the GPU the launch runs on. A
//! NULL global address is wrong everywhere. The driver's encode rules were measured on an H200 (sm_90): they are
//! errors on sm_90 and warnings on any other or unknown architecture (Blackwell descriptors may carry features the
//! H200's driver does not know). Descriptors with Blackwell-only features (swizzle-atomicity bits 19-20 of word 2) or
//! the large-tensor flag (bit 21, never measured against the driver's rules), im2col-family maps (im2col-wide is
//! indistinguishable from im2col in the bytes) and unknown element types never draw an error from these checks.
//! One exception is the flag's own hazard: set over a tensor spanning under 128 KiB on a platform the release notes
//! name (large_flag_hazard) it is tmap-large-flag-small-tensor, an error: the kernel may fault at random.
//!
//! Only the layout fields are judged, the ones the TMA unit reads: the words a form fills or leaves empty (the tile-
//! size and swizzle-span words, word 2 bit 1) decide whether bytes count as a map where maps are only searched for
//! (launch.h: read_map), never what a map is judged to be.
void check_descriptor(std::string_view kernel, const TensorMapParam& map, const Arch& arch, std::vector<Finding>& out);

}  // namespace tmaguard
