// tmaguard shim: allocation ranges from cuPointerGetAttribute(s), with the encode wrappers' small cache.
#include "allocations.h"

#include <mutex>

#include "driver.h"
#include "fork_locks.h"

namespace tmaguard {
namespace {

std::mutex g_range_mu;
Range g_ranges[64];
unsigned g_range_next = 0;

void range_lock() { g_range_mu.lock(); }
void range_unlock() { g_range_mu.unlock(); }

}  // namespace

Allocation allocation_now(uint64_t addr, Range* out) {
  auto get = TG_REAL(cuPointerGetAttribute);
  if (!get) return Allocation::kUnknown;
  CUdeviceptr start = 0;
  size_t size = 0;
  const CUresult a = get(&start, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, static_cast<CUdeviceptr>(addr));
  if (a == CUDA_ERROR_INVALID_VALUE) return Allocation::kNotAllocated;  // what the driver answers for such memory
  if (a != CUDA_SUCCESS || get(&size, CU_POINTER_ATTRIBUTE_RANGE_SIZE, static_cast<CUdeviceptr>(addr)) != CUDA_SUCCESS)
    return Allocation::kUnknown;
  *out = {static_cast<uint64_t>(start), static_cast<uint64_t>(start) + size};
  return Allocation::kFound;
}

Allocation allocation_of(uint64_t addr, Range* out) {
  register_fork_lock(ForkLock::kAllocationRanges, {range_lock, range_unlock, range_unlock});
  {
    std::lock_guard<std::mutex> lock(g_range_mu);
    for (const Range& r : g_ranges)
      if (addr >= r.start && addr < r.end) {
        *out = r;
        return Allocation::kFound;
      }
  }
  const Allocation a = allocation_now(addr, out);
  if (a != Allocation::kFound) return a;
  std::lock_guard<std::mutex> lock(g_range_mu);
  g_ranges[g_range_next++ % 64] = *out;
  return a;
}

bool device_allocation(uint64_t addr, Range* out) {
  auto get = TG_REAL(cuPointerGetAttributes);
  if (!get || addr == 0) return false;
  unsigned int type = 0;
  CUdeviceptr start = 0;
  size_t size = 0;
  CUpointer_attribute attrs[] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR,
                                 CU_POINTER_ATTRIBUTE_RANGE_SIZE};
  void* data[] = {&type, &start, &size};
  if (get(3, attrs, data, static_cast<CUdeviceptr>(addr)) != CUDA_SUCCESS) return false;
  if (type != CU_MEMORYTYPE_DEVICE || size == 0 || addr < start || addr - start >= size) return false;
  *out = {static_cast<uint64_t>(start), static_cast<uint64_t>(start) + size};
  return true;
}

Range mapped_through(Range r, uint64_t end) {
  Range next;
  for (int i = 0; i < 64 && r.end < end && allocation_now(r.end, &next) == Allocation::kFound && next.start == r.end; ++i)
    r.end = next.end;
  return r;
}

}  // namespace tmaguard
