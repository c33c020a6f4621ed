// tmaguard shim: the lock-free kernel-info table (forgetting what an unload frees) and the clean-launch cache.
#include "kernel_cache.h"

#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <mutex>
#include <unordered_map>

#include "driver.h"
#include "reporter.h"
#include "runtime.h"
#include "tmaguard/rules.h"
#include "tmaguard/tensormap.h"

namespace tmaguard {
namespace {

// The parameter space of a kernel holds at most 32764 bytes (CUDA 12.1+), so at most 32764 parameters of one byte.
constexpr std::size_t kMaxParams = 32768;

constexpr std::size_t kSlots = 1 << 14;  // kernels; past 3/4 full the overflow map takes over
// A slot's info: a KernelInfo, nullptr while its first builder fills it in, or kDead after an unload freed the
// handle (the key stays, so probe chains stay intact; a launch of the reused handle rebuilds it).
const KernelInfo* const kDead = reinterpret_cast<const KernelInfo*>(1);
struct Slot {
  std::atomic<uintptr_t> key;
  std::atomic<const KernelInfo*> info;
};
std::atomic<Slot*> g_slots_ptr{nullptr};  // allocated on first use (no work at load time)
std::atomic<std::size_t> g_used{0};
std::mutex g_overflow_mu;
std::unordered_map<uintptr_t, const KernelInfo*>* g_overflow = nullptr;

Slot* slots() {
  Slot* s = g_slots_ptr.load(std::memory_order_acquire);
  if (s) return s;
  auto* fresh = new Slot[kSlots]();
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

// The parameter block's base mod 64, learned from the first kernel with a 128-byte parameter (-1: not yet). It is
// the driver's, the same for every kernel of a process (0x210 on an H200).
std::atomic<int> g_base_mod64{-1};

const KernelInfo* build(CUfunction f, const LaunchArgs* args) {
  auto* k = new KernelInfo;
  const char* name = nullptr;
  bool is_kernel = false;
  if (auto fn = TG_REAL(cuFuncGetName); fn && fn(&name, f) == CUDA_SUCCESS && name) {
    k->name = name;
  } else if (auto kn = TG_REAL(cuKernelGetName);
             kn && kn(&name, reinterpret_cast<CUkernel>(f)) == CUDA_SUCCESS && name) {
    k->name = name;
    is_kernel = true;
  } else {
    k->name = "<unnamed kernel>";
  }
  auto fpi = TG_REAL(cuFuncGetParamInfo);
  auto kpi = TG_REAL(cuKernelGetParamInfo);
  auto info = [&](std::size_t i, std::size_t* off, std::size_t* size) {
    if (is_kernel) return kpi ? kpi(reinterpret_cast<CUkernel>(f), i, off, size) : CUDA_ERROR_NOT_FOUND;
    return fpi ? fpi(f, i, off, size) : CUDA_ERROR_NOT_FOUND;
  };
  std::size_t off = 0, size = 0;
  if (!is_kernel && info(0, &off, &size) == CUDA_ERROR_INVALID_HANDLE) is_kernel = true;  // CUkernel without a name
  std::size_t i = 0;
  for (; i < kMaxParams; ++i) {
    if (info(i, &off, &size) != CUDA_SUCCESS) break;
    k->layout.offsets.push_back(off);
    k->layout.sizes.push_back(size);
    // Offsets are relative to the parameter block, whose own alignment the driver chooses (an H200 reported
    // 112/240/368 for three leading CUtensorMaps), so only the size identifies a tensor-map candidate.
    if (size == kTensorMapBytes) k->maps.push_back({static_cast<uint32_t>(i), 0});
  }
  k->params_truncated = i == kMaxParams && info(i, &off, &size) == CUDA_SUCCESS;
  // Maps inside larger parameters: searched once, with this first launch's bytes, at every legal position.
  std::optional<uint32_t> base = param_base_mod64(k->layout);
  if (base) {
    int unknown = -1;
    g_base_mod64.compare_exchange_strong(unknown, static_cast<int>(*base), std::memory_order_relaxed);
  } else if (const int known = g_base_mod64.load(std::memory_order_relaxed); known >= 0) {
    base = static_cast<uint32_t>(known);
  }
  const auto& sizes = k->layout.sizes;
  if (std::any_of(sizes.begin(), sizes.end(), [](std::size_t s) { return s > kTensorMapBytes; })) {
    if (args) {
      const std::vector<MapSlot> inner = find_embedded_maps(k->layout, *args, base);
      k->maps.insert(k->maps.end(), inner.begin(), inner.end());
      std::sort(k->maps.begin(), k->maps.end(), [](const MapSlot& a, const MapSlot& b) {
        return a.param != b.param ? a.param < b.param : a.offset < b.offset;
      });
    } else {
      k->search_pending = true;
    }
  }
  // The owner, so that an unload can forget this kernel (a driver without these calls: any unload forgets all).
  if (is_kernel) {
    CUlibrary lib = nullptr;
    if (auto get = TG_REAL(cuKernelGetLibrary); get && get(&lib, reinterpret_cast<CUkernel>(f)) == CUDA_SUCCESS)
      k->owner = lib;
  } else {
    CUmodule mod = nullptr;
    if (auto get = TG_REAL(cuFuncGetModule); get && get(&mod, f) == CUDA_SUCCESS) k->owner = mod;
  }
  std::vector<std::string> notes;
  k->rules = rules_for_kernel(tmaguard::rules(), k->name, &notes);
  for (const std::string& n : notes) report_notice("pattern-limit|" + n, "warning", n);
  return k;
}

// Clean-launch cache: direct-mapped, 64-bit keys, bounded (a collision only costs a re-check).
constexpr std::size_t kCleanSlots = 1 << 12;
std::atomic<uint64_t> g_clean[kCleanSlots];

}  // namespace

FrontEntry& front_entry(CUfunction f, const LaunchArgs* args) {
  // An unload since this thread last looked: any entry may describe a freed (and reused) handle.
  const uint32_t epoch = g_hot.kernel_epoch.load(std::memory_order_acquire);
  if (t_hot.kernel_epoch != epoch) {
    std::memset(static_cast<void*>(t_hot.front), 0, sizeof t_hot.front);
    t_hot.kernel_epoch = epoch;
  }
  FrontEntry& e = front_slot(f);
  if (e.f == f && e.info && !(e.info->search_pending && args)) return e;
  const KernelInfo* info = kernel_info(f, args);
  e.f = f;
  e.info = info;
  e.clean_key = 0;
  // The front entry carries up to seven whole-parameter slots with an index below 256, or up to three slots inside
  // parameters as (index, offset / 64) pairs; anything else is read from the KernelInfo (2-CTA FA4 has nine maps).
  const std::vector<MapSlot>& m = info->maps;
  const bool whole = std::all_of(m.begin(), m.end(), [](const MapSlot& s) { return s.offset == 0 && s.param < 256; });
  const bool pairs = std::all_of(m.begin(), m.end(), [](const MapSlot& s) {
    return s.param < 256 && s.offset % 64 == 0 && s.offset / 64 < 256;
  });
  if (info->search_pending) {
    e.n_maps = kManyMaps;  // never the no-maps fast path: every launch goes to the full check until one is searched
  } else if (whole && m.size() <= sizeof(e.idx)) {
    for (std::size_t i = 0; i < m.size(); ++i) e.idx[i] = static_cast<uint8_t>(m[i].param);
    e.n_maps = static_cast<uint8_t>(m.size());
  } else if (pairs && m.size() <= sizeof(e.idx) / 2) {
    for (std::size_t i = 0; i < m.size(); ++i) {
      e.idx[2 * i] = static_cast<uint8_t>(m[i].param);
      e.idx[2 * i + 1] = static_cast<uint8_t>(m[i].offset / 64);
    }
    e.n_maps = static_cast<uint8_t>(kPairs | m.size());
  } else {
    e.n_maps = kManyMaps;
  }
  return e;
}

const KernelInfo* kernel_info(CUfunction f, const LaunchArgs* args) {
  Slot* table = slots();
  const auto key = reinterpret_cast<uintptr_t>(f);
  std::size_t i = mix(key) & (kSlots - 1);
  for (std::size_t probe = 0; probe < kSlots; ++probe, i = (i + 1) & (kSlots - 1)) {
    uintptr_t k = table[i].key.load(std::memory_order_acquire);
    if (k == key) {
      const KernelInfo* info = table[i].info.load(std::memory_order_acquire);
      if (live(info) && info->search_pending && args) {  // the first launch with bytes: search now, replace
        const KernelInfo* built = build(f, args);
        if (table[i].info.compare_exchange_strong(info, built, std::memory_order_acq_rel)) {
          g_hot.kernel_epoch.fetch_add(1, std::memory_order_acq_rel);  // other threads' front caches hold the old
          return built;
        }
        delete built;  // another thread replaced it (or an unload forgot it) first
        if (live(info)) return info;
        break;
      }
      if (live(info)) return info;
      if (info == nullptr) break;          // another thread is filling it in: use the overflow map below (rare)
      const KernelInfo* built = build(f, args);  // forgotten after an unload: the handle now names another kernel
      const KernelInfo* expected = kDead;
      if (table[i].info.compare_exchange_strong(expected, built, std::memory_order_acq_rel)) return built;
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
      return built;
    }
    delete built;
    if (expected == key) break;
  }
  static std::once_flag fork_safe;  // never hold the overflow lock across fork
  std::call_once(fork_safe, [] {
    pthread_atfork([] { g_overflow_mu.lock(); }, [] { g_overflow_mu.unlock(); }, [] { g_overflow_mu.unlock(); });
  });
  std::lock_guard<std::mutex> lock(g_overflow_mu);
  if (!g_overflow) g_overflow = new std::unordered_map<uintptr_t, const KernelInfo*>;
  auto it = g_overflow->find(key);
  if (it != g_overflow->end() && !(it->second->search_pending && args)) return it->second;
  const KernelInfo* built = build(f, args);
  if (it != g_overflow->end()) g_hot.kernel_epoch.fetch_add(1, std::memory_order_acq_rel);
  (*g_overflow)[key] = built;
  return built;
}

void forget_kernels_of(const void* owner, const void* module) {
  auto doomed = [&](const KernelInfo* k) {
    return !owner || !k->owner || k->owner == owner || (module && k->owner == module);
  };
  // The forgotten KernelInfo objects are not freed: another thread may be reading one right now.
  if (Slot* table = g_slots_ptr.load(std::memory_order_acquire)) {
    for (std::size_t i = 0; i < kSlots; ++i) {
      const KernelInfo* k = table[i].info.load(std::memory_order_acquire);
      if (live(k) && doomed(k)) table[i].info.compare_exchange_strong(k, kDead, std::memory_order_acq_rel);
    }
  }
  {
    std::lock_guard<std::mutex> lock(g_overflow_mu);
    if (g_overflow)
      for (auto it = g_overflow->begin(); it != g_overflow->end();)
        it = doomed(it->second) ? g_overflow->erase(it) : ++it;
  }
  g_hot.kernel_epoch.fetch_add(1, std::memory_order_acq_rel);
}

void for_each_kernel(void (*fn)(const KernelInfo&)) {
  if (Slot* table = g_slots_ptr.load(std::memory_order_acquire)) {
    for (std::size_t i = 0; i < kSlots; ++i)
      if (const KernelInfo* k = table[i].info.load(std::memory_order_acquire); live(k)) fn(*k);
  }
  std::lock_guard<std::mutex> lock(g_overflow_mu);
  if (g_overflow)
    for (const auto& entry : *g_overflow) fn(*entry.second);
}

bool clean_cache_contains(uint64_t key) {
  return key && g_clean[key & (kCleanSlots - 1)].load(std::memory_order_relaxed) == key;
}
void clean_cache_insert(uint64_t key) { g_clean[key & (kCleanSlots - 1)].store(key, std::memory_order_relaxed); }

}  // namespace tmaguard
