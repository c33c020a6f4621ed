// tmaguard shim: the TMAGUARD_* environment, read once per process (the core's parse_config does the reading), for
// every room that needs a setting: the driver layer (TMAGUARD_LIBCUDA, needed before initialisation) and the runtime.
#pragma once

#include "tmaguard/config.h"

namespace tmaguard {

//! The settings in the environment when a CUDA call first needed them, with their errors and notices. Read once
//! (getenv; in a secure-execution process the variables that name files are ignored); thread-safe, never freed.
const ConfigResult& settings();

}  // namespace tmaguard
