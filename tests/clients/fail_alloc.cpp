// A preloaded allocator that fails, on request, every allocation libtmaguard.so makes (malloc, calloc, realloc and
// the aligned forms called from inside that library: its static C++ runtime's operator new among them) and nothing
// else: a host memory shortage as tmaguard meets it, while the job's own allocations go on. Preloaded after
// libtmaguard.so; glibc's own allocator does the work (__libc_*).
//   tg_fail_tmaguard_allocations(1)   from now on, tmaguard's allocations return NULL
//   tg_fail_tmaguard_allocations(0)   they succeed again
#include <dlfcn.h>
#include <errno.h>
#include <link.h>

#include <atomic>
#include <cstddef>
#include <cstdint>

extern "C" {
void* __libc_malloc(size_t);
void* __libc_calloc(size_t, size_t);
void* __libc_realloc(void*, size_t);
void* __libc_memalign(size_t, size_t);
}

namespace {

std::atomic<bool> g_fail{false};
uintptr_t g_lo = 0, g_hi = 0;  // libtmaguard.so's mapping

int find_range(dl_phdr_info* info, size_t, void* target) {
  const auto t = reinterpret_cast<uintptr_t>(target);
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    if (ph.p_type != PT_LOAD) continue;
    const uintptr_t lo = info->dlpi_addr + ph.p_vaddr, hi = lo + ph.p_memsz;
    if (t >= lo && t < hi) {
      g_lo = info->dlpi_addr;
      for (int j = 0; j < info->dlpi_phnum; ++j)
        if (info->dlpi_phdr[j].p_type == PT_LOAD) {
          const uintptr_t end = info->dlpi_addr + info->dlpi_phdr[j].p_vaddr + info->dlpi_phdr[j].p_memsz;
          if (end > g_hi) g_hi = end;
        }
      return 1;
    }
  }
  return 0;
}

bool from_tmaguard(void* caller) {
  const auto c = reinterpret_cast<uintptr_t>(caller);
  return g_fail.load(std::memory_order_relaxed) && c >= g_lo && c < g_hi;
}

}  // namespace

extern "C" {

__attribute__((visibility("default"))) int tg_fail_tmaguard_allocations(int on) {
  if (!g_hi) {
    void* wrapper = dlsym(RTLD_DEFAULT, "cuLaunchKernel");  // tmaguard's, preloaded first
    if (!wrapper) return -1;
    dl_iterate_phdr(find_range, wrapper);
    if (!g_hi) return -1;
  }
  g_fail.store(on != 0);
  return 0;
}

__attribute__((visibility("default"))) void* malloc(size_t n) {
  if (from_tmaguard(__builtin_return_address(0))) {
    errno = ENOMEM;
    return nullptr;
  }
  return __libc_malloc(n);
}
__attribute__((visibility("default"))) void* calloc(size_t a, size_t b) {
  if (from_tmaguard(__builtin_return_address(0))) {
    errno = ENOMEM;
    return nullptr;
  }
  return __libc_calloc(a, b);
}
__attribute__((visibility("default"))) void* realloc(void* p, size_t n) {
  if (from_tmaguard(__builtin_return_address(0))) {
    errno = ENOMEM;
    return nullptr;
  }
  return __libc_realloc(p, n);
}
__attribute__((visibility("default"))) int posix_memalign(void** out, size_t align, size_t n) {
  if (from_tmaguard(__builtin_return_address(0))) return ENOMEM;
  void* p = __libc_memalign(align, n);
  if (!p) return ENOMEM;
  *out = p;
  return 0;
}
__attribute__((visibility("default"))) void* aligned_alloc(size_t align, size_t n) {
  if (from_tmaguard(__builtin_return_address(0))) {
    errno = ENOMEM;
    return nullptr;
  }
  return __libc_memalign(align, n);
}
__attribute__((visibility("default"))) void* memalign(size_t align, size_t n) {
  if (from_tmaguard(__builtin_return_address(0))) {
    errno = ENOMEM;
    return nullptr;
  }
  return __libc_memalign(align, n);
}

}  // extern "C"
