// tmaguard core: the generic descriptor sanity check (what the driver would have refused to encode), with the
// architecture policy of descriptor_checks.h.
#include "tmaguard/descriptor_checks.h"

#include <fmt/format.h>

#include <vector>

namespace tmaguard {
namespace {

// Error only where the H200-measured driver rules provably apply: an sm_90 launch of a tiled descriptor without
// Blackwell-era bits in word 2. (The form words do not matter: the TMA unit reads the layout fields alone.)
Severity driver_rule_severity(const TensorMapView& v, const Arch& arch) {
  const bool provable = arch.measured() && v.sm100_bits == 0 && v.kind == MapKind::kTiled;
  return provable ? Severity::kError : Severity::kWarning;
}

std::string unmeasured_note(const TensorMapView& v, const Arch& arch) {
  if (v.sm100_bits & 3)
    return " (a warning: the descriptor carries Blackwell-only bits the H200's driver rules do not cover)";
  if (v.large_tensor_flag())
    return " (a warning: the large-tensor flag, word 2 bit 21, which CuTe DSL sets for tensors of 128 KiB or more, "
           "was never measured against the driver's rules)";
  if (v.kind != MapKind::kTiled) return " (a warning: im2col rules beyond the documented ones are not modelled)";
  if (!arch.known()) return " (a warning: the GPU's architecture is unknown; the rule was measured on sm_90)";
  if (!arch.measured())
    return fmt::format(" (a warning on sm_{}{}: the rule was measured on sm_90's driver)", arch.major, arch.minor);
  return "";
}

// How to fix a descriptor the driver would not have made, by who made it.
const char* inline_hint(const TensorMapView& v) {
  switch (v.encoder) {
    case Encoder::kCuteDsl:
      return "CuTe DSL's host code filled this descriptor without the driver's checks (its form: word 2 bit 1, no "
             "tile-size word); fix the tensor or the copy atom that builds it";
    case Encoder::kDeviceBuilt:
      return "device code built this descriptor with tensormap.replace, which checks nothing; fix the arguments the "
             "kernel builds it from";
    default:
      return "the driver never produces this descriptor: it was filled inline (or modified after encoding); fix the "
             "code that builds it, or build it with cuTensorMapEncodeTiled to get the driver's checks";
  }
}

// The large-tensor flag over a small tensor on a platform the release notes name: what was found, and the fix.
void check_large_flag(std::string_view kernel, const TensorMapParam& m, const Arch& arch, std::vector<Finding>& out) {
  const std::optional<uint64_t> span = large_flag_hazard(m.decoded.view, arch);
  if (!span) return;
  Finding f = make_finding(FindingId::kTmapLargeFlagSmallTensor, kernel, "param " + to_string(m.place), &m);
  f.expected = fmt::format("the large-tensor flag (bit 85: word 2 bit 21) clear on a tensor spanning under {} bytes",
                           kLargeFlagSpan);
  f.observed = fmt::format("the flag is set and the tensor spans {} bytes, on sm_{}{} with driver {}.{} ({}): NVIDIA's "
                           "595.71.05 release notes give this map sporadic illegal-address faults (XID 13)",
                           *span, arch.major, arch.minor, arch.driver / 1000, arch.driver % 1000 / 10, arch.driver);
  f.hint = "clear bit 85 after encoding (((uint64_t*)&map)[1] &= ~(1ull << 21)), as CUTLASS 4.3.4 and Triton do, or "
           "update the driver; TMAGUARD_REPAIR=large-tensor-flag clears it in the maps encoded under tmaguard";
  out.push_back(std::move(f));
}

}  // namespace

bool large_flag_platform(const Arch& arch) {
  const int v = arch.driver;
  return arch.major >= 10 && v > 0 && (v <= 13010 || v == 13020 || v == 13030);
}

std::optional<uint64_t> large_flag_hazard(const TensorMapView& v, const Arch& arch) {
  if (!v.large_tensor_flag() || !large_flag_platform(arch) || v.ragged_dims) return std::nullopt;
  const std::optional<ByteRange> r = map_range(v.encode_args());
  if (!r || r->end - r->first >= kLargeFlagSpan) return std::nullopt;
  return r->end - r->first;
}

void check_descriptor(std::string_view kernel, const TensorMapParam& m, const Arch& arch, std::vector<Finding>& out) {
  if (!m.decoded.ok()) return;
  const TensorMapView& v = m.decoded.view;
  auto tensor = [&] { return "param " + to_string(m.place); };  // made only for a finding
  if (v.address == 0) {  // wrong on every architecture: every access through the map faults
    Finding f = make_finding(FindingId::kTmapNullAddress, kernel, tensor(), &m);
    f.expected = "a non-NULL global address";
    f.observed = "globalAddress = 0";
    f.hint = "the tensor behind this descriptor was never allocated, or the descriptor's address was never filled in";
    out.push_back(std::move(f));
    return;
  }
  if (v.dtype == DataType::kUnknown) {
    Finding f = make_finding(FindingId::kTmapUnknownElementType, kernel, tensor(), &m);
    f.expected = "a known element-type code (0..10)";
    f.observed = fmt::format("element-type code {}", v.hw_type);
    f.hint = "a type tmaguard does not know yet (Blackwell packed types?); only structural checks were made";
    out.push_back(std::move(f));
    return;
  }
  check_large_flag(kernel, m, arch, out);
  const Severity severity = driver_rule_severity(v, arch);
  const EncodeArgs a = v.encode_args();
  // Interleaved im2col has driver rules beyond the documented ones (see tests/data): judge only the rest.
  if (const EncodeProblem p = validate_encode(a);
      p && !(v.kind != MapKind::kTiled && v.interleave != 0 && p.field.rfind("pixelBox", 0) == 0)) {
    Finding f = make_finding(FindingId::kTmapDriverWouldReject, kernel, tensor(), &m);
    f.severity = severity;  // findings.inc: an error only where the measured rules judge this map
    f.expected = fmt::format("a descriptor the driver would encode ({} within its limits)", p.field);
    f.observed = p.message + unmeasured_note(v, arch);
    f.hint = inline_hint(v);
    out.push_back(std::move(f));
  }
}

}  // namespace tmaguard
