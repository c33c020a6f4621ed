// tmaguard shim: finds the real driver at run time and routes driver pointers to wrappers. The only dlfcn user.
#include "driver/driver.h"

#include <dlfcn.h>
#include <link.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <atomic>
#include <cstdlib>
#include <string>

#include "process/settings.h"
#include "process/init_state.h"
#include "process/stderr_io.h"

namespace tmaguard {
namespace {

constexpr int kEntries = static_cast<int>(EntryId::kCount);
constexpr const char* kNames[] = {
#define TG_ENTRY(name, pfn, kind) #name,
#define TG_REAL_ONLY(name, pfn) #name,
#include "driver/entry_points.def"
#undef TG_ENTRY
#undef TG_REAL_ONLY
};
// Our wrappers, nullptr for real-only rows.
void* const kWrappers[] = {
#define TG_ENTRY(name, pfn, kind) reinterpret_cast<void*>(&tg_wrap_##name),
#define TG_REAL_ONLY(name, pfn) nullptr,
#include "driver/entry_points.def"
#undef TG_ENTRY
#undef TG_REAL_ONLY
};
static_assert(sizeof(kNames) / sizeof(kNames[0]) == kEntries);
#define TG_STRINGIFY2(x) #x
#define TG_STRINGIFY(x) TG_STRINGIFY2(x)
static_assert(sizeof(TG_STRINGIFY(RTLD_NEXT)) == sizeof("((void *) -1l)") &&
                  __builtin_memcmp(TG_STRINGIFY(RTLD_NEXT), "((void *) -1l)", sizeof("((void *) -1l)")) == 0,
              "kRtldNext in driver.h must be glibc's RTLD_NEXT");
static_assert(kEntries <= static_cast<int>(sizeof(LaunchGlobals::real) / sizeof(LaunchGlobals::real[0])));
static_assert(static_cast<int>(EntryId::cuLaunchKernel) < 6 && static_cast<int>(EntryId::cuLaunchKernel_ptsz) < 6 &&
                  static_cast<int>(EntryId::cuLaunchKernelEx) < 6 &&
                  static_cast<int>(EntryId::cuLaunchKernelEx_ptsz) < 6 &&
                  static_cast<int>(EntryId::cuLaunchCooperativeKernel) < 6 &&
                  static_cast<int>(EntryId::cuLaunchCooperativeKernel_ptsz) < 6,
              "the launch entries' real pointers must share LaunchGlobals' first cache line");

std::atomic<void*> g_handle{nullptr};  // the driver's dlopen handle; kMissing when it could not be loaded
std::atomic<void*> g_real_dlsym{nullptr};

std::atomic<bool> g_second_copy_said{false};

// TMAGUARD_LIBCUDA from the settings (process/settings.h): unset when empty or blank, as for every TMAGUARD_* variable,
// and in a secure-execution process (a less privileged user named it).
const char* libcuda_override() {
  const std::string& p = settings().config.libcuda;
  return p.empty() ? nullptr : p.c_str();
}

// The file an object was loaded from, for messages.
std::string object_path(void* handle) {
  struct link_map* lm = nullptr;
  if (handle && dlinfo(handle, RTLD_DI_LINKMAP, &lm) == 0 && lm && lm->l_name && *lm->l_name) return lm->l_name;
  return "?";
}

void say_second_copy(const std::string& what) {
  if (g_second_copy_said.exchange(true)) return;
  write_stderr_line("tmaguard: warning: " + what);
}

// load=false: only a driver the process already loaded (the dlsym path must not load libcuda into a process
// that merely probes for it).
//
// The driver tmaguard guards is the one the job uses: the copy already loaded as libcuda.so.1 (a program linked
// with -lcuda, or a client that dlopen()ed it) wins over TMAGUARD_LIBCUDA when that names another file, even a
// byte-identical copy: calls into a second, uninitialised driver would fail the job.
void* libcuda_handle(bool load) {
  void* h = g_handle.load(std::memory_order_acquire);
  if (h) return h == kMissing ? nullptr : h;
  const char* named = libcuda_override();
  void* job = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
  if (named) {
    void* mine = dlopen(named, RTLD_LAZY | RTLD_NOLOAD);
    if (job && mine != job) {
      if (mine) dlclose(mine);
      h = job;
      struct stat st;
      const std::string what = stat(named, &st) != 0 ? std::string("names no file (") + std::strerror(errno) + ")"
                               : S_ISDIR(st.st_mode) ? "names a directory, not a driver library"
                               : !S_ISREG(st.st_mode) ? "names something that is not a library file"
                                                      : "names another file than the CUDA driver the job loaded";
      say_second_copy(std::string(kVariable.libcuda) + "='" + named + "' " + what + "; the job uses '" +
                      object_path(job) + "' (loaded as libcuda.so.1), and tmaguard guards that one");
    } else {
      if (job) dlclose(job);  // the same object as `mine`: one reference is enough
      h = mine;
      if (!h && load) h = dlopen(named, RTLD_LAZY);
    }
  } else {
    h = job;
    if (!h && load) h = dlopen("libcuda.so.1", RTLD_LAZY);
  }
  if (!h && !load) return nullptr;
  const char* path = named ? named : "libcuda.so.1";
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
  const char* p = libcuda_override();
  return p ? p : "libcuda.so.1";
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
LaunchGlobals g_launch_globals;

void* real_function_slow(EntryId id) {
  note_process_stderr();  // the first call into tmaguard from the job: its stderr as it is now
  const int i = static_cast<int>(id);
  void* f = g_launch_globals.real[i].load(std::memory_order_acquire);
  if (f != kNotLookedUp) return f == kMissing ? nullptr : f;
  void* h = libcuda_handle(true);
  DlsymFn sym = real_dlsym();
  f = (h && sym) ? sym(h, kNames[i]) : nullptr;
  // A "real" pointer that is our own wrapper (TMAGUARD_LIBCUDA pointing at tmaguard) would recurse forever.
  if (f && f == kWrappers[i]) f = nullptr;
  g_launch_globals.real[i].store(f ? f : kMissing, std::memory_order_release);
  return f;
}

void* route(void* p) {
  // An explicit TMAGUARD_LIBCUDA is loaded even here, so a wrong path is reported instead of silently unguarded.
  if (!p || !libcuda_handle(libcuda_override() != nullptr)) return p;
  for (int i = 0; i < kEntries; ++i) {
    if (kWrappers[i] && real_function(static_cast<EntryId>(i)) == p) return kWrappers[i];
  }
  note_if_foreign_driver(p);
  return p;
}

void note_if_foreign_driver(void* p) {
  if (g_second_copy_said.load(std::memory_order_relaxed)) return;
  // A pointer handed out by a CUDA driver that is not the one tmaguard guards (a copy the job loaded later).
  static std::atomic<void*> our_base{nullptr};
  void* base = our_base.load(std::memory_order_acquire);
  if (!base) {
    Dl_info ours{};
    void* f = real_function(EntryId::cuLaunchKernel);
    if (!f || !dladdr(f, &ours)) return;
    base = ours.dli_fbase;
    our_base.store(base, std::memory_order_release);
  }
  Dl_info info{}, self{};
  if (!dladdr(p, &info) || info.dli_fbase == base || !info.dli_fname) return;
  // tmaguard itself exports driver names (dlsym(RTLD_DEFAULT, "cuLaunchKernel") finds its wrapper): not a driver.
  if (dladdr(reinterpret_cast<void*>(&note_if_foreign_driver), &self) && self.dli_fbase == info.dli_fbase) return;
  void* other = dlopen(info.dli_fname, RTLD_LAZY | RTLD_NOLOAD);
  if (!other) return;
  const bool is_driver = real_dlsym()(other, "cuGetProcAddress_v2") != nullptr;
  dlclose(other);
  if (is_driver)
    say_second_copy(std::string("the job also uses a second copy of the CUDA driver, '") + info.dli_fname +
                    "', besides '" + object_path(g_handle.load()) +
                    "' that tmaguard guards: launches through that copy are not checked");
}

}  // namespace tmaguard
