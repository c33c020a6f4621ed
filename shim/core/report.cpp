// tmaguard core: rendering of violation, notice and summary records (text lines or JSON lines).
#include "tmaguard/report.h"

#include "tmaguard/launch.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <ctime>
#include <nlohmann/json.hpp>

namespace tmaguard {

const std::vector<FindingKind>& finding_kinds() {
  static const std::vector<FindingKind> v = {
#define TG_FINDING(name, id, severity, meaning) {FindingId::name, id, severity, meaning},
#include "tmaguard/findings.inc"
#undef TG_FINDING
  };
  return v;
}

std::string finding_id(FindingId which, std::string_view rule) {
  const std::string id = finding_kinds()[static_cast<std::size_t>(which)].id;
  constexpr std::string_view kRulePrefix = "<rule id>";
  if (id.compare(0, kRulePrefix.size(), kRulePrefix) == 0) return std::string(rule) + id.substr(kRulePrefix.size());
  return id;
}

std::string findings_markdown_table() {
  std::string s = "| id | severity | meaning |\n| --- | --- | --- |\n";
  for (const FindingKind& k : finding_kinds()) s += fmt::format("| `{}` | {} | {} |\n", k.id, k.severity, k.meaning);
  return s;
}

namespace {

using nlohmann::json;

template <typename A>
json first_n(const A& a, uint32_t n) {
  json j = json::array();
  for (uint32_t i = 0; i < n && i < a.size(); ++i) j.push_back(a[i]);
  return j;
}

// The words of view.ignored_words, in order.
std::vector<int> ignored_word_list(uint32_t mask) {
  std::vector<int> out;
  for (int i = 0; i < 32; ++i)
    if (mask & (1u << i)) out.push_back(i);
  return out;
}

json map_json(const TensorMapView& v) {
  json j;
  j["kind"] = v.kind == MapKind::kTiled ? "tiled" : "im2col";
  j["dtype"] = to_string(v.dtype);
  j["rank"] = v.rank;
  j["dims"] = first_n(v.dims, v.rank);
  j["strides_bytes"] = first_n(v.strides, v.rank ? v.rank - 1 : 0);
  if (v.kind == MapKind::kTiled) {
    j["box"] = first_n(v.box, v.rank);
  } else {
    j["channels_per_pixel"] = v.channels_per_pixel;
    j["pixels_per_column"] = v.pixels_per_column;
    j["lower_corner"] = first_n(v.lower_corner, v.rank - 2);
    j["upper_corner"] = first_n(v.upper_corner, v.rank - 2);
  }
  j["element_strides"] = first_n(v.element_strides, v.rank);
  j["interleave"] = interleave_name(v.interleave);
  j["swizzle"] = swizzle_name(v.swizzle);
  j["l2_promotion"] = v.l2_promotion;
  j["oob_fill"] = v.oob_fill ? "nan" : "zero";
  j["address"] = fmt::format("0x{:x}", v.address);
  // Forms other than the driver's leave the tile-size word empty: no value, rather than a misleading 0.
  j["tile_bytes"] = v.form_words_filled() ? json(v.tile_bytes) : json(nullptr);
  j["encoder"] = to_string(v.encoder);
  if (v.large_tensor_flag()) j["large_tensor_flag"] = true;
  if (v.stale_strides_past_rank) j["stale_strides_past_rank"] = true;
  if (v.ignored_words) j["ignored_words"] = ignored_word_list(v.ignored_words);
  if (const std::optional<RaggedTensor> r = ragged_tensor(v)) {  // the tensor under it: both views
    json dims = json::array();
    for (uint32_t i = 0; i < r->tensor.rank; ++i)
      dims.push_back(i == r->dim ? json("ragged") : json(r->tensor.dims[i]));
    j["ragged"] = {{"form", to_string(r->form)},
                   {"dim", r->dim},
                   {"tensor",
                    {{"address", fmt::format("0x{:x}", r->tensor.address)},
                     {"dims", dims},
                     {"strides_bytes", first_n(r->tensor.strides, r->tensor.rank - 1)}}}};
  }
  return j;
}

std::string map_text(const TensorMapView& v) {
  auto list = [](const auto& a, uint32_t n) { return fmt::format("{{{}}}", fmt::join(a.begin(), a.begin() + n, ",")); };
  std::string s =
      fmt::format("{} {} rank {} dims {} strides_bytes {}", v.kind == MapKind::kTiled ? "tiled" : "im2col",
                  to_string(v.dtype), v.rank, list(v.dims, v.rank), list(v.strides, v.rank ? v.rank - 1 : 0));
  if (v.kind == MapKind::kTiled)
    s += fmt::format(" box {}", list(v.box, v.rank));
  else
    s += fmt::format(" channels_per_pixel {} pixels_per_column {}", v.channels_per_pixel, v.pixels_per_column);
  s += fmt::format(" element_strides {} interleave {} swizzle {} address 0x{:x} encoder {}",
                   list(v.element_strides, v.rank), interleave_name(v.interleave), swizzle_name(v.swizzle), v.address,
                   to_string(v.encoder));
  if (v.encoder == Encoder::kCuteDsl) s += " (word 2 bit 1; no tile-size or swizzle-span word)";
  if (v.encoder == Encoder::kDeviceBuilt) s += " (tensormap.replace; no tile-size or swizzle-span word)";
  if (v.large_tensor_flag()) s += " large-tensor flag (word 2 bit 21)";
  if (v.ignored_words)
    s += fmt::format(" (words the TMA unit does not read hold values: {})",
                     fmt::join(ignored_word_list(v.ignored_words), ", "));
  if (const std::optional<RaggedTensor> r = ragged_tensor(v)) {
    std::string dims;
    for (uint32_t i = 0; i < r->tensor.rank; ++i)
      dims += (i ? "," : "") + (i == r->dim ? std::string("ragged") : std::to_string(r->tensor.dims[i]));
    s += fmt::format(" ragged ({}, dim {}): the tensor at 0x{:x} dims {{{}}} strides_bytes {}", to_string(r->form),
                     r->dim, r->tensor.address, dims, list(r->tensor.strides, r->tensor.rank - 1));
  }
  return s;
}

// Adds the process context to a record and renders it as one line (invalid UTF-8 in names is replaced, never thrown).
std::string stamped(json& j, const ProcessContext& c) {
  j["pid"] = c.pid;
  j["tid"] = c.tid;
  j["rank"] = c.rank.empty() ? json(nullptr) : json(c.rank);
  if (!c.local_rank.empty()) j["local_rank"] = c.local_rank;
  if (!c.host.empty()) j["host"] = c.host;
  j["time"] = c.time;
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

// A value from the environment, a kernel name or a rule file, made safe for a text record: control characters
// (a newline would forge a record of its own, e.g. "tmaguard: SUMMARY: ...") and backslashes are escaped.
std::string esc(std::string_view v) {
  std::string out;
  out.reserve(v.size());
  for (const char ch : v) {
    const auto c = static_cast<unsigned char>(ch);
    if (c == '\\') out += "\\\\";
    else if (c == '\n') out += "\\n";
    else if (c == '\r') out += "\\r";
    else if (c == '\t') out += "\\t";
    else if (c < 0x20 || c == 0x7f) out += fmt::format("\\x{:02x}", c);
    else out += ch;
  }
  return out;
}

std::string ctx_text(const ProcessContext& c) {
  return fmt::format("pid={} tid={}{}{}{} time={}", c.pid, c.tid, c.rank.empty() ? "" : " rank=" + esc(c.rank),
                     c.local_rank.empty() ? "" : " local_rank=" + esc(c.local_rank),
                     c.host.empty() ? "" : " host=" + esc(c.host), c.time);
}

// A map's place as record fields, the one JSON spelling of a MapPlace (text records use to_string); a finding about
// the kernel as a whole has param_index -1. A map in device memory adds where it sat past the pointer and that it was
// read after the kernel ran (its launch was not stopped).
void put_place(json& j, const std::optional<MapPlace>& p) {
  j["param_index"] = p ? static_cast<int64_t>(p->param) : int64_t{-1};
  j["param_offset"] = p ? p->offset : 0;
  if (p && p->on_device()) {
    j["space"] = "device";
    j["device_offset"] = p->at;
    j["read_after_kernel"] = true;
  }
}

}  // namespace

std::string render_map(const TensorMapView& v, LogFormat format) {
  return format == LogFormat::kJson ? map_json(v).dump() : map_text(v);
}

std::string format_time_utc(int64_t ms) {
  const std::time_t s = static_cast<std::time_t>(ms / 1000);
  std::tm tm{};
  gmtime_r(&s, &tm);
  return fmt::format("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
                     tm.tm_hour, tm.tm_min, tm.tm_sec, static_cast<int>(ms % 1000));
}

namespace {

// The call site's frames as JSON: `stack` (native, innermost first) and `python_stack`, each only when it was taken.
void put_call_site(json& j, const CallSite& c) {
  if (c.native_taken) {
    json frames = json::array();
    for (const NativeFrame& f : c.native) {
      json e{{"module", f.module}, {"offset", fmt::format("0x{:x}", f.offset)}};
      if (!f.symbol.empty()) e["symbol"] = f.symbol, e["symbol_offset"] = fmt::format("0x{:x}", f.symbol_offset);
      if (!f.build_id.empty()) e["build_id"] = f.build_id;
      frames.push_back(std::move(e));
    }
    j["stack"] = std::move(frames);
  }
  if (c.python_taken) {
    json frames = json::array();
    for (const PythonFrame& f : c.python) frames.push_back({{"file", f.file}, {"line", f.line}, {"function", f.function}});
    j["python_stack"] = std::move(frames);
    if (!c.python_note.empty()) j["python_note"] = c.python_note;
  }
}

// The top frames under a text record: Python first (where a person starts reading), then native.
std::string call_site_text(const CallSite& c) {
  constexpr std::size_t kShown = 6;
  std::string s;
  for (std::size_t i = 0; i < c.python.size() && i < kShown; ++i)
    s += fmt::format("\ntmaguard:   python #{} {}:{} in {}", i, esc(c.python[i].file), c.python[i].line,
                     esc(c.python[i].function));
  if (c.python_taken && c.python.empty() && !c.python_note.empty() && c.python_note != kNoInterpreter)
    s += fmt::format("\ntmaguard:   python: {}", esc(c.python_note));
  for (std::size_t i = 0; i < c.native.size() && i < kShown; ++i) {
    const NativeFrame& f = c.native[i];
    s += fmt::format("\ntmaguard:   native #{} {}+0x{:x}", i, esc(f.module), f.offset);
    if (!f.symbol.empty()) s += fmt::format(" {}+0x{:x}", esc(f.symbol), f.symbol_offset);
  }
  return s;
}

}  // namespace

std::string render_finding(const Finding& f, const ProcessContext& ctx, std::string_view action, LogFormat format) {
  const char* event = f.severity == Severity::kError ? "violation" : "warning";
  if (format == LogFormat::kJson) {
    json j;
    j["event"] = event;
    j["rule"] = f.rule;
    j["severity"] = to_string(f.severity);
    j["kernel"] = f.kernel;
    j["tensor"] = f.tensor;
    put_place(j, f.place);
    j["tensor_map"] = f.tensor_map ? map_json(*f.tensor_map) : json(nullptr);
    j["expected"] = f.expected;
    j["observed"] = f.observed;
    j["hint"] = f.hint;
    if (!f.provenance.empty()) j["provenance"] = f.provenance;
    j["action"] = action;
    if (f.call_site) put_call_site(j, *f.call_site);
    return stamped(j, ctx);
  }
  std::string s = fmt::format("tmaguard: {} {} [{}] action={} kernel={} tensor={}", event, esc(f.rule),
                              to_string(f.severity), action, esc(f.kernel), esc(f.tensor));
  if (f.place) s += " param=" + to_string(*f.place);
  if (f.place && f.place->on_device()) s += " read_after_kernel";
  s += fmt::format(": expected {}; observed {}. Hint: {}. ({})", esc(f.expected), esc(f.observed), esc(f.hint),
                   ctx_text(ctx));
  if (f.tensor_map) s += fmt::format("\ntmaguard:   {} tensor map: {}", esc(f.tensor), map_text(*f.tensor_map));
  if (!f.provenance.empty()) s += fmt::format("\ntmaguard:   {} provenance: {}", esc(f.tensor), esc(f.provenance));
  if (f.call_site) s += call_site_text(*f.call_site);
  return s;
}

std::string render_inspect(const InspectRecord& r, const ProcessContext& ctx, LogFormat format) {
  if (format == LogFormat::kJson) {
    json j{{"event", "inspect"}, {"kernel", r.kernel}, {"grid", r.grid}, {"block", r.block}};
    json params = json::array();
    for (const auto& [off, size] : r.params) params.push_back({{"offset", off}, {"size", size}});
    j["params"] = params;
    json maps = json::array();
    for (const auto& m : r.maps) {
      json e{{"order", m.order}};
      put_place(e, m.place);
      if (m.embedded) e["embedded"] = true;
      if (unjudged_template(m)) e["template"] = true;
      if (m.decoded.ok())
        e["tensor_map"] = map_json(m.decoded.view);
      else
        e["not_a_tensor_map"] = m.decoded.not_a_map;
      if (!m.provenance.empty()) e["provenance"] = m.provenance;
      maps.push_back(std::move(e));
    }
    j["tensor_maps"] = maps;
    return stamped(j, ctx);
  }
  std::string s =
      fmt::format("tmaguard: inspect kernel={} grid={{{}}} block={{{}}} params={} tensor_maps={} ({})", esc(r.kernel),
                  fmt::join(r.grid, ","), fmt::join(r.block, ","), r.params.size(), r.maps.size(), ctx_text(ctx));
  for (const auto& m : r.maps) {
    s += fmt::format("\ntmaguard:   map {} (param {}): {}", m.order, to_string(m.place),
                     m.decoded.ok() ? map_text(m.decoded.view) : "not a tensor map: " + esc(m.decoded.not_a_map));
    if (!m.provenance.empty()) s += fmt::format("; provenance: {}", esc(m.provenance));
  }
  return s;
}

std::string render_census(const CensusRecord& r, const ProcessContext& ctx, LogFormat format) {
  if (format == LogFormat::kJson) {
    json j{{"event", "census"},
           {"kernel", r.kernel},
           {"launches", r.launches},
           {"params", r.params},
           {"maps_in_params", r.maps_in_params},
           {"maps_in_structs", r.maps_in_structs},
           {"template_maps", r.template_maps},
           {"maps_in_device_memory", r.maps_in_device_memory}};
    json large = json::array();
    for (const auto& p : r.large_params) large.push_back({{"param_index", p.param_index}, {"size", p.size}, {"maps", p.maps}});
    j["large_params"] = large;
    return stamped(j, ctx);
  }
  std::string large;
  for (const auto& p : r.large_params)
    large += fmt::format("{}param {} ({} B, {} maps)", large.empty() ? "" : ", ", p.param_index, p.size, p.maps);
  return fmt::format(
      "tmaguard: census kernel={} launches={} maps_in_params={} maps_in_structs={} template_maps={} "
      "maps_in_device_memory={} large_params=[{}] ({})",
      esc(r.kernel), r.launches, r.maps_in_params, r.maps_in_structs, r.template_maps, r.maps_in_device_memory, large,
      ctx_text(ctx));
}

std::string render_summary(const Summary& s, const ProcessContext& ctx, LogFormat format) {
  if (format == LogFormat::kJson) {
    json j;
    j["event"] = "summary";
    j["launches_seen"] = s.launches_seen;
    j["launches_checked"] = s.launches_checked;
    j["tensor_maps_decoded"] = s.tensor_maps_decoded;
    j["clean_copies"] = s.clean_copies;
    j["violations"] = s.violations_by_rule;
    j["not_checkable"] = s.not_checkable;
    if (!s.not_checked.empty()) j["launches_not_checked"] = s.not_checked;
    j["log_records_lost"] = s.log_records_lost;
    if (s.records_dropped) j["records_dropped"] = s.records_dropped;
    if (s.call_sites_taken)
      j["call_sites"] = {{"taken", s.call_sites_taken}, {"mean_us", s.call_site_ns / 1000.0 / s.call_sites_taken}};
    if (s.device_launches_audited || !s.device_skipped.empty())
      j["device_audit"] = {{"launches_audited", s.device_launches_audited},
                           {"buffers_read", s.device_buffers_read},
                           {"maps_found", s.device_maps_found},
                           {"skipped", s.device_skipped}};
    if (!s.version.empty()) j["tmaguard_version"] = s.version;
    if (!s.revision.empty()) j["tmaguard_revision"] = s.revision;
    return stamped(j, ctx);
  }
  auto counted = [](const std::map<std::string, uint64_t>& m) {
    std::string v;
    for (const auto& [what, n] : m) v += fmt::format("{}{} x{}", v.empty() ? "" : ", ", esc(what), n);
    return v.empty() ? std::string("none") : v;
  };
  std::string line =
      fmt::format("tmaguard: SUMMARY: {} launches seen, {} checked, {} tensor maps decoded; violations: {}",
                  s.launches_seen, s.launches_checked, s.tensor_maps_decoded, counted(s.violations_by_rule));
  if (!s.not_checkable.empty()) line += "; not checkable: " + counted(s.not_checkable);
  if (!s.not_checked.empty()) line += "; launches not checked: " + counted(s.not_checked);
  if (s.log_records_lost)
    line += fmt::format("; {} records could not be written to TMAGUARD_LOG (they went to stderr)", s.log_records_lost);
  if (s.records_dropped)
    line += fmt::format("; {} records dropped while the log was blocked", s.records_dropped);
  if (s.call_sites_taken)
    line += fmt::format("; {} call site(s) taken, {:.0f} us each", s.call_sites_taken,
                        s.call_site_ns / 1000.0 / s.call_sites_taken);
  if (s.device_launches_audited || !s.device_skipped.empty()) {
    line += fmt::format("; device maps: {} launches audited, {} buffers read after the kernel, {} maps found",
                        s.device_launches_audited, s.device_buffers_read, s.device_maps_found);
    if (!s.device_skipped.empty()) line += ", not read: " + counted(s.device_skipped);
  }
  const std::string by = s.version.empty() ? "" : fmt::format("; tmaguard {} git {}", s.version, s.revision);
  return line + fmt::format(" ({}{})", ctx_text(ctx), by);
}

std::string render_notice(std::string_view event, std::string_view message, const ProcessContext& ctx,
                          LogFormat format) {
  if (format == LogFormat::kJson) {
    json j;
    j["event"] = event;
    j["message"] = message;
    return stamped(j, ctx);
  }
  return fmt::format("tmaguard: {}: {} ({})", event, esc(message), ctx_text(ctx));
}

}  // namespace tmaguard
