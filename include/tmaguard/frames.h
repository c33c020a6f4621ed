// tmaguard: where in the job a launch came from: the launching thread's native frames and its Python frames. Pure:
// the shim captures them (callsite/capture.h); this header holds what a record carries and the line-table arithmetic
// that turns a Python frame's instruction into a source line.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace tmaguard {

//! One native frame, innermost first: enough to read it (module and symbol) and to symbolize it offline
//! (`addr2line -e MODULE OFFSET`, or by build id).
struct NativeFrame {
  std::string module;     // the file the frame's code was loaded from
  std::string build_id;   // its GNU build id (hex), when it has one
  uint64_t offset = 0;    // the return address relative to the module's load bias (what addr2line takes)
  std::string symbol;     // demangled, when the module's dynamic or static symbol table names it
  uint64_t symbol_offset = 0;
};

//! One Python frame, innermost first.
struct PythonFrame {
  std::string file;
  int line = 0;  // 0: unknown
  std::string function;  // the code object's qualified name
};

//! The note of a process without a Python interpreter (text records leave it out: most C++ jobs have none).
inline constexpr const char* kNoInterpreter = "no Python interpreter in this process";

//! What a finding says about where its launch came from (TMAGUARD_STACK).
struct CallSite {
  bool native_taken = false;  // TMAGUARD_STACK asked for native frames (and they were read)
  bool python_taken = false;  // ... for Python frames
  std::vector<NativeFrame> native;
  std::vector<PythonFrame> python;
  std::string python_note;  // why there are no Python frames (no interpreter, a thread without Python frames, a
                            // CPython version tmaguard cannot read), or empty
};

//! The source line of instruction `index` (in 2-byte code units) of a code object, from its line table, as CPython
//! computes it (PyCode_Addr2Line): `format` 311 for the location table of CPython 3.11 and later
//! (Objects/locations.md), 310 for 3.10's co_linetable, 39 for 3.9's co_lnotab. 0 when the table says the instruction
//! has no line, or the table ends first.
int python_line(const uint8_t* table, std::size_t size, int first_line, int index, int format);

}  // namespace tmaguard
