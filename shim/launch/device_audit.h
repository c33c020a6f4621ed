// tmaguard shim: the device-map audit. Tensor maps a kernel keeps in device memory (Triton's device-side
// descriptors in its global scratch, Inductor's TMA workspace, CUTLASS's per-group maps) are invisible at launch
// time: they are built or rewritten by the kernel itself. After the first launches of each kernel whose parameters
// hold device addresses, tmaguard copies the memory those addresses lead to (bounded, never past the allocation) into
// pinned memory of its own, in the launch's stream, after the kernel, and records an event; a worker thread of its
// own waits for the event, finds the maps in the bytes, and judges them (generic checks, a footprint past the end of
// the allocation, the user rules that name "param:N->AT" places). Findings come after the fact and say so.
//
//   launch (launch_checked) --> the kernel --> cuMemcpyDtoHAsync into a slot --> cuEventRecord   (the job's stream)
//   worker: cuEventQuery until done --> find_device_maps --> judge --> report --> slot free
//
// Never: a synchronisation of the job's streams, work added to a stream being captured into a graph (counted), a
// read of memory the driver did not allocate as device memory. Bounded: 64 slots (kSlotCount) of
// TMAGUARD_DEVICE_READ_BYTES.
#pragma once

#include <atomic>

#include "driver/cuda_names.h"
#include "kernels/kernel_table.h"
#include "launch/full_check.h"
#include "kernels/launch_view.h"

namespace tmaguard {


//! After a launch of `k` that the driver accepted: reads back what its pointer parameters lead to, in the launch's
//! stream order (a _ptsz launch's stream 0 is the per-thread default stream).
void audit_after_launch(const KernelInfo& k, const LaunchView& launch);

}  // namespace tmaguard
