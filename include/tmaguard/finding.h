// tmaguard: what a check reports. One struct is the report schema (text and JSON render from it).
#pragma once

#include <optional>
#include <string>

#include "tmaguard/tensormap.h"

namespace tmaguard {

enum class Severity { kWarning, kError };
inline const char* to_string(Severity s) { return s == Severity::kError ? "error" : "warning"; }

struct Finding {
  std::string rule;      // stable kebab-case id, e.g. "fa4-dk-not-k-major"
  Severity severity = Severity::kError;
  std::string kernel;    // full kernel name
  std::string tensor;    // "dK", "dV" or "param N"
  int param_index = -1;  // kernel parameter index, -1 when the finding is about the kernel as a whole
  std::optional<TensorMapView> tensor_map;
  std::string expected;  // a sentence
  std::string observed;  // what was found instead
  std::string hint;      // how to fix
  std::string provenance;  // how the descriptor was made, when known
  std::string action;      // a rule's override of TMAGUARD_MODE ("abort", "reject", "log"); empty: the mode's
};

}  // namespace tmaguard
