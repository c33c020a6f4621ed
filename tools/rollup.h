// tmaguard-tool report: the roll-up of JSON-lines logs of any number of processes, ranks and hosts.
#pragma once

#include <string>
#include <vector>

namespace tmaguard_tool {

struct ReportOptions {
  bool records = false;  // also print every record as a line of text
  bool json = false;     // one JSON document instead of the text report
  std::string fail_on;   // "error" or "warning": exit 1 when a finding at or above it is in the logs ("": never)
};

//! Reads the logs (files, or directories: every *.jsonl in them) record by record (memory bounded by the distinct rules, kernels, hosts, ranks, call sites and
//! processes, not by the log's size) and prints the roll-up. Exit status: 0; 1 when --fail-on found such a finding or
//! a line was no record; 2 when a log cannot be read.
int report(const std::vector<std::string>& files, const ReportOptions& options);

//! This build, as the tool and its report name it ("tmaguard 0.2.0 (git REV)").
const std::string& this_build();

//! A string from a log, safe to print on a terminal (control bytes as \xNN, bidi controls as \uNNNN).
std::string printable(std::string_view s);

}  // namespace tmaguard_tool
