// tmaguard shim: where in the job a launch came from (TMAGUARD_STACK): the calling thread's native frames, innermost
// first (tmaguard's own left out), named by the loader's and the files' symbol tables, with each module's build id and
// offset for offline symbolization; and its Python frames (python_frames.h). Taken only for a finding about to be
// reported, never on a clean launch.
#pragma once

#include <cstddef>
#include <cstdint>

#include "callsite/python_frames.h"
#include "tmaguard/frames.h"
#include "tmaguard/config.h"

namespace tmaguard {

//! A call site as it is taken: return addresses and the interpreter's frames, no names yet (a few microseconds; the
//! device audit takes one for every launch it reads after).
struct RawCallSite {
  bool native = false;
  uintptr_t pcs[40] = {};
  std::size_t n = 0;
  RawPython python;
};
//! `max_native`: how many native frames at most (the device audit takes fewer than a finding: unwinding costs a few
//! microseconds a frame); `recent_look`: read_python_raw's (python_frames.h).
RawCallSite capture_raw_call_site(StackMode mode, std::size_t max_native = 32, bool recent_look = false);
//! Names a raw call site: modules, symbols, build ids, files and lines (a millisecond or two, for a finding only).
CallSite resolve_call_site(const RawCallSite& raw);
//! The calling thread's call site, as `mode` asks (kOff: nothing taken), named; its cost goes to the summary.
CallSite capture_call_site(StackMode mode);

}  // namespace tmaguard
