// tmaguard shim: allocation ranges from cuPointerGetAttribute(s), with the encode wrappers' small cache.
#include "driver/allocations.h"

#include <atomic>
#include <mutex>

#include "driver/driver.h"
#include "process/fork_locks.h"

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

Range mapped_through(Range r, uint64_t end, uint64_t epoch) {
  Range next;
  for (int i = 0; i < 64 && r.end < end && allocation_at(r.end, epoch, &next) == Allocation::kFound &&
                  next.start == r.end;
       ++i)
    r.end = next.end;
  return r;
}

namespace {

constexpr uint64_t kJournal = 1024;
struct Freed {
  uint64_t start, end;
};
std::atomic<int> g_reads{0};
std::mutex g_journal_mu;
Freed g_journal[kJournal];  // the e-th free journaled (from 0) at e % kJournal
uint64_t g_journaled = 0;   // under g_journal_mu

std::mutex& journal_lock() {
  register_fork_lock(ForkLock::kFreeJournal, {[] { g_journal_mu.lock(); }, [] { g_journal_mu.unlock(); }, [] {
                       g_reads.store(0, std::memory_order_relaxed);  // the child has none of its parent's reads
                       g_journal_mu.unlock();
                     }});
  return g_journal_mu;
}

}  // namespace

void journal_reads(int delta) { g_reads.fetch_add(delta, std::memory_order_acq_rel); }
bool journal_wanted() { return g_reads.load(std::memory_order_relaxed) > 0; }

void journal_free(uint64_t start, uint64_t end) {
  std::lock_guard<std::mutex> lock(journal_lock());
  g_journal[g_journaled % kJournal] = {start, end};
  ++g_journaled;
}

uint64_t journal_epoch() {
  std::lock_guard<std::mutex> lock(journal_lock());
  return g_journaled;
}

Allocation allocation_at(uint64_t addr, uint64_t epoch, Range* out) {
  if (epoch != kAllocationsNow) {
    std::lock_guard<std::mutex> lock(journal_lock());
    if (g_journaled - epoch > kJournal) return Allocation::kUnknown;
    for (uint64_t e = epoch; e < g_journaled; ++e) {
      const Freed& f = g_journal[e % kJournal];
      if (addr >= f.start && addr < f.end) {
        *out = {f.start, f.end};
        return Allocation::kFound;
      }
    }
  }
  return device_allocation(addr, out) ? Allocation::kFound : Allocation::kNotAllocated;
}

}  // namespace tmaguard
