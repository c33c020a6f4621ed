// tmaguard shim: the facts arena (arena.h): 16 MiB segments mapped as needed, cut into 4 KiB spans, each span
// given to one block size (a multiple of 16 bytes; a span is the unit of blocks, not a page: pages are the kernel's,
// 4 KiB to 64 KiB, asked of sysconf, and populated whole); a list of freed blocks per size; the preparer thread, which keeps
// spans ready (populated and read once) so that an allocating thread finds its pages in place. And the library's
// operator new and delete, which send a FactsScope's blocks here (they are the library's own: the version script keeps
// them out of the job's symbol namespace).
#include "process/arena.h"

#include <pthread.h>
#include <sched.h>
#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <new>

#include "arch/cpu.h"
#include "process/fork_locks.h"
#include "thread/reentry.h"

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23  // Linux 5.14; older kernels answer EINVAL, and pages then fault on first use
#endif

namespace tmaguard {
namespace {

constexpr std::size_t kSpan = 4096;
constexpr std::size_t kSegment = std::size_t{16} << 20;
constexpr int kMaxSegments = static_cast<int>(kFactsMaxBytes / kSegment);
constexpr std::size_t kGrain = 16;  // blocks are multiples of 16 bytes, 16-byte aligned (operator new's alignment)
constexpr std::size_t kSizes = kFactsLargest / kGrain;
constexpr int kReadyMost = 256;  // spans the preparer keeps ready (1 MiB)
constexpr int kReadyLow = 128;   // fewer ready: the preparer is asked for more (once per 512 KiB used)
static_assert(kSegment % kSpan == 0 && kSpan % kFactsLargest == 0 && kSizes <= 256);

thread_local int t_depth __attribute__((tls_model("initial-exec"))) = 0;

// The arena's lock: held for a few dozen instructions (a block taken or given back, a span claimed), by
// threads building kernels' facts and by the preparer. A first launch takes it about 70 times: as a pthread mutex,
// about a microsecond of the launch.
class SpinLock {
 public:
  void lock() {
    while (held_.exchange(true, std::memory_order_acquire))
      for (int spins = 0; held_.load(std::memory_order_relaxed); ++spins) {
        if (spins < 128) {
          cpu::spin_pause();
        } else {
          sched_yield();  // the holder was preempted
        }
      }
  }
  void unlock() { held_.store(false, std::memory_order_release); }

