// tmaguard core: the generic descriptor sanity check (what the driver would have refused to encode).
#include "tmaguard/checks.h"

#include <fmt/format.h>

#include <vector>

namespace tmaguard {

void check_descriptor(std::string_view kernel, const TensorMapParam& m, std::vector<Finding>& out) {
  if (!m.decoded.ok()) return;
  const TensorMapView& v = m.decoded.view;
  const std::string tensor = fmt::format("param {}", m.param_index);
  const char* inline_hint =
      "the driver never produces this descriptor: it was filled inline (or modified after encoding); fix the code "
      "that builds it, or build it with cuTensorMapEncodeTiled to get the driver's checks";
  if (v.address == 0) {
    Finding f = make_finding("tmap-null-address", Severity::kError, kernel, tensor, &m);
    f.expected = "a non-NULL global address";
    f.observed = "globalAddress = 0";
    f.hint = "the tensor behind this descriptor was never allocated, or the descriptor's address was never filled in";
    out.push_back(std::move(f));
    return;
  }
  if (v.dtype == DataType::kUnknown) {
    Finding f = make_finding("tmap-unknown-element-type", Severity::kWarning, kernel, tensor, &m);
    f.expected = "a known element-type code (0..10)";
    f.observed = fmt::format("element-type code {}", v.hw_type);
    f.hint = "a type tmaguard does not know yet (Blackwell packed types?); only structural checks were made";
    out.push_back(std::move(f));
    return;
  }
  if (v.tile_bytes != v.computed_tile_bytes()) {
    Finding f = make_finding("tmap-tile-bytes-mismatch", Severity::kError, kernel, tensor, &m);
    f.expected = fmt::format("tile-bytes word = elemsize x prod(box / elementStrides) = {}", v.computed_tile_bytes());
    f.observed = fmt::format("tile-bytes word = {}", v.tile_bytes);
    f.hint = inline_hint;
    out.push_back(std::move(f));
    return;
  }
  const EncodeArgs a = v.encode_args();
  // Interleaved im2col has driver rules beyond the documented ones (see tests/data): judge only the rest.
  if (const EncodeProblem p = validate_encode(a);
      p && !(v.kind != MapKind::kTiled && v.interleave != 0 && p.field.rfind("pixelBox", 0) == 0)) {
    Finding f = make_finding("tmap-driver-would-reject", Severity::kError, kernel, tensor, &m);
    f.expected = fmt::format("a descriptor the driver would encode ({} within its limits)", p.field);
    f.observed = p.message;
    f.hint = inline_hint;
    out.push_back(std::move(f));
  }
}

}  // namespace tmaguard
