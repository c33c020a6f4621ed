// tmaguard shim: the compute capability of the GPU a launch runs on (the current context's device), cached.
#pragma once

#include "tmaguard/descriptor_checks.h"

namespace tmaguard {

//! The architecture of the current context's device; Arch{} (unknown) when the driver cannot say. Called only on
//! the cold path (a launch whose maps are judged), cached per context.
Arch current_arch();

}  // namespace tmaguard
