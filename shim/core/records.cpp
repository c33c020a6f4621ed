// tmaguard core: rendering of violation, notice and summary records (text lines or JSON lines).
#include "tmaguard/records.h"

#include "tmaguard/launch.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <ctime>
#include <nlohmann/json.hpp>

namespace tmaguard {

const std::vector<FindingKind>& finding_kinds() {
  // Never destroyed: tmaguard's own threads (the device audit's worker) may read it while the process exits.
  static const std::vector<FindingKind>& v = *new std::vector<FindingKind>{
#define TG_FINDING(name, id, severity, meaning) {FindingId::name, id, SeverityRule::severity, meaning},
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
  for (const FindingKind& k : finding_kinds())
    s += fmt::format("| `{}` | {} | {} |\n", k.id, to_string(k.severity), k.meaning);
  return s;
}

Finding make_finding(FindingId which, std::string_view kernel, std::string tensor, const TensorMapParam* map) {
  const SeverityRule rule = finding_kinds()[static_cast<std::size_t>(which)].severity;
  return make_finding(finding_id(which), rule == SeverityRule::kWarning ? Severity::kWarning : Severity::kError, kernel,
                      std::move(tensor), map);
}

Action action_in_mode(const Finding& f, Mode m) {
  if (f.severity != Severity::kError) return Action::kNone;
  switch (m) {
    case Mode::kInspect: return Action::kInspect;
    case Mode::kAbort: return f.action.value_or(Action::kAbort);
    case Mode::kReject: return f.action.value_or(Action::kReject);
    default: return f.action.value_or(Action::kLog);
  }
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

// A rank as an integer, when it is one.
bool integer_text(const std::string& s, long long* out) {
  if (s.empty() || s.size() > 18 || !std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return false;
  *out = std::stoll(s);
  return true;
}

// Adds what every record carries (record_fields.inc: time, severity, one line for a person, the schema, the process)
// and renders it as one line (invalid UTF-8 in names is replaced, never thrown).
std::string stamped(json& j, const ProcessContext& c, RecordSeverity severity, const std::string& body) {
  j[field::kTimestamp] = c.time;
  j[field::kSeverityText] = severity_text(severity);
  j[field::kSeverityNumber] = severity_number(severity);
  j[field::kBody] = body;
  j[field::kSchema] = kRecordSchema;
  j[field::kPid] = c.pid;
  j[field::kTid] = c.tid;
  if (!c.host.empty()) j[field::kHost] = c.host;
  long long n = 0;
  if (integer_text(c.rank, &n)) j[field::kRank] = n;
  if (integer_text(c.local_rank, &n)) j[field::kLocalRank] = n;
  if (!c.job_id.empty()) j[field::kJobId] = c.job_id;
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
  return fmt::format("pid={} tid={}{}{}{}{} time={}", c.pid, c.tid, c.rank.empty() ? "" : " rank=" + esc(c.rank),
                     c.local_rank.empty() ? "" : " local_rank=" + esc(c.local_rank),
                     c.host.empty() ? "" : " host=" + esc(c.host), c.job_id.empty() ? "" : " job=" + esc(c.job_id),
                     c.time);
}

// A map's place as record fields, the one JSON spelling of a MapPlace (text records use to_string); a finding about
// the kernel as a whole has param_index -1. A map in device memory adds where it sat past the pointer and that it was
// read after the kernel ran (its launch was not stopped).
void put_place(json& j, const std::optional<MapPlace>& p) {
  j[field::kParamIndex] = p ? static_cast<int64_t>(p->param) : int64_t{-1};
  j[field::kParamOffset] = p ? p->offset : 0;
  if (p && p->on_device()) {
    j["space"] = "device";
    j["device_offset"] = p->at;
    j["read_after_kernel"] = true;
  }
}

}  // namespace

const std::vector<RecordField>& record_fields() {
  // Never destroyed: tmaguard's own threads (the device audit's worker) may read it while the process exits.
  static const std::vector<RecordField>& v = *new std::vector<RecordField>{
#define TG_FIELD(name, key, type, records, meaning) {key, type, records, meaning},
#include "tmaguard/record_fields.inc"
#undef TG_FIELD
  };
  return v;
}

std::string record_fields_markdown_table() {
  std::string s = fmt::format("Schema {}.\n\n| field | type | records | meaning |\n| --- | --- | --- | --- |\n", kRecordSchema);
  for (const RecordField& f : record_fields())
    s += fmt::format("| `{}` | {} | {} | {} |\n", f.key, f.type, f.records, f.meaning);
  return s;
}

const char* severity_text(RecordSeverity s) {
  return s == RecordSeverity::kError ? "ERROR" : s == RecordSeverity::kWarn ? "WARN" : "INFO";
}
int severity_number(RecordSeverity s) { return s == RecordSeverity::kError ? 17 : s == RecordSeverity::kWarn ? 13 : 9; }

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
    j[field::kStack] = std::move(frames);
  }
  if (c.python_taken) {
    json frames = json::array();
    for (const PythonFrame& f : c.python) frames.push_back({{"file", f.file}, {"line", f.line}, {"function", f.function}});
    j[field::kPythonStack] = std::move(frames);
    if (!c.python_note.empty()) j[field::kPythonNote] = c.python_note;
  }
  // OpenTelemetry's call-site attributes: the innermost Python frame, else the innermost named native frame.
  if (!c.python.empty()) {
    j[field::kCodeFunction] = c.python[0].function;
    j[field::kCodeFile] = c.python[0].file;
    j[field::kCodeLine] = c.python[0].line;
  } else {
    for (const NativeFrame& f : c.native)
      if (!f.symbol.empty()) {
        j[field::kCodeFunction] = f.symbol;
        j[field::kCodeFile] = f.module;
        break;
      }
  }
}

// A kernel name short enough for a record's one-line body.
std::string short_kernel(std::string_view k) {
  return k.size() > 100 ? std::string(k.substr(0, 70)) + "..." + std::string(k.substr(k.size() - 27)) : std::string(k);
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

std::string render_finding(const Finding& f, const ProcessContext& ctx, Action done, LogFormat format) {
  const char* action = to_string(done);
  const char* event = f.severity == Severity::kError ? "violation" : "warning";
  if (format == LogFormat::kJson) {
    json j;
    j[field::kEvent] = event;
    j[field::kRule] = f.rule;
    j[field::kSeverity] = to_string(f.severity);
    j[field::kKernel] = f.kernel;
    j[field::kTensor] = f.tensor;
    put_place(j, f.place);
    j[field::kTensorMap] = f.tensor_map ? map_json(*f.tensor_map) : json(nullptr);
    j[field::kExpected] = f.expected;
    j[field::kObserved] = f.observed;
    j[field::kHint] = f.hint;
    if (!f.provenance.empty()) j[field::kProvenance] = f.provenance;
    j[field::kAction] = action;
    if (f.call_site) put_call_site(j, *f.call_site);
    const std::string body = esc(fmt::format("{} ({}): {} of kernel {}: expected {}; observed {}", f.rule, action,
                                             f.tensor, short_kernel(f.kernel), f.expected, f.observed));
    return stamped(j, ctx, f.severity == Severity::kError ? RecordSeverity::kError : RecordSeverity::kWarn, body);
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
    json j{{field::kEvent, "inspect"}, {field::kKernel, r.kernel}, {field::kGrid, r.grid}, {field::kBlock, r.block}};
    json params = json::array();
    for (const auto& [off, size] : r.params) params.push_back({{"offset", off}, {"size", size}});
    j[field::kParams] = params;
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
    j[field::kTensorMaps] = maps;
    return stamped(j, ctx, RecordSeverity::kInfo,
                   esc(fmt::format("inspect: kernel {} with {} tensor map(s)", short_kernel(r.kernel), r.maps.size())));
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
    json j{{field::kEvent, "census"},
           {field::kKernel, r.kernel},
           {field::kLaunches, r.launches},
           {field::kParams, r.params},
           {field::kMapsInParams, r.maps_in_params},
           {field::kMapsInStructs, r.maps_in_structs},
           {field::kTemplateMaps, r.template_maps},
           {field::kMapsInDevice, r.maps_in_device_memory}};
    json large = json::array();
    for (const auto& p : r.large_params) large.push_back({{"param_index", p.param_index}, {"size", p.size}, {"maps", p.maps}});
    j[field::kLargeParams] = large;
    return stamped(j, ctx, RecordSeverity::kInfo,
                   esc(fmt::format("census: kernel {}: {} launches, {} maps in parameters, {} in structures",
                                   short_kernel(r.kernel), r.launches, r.maps_in_params, r.maps_in_structs)));
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

namespace {
uint64_t total(const std::map<std::string, uint64_t>& m) {
  uint64_t n = 0;
  for (const auto& [k, v] : m) n += v;
  return n;
}
}  // namespace

namespace {

std::string summary_json(const Summary& s, const ProcessContext& ctx) {
  json j;
  j[field::kEvent] = "summary";
  j[field::kFinal] = s.final;
  if (!s.signal.empty()) j[field::kSignal] = s.signal;
  if (!s.mode.empty()) j[field::kMode] = s.mode;
  j[field::kLaunchesSeen] = s.launches_seen;
  j[field::kLaunchesChecked] = s.launches_checked;
  j[field::kMapsDecoded] = s.tensor_maps_decoded;
  j[field::kCleanCopies] = s.clean_copies;
  j[field::kLaunchesMoved] = s.launches_moved;
  j[field::kViolations] = s.violations_by_rule;
  j[field::kWarnings] = s.warnings_by_rule;
  j[field::kSuppressed] = s.suppressed_by_rule;
  j[field::kNotCheckable] = s.not_checkable;
  if (!s.not_checked.empty()) j[field::kNotChecked] = s.not_checked;
  j[field::kRecordsLost] = s.log_records_lost;
  if (s.records_dropped) j[field::kRecordsDropped] = s.records_dropped;
  if (s.metrics_failures) j[field::kMetricsFailed] = s.metrics_failures;
  if (s.call_sites_taken)
    j[field::kCallSites] = {{"taken", s.call_sites_taken}, {"mean_us", s.call_site_ns / 1000.0 / s.call_sites_taken}};
  if (s.device_launches_audited || !s.device_skipped.empty())
    j[field::kDeviceAudit] = {{"launches_audited", s.device_launches_audited},
                              {"buffers_read", s.device_buffers_read},
                              {"maps_found", s.device_maps_found},
                              {"skipped", s.device_skipped}};
  if (s.maps_compared_with_tensors) j[field::kComparedWithTensors] = s.maps_compared_with_tensors;
  if (s.large_flags_cleared) j[field::kLargeFlagsCleared] = s.large_flags_cleared;
  if (!s.version.empty()) j[field::kVersion] = s.version;
  if (!s.revision.empty()) j[field::kRevision] = s.revision;
  const std::string body =
      fmt::format("{}summary{}: {} launches seen, {} checked; {} errors, {} warnings, {} suppressed",
                  s.final ? "final " : "", s.signal.empty() ? "" : " on " + s.signal, s.launches_seen,
                  s.launches_checked, total(s.violations_by_rule), total(s.warnings_by_rule),
                  total(s.suppressed_by_rule));
  return stamped(j, ctx, RecordSeverity::kInfo, body);
}

std::string summary_text(const Summary& s, const ProcessContext& ctx) {
  auto counted = [](const std::map<std::string, uint64_t>& m) {
    std::string v;
    for (const auto& [what, n] : m) v += fmt::format("{}{} x{}", v.empty() ? "" : ", ", esc(what), n);
    return v.empty() ? std::string("none") : v;
  };
  std::string line = fmt::format(
      "tmaguard: SUMMARY{}: {} launches seen, {} checked, {} tensor maps decoded; violations: {}",
      s.final ? "" : (s.signal.empty() ? " (so far)" : " (on " + s.signal + ", so far)"), s.launches_seen,
      s.launches_checked, s.tensor_maps_decoded, counted(s.violations_by_rule));
  if (!s.warnings_by_rule.empty()) line += "; warnings: " + counted(s.warnings_by_rule);
  if (!s.suppressed_by_rule.empty()) line += "; suppressed: " + counted(s.suppressed_by_rule);
  if (!s.not_checkable.empty()) line += "; not checkable: " + counted(s.not_checkable);
  if (!s.not_checked.empty()) line += "; launches not checked: " + counted(s.not_checked);
  if (s.log_records_lost)
    line += fmt::format("; {} records could not be written to TMAGUARD_LOG (they went to stderr)", s.log_records_lost);
  if (s.records_dropped)
    line += fmt::format("; {} records dropped while the log was blocked", s.records_dropped);
  if (s.metrics_failures) line += fmt::format("; {} metrics files could not be written", s.metrics_failures);
  if (s.call_sites_taken)
    line += fmt::format("; {} call site(s) taken, {:.0f} us each", s.call_sites_taken,
                        s.call_site_ns / 1000.0 / s.call_sites_taken);
  if (s.device_launches_audited || !s.device_skipped.empty()) {
    line += fmt::format("; device maps: {} launches audited, {} buffers read after the kernel, {} maps found",
                        s.device_launches_audited, s.device_buffers_read, s.device_maps_found);
    if (!s.device_skipped.empty()) line += ", not read: " + counted(s.device_skipped);
  }
  if (s.maps_compared_with_tensors)
    line += fmt::format("; {} tensor maps compared with declared tensors", s.maps_compared_with_tensors);
  if (s.large_flags_cleared)
    line += fmt::format("; {} large-tensor flags cleared (TMAGUARD_REPAIR)", s.large_flags_cleared);
  const std::string by = s.version.empty() ? "" : fmt::format("; tmaguard {} git {}", s.version, s.revision);
  return line + fmt::format(" ({}{})", ctx_text(ctx), by);
}

}  // namespace

std::string render_summary(const Summary& s, const ProcessContext& ctx, LogFormat format) {
  return format == LogFormat::kJson ? summary_json(s, ctx) : summary_text(s, ctx);
}

std::string render_start(const StartRecord& r, const ProcessContext& ctx, LogFormat format) {
  const std::string body =
      fmt::format("tmaguard {} (git {}) guards {}: mode {}, log {}{}", r.version, r.revision,
                  r.program.empty() ? std::string("this process") : r.program, r.mode, r.log_format,
                  r.preload.empty() ? "" : ", from " + r.preload);
  if (format == LogFormat::kJson) {
    json j;
    j[field::kEvent] = "start";
    j[field::kVersion] = r.version;
    j[field::kRevision] = r.revision;
    j[field::kMode] = r.mode;
    j[field::kLogFormat] = r.log_format;
    json settings = json::object();
    for (const auto& [name, vs] : r.settings) settings[name] = {{"value", vs.first}, {"source", vs.second}};
    j[field::kSettings] = settings;
    j[field::kRulesFiles] = r.rules_files;
    j[field::kBuiltinRules] = r.builtin_rules;
    j[field::kPreload] = r.preload;
    j[field::kProgram] = r.program;
    return stamped(j, ctx, RecordSeverity::kInfo, esc(body));
  }
  std::string from;
  for (const auto& [name, vs] : r.settings)
    if (vs.second != "default") from += fmt::format(" {}={} ({})", name, esc(vs.first), esc(vs.second));
  return fmt::format("tmaguard: start: {};{} ({})", esc(body), from.empty() ? " every setting its default" : from,
                     ctx_text(ctx));
}

const NoticeInfo& notice_info(Notice n) {
  static constexpr NoticeInfo kNotices[] = {
#define TG_NOTICE(id, name, event, severity, meaning) {name, event, RecordSeverity::severity, meaning},
#include "tmaguard/notices.inc"
#undef TG_NOTICE
  };
  return kNotices[static_cast<std::size_t>(n)];
}

std::string render_notice(Notice kind, std::string_view message, const ProcessContext& ctx, LogFormat format) {
  const NoticeInfo& info = notice_info(kind);
  if (format == LogFormat::kJson) {
    json j;
    j[field::kEvent] = info.event;
    j[field::kMessage] = message;
    return stamped(j, ctx, info.severity, esc(message));
  }
  return fmt::format("tmaguard: {}: {} ({})", info.event, esc(message), ctx_text(ctx));
}

}  // namespace tmaguard
