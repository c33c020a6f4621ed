// tmaguard shim: lock-free kernel-info table and the clean-launch cache (bounded, insert-only).
#include "kernel_cache.h"

#include <pthread.h>

#include <atomic>
#include <mutex>
#include <unordered_map>

#include "driver.h"
#include "runtime.h"
#include "tmaguard/rules.h"
#include "tmaguard/tensormap.h"

namespace tmaguard {
namespace {

constexpr std::size_t kSlots = 1 << 14;  // kernels; past 3/4 full the overflow map takes over
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

const KernelInfo* build(CUfunction f) {
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
  constexpr std::size_t kMaxParams = 4096;
  for (std::size_t i = 0; i < kMaxParams; ++i) {
    if (info(i, &off, &size) != CUDA_SUCCESS) break;
    k->layout.offsets.push_back(off);
    k->layout.sizes.push_back(size);
    // Offsets are relative to the parameter block, whose own alignment the driver chooses (an H200 reported
    // 112/240/368 for three leading CUtensorMaps), so only the size identifies a tensor-map candidate.
    if (size == kTensorMapBytes) k->maps.push_back({static_cast<uint32_t>(i), 0});
  }
  k->rules = rules_for_kernel(tmaguard::rules(), k->name);
  return k;
}

// Clean-launch cache: direct-mapped, 64-bit keys, bounded (a collision only costs a re-check).
constexpr std::size_t kCleanSlots = 1 << 12;
std::atomic<uint64_t> g_clean[kCleanSlots];

}  // namespace

FrontEntry& front_entry(CUfunction f) {
  FrontEntry& e = front_slot(f);
  if (e.f == f && e.info) return e;
  const KernelInfo* info = kernel_info(f);
  e.f = f;
  e.info = info;
  e.clean_key = 0;
  // The front entry carries up to seven whole-parameter slots with an index below 256; anything else is read
  // from the KernelInfo (2-CTA FA4 has nine maps).
  const std::size_t n = info->maps.size();
  bool fits = n <= sizeof(e.idx);
  for (std::size_t i = 0; fits && i < n; ++i) {
    fits = info->maps[i].offset == 0 && info->maps[i].param < 256;
    if (fits) e.idx[i] = static_cast<uint8_t>(info->maps[i].param);
  }
  e.n_maps = fits ? static_cast<uint8_t>(n) : kManyMaps;
  return e;
}

const KernelInfo* kernel_info(CUfunction f) {
  Slot* table = slots();
  const auto key = reinterpret_cast<uintptr_t>(f);
  std::size_t i = mix(key) & (kSlots - 1);
  for (std::size_t probe = 0; probe < kSlots; ++probe, i = (i + 1) & (kSlots - 1)) {
    uintptr_t k = table[i].key.load(std::memory_order_acquire);
    if (k == key) {
      const KernelInfo* info = table[i].info.load(std::memory_order_acquire);
      if (info) return info;
      break;  // another thread is filling it in: build our own copy below (rare)
    }
    if (k != 0) continue;
    if (g_used.load(std::memory_order_relaxed) >= kSlots * 3 / 4) break;
    const KernelInfo* built = build(f);
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
  if (it != g_overflow->end()) return it->second;
  const KernelInfo* built = build(f);
  (*g_overflow)[key] = built;
  return built;
}

bool clean_cache_contains(uint64_t key) {
  return key && g_clean[key & (kCleanSlots - 1)].load(std::memory_order_relaxed) == key;
}
void clean_cache_insert(uint64_t key) { g_clean[key & (kCleanSlots - 1)].store(key, std::memory_order_relaxed); }

}  // namespace tmaguard
