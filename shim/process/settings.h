// tmaguard shim: the TMAGUARD_* environment, read once per process (the core's parse_config does the reading), for
// every room that needs a setting: the driver layer (TMAGUARD_LIBCUDA, needed before initialisation) and the runtime.
#pragma once

#include "tmaguard/config.h"

namespace tmaguard {

//! The settings in the environment when a CUDA call first needed them, with their errors and notices. Read once
//! (getenv; in a secure-execution process the variables that name files are ignored); thread-safe, never freed.
//! Relative paths (TMAGUARD_RULES, TMAGUARD_LOG) are taken from the directory the process was in when the library was
//! loaded (note_load_directory), not the one it is in at its first CUDA call.
const ConfigResult& settings();
//! Notes the working directory (at load: runtime/at_load.cpp).
void note_load_directory();

}  // namespace tmaguard
