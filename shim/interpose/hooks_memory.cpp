// tmaguard shim: cuMemFree, cuMemFreeAsync and cuMemUnmap. While the device audit has reads in flight, each device
// range freed is journaled before the driver frees it (allocations.h), so that the maps a read brought back are judged
// against the allocations as they were when the bytes were read, not as they are when the worker looks. Otherwise a
// free costs one relaxed load. The driver's result is never changed.
#include "driver/allocations.h"
#include "runtime/intercept.h"

namespace {

// The range the driver allocated at `p` (the whole allocation a free releases), journaled.
void journal_allocation_at(CUdeviceptr p) {
  tmaguard::Range r;
  if (p && tmaguard::device_allocation(static_cast<uint64_t>(p), &r)) tmaguard::journal_free(r.start, r.end);
}

}  // namespace

CUresult TG_WRAPPER(cuMemFree_v2)(CUdeviceptr p) {
  TG_ENTER(cuMemFree_v2);
  if (tmaguard::journal_wanted() && call.active_if_started()) journal_allocation_at(p);
  return real(p);
}

CUresult TG_WRAPPER(cuMemFreeAsync)(CUdeviceptr p, CUstream s) {
  TG_ENTER(cuMemFreeAsync);
  if (tmaguard::journal_wanted() && call.active_if_started()) journal_allocation_at(p);
  return real(p, s);
}

CUresult TG_WRAPPER(cuMemFreeAsync_ptsz)(CUdeviceptr p, CUstream s) {
  TG_ENTER(cuMemFreeAsync_ptsz);
  if (tmaguard::journal_wanted() && call.active_if_started()) journal_allocation_at(p);
  return real(p, s);
}

CUresult TG_WRAPPER(cuMemUnmap)(CUdeviceptr p, size_t size) {
  TG_ENTER(cuMemUnmap);
  if (tmaguard::journal_wanted() && call.active_if_started() && p && size)
    tmaguard::journal_free(static_cast<uint64_t>(p), static_cast<uint64_t>(p) + size);
  return real(p, size);
}
