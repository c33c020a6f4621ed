// tmaguard shim: where a kernel's facts live. A kernel's first launch builds its facts (name, parameter layout, map
// places, the audit's plan: about 900 bytes in a dozen blocks) and keeps them. From the process heap, every 4 KiB of
// them is a page the process never used, and the first use of such a page is a fault: where page faults go through a
// hypervisor that is 10 to 14 us (measured on the CPU machine, a Firecracker VM; populating pages in one call costs
// 0.7 us a page there, and the first use after it still 4.8 us, unless another thread used the page first), so one
// first launch in five took 15 us instead of 4.
//
// So while a FactsScope lives on a thread, what tmaguard's code allocates with operator new (blocks up to
// kFactsLargest bytes) comes from memory of tmaguard's own, in 4 KiB spans that a thread of its own (the preparer,
// "tmaguard-facts", started at the first need, SCHED_BATCH) has populated with one madvise(MADV_POPULATE_WRITE) for
// many pages and read once, ahead of use; an allocating thread that finds no span ready populates one itself. Freed
// blocks are reused for blocks of their size; the memory is never returned (like the heap's), and past kFactsMaxBytes
// the heap serves.
//
// Why not std::pmr::unsynchronized_pool_resource: once its newest chunk of a size is full it scans every older chunk of
// that size before asking for a new one, so a job with 100,000 kernels would pay a scan of thousands of chunks at every
// new chunk. Why not the heap with its pages prepared ahead: the heap is the job's, and where its next block lies is
// glibc's to say.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tmaguard {

inline constexpr std::size_t kFactsLargest = 4096;         // larger blocks come from the heap
inline constexpr std::size_t kFactsMaxBytes = 1ull << 30;  // at most (16 MiB segments, mapped as needed)

//! While one lives on this thread, operator new takes blocks of at most kFactsLargest bytes from the facts arena.
//! Nestable; cheap (a thread-local count).
class FactsScope {
 public:
  FactsScope();
  ~FactsScope();
  FactsScope(const FactsScope&) = delete;
  FactsScope& operator=(const FactsScope&) = delete;
};

//! A block of `n` bytes (16-byte aligned) from the facts arena when a FactsScope lives on this thread; nullptr
//! otherwise, or when `n` is over kFactsLargest or the facts arena is full (the caller takes the heap's).
void* facts_allocate(std::size_t n);
//! Frees `p` and returns true when it came from facts_allocate; false otherwise (nothing done).
bool facts_free(void* p);
//! Whether `p` lies in the facts arena.
bool facts_owns(const void* p);

struct FactsStats {
  std::size_t in_use = 0;          // bytes in blocks not freed
  uint64_t spans_prepared = 0;     // spans the preparer made ready
  uint64_t spans_ready_taken = 0;  // spans an allocating thread found ready
  std::size_t spans_ready = 0;     // ready now
  bool populate_works = true;      // false: the kernel refused MADV_POPULATE_WRITE (pages fault on first use)
};
FactsStats facts_stats();

}  // namespace tmaguard
