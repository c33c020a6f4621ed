// tmaguard: what a check reports. One struct is the report schema (text and JSON render from it).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tmaguard/config.h"
#include "tmaguard/frames.h"
#include "tmaguard/launch.h"
#include "tmaguard/tensormap.h"

namespace tmaguard {

enum class Severity { kWarning, kError };
const char* to_string(Severity s);

//! The severity a finding id is reported at (findings.inc's column): always error, always warning, or error only on
//! the architecture the driver's encode rules were measured on (sm_90; descriptor_checks.h says which maps), else
//! warning.
enum class SeverityRule { kError, kWarning, kErrorOnSm90 };
const char* to_string(SeverityRule s);  // "error", "warning", "error on sm_90, else warning"

//! What is done about a finding, as its record's "action" says: nothing for a warning; for an error, the mode's
//! (abort, reject, log, inspect) or the rule's own (a rule's `action` key: abort, reject or log).
enum class Action { kNone, kAbort, kReject, kLog, kInspect };
const char* to_string(Action a);
//! A rule's `action` key: abort, reject or log; nullopt for anything else.
std::optional<Action> rule_action(std::string_view name);

//! Every finding id tmaguard and its built-in rules report (findings.inc), by the name its code uses.
enum class FindingId {
#define TG_FINDING(name, id, severity, meaning) name,
#include "tmaguard/findings.inc"
#undef TG_FINDING
};
//! One row of findings.inc.
struct FindingKind {
  FindingId which;
  const char* id;        // "fa4-dk-not-k-major"; "<rule id>-map-missing" for the ids every rule has
  SeverityRule severity;
  const char* meaning;   // one line
};
//! Every row of findings.inc, in its order.
const std::vector<FindingKind>& finding_kinds();
//! The id a finding kind is reported under; for the ids every rule has ("<rule id>-map-missing"), `rule`'s.
std::string finding_id(FindingId which, std::string_view rule = {});
//! The reference list of finding ids (docs/reference.md, `tmaguard-tool findings`), in Markdown.
std::string findings_markdown_table();

//! What happens to a launch (or a graph node about to be added or updated) once it was checked. kNoMemory: it could
//! not be checked for lack of host memory, and abort and reject mode do not run what they could not check (the
//! call returns CUDA_ERROR_OUT_OF_MEMORY, as the driver itself would when memory runs out).
enum class Verdict { kRun, kReject, kNoMemory };

struct Finding {
  std::string rule;  // stable kebab-case id, e.g. "fa4-dk-not-k-major"
  Severity severity = Severity::kError;
  std::string kernel;         // full kernel name
  std::string tensor;            // "dK", "dV" or "param N"
  std::optional<MapPlace> place;  // where the map sits; none when the finding is about the kernel as a whole
  std::optional<TensorMapView> tensor_map;
  std::string expected;    // a sentence
  std::string observed;    // what was found instead
  std::string hint;        // how to fix
  std::string provenance;  // how the descriptor was made, when known
  std::optional<Action> action;  // a rule's override of TMAGUARD_MODE (abort, reject, log); none: the mode's
  std::shared_ptr<const CallSite> call_site;  // where in the job the launch came from (TMAGUARD_STACK); shared by
                                              // the findings of one launch; null when not taken
  bool launch_unchecked = false;  // a rule knew the kernel but could not judge this launch (a map count or signature
                                  // it does not know, a map it names missing): the launch is counted as not checked
};
//! Whether a rule said it could not judge the launch these findings are of.
inline bool launch_unchecked(const std::vector<Finding>& findings) {
  for (const Finding& f : findings)
    if (f.launch_unchecked) return true;
  return false;
}

//! What is done about `f` under mode `m`: none for a warning; for an error the rule's action, else the mode's (inspect
//! mode never blocks, whatever the rule says).
Action action_in_mode(const Finding& f, Mode m);

//! A launch a rule recognises but cannot check (e.g. FA4's dK/dV written with plain stores, not through a map).
struct NotCheckable {
  std::string reason;   // counted in the summary by this text
  std::string message;  // said once per process
};

//! A finding about `map` (or about the kernel as a whole when map is null), with the map's location and decoded
//! view filled in. Every check builds its findings with this.
inline Finding make_finding(std::string rule, Severity severity, std::string_view kernel, std::string tensor,
                            const TensorMapParam* map) {
  Finding f;
  f.rule = std::move(rule);
  f.severity = severity;
  f.kernel = std::string(kernel);
  f.tensor = std::move(tensor);
  if (map) {
    f.place = map->place;
    if (map->decoded.ok()) f.tensor_map = map->decoded.view;
  }
  return f;
}
//! A finding of a row of findings.inc, at the row's severity (a row that is an error only on sm_90 is made an error:
//! its check lowers it where the map is not judged by the measured rules).
Finding make_finding(FindingId which, std::string_view kernel, std::string tensor, const TensorMapParam* map);

}  // namespace tmaguard
