// tmaguard: the built-in check run on every tensor-map parameter. Pure: decoded bytes in, findings out.
// Kernel-specific rules (the FA4 guard among them) live in rules.h.
#pragma once

#include <string_view>
#include <vector>

#include "tmaguard/finding.h"
#include "tmaguard/launch.h"

namespace tmaguard {

//! The GPU a launch runs on: compute capability of the current context's device (0.0: unknown).
struct Arch {
  int major = 0, minor = 0;
  bool known() const { return major > 0; }
  //! The architecture the driver limits tmaguard encodes were measured on (an H200, sm_90, driver 580).
  bool measured() const { return major == 9; }
};

//! Generic sanity of one decoded descriptor: what the real driver would have refused to encode.
//!
//! Architecture policy: a finding is an error only where it is provably wrong for the GPU the launch runs on. A
//! NULL global address is wrong everywhere. The driver's encode rules were measured on an H200 (sm_90): they are
//! errors on sm_90 and warnings on any other or unknown architecture (Blackwell descriptors may carry features the
//! H200's driver does not know). Descriptors with Blackwell-only features (swizzle-atomicity bits 19-20 of word 2) or
//! the large-tensor flag (bit 21, never measured against the driver's rules), im2col-family maps (im2col-wide is
//! indistinguishable from im2col in the bytes) and unknown element types never draw an error from these checks.
//!
//! Only the layout fields are judged, the ones the TMA unit reads: the words a form fills or leaves empty (the tile-
//! size and swizzle-span words, word 2 bit 1) decide whether bytes count as a map where maps are only searched for
//! (launch.h: read_map), never what a map is judged to be.
void check_descriptor(std::string_view kernel, const TensorMapParam& map, const Arch& arch, std::vector<Finding>& out);

}  // namespace tmaguard
