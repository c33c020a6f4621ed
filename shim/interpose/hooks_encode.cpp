// tmaguard shim: cuTensorMapEncode* and cuTensorMapReplaceAddress wrappers. They record provenance (provenance.h)
// and explain in one line an encode that failed or that the driver accepted although its arguments are almost
// certainly a bug. The driver's return code is never changed.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <atomic>
#include <cstring>
#include <mutex>


#include "driver/allocations.h"
#include "runtime/intercept.h"
#include "driver/provenance.h"
#include "report/reporter.h"
#include "runtime/runtime.h"
#include "tmaguard/tensormap.h"

namespace tmaguard {
namespace {

const char* result_name(CUresult rc) {
  switch (rc) {
    case CUDA_ERROR_INVALID_VALUE: return "CUDA_ERROR_INVALID_VALUE";
    case CUDA_ERROR_NOT_INITIALIZED: return "CUDA_ERROR_NOT_INITIALIZED";
    case CUDA_ERROR_INVALID_CONTEXT: return "CUDA_ERROR_INVALID_CONTEXT";
    default: return "error";
  }
}

// Each (entry point, kind of warning) is reported once per process: a job that encodes thousands of host-pointer
// maps gets one line, and the check of a repeat costs one atomic load (no formatting).
constexpr int kEncodeApis = 4;  // EncodeApi values
std::atomic<bool> g_warned[kEncodeApis][kEncodeWarningKinds];

template <typename Message>
void warn_once(EncodeApi api, EncodeWarning kind, Message&& message) {
  const int a = static_cast<int>(api);
  if (a < 0 || a >= kEncodeApis || kind <= kNoWarning || kind >= kEncodeWarningKinds) return;
  if (g_warned[a][kind].exchange(true, std::memory_order_relaxed)) return;
  report_notice(Notice::kEncodeWarning, fmt::format("{}|{}", encode_api_name(api), kind),
                fmt::format("{} accepted, but {}", encode_api_name(api), message()));
}

// Success: remember the bytes and, the first time these bytes are seen, warn about arguments the driver accepts
// but that are almost certainly bugs. Failure: say in one line which documented requirement the arguments break.
// The arguments are gathered only for new bytes or a failure, never for a repeat encode (Triton re-encodes every
// launch).
template <typename Gather>
void after_encode(const Intercepted& call, EncodeApi api, CUresult rc, const CUtensorMap* map, Gather&& gather) {
  if (rc != CUDA_SUCCESS && rc != CUDA_ERROR_INVALID_VALUE) return;
  if (!call.active()) return;
  try {
    if (rc == CUDA_SUCCESS) {
      if (!map) return;
      const uint64_t h = provenance_hash(reinterpret_cast<const uint8_t*>(map));
      const Provenance seen = provenance_lookup(h);
      if (seen.api == api && !seen.replaced) return;
      provenance_record(h, {api, false});
      EncodeArgs a = gather();
      for (const EncodeProblem& p : encode_warnings(a)) warn_once(api, p.kind, [&] { return p.message; });
      // A ptr-shift ragged map (FA4 SM90's varlen dK/dV) points 2^30 rows before its tensor by design: the bounds
      // lint judges the tensor under it, whose length per sequence no map carries (one row of the ragged mode).
      if (const DecodeResult d = decode(reinterpret_cast<const uint8_t*>(map)); d.ok())
        if (const std::optional<RaggedTensor> r = ragged_tensor(d.view); r && r->form == Ragged::kPtrShift) {
          a = r->tensor.encode_args();
          a.dims[r->dim] = 1;
        }
      // A map built on 64-bit address wraparound (Triton's ragged descriptors) gets no bounds lint at all, nor does
      // a template (every dim 1) whose address device code replaces before use.
      const std::optional<ByteRange> span = map_range(a);
      if (!a.address || !span || template_args(a)) return;
      Range r;
      const Allocation where = allocation_of(a.address, &r);
      if (where == Allocation::kNotAllocated) {
        warn_once(api, kNotAllocated, [&] {
          return fmt::format(
              "globalAddress 0x{:x} is not memory the CUDA driver allocated (a host, freed or foreign pointer?)",
              a.address);
        });
      } else if (where == Allocation::kFound && span->end > mapped_through(r, span->end).end) {
        warn_once(api, kBeyondAllocation, [&] {
          return fmt::format("the map spans [0x{:x}, 0x{:x}), {} bytes past the end of its allocation [0x{:x}, 0x{:x})",
                             span->first, span->end, span->end - r.end, r.start, r.end);
        });
      }
      return;
    }
    const EncodeProblem p = validate_encode(gather());
    const std::string why = p ? p.message : "no documented requirement explains it";
    report_notice(
        Notice::kEncodeRejected, fmt::format("{}|{}", encode_api_name(api), why),
        fmt::format("{} returned {} ({}): {}", encode_api_name(api), static_cast<int>(rc), result_name(rc), why));
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
