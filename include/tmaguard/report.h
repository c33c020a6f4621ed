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

//! Facts about the reporting process stamped on every record.
struct ProcessContext {
  long pid = 0;
  long tid = 0;
  std::string rank;        // empty when not set
  std::string local_rank;  // empty when not set
  std::string host;        // the node's name
  std::string time;        // ISO-8601 UTC with milliseconds
};

struct Summary {
  uint64_t launches_seen = 0;
  uint64_t launches_checked = 0;
  uint64_t tensor_maps_decoded = 0;
  uint64_t clean_copies = 0;  // copies a thread took of a clean launch's maps (the reference of the byte compare)
  std::map<std::string, uint64_t> violations_by_rule;  // occurrences, repeats included
  std::map<std::string, uint64_t> not_checkable;       // launches tmaguard could not check, by reason
  // Launches tmaguard did not get to check although it could have (no memory during the check, a launch from a signal
  // handler that interrupted another tmaguard call, an internal error), by reason: never said in silence.
  std::map<std::string, uint64_t> not_checked;
  uint64_t log_records_lost = 0;                       // records the log refused (written to stderr instead)
  uint64_t records_dropped = 0;  // records dropped: the log queue was full, or the reporter was busy over 2 s
  std::string version, revision;                       // which tmaguard wrote it (empty: not said)
  // The device-map audit (read back after launches): launches audited, buffers read, maps found in them, and
  // launches or buffers not read, by reason. Said only when the audit did or skipped something.
  uint64_t device_launches_audited = 0, device_buffers_read = 0, device_maps_found = 0;
  // Call sites taken for reported findings (TMAGUARD_STACK) and the time they took in all.
  uint64_t call_sites_taken = 0, call_site_ns = 0;
  std::map<std::string, uint64_t> device_skipped;
};

//! One finding as a record; `action` is what the mode (or the rule) did about it.
std::string render_finding(const Finding& f, const ProcessContext& ctx, std::string_view action, LogFormat fmt);

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
//! A tmaguard-internal notice (cannot work, bad configuration, a warning about a kernel): one line.
std::string render_notice(std::string_view event, std::string_view message, const ProcessContext& ctx, LogFormat fmt);
std::string format_time_utc(int64_t unix_ms);
//! One decoded map, as the records show it (text, or one JSON object).
std::string render_map(const TensorMapView& v, LogFormat fmt);

}  // namespace tmaguard
