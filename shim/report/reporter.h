// tmaguard shim: the reporter. Owns the log (spdlog over a sink of its own), dedupe, the mode's action on error
// findings, and the exit summary.
#pragma once

#include <string>
#include <vector>

#include "tmaguard/config.h"
#include "tmaguard/finding.h"
#include "tmaguard/report.h"

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
//! A one-line notice (warnings about tmaguard's own limits, failed encodes): deduplicated by key.
void report_notice(const std::string& key, const char* event, const std::string& message);
//! A launch tmaguard cannot check for a known reason (e.g. FA4 dK/dV written with plain stores): counted in the
//! summary by reason, said once per reason.
void report_not_checkable(const std::string& reason, const std::string& message);
//! Inspect mode: writes the record once per key (kernel + tensor-map layout).
void report_inspect(const std::string& key, const InspectRecord& record);
//! Inspect mode's per-kernel census record (written at exit, before the summary).
void report_census(const CensusRecord& record);
//! The exit summary (registered with atexit once the reporter is open).
void report_summary_at_exit();

}  // namespace tmaguard
