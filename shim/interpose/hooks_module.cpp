// tmaguard shim: cuModuleUnload and cuLibraryUnload. The driver may hand out the same CUfunction/CUkernel value for
// a kernel loaded later; tmaguard forgets the kernels an unload frees, so a reused handle is looked up afresh
// instead of being checked with another kernel's parameter layout (whose map indices could reach past its
// parameters). Forgotten before and after the real call, so a launch racing with the unload leaves nothing stale.
#include "runtime/intercept.h"
#include "kernels/kernel_table.h"

CUresult TG_WRAPPER(cuModuleUnload)(CUmodule module) {
  TG_ENTER(cuModuleUnload);
  if (call.active_if_started()) tmaguard::forget_kernels_of(module);
  const CUresult rc = real(module);
  if (call.active_if_started()) tmaguard::forget_kernels_of(module);
  return rc;
}

CUresult TG_WRAPPER(cuLibraryUnload)(CUlibrary library) {
  TG_ENTER(cuLibraryUnload);
  // CUfunctions taken from the library's kernels (cuKernelGetFunction) belong to its context module.
  CUmodule module = nullptr;
  if (auto get = TG_REAL(cuLibraryGetModule); get && call.active_if_started()) {
    if (get(&module, library) != CUDA_SUCCESS) module = nullptr;
  }
  if (call.active_if_started()) tmaguard::forget_kernels_of(library, module);
  const CUresult rc = real(library);
  if (call.active_if_started()) tmaguard::forget_kernels_of(library, module);
  return rc;
}
