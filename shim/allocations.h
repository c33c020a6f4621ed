// tmaguard shim: what the driver says about an address (its allocation), for encode warnings and the device audit.
#pragma once

#include <cstdint>

namespace tmaguard {

//! [start, end) of one driver allocation.
struct Range {
  uint64_t start = 0, end = 0;
};

//! What the driver says about an address: its allocation, not memory it allocated, or nothing (a driver without
//! cuPointerGetAttribute, or one that refuses the question): then tmaguard makes no claim at all.
enum class Allocation { kFound, kNotAllocated, kUnknown };
//! The allocation holding `addr`, answered from a small cache of recent ranges (a job encodes the same tensors over
//! and over; a range freed since may still answer, so use it only for warnings).
Allocation allocation_of(uint64_t addr, Range* out);
//! The same, asked of the driver now (never cached): what the device audit trusts.
Allocation allocation_now(uint64_t addr, Range* out);
//! Whether `addr` lies in device memory the driver allocated (device or managed memory, never host memory, pinned or
//! not), with its range: one cuPointerGetAttributes call, which answers for any address without an error.
bool device_allocation(uint64_t addr, Range* out);
//! `r` extended over the driver allocations that follow it without a gap, until it reaches `end` (at most 64 of
//! them): memory mapped piece by piece into one range (PyTorch's expandable segments map 20 MiB pieces with cuMemMap,
//! each its own allocation to the driver) is one span to a tensor, so a map reaching into the next piece is not past
//! its allocation.
Range mapped_through(Range r, uint64_t end);

}  // namespace tmaguard
