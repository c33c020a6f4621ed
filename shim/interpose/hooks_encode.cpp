// tmaguard shim: cuTensorMapEncode* and cuTensorMapReplaceAddress wrappers. They gather an encode's arguments and
// record its bytes' provenance (provenance.h); what is said about an encode is report/encode_notes.h's. The driver's
// return code is never changed; its bytes only by TMAGUARD_REPAIR=large-tensor-flag (encode_notes.h).
#include "driver/device_arch.h"
#include "driver/provenance.h"
#include "report/encode_notes.h"
#include "runtime/intercept.h"
#include "tmaguard/tensormap.h"

namespace tmaguard {
namespace {

// Success: remember the bytes and, the first time these bytes are seen from this entry point, say what is suspect in
// the arguments. Failure: explain it. The arguments are gathered only for new bytes or a failure, never for a repeat
// encode (Triton re-encodes every launch).
template <typename Gather>
void after_encode(const Intercepted& call, EncodeApi api, CUresult rc, CUtensorMap* map, Gather&& gather) {
  if (rc != CUDA_SUCCESS && rc != CUDA_ERROR_INVALID_VALUE) return;
  if (!call.active()) return;
  try {
    if (rc != CUDA_SUCCESS) return note_encode_refused(api, rc, gather());
    if (!map) return;
    if (config().repair_large_tensor_flag) repair_large_flag(api, map, current_arch());
    const uint64_t h = provenance_hash(reinterpret_cast<const uint8_t*>(map));
    const Provenance seen = provenance_lookup(h);
    if (seen.api == api && !seen.replaced) return;
    provenance_record(h, {api, false});
    note_encode_accepted(api, *map, gather());
  } catch (...) {
    // Best effort: the encode result stands either way.
  }
}

}  // namespace
}  // namespace tmaguard

using namespace tmaguard;

CUresult TG_WRAPPER(cuTensorMapEncodeTiled)(CUtensorMap* map, CUtensorMapDataType dt, cuuint32_t rank, void* addr,
                                            const cuuint64_t* dims, const cuuint64_t* strides, const cuuint32_t* box,
                                            const cuuint32_t* es, CUtensorMapInterleave il, CUtensorMapSwizzle sw,
                                            CUtensorMapL2promotion l2, CUtensorMapFloatOOBfill oob) {
  TG_ENTER(cuTensorMapEncodeTiled);
  const CUresult rc = real(map, dt, rank, addr, dims, strides, box, es, il, sw, l2, oob);
  after_encode(call, EncodeApi::kTiled, rc, map, [&] {
    EncodeArgs a =
        encode_args(MapKind::kTiled, dt, rank, reinterpret_cast<uint64_t>(addr), dims, strides, es, il, sw, l2, oob);
    for (uint32_t i = 0; box && i < rank && i < kMaxRank; ++i) a.box[i] = box[i];
    return a;
  });
  return rc;
}

CUresult TG_WRAPPER(cuTensorMapEncodeIm2col)(CUtensorMap* map, CUtensorMapDataType dt, cuuint32_t rank, void* addr,
                                             const cuuint64_t* dims, const cuuint64_t* strides, const int* lower,
                                             const int* upper, cuuint32_t cpp, cuuint32_t ppc, const cuuint32_t* es,
                                             CUtensorMapInterleave il, CUtensorMapSwizzle sw, CUtensorMapL2promotion l2,
                                             CUtensorMapFloatOOBfill oob) {
  TG_ENTER(cuTensorMapEncodeIm2col);
  const CUresult rc = real(map, dt, rank, addr, dims, strides, lower, upper, cpp, ppc, es, il, sw, l2, oob);
  after_encode(call, EncodeApi::kIm2col, rc, map, [&] {
    EncodeArgs a =
        encode_args(MapKind::kIm2col, dt, rank, reinterpret_cast<uint64_t>(addr), dims, strides, es, il, sw, l2, oob);
    for (uint32_t i = 0; i + 2 < rank && i < 3; ++i) {
      if (lower) a.lower_corner[i] = lower[i];
      if (upper) a.upper_corner[i] = upper[i];
    }
    a.channels_per_pixel = cpp;
    a.pixels_per_column = ppc;
    return a;
  });
  return rc;
}

CUresult TG_WRAPPER(cuTensorMapEncodeIm2colWide)(CUtensorMap* map, CUtensorMapDataType dt, cuuint32_t rank, void* addr,
                                                 const cuuint64_t* dims, const cuuint64_t* strides, int lower_w,
                                                 int upper_w, cuuint32_t cpp, cuuint32_t ppc, const cuuint32_t* es,
                                                 CUtensorMapInterleave il, CUtensorMapIm2ColWideMode mode,
                                                 CUtensorMapSwizzle sw, CUtensorMapL2promotion l2,
                                                 CUtensorMapFloatOOBfill oob) {
  TG_ENTER(cuTensorMapEncodeIm2colWide);
  const CUresult rc = real(map, dt, rank, addr, dims, strides, lower_w, upper_w, cpp, ppc, es, il, mode, sw, l2, oob);
  after_encode(call, EncodeApi::kIm2colWide, rc, map, [&] {
    EncodeArgs a = encode_args(MapKind::kIm2colWide, dt, rank, reinterpret_cast<uint64_t>(addr), dims, strides, es, il,
                               sw, l2, oob);
    a.lower_corner[0] = lower_w;
    a.upper_corner[0] = upper_w;
    a.channels_per_pixel = cpp;
    a.pixels_per_column = ppc;
    a.wide_mode = mode;
    return a;
  });
  return rc;
}

CUresult TG_WRAPPER(cuTensorMapReplaceAddress)(CUtensorMap* map, void* addr) {
  TG_ENTER(cuTensorMapReplaceAddress);
  const uint64_t before = map ? provenance_hash(reinterpret_cast<const uint8_t*>(map)) : 0;
  const CUresult rc = real(map, addr);
  if (rc == CUDA_SUCCESS && map && call.active()) {
    const Provenance p = provenance_lookup(before);
    if (p.api != EncodeApi::kNone) provenance_record(provenance_hash(reinterpret_cast<const uint8_t*>(map)), {p.api, true});
  }
  return rc;
}
