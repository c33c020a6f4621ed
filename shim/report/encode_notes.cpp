// tmaguard shim: the encode notices (encode_notes.h).
#include "report/encode_notes.h"

#include <fmt/format.h>

#include <atomic>
#include <cstring>
#include <optional>

#include "process/counters.h"
#include "driver/allocations.h"
#include "report/reporter.h"

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

// Each (entry point, kind of warning) is reported once per process: the check of a repeat costs one atomic load (no
// formatting).
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

// The arguments the bounds lint judges. A ptr-shift ragged map (FA4 SM90's varlen dK/dV) points 2^30 rows before its
// tensor by design: the lint judges the tensor under it, whose length per sequence no map carries (one row of the
// ragged mode).
EncodeArgs bounds_args(const CUtensorMap& map, const EncodeArgs& args) {
  EncodeArgs a = args;
  if (const DecodeResult d = decode(reinterpret_cast<const uint8_t*>(&map)); d.ok())
    if (const std::optional<RaggedTensor> r = ragged_tensor(d.view); r && r->form == Ragged::kPtrShift) {
      a = r->tensor.encode_args();
      a.dims[r->dim] = 1;
    }
  return a;
}

// Where the map's bytes lie against the driver's allocations. A map built on 64-bit address wraparound (Triton's
// ragged descriptors) gets no bounds lint at all, nor does a template (every dim 1) whose address device code
// replaces before use.
void lint_bounds(EncodeApi api, const EncodeArgs& a) {
  const std::optional<ByteRange> span = map_range(a);
  if (!a.address || !span || template_args(a)) return;
  Range r;
  const Allocation where = allocation_of(a.address, &r);
  if (where == Allocation::kNotAllocated) {
    warn_once(api, kNotAllocated, [&] {
      return fmt::format(
          "globalAddress 0x{:x} is not memory the CUDA driver allocated (a host, freed or foreign pointer?)", a.address);
    });
  } else if (where == Allocation::kFound && span->end > mapped_through(r, span->end).end) {
    warn_once(api, kBeyondAllocation, [&] {
      return fmt::format("the map spans [0x{:x}, 0x{:x}), {} bytes past the end of its allocation [0x{:x}, 0x{:x})",
                         span->first, span->end, span->end - r.end, r.start, r.end);
    });
  }
}

}  // namespace

void note_encode_accepted(EncodeApi api, const CUtensorMap& map, const EncodeArgs& args) {
  for (const EncodeProblem& p : encode_warnings(args)) warn_once(api, p.kind, [&] { return p.message; });
  lint_bounds(api, bounds_args(map, args));
}

void repair_large_flag(EncodeApi api, CUtensorMap* map, const Arch& arch) {
  auto* bytes = reinterpret_cast<uint8_t*>(map);
  const DecodeResult d = decode(bytes);
  if (!d.ok()) return;
  const std::optional<uint64_t> span = large_flag_hazard(d.view, arch);
  if (!span) return;
  uint64_t word;  // bit 85 is bit 21 of the second 64-bit word
  std::memcpy(&word, bytes + 8, 8);
  word &= ~(uint64_t{1} << 21);
  std::memcpy(bytes + 8, &word, 8);
  count_large_flag_cleared();
  static std::atomic<bool> said{false};
  if (said.exchange(true, std::memory_order_relaxed)) return;
  report_notice(Notice::kLargeFlagCleared, "large-tensor-flag",
                fmt::format("{} set the large-tensor flag (bit 85) on a tensor spanning {} bytes, on sm_{}{} with driver "
                            "{}: cleared, as CUTLASS 4.3.4 does (TMAGUARD_REPAIR=large-tensor-flag); the summary counts "
                            "every map cleared",
                            encode_api_name(api), *span, arch.major, arch.minor, arch.driver));
}

void note_encode_refused(EncodeApi api, CUresult rc, const EncodeArgs& args) {
  const EncodeProblem p = validate_encode(args);
  const std::string why = p ? p.message : "no documented requirement explains it";
  report_notice(
      Notice::kEncodeRejected, fmt::format("{}|{}", encode_api_name(api), why),
      fmt::format("{} returned {} ({}): {}", encode_api_name(api), static_cast<int>(rc), result_name(rc), why));
}

}  // namespace tmaguard