 private:
  std::atomic<bool> held_{false};
};

enum class Preparer { kNone, kStarting, kIdle, kAsked, kBusy, kGone };

// Constant-initialised: nothing runs at load time. g_lock guards everything but the segment list, which only grows
// (a segment is written before the count that shows it, and never unmapped), so facts_free asks it without the lock.
// Nothing is allocated while g_lock is held (an allocation in a FactsScope takes it).
SpinLock g_lock;
uintptr_t g_segments[kMaxSegments];
std::atomic<int> g_segment_count{0};
uint8_t g_size_of_span[kMaxSegments][kSegment / kSpan];  // per span given to a size: that block size / kGrain - 1
void* g_free_blocks[kSizes];                              // per size: freed blocks, linked through their first word
uintptr_t g_cut[kSizes], g_cut_end[kSizes];               // per size: the rest of its newest span
uintptr_t g_next_span = 0, g_segment_end = 0;             // spans never handed out: [g_next_span, g_segment_end)
bool g_full = false;
uintptr_t g_ready[kReadyMost];  // spans the preparer made ready
int g_ready_count = 0;
Preparer g_preparer = Preparer::kNone;
FactsStats g_stats;
// The preparer sleeps on these (made with it; a forked child makes its own): g_asked under *g_sleep_lock.
std::mutex* g_sleep_lock = nullptr;
std::condition_variable* g_wake = nullptr;
bool g_asked = false;

void fork_prepare() { g_lock.lock(); }
void fork_parent() { g_lock.unlock(); }
// The child has no preparer (spans it was preparing are lost: at most kReadyMost); one starts when wanted.
void fork_child() {
  g_preparer = Preparer::kNone;
  g_sleep_lock = nullptr;  // the parent's preparer may have held it, or been mid-wait
  g_wake = nullptr;
  g_asked = false;
  g_lock.unlock();
}

SpinLock& facts_lock() {
  register_fork_lock(ForkLock::kArena, {fork_prepare, fork_parent, fork_child});
  return g_lock;
}

// The segment `p` lies in, or -1.
int segment_of(uintptr_t p) {
  const int n = g_segment_count.load(std::memory_order_acquire);
  for (int i = 0; i < n; ++i)
    if (p - g_segments[i] < kSegment) return i;
  return -1;
}

// Caller holds g_lock. A new segment, when the last is used up; false when none can be had.
bool next_segment() {
  const int n = g_segment_count.load(std::memory_order_relaxed);
  if (g_full || n == kMaxSegments) return false;
  void* m = mmap(nullptr, kSegment, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (m == MAP_FAILED) {
    g_full = true;
    return false;
  }
  g_segments[n] = reinterpret_cast<uintptr_t>(m);
  g_segment_count.store(n + 1, std::memory_order_release);
  g_next_span = g_segments[n];
  g_segment_end = g_next_span + kSegment;
  return true;
}

// Caller holds g_lock. Up to `most` spans never handed out, side by side in one segment: how many (0: none left).
int claim_spans(int most, uintptr_t* first) {
  if (g_next_span == g_segment_end && !next_segment()) return 0;
  const int n = static_cast<int>(std::min<std::size_t>(most, (g_segment_end - g_next_span) / kSpan));
  *first = g_next_span;
  g_next_span += n * kSpan;
  return n;
}

// Pages of the facts arena asked for in one call rather than faulted in one at a time. False: the kernel refused.
// The whole pages under [at, at + bytes) (a span lies inside one page of 4 KiB, or shares a 16 or 64 KiB one with its
// neighbours: populating a page again is harmless); segments start on a page, so the rounding stays inside one.
bool populate(uintptr_t at, std::size_t bytes) {
  const uintptr_t page = cpu::page_size(), first = at & ~(page - 1), end = (at + bytes + page - 1) & ~(page - 1);
  return madvise(reinterpret_cast<void*>(first), end - first, MADV_POPULATE_WRITE) == 0;
}

// Caller holds g_lock. A span for blocks of size class `c`: a ready one, else a fresh one populated here.
bool new_span(std::size_t c) {
  uintptr_t span = 0;
  if (g_ready_count > 0) {
    span = g_ready[--g_ready_count];
    ++g_stats.spans_ready_taken;
  } else {
    if (claim_spans(1, &span) == 0) return false;
    if (g_stats.populate_works) g_stats.populate_works = populate(span, kSpan);
  }
  const int seg = segment_of(span);
  g_size_of_span[seg][(span - g_segments[seg]) / kSpan] = static_cast<uint8_t>(c);
  const std::size_t size = (c + 1) * kGrain;
  g_cut[c] = span;
  g_cut_end[c] = span + kSpan / size * size;
  return true;
}

// One round of the preparer: claims fresh spans up to kReadyMost ready, populates them and reads a byte of each page
// (where a page's first use is a trip through the hypervisor, that trip is then taken here, not by the thread that
// allocates), and adds them to the ready ones. False: nothing to do (it is idle now) or nothing left (gone).
bool prepare_round() {
  uintptr_t first = 0;
  int n = 0;
  bool ask = false;
  {
    std::lock_guard<SpinLock> lock(g_lock);
    if (g_ready_count >= kReadyMost) {
      g_preparer = Preparer::kIdle;
      return false;
    }
    n = claim_spans(kReadyMost - g_ready_count, &first);
    g_preparer = n ? Preparer::kBusy : Preparer::kGone;  // none: the facts arena is full
    ask = g_stats.populate_works;
  }
  if (n == 0) return false;
  const bool populated = !ask || populate(first, n * kSpan);
  const std::size_t step = std::max<std::size_t>(kSpan, cpu::page_size());  // a byte of each page they lie in
  for (std::size_t off = 0; off < n * kSpan; off += step) (void)*reinterpret_cast<volatile const char*>(first + off);
  std::lock_guard<SpinLock> lock(g_lock);
  if (!populated) g_stats.populate_works = false;
  g_stats.spans_prepared += n;
  for (int i = 0; i < n; ++i) g_ready[g_ready_count++] = first + i * kSpan;  // only taken meanwhile: room for n
  return true;
}

// The preparer's thread: rounds while there is work, then sleeps until an allocating thread finds fewer than
// kReadyLow spans ready.
void* preparer(void*) {
  become_tmaguard_thread("tmaguard-facts");
  // SCHED_BATCH: woken by an allocating thread, it does not preempt it (nor any thread of the job) to run.
  const sched_param batch{};
  pthread_setschedparam(pthread_self(), SCHED_BATCH, &batch);
  std::mutex* sleep_lock = g_sleep_lock;
  std::condition_variable* wake = g_wake;
  for (;;) {
    while (prepare_round()) {
    }
    std::unique_lock<std::mutex> lock(*sleep_lock);
    wake->wait(lock, [] { return g_asked; });
    g_asked = false;
  }
  return nullptr;
}

// Starts the preparer (the first time spans run low). No thread: no preparer (allocating threads populate).
void start_preparer() {
  const int depth = t_depth;
  t_depth = 0;  // the preparer's own lock and wake are not facts (blocks in use count only those)
  auto* sleep_lock = new (std::nothrow) std::mutex;
  auto* wake = new (std::nothrow) std::condition_variable;
  t_depth = depth;
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  pthread_attr_setstacksize(&attr, 64 * 1024);
  g_sleep_lock = sleep_lock;
  g_wake = wake;
  pthread_t t;
  const bool started = sleep_lock && wake && pthread_create(&t, &attr, preparer, nullptr) == 0;
  pthread_attr_destroy(&attr);
  if (started) return;
  std::lock_guard<SpinLock> lock(g_lock);
  g_preparer = Preparer::kGone;
}

// Wakes the idle preparer.
void ask_preparer() {
  std::lock_guard<std::mutex> lock(*g_sleep_lock);
  g_asked = true;
  g_wake->notify_one();
}

// Caller holds g_lock. What to do about the preparer after an allocation: start it, ask it for spans, or nothing.
enum class PreparerStep { kNothing, kStart, kAsk };
PreparerStep preparer_step() {
  if (g_ready_count >= kReadyLow) return PreparerStep::kNothing;
  if (g_preparer == Preparer::kNone) {
    g_preparer = Preparer::kStarting;
    return PreparerStep::kStart;
  }
  if (g_preparer != Preparer::kIdle) return PreparerStep::kNothing;  // starting, asked, busy (it looks again) or gone
  g_preparer = Preparer::kAsked;
  return PreparerStep::kAsk;
}

// Caller holds g_lock. A block of size class `c` (nullptr: the facts arena is full).
void* take_block(std::size_t c) {
  const std::size_t size = (c + 1) * kGrain;
  void* p = g_free_blocks[c];
  if (p) {
    g_free_blocks[c] = *static_cast<void**>(p);
  } else {
    if (g_cut[c] + size > g_cut_end[c] && !new_span(c)) return nullptr;
    p = reinterpret_cast<void*>(g_cut[c]);
    g_cut[c] += size;
  }
  g_stats.in_use += size;
  return p;
}

}  // namespace

FactsScope::FactsScope() { ++t_depth; }
FactsScope::~FactsScope() { --t_depth; }

void* facts_allocate(std::size_t n) {
  if (t_depth == 0 || n > kFactsLargest) return nullptr;
  void* p;
  PreparerStep step;
  {
    std::lock_guard<SpinLock> lock(facts_lock());
    p = take_block(n == 0 ? 0 : (n - 1) / kGrain);
    step = preparer_step();
  }
  if (step == PreparerStep::kStart) start_preparer();
  if (step == PreparerStep::kAsk) ask_preparer();
  return p;
}

bool facts_owns(const void* p) { return p && segment_of(reinterpret_cast<uintptr_t>(p)) >= 0; }

bool facts_free(void* p) {
  const auto at = reinterpret_cast<uintptr_t>(p);
  const int seg = p ? segment_of(at) : -1;
  if (seg < 0) return false;
  std::lock_guard<SpinLock> lock(facts_lock());
  const std::size_t c = g_size_of_span[seg][(at - g_segments[seg]) / kSpan];
  *static_cast<void**>(p) = g_free_blocks[c];
  g_free_blocks[c] = p;
  g_stats.in_use -= (c + 1) * kGrain;
  return true;
}

FactsStats facts_stats() {
  std::lock_guard<SpinLock> lock(facts_lock());
  FactsStats s = g_stats;
  s.spans_ready = static_cast<std::size_t>(g_ready_count);
  return s;
}

}  // namespace tmaguard

// The library's operator new and delete (its C++ runtime is linked in and hidden, so these serve its code alone).
// Address-sanitized builds keep the sanitizer's, which track every block.
#if !defined(__SANITIZE_ADDRESS__)
void* operator new(std::size_t n) {
  if (void* p = tmaguard::facts_allocate(n)) return p;
  for (;;) {
    if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
    std::new_handler handler = std::get_new_handler();
    if (!handler) throw std::bad_alloc();
    handler();
  }
}
void operator delete(void* p) noexcept {
  if (!tmaguard::facts_free(p)) std::free(p);
}
void operator delete(void* p, std::size_t) noexcept { operator delete(p); }
#endif
