// tmaguard shim: the dlsym interposer. dlsym(handle, name) never searches LD_PRELOAD objects, so Triton's and
// PyTorch's dlsym on a libcuda handle would bypass every wrapper without it.
//
// Only CUDA driver names (cu + upper-case letter) are touched; cublas*, cudnn* and everything else are forwarded
// by a tail call, so glibc still sees the original caller's return address (RTLD_NEXT stays relative to the
// caller; a forwarding C call here is what hung `import torch` under another shim). This file is built with
// -O2 -foptimize-sibling-calls and scripts/check_exports.sh verifies the forward compiles to a jump.
#include "driver.h"
#include "runtime.h"

extern "C" __attribute__((visibility("default"))) void* dlsym(void* handle, const char* symbol) {
  const tmaguard::DlsymFn real = tmaguard::real_dlsym();
  if (__builtin_expect(!(symbol && symbol[0] == 'c' && symbol[1] == 'u' && symbol[2] >= 'A' && symbol[2] <= 'Z'), 1))
    return real(handle, symbol);  // tail call
  void* p = real(handle, symbol);
  tmaguard::HookScope scope;  // route() may load nothing but must not recurse into us
  return scope.nested() ? p : tmaguard::route(p);
}
