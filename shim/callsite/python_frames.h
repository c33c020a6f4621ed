// tmaguard shim: the launching thread's Python frames (CPython 3.9 to 3.13), read without the GIL and without
// calling into Python (python_frames.cpp says how).
#pragma once

#include <cstddef>
#include <cstdint>

#include "tmaguard/frames.h"

namespace tmaguard {

//! This thread's Python frames as the interpreter holds them (code object and instruction), innermost first: cheap
//! enough to take for every audited launch; resolve_python() names them later.
inline constexpr std::size_t kMaxRawPythonFrames = 32;
struct RawPython {
  bool taken = false;
  struct Frame {
    uintptr_t code, instr;
  } frames[kMaxRawPythonFrames] = {};
  std::size_t n = 0;
  const char* note = nullptr;  // why there are none (a string that lives as long as the process)
};
//! Reads this thread's frame chain; false (with `raw.note`) when there is no Python, or no frame. Never fails, never
//! waits on the interpreter. `recent_look`: in a process where no interpreter was found, the last look for one will
//! do if it is younger than kPythonRelookMs (a look walks every loaded object under the loader's lock: the device
//! audit takes a call site at every audited launch, a finding a fresh look).
bool read_python_raw(RawPython& raw, bool recent_look = false);
inline constexpr long kPythonRelookMs = 100;
//! Names raw frames (file, line, function) into `site.python`, or says in `site.python_note` why there are none. A
//! code object freed since the frames were read is not believed (its type is checked) and ends the list.
void resolve_python(const RawPython& raw, CallSite& site);

}  // namespace tmaguard
