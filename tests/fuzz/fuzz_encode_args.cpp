// libFuzzer target: arbitrary cuTensorMapEncode* arguments (every field any value) through the encode explainer's
// arithmetic: validate_encode, encode_warnings, aliasing, footprint_bytes and map_range must never overflow silently
// (UBSan), crash, or claim a range that wraps.
#include "input.h"
#include "tmaguard/tensormap.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzInput in{data, size};
  tmaguard::EncodeArgs a;
  a.kind = static_cast<tmaguard::MapKind>(in.take<uint8_t>() % 3);
  a.dtype = in.take<uint32_t>() % 20;
  a.rank = in.take<uint32_t>() % 8;
  a.address = in.take<uint64_t>();
  for (int i = 0; i < tmaguard::kMaxRank; ++i) {
    a.dims[i] = in.take<uint64_t>();
    a.strides[i] = in.take<uint64_t>();
    a.box[i] = in.take<uint32_t>();
    a.element_strides[i] = in.take<uint32_t>();
  }
  for (int i = 0; i < 3; ++i) {
    a.lower_corner[i] = in.take<int32_t>();
    a.upper_corner[i] = in.take<int32_t>();
  }
  a.channels_per_pixel = in.take<uint32_t>();
  a.pixels_per_column = in.take<uint32_t>();
  a.interleave = in.take<uint8_t>() % 4;
  a.swizzle = in.take<uint8_t>() % 8;
  a.l2_promotion = in.take<uint8_t>() % 5;
  a.oob_fill = in.take<uint8_t>() % 3;
  a.wide_mode = in.take<uint8_t>() % 3;
  (void)tmaguard::validate_encode(a);
  (void)tmaguard::encode_warnings(a);
  (void)tmaguard::aliasing(a);
  (void)tmaguard::footprint_bytes(a);
  if (const auto r = tmaguard::map_range(a); r && r->end < r->first) __builtin_trap();
  uint8_t out[tmaguard::kTensorMapBytes];
  if (tmaguard::encode(a, out) == 0) (void)tmaguard::decode(out);
  return 0;
}
