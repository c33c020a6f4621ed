// tmaguard shim: the real CUDA driver (resolution, typed real pointers, pointer routing). Of this room only driver.cpp
// includes <dlfcn.h>; the call-site room and the fleet's start record ask the loader too (dladdr, dl_iterate_phdr).
#pragma once

#include <type_traits>

#include "driver/cuda_names.h"
#include "thread/thread_words.h"

namespace tmaguard {

enum class EntryId : int {
#define TG_ENTRY(name, pfn, kind) name,
#define TG_REAL_ONLY(name, pfn) name,
#include "driver/entry_points.def"
#undef TG_ENTRY
#undef TG_REAL_ONLY
  kCount
};

//! Values of a LaunchGlobals::real slot besides a function pointer: not looked up yet, or looked up and absent (so a
//! missing symbol is not looked up again on every call).
inline void* const kNotLookedUp = nullptr;
inline void* const kMissing = reinterpret_cast<void*>(1);

void* real_function_slow(EntryId id);
//! The real function if it was already looked up and found, else nullptr; never looks anything up (the launch
//! wrappers' first line, which must not make a call that is not a tail call).
inline void* real_function_if_resolved(EntryId id) {
  void* f = g_launch_globals.real[static_cast<int>(id)].load(std::memory_order_acquire);
  return (f != kNotLookedUp && f != kMissing) ? f : nullptr;
}
//! The real driver's function for an entry, or nullptr (driver missing, or it lacks the symbol). Never ours.
inline void* real_function(EntryId id) {
  if (void* f = real_function_if_resolved(id); __builtin_expect(f != nullptr, 1)) return f;
  return real_function_slow(id);
}
//! Our wrapper for a pointer the driver handed out, or the pointer itself when it is not an interposed entry.
void* route(void* real_ptr);
//! Says once when `p` belongs to a CUDA driver other than the one tmaguard guards (route() calls it).
void note_if_foreign_driver(void* p);
//! glibc's RTLD_NEXT pseudo-handle (driver.cpp checks it against <dlfcn.h>, which this header does not include).
inline void* const kRtldNext = reinterpret_cast<void*>(-1L);
//! The real dlsym (glibc's, found with dlvsym), for the dlsym interposer.
using DlsymFn = void* (*)(void*, const char*);
DlsymFn real_dlsym();
//! The path the real driver was (or will be) loaded from, for messages.
const char* driver_path();

}  // namespace tmaguard

// Typed real pointer: TG_REAL(cuLaunchKernel) has type PFN_cuLaunchKernel_v4000.
#define TG_REAL(name) reinterpret_cast<tg_pfn_##name>(::tmaguard::real_function(::tmaguard::EntryId::name))

// Wrapper declarations with the exact exported names and the PFN types (mismatched definitions do not compile).
#define TG_WRAPPER(name) tg_wrap_##name
#define TG_ENTRY(name, pfn, kind)  \
  using tg_pfn_##name = pfn; \
  extern "C" __attribute__((visibility("default"))) std::remove_pointer_t<pfn> tg_wrap_##name __asm__(#name);
#define TG_REAL_ONLY(name, pfn) using tg_pfn_##name = pfn;
#include "driver/entry_points.def"
#undef TG_ENTRY
#undef TG_REAL_ONLY
