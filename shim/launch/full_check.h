// tmaguard shim: the full check of one launch, shared by the launch wrappers and the CUDA graph kernel-node
// wrappers (a node about to be added or updated is judged exactly like a launch).
#pragma once

#include "driver/cuda_names.h"
#include "kernels/launch_view.h"
#include <vector>

#include "tmaguard/finding.h"

namespace tmaguard {

class Intercepted;
struct KernelInfo;

//! Collects the launch's tensor maps, judges them (unless the memo knows the same bytes clean) and reports, when
//! `call` (the wrapper's entry) is active. kReject: the launch must not happen (reject mode); abort mode never returns
//! after an error. `kernel`, when given, receives the kernel's facts (nullptr when tmaguard did not look).
Verdict check_launch(const Intercepted& call, const LaunchView& launch, const KernelInfo** kernel = nullptr);

//! Gives the findings of one launch the calling thread's call site (TMAGUARD_STACK), when any of them will be reported
//! (a repeat the reporter dedupes takes none).
void attach_call_site(std::vector<Finding>& findings);

//! What a wrapper returns for a launch (or graph node) check_launch refused: CUDA_ERROR_OUT_OF_MEMORY when there was no
//! memory to check it, else CUDA_ERROR_INVALID_VALUE.
inline CUresult refused(Verdict v) { return v == Verdict::kNoMemory ? CUDA_ERROR_OUT_OF_MEMORY : CUDA_ERROR_INVALID_VALUE; }

}  // namespace tmaguard
