// tmaguard core: the names of the core's kinds (severities, actions, data types, swizzles, interleaves, ragged
// layouts, encoders, map evidence): one function per kind, each a table.
#include "tmaguard/finding.h"
#include "tmaguard/launch.h"
#include "tmaguard/tensormap.h"

namespace tmaguard {

const char* to_string(Severity s) { return s == Severity::kError ? "error" : "warning"; }

const char* to_string(SeverityRule s) {
  switch (s) {
    case SeverityRule::kError: return "error";
    case SeverityRule::kWarning: return "warning";
    default: return "error on sm_90, else warning";
  }
}

const char* to_string(Action a) {
  switch (a) {
    case Action::kAbort: return "abort";
    case Action::kReject: return "reject";
    case Action::kLog: return "log";
    case Action::kInspect: return "inspect";
    default: return "none";
  }
}

std::optional<Action> rule_action(std::string_view name) {
  if (name == "abort") return Action::kAbort;
  if (name == "reject") return Action::kReject;
  if (name == "log") return Action::kLog;
  return std::nullopt;
}

const char* to_string(DataType t) {
  switch (t) {
    case DataType::kU8: return "uint8";
    case DataType::kU16: return "uint16";
    case DataType::kU32: return "uint32";
    case DataType::kS32: return "int32";
    case DataType::kU64: return "uint64";
    case DataType::kS64: return "int64";
    case DataType::kF16: return "float16";
    case DataType::kF32: return "float32";
    case DataType::kF64: return "float64";
    case DataType::kBF16: return "bfloat16";
    case DataType::kF32Ftz: return "float32_ftz";
    case DataType::kTF32: return "tfloat32";
    case DataType::kTF32Ftz: return "tfloat32_ftz";
    case DataType::k16U4Align8B: return "16u4_align8b";
    case DataType::k16U4Align16B: return "16u4_align16b";
    case DataType::k16U6Align16B: return "16u6_align16b";
    default: return "unknown";
  }
}

int element_size(DataType t) {
  static constexpr int kSize[13] = {1, 2, 4, 4, 8, 8, 2, 4, 8, 2, 4, 4, 4};
  const auto i = static_cast<unsigned>(t);
  return i < 13 ? kSize[i] : 0;
}

bool is_float(DataType t) {
  const auto i = static_cast<unsigned>(t);
  return i >= 6 && i <= 12;
}

uint32_t swizzle_span_word(uint32_t swizzle) { return swizzle == 0 ? 0x10u : (0x80u << swizzle); }
uint32_t swizzle_span(uint32_t swizzle) { return swizzle == 0 ? 0 : swizzle <= 3 ? (16u << swizzle) : 128u; }
const char* swizzle_name(uint32_t s) {
  static const char* kNames[] = {"none",         "32B", "64B", "128B", "128B_atom_32B", "128B_atom_32B_flip_8B",
                                 "128B_atom_64B"};
  return s < 7 ? kNames[s] : "invalid";
}
const char* interleave_name(uint32_t il) {
  static const char* kNames[] = {"none", "16B", "32B"};
  return il < 3 ? kNames[il] : "invalid";
}


const char* to_string(Ragged r) {
  switch (r) {
    case Ragged::kPtrShift: return "ptr-shift";
    case Ragged::kWraparound: return "wraparound";
    default: return "none";
  }
}


const char* to_string(Encoder e) {
  switch (e) {
    case Encoder::kDriver: return "driver";
    case Encoder::kCuteDsl: return "CuTe DSL";
    case Encoder::kDeviceBuilt: return "device-built";
    default: return "unknown";
  }
}


const char* to_string(MapEvidence e) {
  switch (e) {
    case MapEvidence::kKnown: return "a place a rule names";
    case MapEvidence::kParameter: return "a 128-byte parameter";
    case MapEvidence::kInStruct: return "a window inside a structure";
    default: return "device memory";
  }
}

}  // namespace tmaguard
