// tmaguard shim: the one way every driver wrapper starts (as compiler-rt's interceptors all start with one ENTER
// macro): the real function, the re-entry guard and the initialisation state, in this order.
//
//   CUresult TG_WRAPPER(cuFoo)(args) {
//     TG_ENTER(cuFoo);                // `real`: the driver's cuFoo; CUDA_ERROR_NOT_INITIALIZED without it
//     const CUresult rc = real(args);
//     if (call.active()) ...;         // tmaguard's own work: armed (starting it on first use), not re-entered
//     return rc;
//   }
//
// The launch wrappers alone ask the clean-launch memo before TG_ENTER (hooks_launch.cpp, memo/memo.h): that look
// touches no shared state and ends in a tail call. dlsym is no driver entry point: it forwards by a tail call
// and enters only to route a driver name (hooks_dlsym.cpp).
#pragma once

#include "driver/driver.h"
#include "runtime/runtime.h"

namespace tmaguard {

//! One interposed call, for its whole duration: the driver (or tmaguard itself) calling back into a wrapper while it
//! runs passes straight through.
class Intercepted {
 public:
  Intercepted() = default;
  Intercepted(const Intercepted&) = delete;
  Intercepted& operator=(const Intercepted&) = delete;
  //! Another interposed call of this thread is under way (a call back from the driver or from tmaguard).
  bool nested() const { return scope_.nested(); }
  //! tmaguard's work may run on this call: not nested, and armed (initialising tmaguard on its first use; false once
  //! it stepped aside).
  bool active() const { return !nested() && armed(); }
  //! Not nested and already armed; never starts tmaguard (for calls that have nothing to do before the first launch,
  //! such as forgetting the kernels of an unloaded module).
  bool active_if_started() const { return !nested() && armed_already(); }

 private:
  HookScope scope_;
};

}  // namespace tmaguard

//! Declares `real` (the typed real function) and `call` (an Intercepted); returns CUDA_ERROR_NOT_INITIALIZED from the
//! wrapper when the driver or the entry point is missing.
#define TG_ENTER(name) TG_ENTER_ENTRY(tg_pfn_##name, ::tmaguard::EntryId::name)
//! TG_ENTER for a wrapper generated from a template (hooks_launch.cpp): the entry by its EntryId and PFN type.
#define TG_ENTER_ENTRY(pfn, id)                                                        \
  const auto real = reinterpret_cast<pfn>(::tmaguard::real_function(id));             \
  if (__builtin_expect(!real, 0)) return CUDA_ERROR_NOT_INITIALIZED;                   \
  const ::tmaguard::Intercepted call
