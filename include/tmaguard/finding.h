// tmaguard: what a check reports. One struct is the report schema (text and JSON render from it).
#pragma once

#include <optional>
#include <string>

#include "tmaguard/launch.h"
#include "tmaguard/tensormap.h"

namespace tmaguard {

enum class Severity { kWarning, kError };
inline const char* to_string(Severity s) { return s == Severity::kError ? "error" : "warning"; }

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
  std::string action;      // a rule's override of TMAGUARD_MODE ("abort", "reject", "log"); empty: the mode's
};

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

}  // namespace tmaguard
