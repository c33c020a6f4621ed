// libFuzzer target: arbitrary 128-byte descriptors through decode, the content hash and the generic descriptor
// check, and arbitrary encode arguments through validate/encode/decode (an accepted encode must round-trip, in the
// driver's form and in CuTe DSL's and the device-built one).
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "tmaguard/descriptor_checks.h"
#include "tmaguard/launch.h"
#include "tmaguard/tensormap.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size >= 128) {
    const tmaguard::TensorMapParam p{{1, 0}, tmaguard::decode(data)};
    (void)tmaguard::content_hash(data);
    (void)tmaguard::provenance_hash(data);
    std::vector<tmaguard::Finding> out;
    for (const int major : {0, 9, 10}) tmaguard::check_descriptor("fuzz", p, tmaguard::Arch{major, 0}, out);
    // Where only the fields the TMA unit reads count, bytes the strict convention accepts read the same. The strict
    // convention takes the two form words (16: tile size, 18: swizzle span) with any value (a wrong one only makes
    // the encoder unknown); the hardware one names a wrong one among the ignored words: those two bits may differ.
    const tmaguard::TensorMapParam hw{{1, 0}, tmaguard::decode(data, tmaguard::Convention::kHardware)};
    if (p.decoded.ok()) {
      const auto &a = p.decoded.view, &b = hw.decoded.view;
      if (!hw.decoded.ok() || a.address != b.address || a.rank != b.rank || a.dtype != b.dtype || a.dims != b.dims ||
          a.strides != b.strides || a.box != b.box || a.element_strides != b.element_strides || a.swizzle != b.swizzle ||
          a.interleave != b.interleave || (b.ignored_words & ~((1u << 16) | (1u << 18))) != 0)
        std::abort();
    }
    for (const int major : {0, 9, 10}) tmaguard::check_descriptor("fuzz", hw, tmaguard::Arch{major, 0}, out);
    // Where maps are only searched for, a map in a form without the driver's redundant words can draw no error.
    for (const auto e : {tmaguard::MapEvidence::kParameter, tmaguard::MapEvidence::kDeviceMemory}) {
      const tmaguard::TensorMapParam m{{1, 0}, tmaguard::read_map(data, e)};
      if (!m.decoded.ok() || m.decoded.view.encoder == tmaguard::Encoder::kDriver) continue;
      std::vector<tmaguard::Finding> found;
      tmaguard::check_descriptor("fuzz", m, tmaguard::Arch{9, 0}, found);
      for (const auto& f : found)
        if (f.severity == tmaguard::Severity::kError) std::abort();
    }
  }
  tmaguard::EncodeArgs a;
  if (size < 8) return 0;
  uint64_t s = 0;
  std::memcpy(&s, data, 8);
  auto next = [&](uint64_t mod) {
    s = s * 6364136223846793005ULL + 1442695040888963407ULL;
    return (s >> 17) % mod;
  };
  a.kind = static_cast<tmaguard::MapKind>(next(3));
  a.dtype = static_cast<uint32_t>(next(18));
  a.rank = static_cast<uint32_t>(next(7));
  a.address = next(4) == 0 ? next(1 << 20) : (next(1ULL << 40) << 4);
  for (int i = 0; i < 5; ++i) {
    a.dims[i] = next(3) == 0 ? next(1ULL << 33) : 1 + next(4096);
    a.strides[i] = next(5) == 0 ? next(1ULL << 41) : 16 * (1 + next(1 << 20));
    a.box[i] = static_cast<uint32_t>(next(300));
    a.element_strides[i] = static_cast<uint32_t>(next(10));
  }
  for (int i = 0; i < 3; ++i) {
    a.lower_corner[i] = static_cast<int32_t>(next(70000)) - 35000;
    a.upper_corner[i] = static_cast<int32_t>(next(70000)) - 35000;
  }
  a.channels_per_pixel = static_cast<uint32_t>(next(300));
  a.pixels_per_column = static_cast<uint32_t>(next(1100));
  a.interleave = static_cast<uint32_t>(next(4));
  a.swizzle = static_cast<uint32_t>(next(8));
  a.l2_promotion = static_cast<uint32_t>(next(5));
  a.oob_fill = static_cast<uint32_t>(next(3));
  a.wide_mode = static_cast<uint32_t>(next(3));
  uint8_t bytes[128];
  if (tmaguard::encode(a, bytes) != 0) return 0;
  const tmaguard::DecodeResult d = tmaguard::decode(bytes);
  if (!d.ok() || d.view.rank != a.rank || d.view.address != a.address || d.view.dims[0] != a.dims[0] ||
      d.view.swizzle != a.swizzle || d.view.tile_bytes != d.view.computed_tile_bytes())
    std::abort();  // an encode the stand-in accepts must decode to its own arguments
  // And in the forms other encoders write: named by their encoder, the same layout fields.
  for (const auto form : {tmaguard::Encoder::kCuteDsl, tmaguard::Encoder::kDeviceBuilt}) {
    if (tmaguard::encode_in_form(form, a, bytes) != 0) continue;
    const tmaguard::DecodeResult f = tmaguard::decode(bytes);
    if (!f.ok() || f.view.encoder != form || f.view.rank != a.rank || f.view.dims[0] != a.dims[0] ||
        f.view.box[0] != a.box[0] || f.view.swizzle != a.swizzle || (a.rank > 1 && f.view.strides[0] != a.strides[0]))
      std::abort();
  }
  return 0;
}
