// tmaguard shim: the process's init state (thread_words.h: LaunchGlobals::state, read on every launch), and its one
// owner: every change of it goes through the functions below. runtime.cpp drives them (lazy initialisation on the
// first driver call); anything that finds tmaguard cannot work (the driver's room, initialisation) says so here.
//
//   kUninit --begin_init--> kIniting (with the initialiser's pid) --end_init--> kArmed | kDisabled
//   any --report_cannot_work--> kDisabled (said once);   a child's inherited kIniting --restart_init--> kUninit
#pragma once

#include <cstdint>
#include <string>

#include "thread/thread_words.h"

namespace tmaguard {

//! The state now (acquire).
inline uint64_t init_state() { return g_launch_globals.state.load(std::memory_order_acquire); }
//! kUninit -> initialising by this process: true when this thread won (it initialises now), false when `seen` was
//! not the state any more (`seen` is then the state found).
bool begin_init(uint64_t& seen);
//! The initialisation this thread began ended: armed when `ok` and nothing said tmaguard cannot work meanwhile,
//! else disabled. Returns whether tmaguard is armed.
bool end_init(bool ok);
//! A child forked while its parent initialised holds the parent's state (`seen`), whose initialising thread does not
//! exist here: back to kUninit, so that the child initialises for itself.
void restart_init(uint64_t seen);
//! tmaguard cannot work: disabled for good, said once, in one line, on stderr; the job runs on unguarded.
void report_cannot_work(const std::string& why);
//! Whether tmaguard said it cannot work.
bool cannot_work_said();

}  // namespace tmaguard
