// tmaguard: rendering findings and the exit summary as text or JSON lines. Pure: strings out, no I/O.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "tmaguard/config.h"
#include "tmaguard/finding.h"

namespace tmaguard {

//! The version of the record schema (record_fields.inc): raised when a field is renamed, retyped or removed.
inline constexpr int kRecordSchema = 1;
//! Every top-level record field's key, by constant (field::kTimestamp == "timestamp"): the one spelling of each.
namespace field {
#define TG_FIELD(name, key, type, records, meaning) inline constexpr const char name[] = key;
#include "tmaguard/record_fields.inc"
#undef TG_FIELD
}  // namespace field
struct RecordField {
  const char* key;
  const char* type;
  const char* records;
  const char* meaning;
};
//! The rows of record_fields.inc, and the reference table docs/reference.md holds (Markdown).
const std::vector<RecordField>& record_fields();
std::string record_fields_markdown_table();

//! A record's severity in OpenTelemetry's terms: INFO 9, WARN 13, ERROR 17.
enum class RecordSeverity { kInfo, kWarn, kError };
const char* severity_text(RecordSeverity s);
int severity_number(RecordSeverity s);

//! Facts about the reporting process stamped on every record.
struct ProcessContext {
  long pid = 0;
  long tid = 0;
  std::string rank;        // empty when not set
  std::string local_rank;  // empty when not set
  std::string host;        // the node's name
  std::string job_id;      // empty when not set
  std::string time;        // RFC 3339 UTC with milliseconds
};

struct Summary {
  bool final = true;   // false for the periodic summaries and for one a signal wrote before the job's own handler
  std::string signal;  // the signal that made it be written ("" otherwise)
  std::string mode;    // the mode in force ("" when not said)
  uint64_t launches_seen = 0;
  uint64_t launches_checked = 0;
  uint64_t tensor_maps_decoded = 0;
  uint64_t clean_copies = 0;  // copies a thread took of a clean launch's maps (the reference of the byte compare)
  uint64_t launches_moved = 0;  // launches whose maps differed from a clean launch's in their addresses alone
  std::map<std::string, uint64_t> violations_by_rule;  // error findings, repeats included
  std::map<std::string, uint64_t> warnings_by_rule;    // warning findings, repeats included
  std::map<std::string, uint64_t> suppressed_by_rule;  // findings TMAGUARD_SUPPRESS silenced
  std::map<std::string, uint64_t> not_checkable;       // launches tmaguard could not check, by reason
  // Launches tmaguard did not get to check although it could have (no memory during the check, a launch from a signal
  // handler that interrupted another tmaguard call, an internal error), by reason: never said in silence.
  std::map<std::string, uint64_t> not_checked;
  uint64_t log_records_lost = 0;                       // records the log refused (written to stderr instead)
  uint64_t records_dropped = 0;  // records dropped: the log queue was full, or the reporter was busy over 2 s
  uint64_t metrics_failures = 0;  // metrics files that could not be written (TMAGUARD_METRICS)
  std::string version, revision;                       // which tmaguard wrote it (empty: not said)
  // The device-map audit (read back after launches): launches audited, buffers read, maps found in them, and
  // launches or buffers not read, by reason. Said only when the audit did or skipped something.
  uint64_t device_launches_audited = 0, device_buffers_read = 0, device_maps_found = 0;
  // Call sites taken for reported findings (TMAGUARD_STACK) and the time they took in all.
  uint64_t call_sites_taken = 0, call_site_ns = 0;
  // Tensor maps compared with the tensors the job declared (tmaguard.declared): absent from the record when none.
  uint64_t maps_compared_with_tensors = 0;
  // Maps whose large-tensor flag the repair cleared (TMAGUARD_REPAIR=large-tensor-flag): absent when none.
  uint64_t large_flags_cleared = 0;
  std::map<std::string, uint64_t> device_skipped;
};

//! One finding as a record; `action` is what the mode (or the rule) did about it.
std::string render_finding(const Finding& f, const ProcessContext& ctx, Action done, LogFormat fmt);

//! What inspect mode records once per distinct (kernel, tensor-map layout): enough to write a rule from.
struct InspectRecord {
  std::string kernel;
  std::array<unsigned, 3> grid{}, block{};
  std::vector<std::pair<std::size_t, std::size_t>> params;  // (offset, size) of every parameter
  struct Map {
    int order = 0;  // position among the launch's tensor maps
    MapPlace place;
    bool embedded = false;  // a map inside a larger parameter (a Params struct)
    DecodeResult decoded;
    std::string provenance;
  };
  std::vector<Map> maps;
};
std::string render_inspect(const InspectRecord& r, const ProcessContext& ctx, LogFormat fmt);

//! Inspect mode, at exit: what tmaguard could see of one kernel's tensor maps over the whole run.
struct CensusRecord {
  std::string kernel;
  uint64_t launches = 0;
  int params = 0;
  int maps_in_params = 0;   // 128-byte parameters that decoded as tensor maps
  int maps_in_structs = 0;  // maps found inside larger parameters
  int template_maps = 0;    // of those, per-group templates (every dim 1)
  int maps_in_device_memory = 0;  // maps read back from memory its parameters point to, after a launch (the most
                                  // any one audited launch showed)
  struct LargeParam {
    int param_index = 0;
    std::size_t size = 0;
    int maps = 0;
  };
  std::vector<LargeParam> large_params;  // parameters over 128 bytes, with how many maps each held
};
std::string render_census(const CensusRecord& r, const ProcessContext& ctx, LogFormat fmt);

std::string render_summary(const Summary& s, const ProcessContext& ctx, LogFormat fmt);

//! The labels every metric carries: bounded values only (no kernel names, no pointers).
struct MetricLabels {
  std::string host, pid, rank, job;  // rank and job "x" when unknown
  std::string version, mode;         // tmaguard_active's own
};
//! A summary in Prometheus' text exposition format (node_exporter's textfile collector reads it): tmaguard_active
//! (1, or 0 in the last write), launches seen and checked, maps decoded, findings by rule and severity, suppressed
//! findings by rule, not-checkable launches by reason, records lost.
std::string render_metrics(const Summary& s, const MetricLabels& labels, bool active);

//! The record a guarded process writes when it starts: which build, what it was told and from where.
struct StartRecord {
  std::string version, revision, mode, log_format, preload, program;
  std::vector<std::pair<std::string, std::pair<std::string, std::string>>> settings;  // name -> (value, source)
  std::vector<std::string> rules_files;
  bool builtin_rules = true;
};
std::string render_start(const StartRecord& r, const ProcessContext& ctx, LogFormat fmt);
//! The kinds of notice tmaguard writes about itself (notices.inc): each has one name, event and severity.
enum class Notice : uint8_t {
#define TG_NOTICE(id, name, event, severity, meaning) id,
#include "tmaguard/notices.inc"
#undef TG_NOTICE
};
struct NoticeInfo {
  const char* name;   // the start of its dedupe key
  const char* event;  // the record's event
  RecordSeverity severity;
  const char* meaning;
};
const NoticeInfo& notice_info(Notice n);
//! A tmaguard-internal notice (cannot work, bad configuration, a warning about a kernel): one line, with its kind's
//! event and severity.
std::string render_notice(Notice kind, std::string_view message, const ProcessContext& ctx, LogFormat fmt);
std::string format_time_utc(int64_t unix_ms);
//! One decoded map, as the records show it (text, or one JSON object).
std::string render_map(const TensorMapView& v, LogFormat fmt);

}  // namespace tmaguard
