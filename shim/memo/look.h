// tmaguard shim, the memo room's door: how a repeat launch goes, and every tier of "known clean".
//
// A launch entry (interpose/hooks_launch.cpp; on x86-64 a thunk, arch/launch_thunk_x86_64.h, that keeps the caller's
// registers and stack as they came) calls repeat_look() below with the launch's handle and kernelParams:
//
//   1. the gate (thread/thread_words.h): tmaguard armed, not inside one of its own calls, not inspecting, no kernel
//      facts replaced since this thread's entries were made: one word of the thread's object (LaunchTls, memo.h)
//   2. the thread's entry for the handle (memo.h: MemoEntry, one line of 16): a kernel this thread launched before
//   3. no maps and no watched places (MapsAt::kNowhere): passed here, inline                            --> driver
//   4. maps_pass_wide/_narrow (passes.cpp): the watched places' words 13 still 0 (no map appeared where there was
//      none), then the maps' bytes against the entry's copy of a clean launch; else the ring's next layer (a kernel
//      launched per layer); else the launch key among the entry's clean keys                          --> driver
//
// What the look could not pass goes to the wrapper's after_fast_pass, which asks slow_pass() (passes.cpp):
//   5. the launch key against the kernel's last clean key and the process's clean keys; a kernel whose places live
//      in its KernelInfo (more maps than an entry holds) compared and keyed there                     --> driver
// and then to the full check (launch/full_check.cpp), which asks and tells the memo through memo.h:
//   6. entry() (the kernel's facts, searched on its first launch), the key again (is_clean_key), each map's content
//      hash (map_passed_before), a layout whose maps only moved (moved_maps_clean); else every map is decoded and
//      judged, and a clean launch is remembered (remember, remember_map, learn_moved_maps)     --> driver, or refused
//
// Every tier of "known clean" is kept by this room alone (docs/how-it-works.md#what-tmaguard-remembers-as-clean has
// what each keys on, what forgets it and its memory):
//   per thread    its entries and their watch lists (memo.h), each entry's CleanBlock: the copy, 64 clean keys, a
//                 LayerRing of the layers' copies (memo_inside.h; memo.cpp keeps them)
//   per kernel    its last clean key and its compiled moved layouts, stored in its KernelInfo (kernels/) and written
//                 by memo.cpp alone
//   per process   the clean launch keys and the content hashes of maps that passed the generic checks (memo.cpp)
//
// What a repeat costs is how many lines it touches: the thread's object (gate and entry), the entry's copy and the
// caller's maps; on a GPU host the driver's own work between launches evicts them (docs/verification.md).
//
// A measurement build (CMake's TMAGUARD_MEASURE) puts tests/bench/measure/<variant>/ first on the include path, whose
// memo/look.h defines repeat_look() its own way (floor: no look at all; lookup: the look without the map compare);
// shipped builds compile this file, and the launch path holds no measurement branch.
#pragma once

#include "kernels/launch_view.h"
#include "memo/memo.h"

namespace tmaguard {

//! The driver's function `real` when the memo passes the launch without a check (a known kernel's repeat), else
//! nullptr (and nullptr while the driver's function is not resolved).
__attribute__((always_inline)) inline void* repeat_look(void* real, const LaunchView& v) {
  return real && fast_pass(v) ? real : nullptr;
}

}  // namespace tmaguard
