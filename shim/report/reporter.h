// tmaguard shim: the reporter. Owns the log (spdlog over a sink of its own), dedupe, the mode's action on error
// findings, and the exit summary.
#pragma once

#include <string>
#include <vector>

#include "tmaguard/config.h"
#include "tmaguard/finding.h"
#include "tmaguard/records.h"

namespace tmaguard {

//! Opens the log the configuration names (stderr when none) and registers the reporter's lock with the fork handler
//! (the child starts with empty dedupe and counts). False with `error` set when it cannot be opened.
bool reporter_open(const Config& cfg, std::string* error);

//! Reports findings (deduplicated by rule, kernel, parameter) and applies the mode to error findings: kReject
//! when the launch must not run. In abort mode it writes the summary, flushes and aborts the process.
Verdict report_findings(std::vector<Finding>& findings);
//! Whether report_findings would write a record for any of these (one not deduplicated yet): a call site is taken
//! only for findings that will be written.
bool findings_unreported(const std::vector<Finding>& findings);
//! A one-line notice of this kind (warnings about tmaguard's own limits, failed encodes): said once per kind and
//! `detail` (a kernel's name, an entry point and reason; empty: once per kind).
void report_notice(Notice kind, const std::string& detail, const std::string& message);
//! A launch tmaguard cannot check for a known reason (e.g. FA4 dK/dV written with plain stores): counted in the
//! summary by reason, said once per reason.
void report_not_checkable(const std::string& reason, const std::string& message);
//! Inspect mode: writes the record once per key (kernel + tensor-map layout).
void report_inspect(const std::string& key, const InspectRecord& record);
//! Inspect mode's per-kernel census record (written at exit, before the summary).
void report_census(const CensusRecord& record);
//! The exit summary (registered with atexit once the reporter is open), then the last metrics (tmaguard_active 0).
void report_summary_at_exit();
//! A summary now: periodic (`final` false) or on a signal (`signal` names it); a final one is the last (false when
//! the final one was written already, or the reporter's lock was not free in time).
bool report_summary_now(bool final, const char* signal);
//! The counts so far, as a summary would give them (for the metrics; empty when the reporter is not open).
Summary current_summary();
//! One finished record, through the log (the start record when the log is stderr).
void report_line(const std::string& line);
//! The process context records carry, now.
ProcessContext report_context();

// ---- the fleet's view (fleet.cpp): the start record, the metrics file, the periodic summary and the signals
//! Writes the start record at load, where the log is a file (no CUDA call: the settings and a write).
void write_start_record_at_load();
//! Arming: the start record where it was not written at load, the first metrics, the summary thread, the signal
//! handlers (SIGTERM, SIGINT, SIGHUP: a summary, then the job's own handler or the default action).
void fleet_arm(const Config& cfg);
//! The metrics file (TMAGUARD_METRICS), atomically; `active` false in the last one.
void write_metrics(bool active);
//! The same for these settings: the file tmaguard-HOST-PID.prom in their metrics directory, replaced whole (a reader
//! never sees half a file); a write that fails is counted (metrics_write_failures) and said once.
void write_metrics_file(const Config& config, bool active);
//! Metrics files that could not be written (said once; counted in the summary).
uint64_t metrics_write_failures();

}  // namespace tmaguard
