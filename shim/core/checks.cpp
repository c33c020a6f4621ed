// tmaguard core: the FA4 SM100 backward layout guard and the generic descriptor sanity check.
#include "tmaguard/checks.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <vector>

namespace tmaguard {
namespace {

std::string dims_str(const TensorMapView& v) {
  return fmt::format("{{{}}}", fmt::join(v.dims.begin(), v.dims.begin() + v.rank, ","));
}

bool is_16bit_float(DataType t) { return t == DataType::kF16 || t == DataType::kBF16; }

Finding make(std::string rule, Severity sev, std::string_view kernel, std::string tensor, const TensorMapParam* m) {
  Finding f;
  f.rule = std::move(rule);
  f.severity = sev;
  f.kernel = std::string(kernel);
  f.tensor = std::move(tensor);
  if (m) {
    f.param_index = m->param_index;
    if (m->decoded.ok()) f.tensor_map = m->decoded.view;
  }
  return f;
}

// dK against K (or dV against V): K-major first, then the logical shape, then the element type.
void check_grad(std::string_view kernel, const char* grad, const char* src, const TensorMapParam& g,
                const TensorMapParam& s, std::vector<Finding>& out) {
  const std::string lg = grad[1] == 'K' ? "dk" : "dv";
  const char* alloc = grad[1] == 'K' ? "k" : "v";
  if (!g.decoded.ok() || !s.decoded.ok()) {
    Finding f = make("fa4-map-undecodable", Severity::kWarning, kernel, grad, g.decoded.ok() ? &s : &g);
    f.expected = fmt::format("{} and {} parameters are tensor maps", grad, src);
    f.observed = g.decoded.ok() ? fmt::format("{}: {}", src, s.decoded.not_a_map) : fmt::format("{}: {}", grad, g.decoded.not_a_map);
    f.hint = "the kernel's parameter list does not match the FA4 SM100 backward signature tmaguard knows";
    out.push_back(std::move(f));
    return;
  }
  const TensorMapView& gv = g.decoded.view;
  const TensorMapView& sv = s.decoded.view;
  const std::string hint = fmt::format(
      "allocate {} with the layout of {}: torch.empty_like({}) (not empty_like(q) or a transposed/permuted view), "
      "so that the head dim is contiguous in (b, s_k, h_kv, d) order",
      grad, src, alloc);
  if (gv.dims[0] != sv.dims[0]) {
    Finding f = make(fmt::format("fa4-{}-not-k-major", lg), Severity::kError, kernel, grad, &g);
    f.expected = fmt::format("{} K-major: innermost dimension (dim 0) is the head dim, equal to {} dim 0 = {}", grad, src,
                             sv.dims[0]);
    const bool transposed = gv.rank > 1 && gv.dims[1] == sv.dims[0];
    f.observed = fmt::format("{} dim 0 = {} ({} dims {}, {} dims {}){}", grad, gv.dims[0], grad, dims_str(gv), src,
                             dims_str(sv), transposed ? ": seqlen is contiguous (MN-major)" : "");
    f.hint = hint;
    out.push_back(std::move(f));
    return;
  }
  if (gv.rank != sv.rank || gv.dims != sv.dims) {
    Finding f = make(fmt::format("fa4-{}-shape-mismatch", lg), Severity::kError, kernel, grad, &g);
    f.expected = fmt::format("{} has the dims of {} = {}", grad, src, dims_str(sv));
    f.observed = fmt::format("{} dims {}", grad, dims_str(gv));
    f.hint = hint;
    out.push_back(std::move(f));
    return;
  }
  if (!is_16bit_float(gv.dtype)) {
    Finding f = make(fmt::format("fa4-{}-dtype", lg), Severity::kError, kernel, grad, &g);
    f.expected = fmt::format("{} is float16 or bfloat16", grad);
    f.observed = fmt::format("{} is {}", grad, to_string(gv.dtype));
    f.hint = fmt::format("allocate {} in the dtype of {} (the kernel TMA-stores 16-bit values)", grad, src);
    out.push_back(std::move(f));
  }
}

}  // namespace

bool is_fa4_sm100_bwd(std::string_view name) { return name.find("FlashAttentionBackwardSm100") != std::string_view::npos; }

Fa4Layout fa4_layout(std::size_t n) {
  switch (n) {
    case 4: case 7: return {true, false};
    case 6: return {true, true, 1, 2, 4, 5};
    case 9: return {true, true, 2, 4, 7, 8};
    default: return {};
  }
}

void check_fa4_sm100_bwd(std::string_view kernel, const std::vector<TensorMapParam>& maps, std::vector<Finding>& out) {
  const Fa4Layout l = fa4_layout(maps.size());
  if (!l.known) {
    Finding f = make("fa4-unexpected-map-count", Severity::kWarning, kernel, "kernel", nullptr);
    f.expected = "4, 6, 7 or 9 tensor-map parameters (1-CTA/2-CTA, with or without dKV postprocess)";
    f.observed = fmt::format("{} tensor-map parameters; dK/dV not checked", maps.size());
    f.hint = "a newer FA4 signature? report it to tmaguard with the kernel name";
    out.push_back(std::move(f));
    return;
  }
  if (!l.present) return;
  check_grad(kernel, "dV", "V", maps[l.dv], maps[l.v], out);
  check_grad(kernel, "dK", "K", maps[l.dk], maps[l.k], out);
}

void check_descriptor(std::string_view kernel, const TensorMapParam& m, std::vector<Finding>& out) {
  if (!m.decoded.ok()) return;
  const TensorMapView& v = m.decoded.view;
  const std::string tensor = fmt::format("param {}", m.param_index);
  const char* inline_hint =
      "the driver never produces this descriptor: it was filled inline (or modified after encoding); fix the code "
      "that builds it, or build it with cuTensorMapEncodeTiled to get the driver's checks";
  if (v.address == 0) {
    Finding f = make("tmap-null-address", Severity::kError, kernel, tensor, &m);
    f.expected = "a non-NULL global address";
    f.observed = "globalAddress = 0";
    f.hint = "the tensor behind this descriptor was never allocated, or the descriptor's address was never filled in";
    out.push_back(std::move(f));
    return;
  }
  if (v.dtype == DataType::kUnknown) {
    Finding f = make("tmap-unknown-element-type", Severity::kWarning, kernel, tensor, &m);
    f.expected = "a known element-type code (0..10)";
    f.observed = fmt::format("element-type code {}", v.hw_type);
    f.hint = "a type tmaguard does not know yet (Blackwell packed types?); only structural checks were made";
    out.push_back(std::move(f));
    return;
  }
  if (v.tile_bytes != v.computed_tile_bytes()) {
    Finding f = make("tmap-tile-bytes-mismatch", Severity::kError, kernel, tensor, &m);
    f.expected = fmt::format("tile-bytes word = elemsize x prod(box / elementStrides) = {}", v.computed_tile_bytes());
    f.observed = fmt::format("tile-bytes word = {}", v.tile_bytes);
    f.hint = inline_hint;
    out.push_back(std::move(f));
    return;
  }
  EncodeArgs a;
  a.kind = v.kind;
  a.dtype = static_cast<uint32_t>(v.dtype);
  a.rank = v.rank;
  a.address = v.address;
  a.dims = v.dims;
  a.strides = v.strides;
  a.box = v.box;
  a.element_strides = v.element_strides;
  a.lower_corner = v.lower_corner;
  a.upper_corner = v.upper_corner;
  a.channels_per_pixel = v.channels_per_pixel;
  a.pixels_per_column = v.pixels_per_column;
  a.interleave = v.interleave;
  a.swizzle = v.swizzle;
  a.l2_promotion = v.l2_promotion;
  a.oob_fill = v.oob_fill;
  // Interleaved im2col has driver rules beyond the documented ones (see tests/data): judge only the rest.
  if (const EncodeProblem p = validate_encode(a); p && !(v.kind != MapKind::kTiled && v.interleave != 0 &&
                                                         p.field.rfind("pixelBox", 0) == 0)) {
    Finding f = make("tmap-driver-would-reject", Severity::kError, kernel, tensor, &m);
    f.expected = fmt::format("a descriptor the driver would encode ({} within its limits)", p.field);
    f.observed = p.message;
    f.hint = inline_hint;
    out.push_back(std::move(f));
  }
}

}  // namespace tmaguard
