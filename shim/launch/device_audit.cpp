// tmaguard shim: the device-map audit (device_audit.h): read-back slots, the worker, judging what was read.
#include "launch/device_audit.h"

#include <pthread.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <mutex>
#include <vector>

#include <fmt/format.h>

#include "driver/allocations.h"
#include "launch/declared.h"
#include "callsite/capture.h"
#include "process/counters.h"
#include "thread/reentry.h"
#include "driver/device_arch.h"
#include "driver/driver.h"
#include "process/fork_locks.h"
#include "report/reporter.h"
#include "runtime/runtime.h"
#include "core/struct_search.h"
#include "tmaguard/judge.h"
#include "tmaguard/tensor_match.h"
#include "tmaguard/records.h"

namespace tmaguard {
namespace {

constexpr int kSlotCount = 64;        // reads in flight, process-wide
constexpr std::size_t kReadsPerLaunch = 8;  // distinct allocations read after one launch, at most

// One read in flight: `bytes` bytes from device address `address` (what parameter place `pointer` held) into
// `host`, done when `event` is.
struct ReadSlot {
  uint8_t* host = nullptr;
  CUevent event = nullptr;
  CUcontext event_ctx = nullptr;  // the context `event` was created in
  CUcontext ctx = nullptr;        // the launch's context
  const KernelInfo* kernel = nullptr;
  MapPlace pointer;
  uint64_t address = 0;
  std::size_t bytes = 0;
  bool last_of_launch = false;  // the launch's last read (the launch counts as audited once its reads are judged)
  Geometry geometry{};          // the launch's grid and block (inspect records)
  RawCallSite site;             // where the launch came from (TMAGUARD_STACK), named only for a finding
  uint64_t epoch = 0;           // the free journal's epoch when the read was queued (allocations.h)
  uint64_t generation = 0;      // bumped each time the slot is queued: a poll of an older read never claims it
  bool claimed = false;         // being judged (by the worker, or by a launch waiting for a slot)
  // The launching thread's declared tensors at the launch (declared.h): the maps read back are judged against them.
  DeclaredTensor declared[kMaxDeclared];
  std::size_t declared_count = 0;
};

// Process-wide state; g_mu guards everything but the slots' own fields while a read is in flight (only the worker
// touches a pending slot).
std::mutex g_mu;
std::condition_variable* g_cv = nullptr;  // the worker waits for work, the exit drain for an empty queue (made on
                                          // first use: nothing runs at load time)
ReadSlot g_slots[kSlotCount];
std::vector<int>* g_free = nullptr;   // free slots
std::deque<int>* g_pending = nullptr;  // reads in flight, oldest first
uint8_t* g_pinned = nullptr;           // kSlotCount x the read size, pinned (allocated on first use)
bool g_pinned_failed = false;
bool g_worker_running = false;
bool g_stopping = false;  // at exit: the worker finishes the read at hand and stops

void fork_prepare() { g_mu.lock(); }
void fork_parent() { g_mu.unlock(); }
// The child has no worker and cannot use its parent's CUDA state: it starts with no slots, pinned memory or events.
void fork_child() {
  for (ReadSlot& s : g_slots) s = ReadSlot{};
  g_free = nullptr;
  g_pending = nullptr;
  g_pinned = nullptr;
  g_pinned_failed = false;
  g_worker_running = false;
  g_stopping = false;
  g_cv = nullptr;  // the parent's may be mid-wait: the child makes its own
  g_mu.unlock();
}

std::mutex& audit_lock() {
  register_fork_lock(ForkLock::kDeviceAudit, {fork_prepare, fork_parent, fork_child});
  return g_mu;
}

// Runs `fn` with this thread allowed to make calls a graph capture in global mode would otherwise refuse (and be
// invalidated by): tmaguard's own allocations never touch a stream.
void relaxed(const std::function<void()>& fn) {
  auto exchange = TG_REAL(cuThreadExchangeStreamCaptureMode);
  CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_RELAXED;
  const bool swapped = exchange && exchange(&mode) == CUDA_SUCCESS;
  fn();
  if (swapped) exchange(&mode);
}

// ---- the worker

// The bytes a map covers, past the allocation its address lies in and any that follow it without a gap (no claim for
// a template or a map built on address arithmetic: map_range says which): a finding when the tensor reaches past.
std::optional<Finding> beyond_allocation(const ReadSlot& s, const Range& r, const TensorMapParam& m) {
  const TensorMapView& v = m.decoded.view;
  const std::optional<ByteRange> span = template_map(v) ? std::nullopt : map_range(v.encode_args());
  const uint64_t end = span ? mapped_through(r, span->end, s.epoch).end : 0;
  if (!span || span->end <= end) return std::nullopt;
  Finding f = make_finding(FindingId::kTmapBeyondAllocation, s.kernel->name,
                           "param " + to_string(m.place), &m);
  f.expected = fmt::format("the tensor the map describes ({} bytes from 0x{:x}) inside its allocation "
                           "[0x{:x}, 0x{:x})",
                           span->end - span->first, span->first, r.start, end);
  f.observed = fmt::format("it reaches {} bytes past the allocation's end", span->end - end);
  f.hint = "the descriptor's dims or strides are larger than the tensor it was built for (a wrong shape or "
           "stride passed to the device-side descriptor)";
  return f;
}

// The maps in what one read brought back whose tensors lie in device memory the driver allocated (bytes that merely
// look like one elsewhere do not count); a map repeated byte for byte (every program's copy) is taken at its first
// place.
std::vector<TensorMapParam> maps_read_back(const ReadSlot& s, std::vector<Finding>& findings) {
  std::vector<TensorMapParam> maps;
  std::vector<uint64_t> seen_bytes;
  for (DeviceWindow& w : find_device_maps(s.host, s.bytes, s.address)) {
    const uint64_t h = content_hash(s.host + w.at);
    if (std::find(seen_bytes.begin(), seen_bytes.end(), h) != seen_bytes.end()) continue;
    seen_bytes.push_back(h);
    Range r;
    // A ragged map's address lies below its tensor by design: the tensor's base is what the allocation holds.
    const Allocation then = allocation_at(judged_view(w.decoded.view).address, s.epoch, &r);
    if (then == Allocation::kUnknown) {  // freed since the read, and the journal no longer says what it was
      audit_skipped(AuditSkip::kAllocationForgotten);
      continue;
    }
    if (then != Allocation::kFound) continue;
    TensorMapParam m;
    m.place = MapPlace::device(s.pointer.param, s.pointer.offset, w.at);
    m.decoded = std::move(w.decoded);
    if (auto f = beyond_allocation(s, r, m)) findings.push_back(std::move(*f));
    maps.push_back(std::move(m));
  }
  return maps;
}

constexpr const char* kReadBackProvenance = "built or written on the device; read back after the kernel ran";

void inspect_read_back(const ReadSlot& s, const std::vector<TensorMapParam>& maps) {
  const KernelInfo& k = *s.kernel;
  InspectRecord rec;
  rec.kernel = k.name;
  rec.grid = {s.geometry.gx, s.geometry.gy, s.geometry.gz};
  rec.block = {s.geometry.bx, s.geometry.by, s.geometry.bz};
  for (std::size_t i = 0; i < k.layout.offsets.size(); ++i) rec.params.emplace_back(k.layout.offsets[i], k.layout.sizes[i]);
  for (std::size_t i = 0; i < maps.size(); ++i)
    rec.maps.push_back({static_cast<int>(i), maps[i].place, false, maps[i].decoded, kReadBackProvenance});
  report_inspect("inspect|" + std::to_string(layout_key(k.name, maps)), rec);
}

// The maps in what one read brought back, judged and reported.
void examine(const ReadSlot& s) {
  const KernelInfo& k = *s.kernel;
  std::vector<Finding> findings;
  std::vector<TensorMapParam> maps = maps_read_back(s, findings);
  audit_count(AuditCount::kBuffersRead);
  if (s.last_of_launch) audit_count(AuditCount::kLaunchesAudited);
  if (maps.empty()) return;
  audit_count(AuditCount::kMapsFound, maps.size());
  int seen = k.audit.most_maps.load(std::memory_order_relaxed);
  while (seen < static_cast<int>(maps.size()) &&
         !k.audit.most_maps.compare_exchange_weak(seen, static_cast<int>(maps.size()), std::memory_order_relaxed)) {
  }
  if (mode() == Mode::kInspect) inspect_read_back(s, maps);
  Judgement j = judge_launch(rules(), k.audit.rules, k.name, maps, current_arch());
  for (const NotCheckable& n : j.not_checkable) report_not_checkable(n.reason, n.message);
  findings.insert(findings.end(), j.findings.begin(), j.findings.end());
  const std::vector<bool> stored = s.declared_count ? stored_maps(rules(), k.audit.rules, maps) : std::vector<bool>{};
  if (s.declared_count) count_compared_with_tensors(maps_into_tensors(maps, s.declared, s.declared_count));
  for (std::size_t i = 0; i < maps.size() && s.declared_count; ++i)
    if (auto f = tensor_finding(k.name, maps[i], s.declared, s.declared_count, stored[i]))
      findings.push_back(std::move(*f));
  if (findings.empty()) return;
  const auto site = s.site.native || s.site.python.taken
                        ? std::make_shared<const CallSite>(resolve_call_site(s.site))
                        : std::shared_ptr<const CallSite>();
  for (Finding& f : findings) {
    f.provenance = kReadBackProvenance;
    f.call_site = site;
    // The launch already ran: reject mode has nothing left to refuse, so it logs.
    if (action_in_mode(f, mode()) == Action::kReject) f.action = Action::kLog;
  }
  report_findings(findings);
}

void nap(long ns) {
  const timespec t{0, ns};
  nanosleep(&t, nullptr);
}

// Caller holds g_mu. Claims the slot for judging when it still holds the read a poll saw (`generation`) and nobody
// judges it yet.
bool claim_slot(int i, uint64_t generation) {
  ReadSlot& s = g_slots[i];
  if (s.claimed || s.generation != generation ||
      std::find(g_pending->begin(), g_pending->end(), i) == g_pending->end())
    return false;
  s.claimed = true;
  return true;
}

// Caller holds g_mu. The slot's read is judged: the slot is free again.
void release_slot(int i) {
  g_pending->erase(std::find(g_pending->begin(), g_pending->end(), i));
  if (g_slots[i].kernel) g_slots[i].kernel->audit.pins.fetch_sub(1, std::memory_order_acq_rel);
  g_slots[i].kernel = nullptr;
  g_slots[i].claimed = false;
  g_free->push_back(i);
  journal_reads(-1);
}

// Judges a claimed slot's read (no lock held): a read whose event failed is dropped unjudged.
void judge_claimed(ReadSlot& s, CUresult event_state) {
  if (event_state != CUDA_SUCCESS) return;
  try {
    examine(s);
  } catch (...) {
    // a record that cannot be built is lost, never the job
  }
}

void* worker(void*) {
  become_tmaguard_thread("tmaguard-audit");
  auto exchange = TG_REAL(cuThreadExchangeStreamCaptureMode);
  CUstreamCaptureMode relaxed_mode = CU_STREAM_CAPTURE_MODE_RELAXED;
  if (exchange) exchange(&relaxed_mode);
  auto query = TG_REAL(cuEventQuery);
  auto set_ctx = TG_REAL(cuCtxSetCurrent);
  CUcontext current = nullptr;
  long pause = 20 * 1000;
  for (;;) {
    std::vector<std::pair<int, uint64_t>> in_flight;
    {
      std::unique_lock<std::mutex> lock(g_mu);
      g_cv->wait(lock, [] { return g_stopping || (g_pending && !g_pending->empty()); });
      if (g_stopping) {
        g_worker_running = false;
        g_cv->notify_all();
        return nullptr;
      }
      for (const int i : *g_pending)
        if (!g_slots[i].claimed) in_flight.emplace_back(i, g_slots[i].generation);
    }
    // Every read in flight is polled, never waited on: the job's streams are never synchronised, a slow stream holds
    // up no other, and the exit drain can stop the worker.
    std::vector<std::pair<int, CUresult>> done;
    for (const auto& [i, generation] : in_flight) {
      ReadSlot& s = g_slots[i];
      CUcontext ctx;
      CUevent event;
      {
        std::lock_guard<std::mutex> lock(g_mu);
        if (s.claimed || s.generation != generation) continue;  // a launch waiting for a slot took it
        ctx = s.ctx;
        event = s.event;
      }
      if (ctx != current && set_ctx && set_ctx(ctx) == CUDA_SUCCESS) current = ctx;
      const CUresult rc = query ? query(event) : CUDA_ERROR_NOT_FOUND;
      if (rc == CUDA_ERROR_NOT_READY) continue;
      std::lock_guard<std::mutex> lock(g_mu);
      if (claim_slot(i, generation)) done.emplace_back(i, rc);
    }
    if (done.empty()) {
      nap(pause);
      pause = std::min(pause * 2, 2L * 1000 * 1000);
      continue;
    }
    pause = 20 * 1000;
    for (const auto& [i, rc] : done) judge_claimed(g_slots[i], rc);
    std::lock_guard<std::mutex> lock(g_mu);
    for (const auto& [i, rc] : done) release_slot(i);
    g_cv->notify_all();
  }
}

// At exit, before the summary (registered after it): reads still in flight get up to two seconds, then the worker
// stops and what is left is counted.
void drain_at_exit() {
  std::unique_lock<std::mutex> lock(g_mu);
  if (!g_worker_running) return;
  g_cv->wait_for(lock, std::chrono::seconds(2), [] { return !g_pending || g_pending->empty(); });
  if (g_pending && !g_pending->empty()) audit_skipped(AuditSkip::kUnfinishedAtExit, g_pending->size());
  g_stopping = true;
  g_cv->notify_all();
  g_cv->wait_for(lock, std::chrono::milliseconds(200), [] { return !g_worker_running; });
}

// Caller holds g_mu. Pinned memory, the free list and the worker, on first use; false when there is no pinned memory.
bool ready_locked() {
  if (!g_cv) g_cv = new std::condition_variable;
  if (!g_free) {
    g_free = new std::vector<int>;
    g_pending = new std::deque<int>;
    for (int i = kSlotCount - 1; i >= 0; --i) g_free->push_back(i);
  }
  if (!g_pinned && !g_pinned_failed) {
    auto alloc = TG_REAL(cuMemHostAlloc);
    void* p = nullptr;
    const std::size_t total = kSlotCount * config().device_read_bytes;
    relaxed([&] {
      if (!alloc || alloc(&p, total, CU_MEMHOSTALLOC_PORTABLE) != CUDA_SUCCESS) p = nullptr;
    });
    g_pinned = static_cast<uint8_t*>(p);
    g_pinned_failed = !p;
    if (!p)
      report_notice(Notice::kDeviceAuditNoMemory, "",
                    "cannot allocate pinned host memory for the device-map audit: maps in device memory are not read");
    for (int i = 0; p && i < kSlotCount; ++i) g_slots[i].host = g_pinned + i * config().device_read_bytes;
  }
  if (!g_pinned) return false;
  if (!g_worker_running) {
    pthread_t t;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    if (pthread_create(&t, &attr, worker, nullptr) == 0) {
      g_worker_running = true;
      static std::atomic<bool> registered{false};
      if (!registered.exchange(true)) std::atexit(drain_at_exit);
    }
    pthread_attr_destroy(&attr);
  }
  return g_worker_running;
}

// Caller holds g_mu (through `lock`). TMAGUARD_DEVICE_AUDIT=all with every slot in flight: the oldest read of the
// launch's context is waited for (its event polled, at most kAllWait) and judged here, which frees its slot. A read
// that does not finish in time is left to the worker (and the launch's read is counted as skipped).
constexpr auto kAllWait = std::chrono::seconds(10);
void judge_oldest_read(std::unique_lock<std::mutex>& lock, CUcontext ctx) {
  int idx = -1;
  for (const int i : *g_pending)
    if (!g_slots[i].claimed && g_slots[i].ctx == ctx) {
      idx = i;
      break;
    }
  auto query = TG_REAL(cuEventQuery);
  if (idx < 0 || !query) return;
  ReadSlot& s = g_slots[idx];
  s.claimed = true;
  const CUevent event = s.event;
  lock.unlock();
  const auto deadline = std::chrono::steady_clock::now() + kAllWait;
  long pause = 1000;
  CUresult rc;
  while ((rc = query(event)) == CUDA_ERROR_NOT_READY && std::chrono::steady_clock::now() < deadline) {
    nap(pause);
    pause = std::min(pause * 2, 1000L * 1000);
  }
  if (rc != CUDA_ERROR_NOT_READY) judge_claimed(s, rc);
  lock.lock();
  if (rc == CUDA_ERROR_NOT_READY) {
    s.claimed = false;
    return;
  }
  release_slot(idx);
  g_cv->notify_all();
}

// A launch's share of the audit budget: false when its kernel's audits are used up.
bool claim(const KernelInfo& k) {
  uint64_t left = k.audit.launches_left.load(std::memory_order_relaxed);
  while (left != 0) {
    if (left == kAuditEveryLaunch) return true;
    if (k.audit.launches_left.compare_exchange_weak(left, left - 1, std::memory_order_relaxed)) return true;
  }
  return false;
}

// The driver's calls one audit makes (a driver without the first four: no kernel is audited).
struct AuditCalls {
  tg_pfn_cuStreamIsCapturing capturing = TG_REAL(cuStreamIsCapturing);
  tg_pfn_cuMemcpyDtoHAsync_v2 copy = TG_REAL(cuMemcpyDtoHAsync_v2);
  tg_pfn_cuEventRecord record = TG_REAL(cuEventRecord);
  tg_pfn_cuEventCreate create = TG_REAL(cuEventCreate);
  tg_pfn_cuEventDestroy_v2 destroy = TG_REAL(cuEventDestroy_v2);
  bool usable() const { return capturing && copy && record && create; }
};

// One pointer of the launch worth reading: device memory the driver allocated, at least one map long.
struct Read {
  MapPlace pointer;
  uint64_t address;
  std::size_t bytes;
};

std::vector<Read> reads_of(const KernelInfo& k, const LaunchArgs& args) {
  std::vector<Read> reads;
  for (const PointerWords& run : k.audit.pointers)
    for (uint32_t i = 0; i < run.words && reads.size() < kReadsPerLaunch; ++i) {
      const MapPlace p = run.word(i);
      const uint8_t* word = args.bytes(k.layout, p, 8);
      uint64_t v = 0;
      if (word) std::memcpy(&v, word, 8);
      if (v == 0) continue;
      if (std::any_of(reads.begin(), reads.end(), [&](const Read& r) { return r.address == v; })) continue;
      Range r;
      if (!device_allocation(v, &r)) continue;  // not device memory the driver allocated: never read
      const std::size_t n = std::min<uint64_t>(config().device_read_bytes, r.end - v);
      if (n >= kTensorMapBytes) reads.push_back({p, v, n});
    }
  return reads;
}

// Where the launch came from: taken now (its frames are gone once it returns), outside the audit's lock (it asks the
// loader), and only when a slot is free for its reads (a launch that finds every slot busy takes none: such launches
// can be many); named only when the worker finds something to report.
RawCallSite site_if_slot_free(bool every) {
  bool slot_free = every;
  if (!every) {
    std::lock_guard<std::mutex> peek(audit_lock());
    slot_free = !g_free || !g_free->empty();
  }
  return slot_free ? capture_raw_call_site(config().stack, 12, true) : RawCallSite{};
}

// The slot's event, made in the launch's context (one of another context is destroyed first). False: no event.
bool slot_event(ReadSlot& s, CUcontext ctx, const AuditCalls& calls) {
  if (s.event && s.event_ctx != ctx) {
    relaxed([&] {
      if (calls.destroy) calls.destroy(s.event);
    });
    s.event = nullptr;
  }
  if (s.event) return true;
  CUresult rc = CUDA_ERROR_UNKNOWN;
  relaxed([&] { rc = calls.create(&s.event, CU_EVENT_DISABLE_TIMING); });
  if (rc != CUDA_SUCCESS) {
    s.event = nullptr;
    return false;
  }
  s.event_ctx = ctx;
  return true;
}

// Queues the copy of one read into the free slot at the back of g_free and its event after it; the slot leaves g_free
// when the copy is queued (a copy whose end cannot be known keeps its slot forever). False: not queued.
bool queue_copy(ReadSlot& s, const Read& read, CUstream stream, const AuditCalls& calls) {
  // Frees are journaled from before the copy is queued until its read is judged (allocations.h).
  journal_reads(+1);
  const uint64_t epoch = journal_epoch();
  if (calls.copy(s.host, static_cast<CUdeviceptr>(read.address), read.bytes, stream) != CUDA_SUCCESS) {
    journal_reads(-1);
    return false;
  }
  g_free->pop_back();
  if (calls.record(s.event, stream) != CUDA_SUCCESS) {
    journal_reads(-1);
    return false;
  }
  s.epoch = epoch;
  return true;
}

// Caller holds the audit's lock. Queues each read into a free slot; returns this launch's last slot (-1: none) and
// sets `all_busy` when no slot was free for any read (the launch then leaves the kernel's audits for a later one).
int queue_reads(std::unique_lock<std::mutex>& lock, const KernelInfo& k, const LaunchView& launch,
                const std::vector<Read>& reads, const RawCallSite& site, CUcontext ctx, CUstream stream,
                const AuditCalls& calls, bool every, bool* all_busy) {
  int last = -1;
  for (std::size_t i = 0; i < reads.size(); ++i) {
    // TMAGUARD_DEVICE_AUDIT=all audits every launch: with every slot in flight, this launch waits for the oldest
    // read (bounded) and judges it itself.
    if (g_free->empty() && every) judge_oldest_read(lock, ctx);
    if (g_free->empty()) {
      audit_skipped(AuditSkip::kBusy, reads.size() - i);
      *all_busy = i == 0;
      break;
    }
    const int idx = g_free->back();
    ReadSlot& s = g_slots[idx];
    if (!slot_event(s, ctx, calls) || !queue_copy(s, reads[i], stream, calls)) {
      audit_skipped(AuditSkip::kCopyRefused);
      continue;
    }
    ++s.generation;
    s.claimed = false;
    s.ctx = ctx;
    k.audit.pins.fetch_add(1, std::memory_order_acq_rel);  // these facts outlive an unload until the read is judged
    s.kernel = &k;
    s.pointer = reads[i].pointer;
    s.address = reads[i].address;
    s.bytes = reads[i].bytes;
    s.last_of_launch = false;
    s.geometry = launch.geom;
    s.site = site;
    const DeclaredSet declared = declared_tensors();  // this launching thread's
    std::copy(declared.tensors, declared.tensors + declared.count, s.declared);
    s.declared_count = declared.count;
    g_pending->push_back(idx);
    last = idx;
  }
  return last;
}

}  // namespace

void audit_after_launch(const KernelInfo& k, const LaunchView& launch) {
  if (k.audit.pointers.empty()) return;
  const AuditCalls calls;
  if (!calls.usable()) {  // a driver without them: this kernel is not audited again
    k.audit.launches_left.store(0, std::memory_order_relaxed);
    return;
  }
  CUstream stream = launch.stream;
  if (launch.per_thread && stream == nullptr) stream = CU_STREAM_PER_THREAD;
  // Never add work to a stream that is being captured into a graph (nor ask about one that cannot be asked). Such
  // launches do not use up the kernel's audits.
  CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
  if (calls.capturing(stream, &status) != CUDA_SUCCESS || status != CU_STREAM_CAPTURE_STATUS_NONE) {
    audit_skipped(AuditSkip::kCapturing);
    return;
  }
  if (!audit_due(k)) return;
  const std::vector<Read> reads = reads_of(k, launch.args());
  // A launch with nothing to read (its 8-byte parameters hold scalars, NULL or host addresses) was looked at all
  // the same: it uses up one of the kernel's audits, so that the kernel soon takes the fast paths again.
  if (reads.empty()) {
    claim(k);
    return;
  }
  const bool every = k.audit.launches_left.load(std::memory_order_relaxed) == kAuditEveryLaunch;
  const RawCallSite site = site_if_slot_free(every);
  CUcontext ctx = nullptr;
  if (auto get = TG_REAL(cuCtxGetCurrent)) get(&ctx);
  std::unique_lock<std::mutex> lock(audit_lock());
  if (!ready_locked()) {  // said once; this kernel's launches are not audited again
    audit_skipped(AuditSkip::kNoPinnedMemory);
    k.audit.launches_left.store(0, std::memory_order_relaxed);
    return;
  }
  bool all_busy = false;
  const int last = queue_reads(lock, k, launch, reads, site, ctx, stream, calls, every, &all_busy);
  if (!all_busy && claim(k) && last >= 0) g_slots[last].last_of_launch = true;
  g_cv->notify_all();
}

}  // namespace tmaguard
