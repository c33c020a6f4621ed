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
//! its allocation. `epoch`: the allocations as they were when a read queued at that journal epoch was made (below);
//! kAllocationsNow: as they are.
inline constexpr uint64_t kAllocationsNow = ~uint64_t{0};
Range mapped_through(Range r, uint64_t end, uint64_t epoch = kAllocationsNow);

// ---- the free journal: the device audit judges the maps it read against the allocations as they were when it read
// them, but it looks at them later (after the kernel, on its worker); a buffer freed in between (and its address
// handed to a smaller allocation) must change nothing. While reads are in flight, the free wrappers (hooks_memory.cpp)
// journal each device range they free before the driver frees it.

//! A read of device memory was queued (+1) or judged (-1); the journal is kept while any is in flight.
void journal_reads(int delta);
//! Whether frees must be journaled now (one relaxed load: the free wrappers' whole cost otherwise).
bool journal_wanted();
//! Journals [start, end) as freed now.
void journal_free(uint64_t start, uint64_t end);
//! How many frees were journaled so far: a read remembers this when it is queued.
uint64_t journal_epoch();
//! The device allocation `addr` lay in when a read queued at `epoch` was made: the earliest range journaled as freed
//! since then that holds it, else the driver's answer now (device_allocation). kUnknown when the journal dropped
//! frees made since `epoch` (more than it holds): then nothing is claimed. kAllocationsNow: the driver's answer.
Allocation allocation_at(uint64_t addr, uint64_t epoch, Range* out);

}  // namespace tmaguard
