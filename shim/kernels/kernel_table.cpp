// tmaguard shim: the lock-free kernel-info table: each kernel's facts, found by its launch handle, and forgetting what
// an unload frees (the memo, memo/memo.h, keeps what is known clean).
#include "kernels/kernel_table.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <mutex>
#include <new>
#include <unordered_map>

#include "process/counters.h"
#include "process/arena.h"
#include "driver/driver.h"
#include "process/fork_locks.h"
#include "kernels/kernel_table.h"
#include "report/reporter.h"
#include "runtime/runtime.h"
#include "tmaguard/rules.h"
#include "tmaguard/launch.h"
#include "tmaguard/tensormap.h"

namespace tmaguard {

KernelInfo::~KernelInfo() {
  for (const auto& m : moved) delete m.load(std::memory_order_relaxed);
}
namespace {

// The parameter space of a kernel holds at most 32764 bytes (CUDA 12.1+), so at most 32764 parameters of one byte.
constexpr std::size_t kMaxParams = 32768;

constexpr std::size_t kSlots = 1 << 14;  // kernels; past 3/4 full the overflow map takes over
// A slot's info: a KernelInfo, nullptr while its first builder fills it in, or kDead after an unload freed the
// handle (the key stays, so probe chains stay intact; a launch of the reused handle rebuilds it).
const KernelInfo* const kDead = reinterpret_cast<const KernelInfo*>(1);
struct TableSlot {
  std::atomic<uintptr_t> key;
  std::atomic<const KernelInfo*> info;
};
std::atomic<TableSlot*> g_slots_ptr{nullptr};  // allocated on first use (no work at load time)
std::atomic<std::size_t> g_used{0};
std::mutex g_overflow_mu;
std::unordered_map<uintptr_t, const KernelInfo*>* g_overflow = nullptr;

// The overflow lock, known to the fork handler before anyone takes it.
std::mutex& overflow_lock() {
  register_fork_lock(ForkLock::kKernelOverflow,
                     {[] { g_overflow_mu.lock(); }, [] { g_overflow_mu.unlock(); }, [] { g_overflow_mu.unlock(); }});
  return g_overflow_mu;
}

// ---- what an unload forgets, and when it is freed. Every kernel's facts are indexed by their owner (module or
// library; nullptr when the driver does not say, and those are forgotten by any unload), so that an unload touches
// its own kernels only. Forgotten facts are retired with the epoch that forgot them and freed once every thread that
// launches has seen that epoch (none of them can hold them then: a thread drops its memo entries when it sees a new
// epoch, and launches with a stale epoch take no cache at all) and no device-audit read refers to them (pins).
struct Indexed {
  uintptr_t key;
  std::size_t slot;  // in the table, unless `overflow`
  bool overflow;
};
struct Retired {
  const KernelInfo* info;
  uint32_t epoch;
};
std::mutex g_index_mu;
// A deque per owner: a module of 100,000 kernels grows its index without copying it.
std::unordered_map<const void*, std::deque<Indexed>>* g_by_owner = nullptr;  // under g_index_mu
std::vector<Retired>* g_retired = nullptr;                                    // under g_index_mu
std::atomic<bool> g_retired_any{false};

std::mutex& index_lock() {
  register_fork_lock(ForkLock::kKernelIndex,
                     {[] { g_index_mu.lock(); }, [] { g_index_mu.unlock(); }, [] { g_index_mu.unlock(); }});
  return g_index_mu;
}

void index_insert(const KernelInfo* k, uintptr_t key, std::size_t slot, bool overflow) {
  FactsScope facts;  // kept as long as the kernel: from pages populated ahead (arena.h)
  std::lock_guard<std::mutex> lock(index_lock());
  if (!g_by_owner) g_by_owner = new std::unordered_map<const void*, std::deque<Indexed>>;
  (*g_by_owner)[k->owner].push_back({key, slot, overflow});
}

// Frees what no thread can hold any more.
void reclaim() {
  std::vector<const KernelInfo*> doomed;
  {
    std::lock_guard<std::mutex> lock(index_lock());
    if (!g_retired || g_retired->empty()) return;
    const uint32_t now = g_launch_globals.kernel_epoch.load(std::memory_order_acquire);
    const uint32_t oldest = oldest_thread_epoch(now);
    auto keep = g_retired->begin();
    for (const Retired& r : *g_retired) {
      if (static_cast<int32_t>(oldest - r.epoch) >= 0 && r.info->audit.pins.load(std::memory_order_acquire) == 0)
        doomed.push_back(r.info);
      else
        *keep++ = r;
    }
    g_retired->erase(keep, g_retired->end());
    g_retired_any.store(!g_retired->empty(), std::memory_order_relaxed);
  }
  for (const KernelInfo* k : doomed) delete k;
}

// Retires facts no table slot holds any more, with the epoch that made every thread drop them (bumped before).
void retire(const std::vector<const KernelInfo*>& gone, uint32_t epoch) {
  if (gone.empty()) return;
  {
    std::lock_guard<std::mutex> lock(index_lock());
    if (!g_retired) g_retired = new std::vector<Retired>;
    for (const KernelInfo* k : gone) g_retired->push_back({k, epoch});
    g_retired_any.store(true, std::memory_order_relaxed);
  }
  reclaim();
}

// A new epoch: every thread's memo entries (and any KernelInfo pointer it took from them) must be dropped.
uint32_t next_epoch() {
  const uint32_t epoch = g_launch_globals.kernel_epoch.fetch_add(1, std::memory_order_acq_rel) + 1;
  refresh_memo_gate();  // every thread's look fails until its entries are made again
  return epoch;
}

TableSlot* slots() {
  TableSlot* s = g_slots_ptr.load(std::memory_order_acquire);
  if (s) return s;
  auto* fresh = new TableSlot[kSlots]();
  if (g_slots_ptr.compare_exchange_strong(s, fresh, std::memory_order_acq_rel)) return fresh;
  delete[] fresh;
  return s;
}

std::size_t mix(uintptr_t k) {
  uint64_t x = static_cast<uint64_t>(k);
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  return static_cast<std::size_t>(x);
}

bool live(const KernelInfo* i) { return i != nullptr && i != kDead; }

// Where maps can sit: 128-byte parameters, maps a search of the larger parameters found, and the places the kernel's
// rules name by parameter. Reads nothing of any other kernel.
void find_maps(KernelInfo* k, const LaunchArgs* args, const std::vector<MapPlace>& watched_before) {
  const auto& sizes = k->layout.sizes;
  for (std::size_t i = 0; i < sizes.size(); ++i)
    if (sizes[i] == kTensorMapBytes) k->maps.push_back({static_cast<uint32_t>(i), 0});
  if (std::any_of(sizes.begin(), sizes.end(), [](std::size_t s) { return s > kTensorMapBytes; })) {
    if (args) {
      const StructSearch found = search_structs(k->layout, *args, watched_before);
      k->maps.insert(k->maps.end(), found.maps.begin(), found.maps.end());
      k->watch = found.watch;
      k->search_pending = found.incomplete;
      if (found.watch_truncated)
        report_notice(Notice::kWatchTruncated, k->name,
                      "kernel " + k->name + " has more than " + std::to_string(found.watch_limit) +
                          " empty 64-byte places in its parameters; maps that appear beyond those are not searched for");
    } else {
      k->search_pending = true;
    }
  }
  std::sort(k->maps.begin(), k->maps.end());
  std::sort(k->watch.begin(), k->watch.end());
  k->named_only.assign(k->maps.size(), false);
  // Places a rule names: checked at that place on every launch, found by the search or not.
  for (const NamedPlace& n : named_places(tmaguard::rules(), k->rules)) {
    const MapPlace& place = n.place;
    const bool exists = place.param < sizes.size();
    if (!exists || place.offset + kTensorMapBytes > sizes[place.param]) {
      const std::string what = exists ? "is " + std::to_string(sizes[place.param]) + " bytes"
                                      : "does not exist (the kernel has " + std::to_string(sizes.size()) + " parameters)";
      report_notice(Notice::kNamedPlaceEmpty, n.rule + "|" + k->name + "|" + to_string(place),
                    "rule " + n.rule + " names map " + n.map + " at param " + to_string(place) + " of kernel " +
                        k->name + ", whose parameter " + std::to_string(place.param) + " " + what +
                        ": no map can sit there, and the rule never applies");
      continue;
    }
    if (std::find(k->maps.begin(), k->maps.end(), place) != k->maps.end()) continue;
    k->maps.push_back(place);
    k->named_only.push_back(true);
    k->watch.erase(std::remove(k->watch.begin(), k->watch.end(), place), k->watch.end());
  }

}

// The kernel's name, and whether `f` is a CUkernel (cuKernelGetName names it) rather than a CUfunction.
bool read_name(CUfunction f, KernelInfo* k) {
  const char* name = nullptr;
  if (auto fn = TG_REAL(cuFuncGetName); fn && fn(&name, f) == CUDA_SUCCESS && name) {
    k->name = name;
    return false;
  }
  if (auto kn = TG_REAL(cuKernelGetName); kn && kn(&name, reinterpret_cast<CUkernel>(f)) == CUDA_SUCCESS && name) {
    k->name = name;
    return true;
  }
  k->name = "<unnamed kernel>";
  return false;
}

// The parameter block as the driver reports it; returns whether `f` is a CUkernel after all (a CUkernel without a
// name answers cuFuncGetParamInfo with CUDA_ERROR_INVALID_HANDLE).
bool read_layout(CUfunction f, bool is_kernel, KernelInfo* k) {
  auto fpi = TG_REAL(cuFuncGetParamInfo);
  auto kpi = TG_REAL(cuKernelGetParamInfo);
  auto info = [&](std::size_t i, std::size_t* off, std::size_t* size) {
    if (is_kernel) return kpi ? kpi(reinterpret_cast<CUkernel>(f), i, off, size) : CUDA_ERROR_NOT_FOUND;
    return fpi ? fpi(f, i, off, size) : CUDA_ERROR_NOT_FOUND;
  };
  std::size_t off = 0, size = 0;
  if (!is_kernel && info(0, &off, &size) == CUDA_ERROR_INVALID_HANDLE) is_kernel = true;
  std::size_t i = 0;
  for (; i < kMaxParams; ++i) {
    if (info(i, &off, &size) != CUDA_SUCCESS) break;
    // Offsets are relative to the parameter block, whose own alignment the driver chooses (an H200 reported
    // 112/240/368 for three leading CUtensorMaps), so only the size identifies a tensor-map candidate.
    k->layout.offsets.push_back(off);
    k->layout.sizes.push_back(size);
  }
  k->params_truncated = i == kMaxParams && info(i, &off, &size) == CUDA_SUCCESS;
  return is_kernel;
}

// The owner, so that an unload can forget this kernel (a driver without these calls: any unload forgets all).
void read_owner(CUfunction f, bool is_kernel, KernelInfo* k) {
  if (is_kernel) {
    CUlibrary lib = nullptr;
    if (auto get = TG_REAL(cuKernelGetLibrary); get && get(&lib, reinterpret_cast<CUkernel>(f)) == CUDA_SUCCESS)
      k->owner = lib;
  } else {
    CUmodule mod = nullptr;
    if (auto get = TG_REAL(cuFuncGetModule); get && get(&mod, f) == CUDA_SUCCESS) k->owner = mod;
  }
}

void pick_rules(KernelInfo* k) {
  std::vector<std::string> notes;
  const std::vector<int> all_rules = rules_for_kernel(tmaguard::rules(), k->name, &notes);
  k->rules = rules_on(tmaguard::rules(), all_rules, false);
  k->audit.rules = rules_on(tmaguard::rules(), all_rules, true);
  for (const std::string& n : notes) report_notice(Notice::kPatternLimit, n, n);
}

// Kept as long as the kernel: each list as long as it is, not as long as it grew (a kernel of 9 parameters kept
// 16 offsets and 16 sizes).
void fit(KernelInfo* k) {
  k->rules.shrink_to_fit();
  k->layout.offsets.shrink_to_fit();
  k->layout.sizes.shrink_to_fit();
  k->maps.shrink_to_fit();
  k->named_only.shrink_to_fit();
  k->watch.shrink_to_fit();
  k->audit.rules.shrink_to_fit();
}

// `stale`: the facts this search replaces (its search count and watched places carry over), or nullptr.
const KernelInfo* build(CUfunction f, const LaunchArgs* args, const KernelInfo* stale = nullptr) {
  const unsigned searches = stale ? stale->searches : 0;
  FactsScope facts;  // the facts, and what building them takes, from pages populated ahead (arena.h)
  auto* k = new KernelInfo;
  static std::atomic<uint64_t> serials{0};  // never reused, unlike the record's address after an unload frees it
  k->serial = serials.fetch_add(1, std::memory_order_relaxed) + 1;
  k->searches = searches + (args ? 1 : 0);
  const bool is_kernel = read_layout(f, read_name(f, k), k);
  read_owner(f, is_kernel, k);
  pick_rules(k);
  find_maps(k, args, stale ? stale->watch : std::vector<MapPlace>{});
  if (k->searches >= kMaxSearches && (k->search_pending || !k->watch.empty())) {
    report_notice(Notice::kSearchesExhausted, k->name,
                  "kernel " + k->name + "'s parameters changed where maps could appear on " +
                      std::to_string(kMaxSearches) +
                      " launches; they are not searched again (maps found so far and places rules name are checked)");
    k->watch.clear();
    k->search_pending = false;
  }
  plan_audit(*k, stale);
  fit(k);
  return k;
}

}  // namespace

namespace {

// Replaces `stale` (the info in force for `key`) with `fresh`: true when it did; false when another thread replaced
// or forgot it first (then `fresh` is not published).
bool replace_info(uintptr_t key, const KernelInfo* stale, const KernelInfo* fresh) {
  if (TableSlot* table = g_slots_ptr.load(std::memory_order_acquire)) {
    std::size_t i = mix(key) & (kSlots - 1);
    for (std::size_t probe = 0; probe < kSlots; ++probe, i = (i + 1) & (kSlots - 1)) {
      const uintptr_t k = table[i].key.load(std::memory_order_acquire);
      if (k == 0) break;
      if (k != key) continue;
      const KernelInfo* expected = stale;
      return table[i].info.compare_exchange_strong(expected, fresh, std::memory_order_acq_rel);
    }
  }
  std::lock_guard<std::mutex> lock(overflow_lock());
  if (!g_overflow) return false;
  auto it = g_overflow->find(key);
  if (it == g_overflow->end() || it->second != stale) return false;
  it->second = fresh;
  return true;
}

}  // namespace

bool needs_new_search(const KernelInfo& k, const LaunchArgs& args) {
  if (k.search_pending) return true;
  for (const MapPlace& w : k.watch) {
    // No longer empty: a map now, or other data (a union's other variant, a list rewritten per launch). Only a map
    // is worth a search; other data leaves the place watched.
    const uint8_t* b = args.map(k.layout, w);
    if (watched_place_may_hold_map(b) && (!b || read_map(b, MapEvidence::kInStruct).ok())) return true;
  }
  return false;
}

const KernelInfo* search_again(CUfunction f, const KernelInfo* stale, const LaunchArgs& args) {
  const KernelInfo* fresh = build(f, &args, stale);
  if (!replace_info(reinterpret_cast<uintptr_t>(f), stale, fresh)) {
    delete fresh;  // another thread searched (or an unload forgot the kernel) first
    return kernel_info(f, &args);
  }
  retire({stale}, next_epoch());  // every thread's memo holds the old one
  return fresh;
}

const KernelInfo* kernel_info(CUfunction f, const LaunchArgs* args, bool* built_here) {
  bool ignored = false;
  bool& made = built_here ? *built_here : ignored;
  made = false;
  TableSlot* table = slots();
  const auto key = reinterpret_cast<uintptr_t>(f);
  std::size_t i = mix(key) & (kSlots - 1);
  for (std::size_t probe = 0; probe < kSlots; ++probe, i = (i + 1) & (kSlots - 1)) {
    uintptr_t k = table[i].key.load(std::memory_order_acquire);
    if (k == key) {
      const KernelInfo* info = table[i].info.load(std::memory_order_acquire);
      if (live(info)) return info;
      if (info == nullptr) break;          // another thread is filling it in: use the overflow map below (rare)
      const KernelInfo* built = build(f, args);  // forgotten after an unload: the handle now names another kernel
      const KernelInfo* expected = kDead;
      if (table[i].info.compare_exchange_strong(expected, built, std::memory_order_acq_rel)) {
        index_insert(built, key, i, false);
        made = true;
        return built;
      }
      delete built;
      if (live(expected)) return expected;
      break;
    }
    if (k != 0) continue;
    if (g_used.load(std::memory_order_relaxed) >= kSlots * 3 / 4) break;
    const KernelInfo* built = build(f, args);
    uintptr_t expected = 0;
    if (table[i].key.compare_exchange_strong(expected, key, std::memory_order_acq_rel)) {
      g_used.fetch_add(1, std::memory_order_relaxed);
      table[i].info.store(built, std::memory_order_release);
      index_insert(built, key, i, false);
      made = true;
      return built;
    }
    delete built;
    if (expected == key) break;
  }
  std::lock_guard<std::mutex> lock(overflow_lock());
  if (!g_overflow) {
    // Made with buckets for 8 times the table's kernels (1 MiB): a first launch never waits for a rehash of tens of
    // thousands of kernels (17 ms at 100,000) until a job has about 150,000.
    g_overflow = new std::unordered_map<uintptr_t, const KernelInfo*>;
    try {
      g_overflow->reserve(kSlots * 8);
    } catch (const std::bad_alloc&) {  // no MiB to spare: the map grows as it would have
    }
  }
  auto it = g_overflow->find(key);
  if (it != g_overflow->end()) return it->second;
  const KernelInfo* built = build(f, args);
  {
    FactsScope facts;
    (*g_overflow)[key] = built;
  }
  index_insert(built, key, 0, true);
  made = true;
  return built;
}

void forget_kernels_of(const void* owner, const void* module) {
  auto doomed = [&](const KernelInfo* k) {
    return !owner || !k->owner || k->owner == owner || (module && k->owner == module);
  };
  std::vector<const KernelInfo*> gone;
  TableSlot* table = g_slots_ptr.load(std::memory_order_acquire);
  auto forget_slot = [&](std::size_t i) {
    const KernelInfo* k = table[i].info.load(std::memory_order_acquire);
    if (live(k) && doomed(k) && table[i].info.compare_exchange_strong(k, kDead, std::memory_order_acq_rel))
      gone.push_back(k);
  };
  if (!owner) {  // the driver does not say whose kernels an unload frees: every kernel is forgotten
    if (table)
      for (std::size_t i = 0; i < kSlots; ++i) forget_slot(i);
    {
      std::lock_guard<std::mutex> lock(index_lock());
      if (g_by_owner) g_by_owner->clear();
    }
    std::lock_guard<std::mutex> lock(overflow_lock());
    if (g_overflow) {
      for (const auto& entry : *g_overflow) gone.push_back(entry.second);
      g_overflow->clear();
    }
  } else {
    // The unloaded module's (and a library's context module's) kernels, and those whose owner is unknown.
    std::vector<Indexed> places;
    {
      std::lock_guard<std::mutex> lock(index_lock());
      if (g_by_owner)
        for (const void* o : {owner, module, static_cast<const void*>(nullptr)}) {
          const auto it = g_by_owner->find(o);
          if (it == g_by_owner->end()) continue;
          places.insert(places.end(), it->second.begin(), it->second.end());
          g_by_owner->erase(it);
        }
    }
    for (const Indexed& x : places) {
      if (!x.overflow) {
        if (table) forget_slot(x.slot);
        continue;
      }
      std::lock_guard<std::mutex> lock(overflow_lock());
      if (!g_overflow) continue;
      const auto it = g_overflow->find(x.key);
      if (it == g_overflow->end() || !doomed(it->second)) continue;
      gone.push_back(it->second);
      g_overflow->erase(it);
    }
  }
  retire(gone, next_epoch());
}

void kernel_facts_released() {
  if (g_retired_any.load(std::memory_order_relaxed)) reclaim();
}

void for_each_kernel(void (*fn)(const KernelInfo&)) {
  if (TableSlot* table = g_slots_ptr.load(std::memory_order_acquire)) {
    for (std::size_t i = 0; i < kSlots; ++i)
      if (const KernelInfo* k = table[i].info.load(std::memory_order_acquire); live(k)) fn(*k);
  }
  std::lock_guard<std::mutex> lock(overflow_lock());
  if (g_overflow)
    for (const auto& entry : *g_overflow) fn(*entry.second);
}

}  // namespace tmaguard
