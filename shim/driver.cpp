// tmaguard shim: finds the real driver at run time and routes driver pointers to wrappers. The only dlfcn user.
#include "driver.h"

#include <dlfcn.h>

#include <atomic>
#include <cstdlib>

#include "runtime.h"

namespace tmaguard {
namespace {

constexpr int kEntries = static_cast<int>(EntryId::kCount);
constexpr const char* kNames[] = {
#define TG_ENTRY(name, pfn) #name,
#define TG_REAL_ONLY(name, pfn) #name,
#include "entry_points.def"
#undef TG_ENTRY
#undef TG_REAL_ONLY
};
// Our wrappers, nullptr for real-only rows.
void* const kWrappers[] = {
#define TG_ENTRY(name, pfn) reinterpret_cast<void*>(&tg_wrap_##name),
#define TG_REAL_ONLY(name, pfn) nullptr,
#include "entry_points.def"
#undef TG_ENTRY
#undef TG_REAL_ONLY
};
static_assert(sizeof(kNames) / sizeof(kNames[0]) == kEntries);
static_assert(kEntries <= static_cast<int>(sizeof(HotGlobals::real) / sizeof(HotGlobals::real[0])));
static_assert(static_cast<int>(EntryId::cuLaunchKernel) < 6 && static_cast<int>(EntryId::cuLaunchKernel_ptsz) < 6 &&
                  static_cast<int>(EntryId::cuLaunchKernelEx) < 6 &&
                  static_cast<int>(EntryId::cuLaunchKernelEx_ptsz) < 6 &&
                  static_cast<int>(EntryId::cuLaunchCooperativeKernel) < 6 &&
                  static_cast<int>(EntryId::cuLaunchCooperativeKernel_ptsz) < 6,
              "the launch entries' real pointers must share HotGlobals' first cache line");

std::atomic<void*> g_handle{nullptr};  // the driver's dlopen handle; kMissing when it could not be loaded
std::atomic<void*> g_real_dlsym{nullptr};

// load=false: only a driver the process already loaded (the dlsym path must not load libcuda into a process
// that merely probes for it).
void* libcuda_handle(bool load) {
  void* h = g_handle.load(std::memory_order_acquire);
  if (h) return h == kMissing ? nullptr : h;
  const char* path = driver_path();
  // A client that already loaded the driver gets that very copy; otherwise load it now (never at load time).
  h = dlopen(path, RTLD_LAZY | RTLD_NOLOAD);
  if (!h && !load) return nullptr;
  if (!h) h = dlopen(path, RTLD_LAZY);
  if (!h) {
    const char* err = dlerror();
    report_cannot_work(std::string("cannot load the CUDA driver '") + path + "': " + (err ? err : "unknown error"));
  }
  void* expected = nullptr;
  if (!g_handle.compare_exchange_strong(expected, h ? h : kMissing, std::memory_order_acq_rel)) {
    if (h) dlclose(h);  // another thread won; keep its handle
    return expected == kMissing ? nullptr : expected;
  }
  return h;
}

}  // namespace

const char* driver_path() {
  const char* p = std::getenv("TMAGUARD_LIBCUDA");
  return (p && *p) ? p : "libcuda.so.1";
}

DlsymFn real_dlsym() {
  void* f = g_real_dlsym.load(std::memory_order_acquire);
  if (!f) {
    // glibc >= 2.34 versions dlsym GLIBC_2.34; older ones GLIBC_2.2.5. Never glibc-private _dl_sym.
    f = dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34");
    if (!f) f = dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5");
    g_real_dlsym.store(f, std::memory_order_release);
  }
  return reinterpret_cast<DlsymFn>(f);
}

// Zero-initialised: no constructor runs at load time.
HotGlobals g_hot;

void* real_function_slow(EntryId id) {
  const int i = static_cast<int>(id);
  void* f = g_hot.real[i].load(std::memory_order_acquire);
  if (f != kNotLookedUp) return f == kMissing ? nullptr : f;
  void* h = libcuda_handle(true);
  DlsymFn sym = real_dlsym();
  f = (h && sym) ? sym(h, kNames[i]) : nullptr;
  // A "real" pointer that is our own wrapper (TMAGUARD_LIBCUDA pointing at tmaguard) would recurse forever.
  if (f && f == kWrappers[i]) f = nullptr;
  g_hot.real[i].store(f ? f : kMissing, std::memory_order_release);
  return f;
}

void* route(void* p) {
  // An explicit TMAGUARD_LIBCUDA is loaded even here, so a wrong path is reported instead of silently unguarded.
  const char* explicit_driver = std::getenv("TMAGUARD_LIBCUDA");
  if (!p || !libcuda_handle(explicit_driver && *explicit_driver)) return p;
  for (int i = 0; i < kEntries; ++i) {
    if (kWrappers[i] && real_function(static_cast<EntryId>(i)) == p) return kWrappers[i];
  }
  return p;
}

}  // namespace tmaguard
