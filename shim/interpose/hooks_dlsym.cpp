// tmaguard shim: the dlsym interposer. dlsym(handle, name) never searches LD_PRELOAD objects, so Triton's and
// PyTorch's dlsym on a libcuda handle would bypass every wrapper without it.
//
// Only CUDA driver names (cu + upper-case letter) looked up in a real handle are touched; cublas*, cudnn*, every
// other name and every RTLD_NEXT lookup are forwarded by a tail call, so glibc still sees the original caller's
// return address and resolves RTLD_NEXT relative to it. (A forwarding C call made "next" relative to tmaguard: a
// second CUDA shim after tmaguard in LD_PRELOAD that asked dlsym(RTLD_NEXT, "cuInit") got its own cuInit back and
// recursed for ever; the same mistake hung `import torch` under another shim.) RTLD_NEXT needs no routing: an
// interposer in front of tmaguard finds tmaguard's own wrapper as "next". This file is built with -O2
// -foptimize-sibling-calls and scripts/check_exports.sh verifies the forward compiles to a jump.
#include "runtime/intercept.h"

extern "C" __attribute__((visibility("default"))) void* dlsym(void* handle, const char* symbol) {
  const tmaguard::DlsymFn real = tmaguard::real_dlsym();
  if (__builtin_expect(handle == tmaguard::kRtldNext ||
                           !(symbol && symbol[0] == 'c' && symbol[1] == 'u' && symbol[2] >= 'A' && symbol[2] <= 'Z'),
                       1))
    return real(handle, symbol);  // tail call
  void* p = real(handle, symbol);
  const tmaguard::Intercepted call;  // route() may load nothing but must not recurse into us
  return call.nested() ? p : tmaguard::route(p);
}
