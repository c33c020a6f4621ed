// tmaguard core: a summary as Prometheus text-format metrics (the textfile collector's input). Pure.
#include <fmt/format.h>

#include "tmaguard/records.h"

namespace tmaguard {
namespace {

// A label value as the text format writes it: backslash, double quote and newline escaped.
std::string label(std::string_view v) {
  std::string out;
  for (const char c : v) {
    if (c == '\\') out += "\\\\";
    else if (c == '"') out += "\\\"";
    else if (c == '\n') out += "\\n";
    else out += c;
  }
  return out;
}

struct Writer {
  std::string text;
  std::string common;  // host="..",pid="..",rank="..",job=".."
  void family(const char* name, const char* type, const char* help) {
    text += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
  }
  void sample(const char* name, uint64_t value, const std::string& extra = "") {
    text += fmt::format("{}{{{}{}}} {}\n", name, common, extra, value);
  }
};

}  // namespace

std::string render_metrics(const Summary& s, const MetricLabels& l, bool active) {
  Writer w;
  w.common = fmt::format("host=\"{}\",pid=\"{}\",rank=\"{}\",job=\"{}\"", label(l.host), label(l.pid), label(l.rank),
                         label(l.job));
  w.family("tmaguard_active", "gauge", "1 while a guarded process runs, 0 in its last write (it ended)");
  w.sample("tmaguard_active", active ? 1 : 0,
           fmt::format(",version=\"{}\",mode=\"{}\"", label(l.version), label(l.mode)));
  w.family("tmaguard_launches_seen_total", "counter", "kernel launches that reached tmaguard");
  w.sample("tmaguard_launches_seen_total", s.launches_seen);
  w.family("tmaguard_launches_checked_total", "counter", "launches whose tensor maps were judged or known clean");
  w.sample("tmaguard_launches_checked_total", s.launches_checked);
  w.family("tmaguard_tensor_maps_decoded_total", "counter", "tensor maps decoded");
  w.sample("tmaguard_tensor_maps_decoded_total", s.tensor_maps_decoded);
  w.family("tmaguard_findings_total", "counter", "findings by rule and severity, repeats included");
  for (const auto& [rule, n] : s.violations_by_rule)
    w.sample("tmaguard_findings_total", n, fmt::format(",rule=\"{}\",severity=\"error\"", label(rule)));
  for (const auto& [rule, n] : s.warnings_by_rule)
    w.sample("tmaguard_findings_total", n, fmt::format(",rule=\"{}\",severity=\"warning\"", label(rule)));
  w.family("tmaguard_suppressed_total", "counter", "findings TMAGUARD_SUPPRESS silenced, by rule");
  for (const auto& [rule, n] : s.suppressed_by_rule)
    w.sample("tmaguard_suppressed_total", n, fmt::format(",rule=\"{}\"", label(rule)));
  w.family("tmaguard_not_checkable_total", "counter", "launches tmaguard cannot check, by reason");
  for (const auto& [reason, n] : s.not_checkable)
    w.sample("tmaguard_not_checkable_total", n, fmt::format(",reason=\"{}\"", label(reason)));
  w.family("tmaguard_log_records_lost_total", "counter", "records the log refused or dropped");
  w.sample("tmaguard_log_records_lost_total", s.log_records_lost + s.records_dropped);
  return w.text;
}

}  // namespace tmaguard
