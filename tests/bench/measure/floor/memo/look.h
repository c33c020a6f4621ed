// The `floor` measurement build's look (shim/memo/look.h says how it is chosen): a resolved entry passes every
// launch straight to the driver, so that the thunk's cost alone is measured. It does not guard anything.
#pragma once

#include "kernels/launch_view.h"

namespace tmaguard {

__attribute__((always_inline)) inline void* repeat_look(void* real, const LaunchView&) { return real; }

}  // namespace tmaguard
