// tmaguard shim: cuGetProcAddress (4 arguments, CUDA 11.3) and cuGetProcAddress_v2 (5 arguments, CUDA 12.0).
// The driver answers; we only swap a pointer it handed out for our wrapper when it is one of our entries. Routing
// by the returned pointer gets _ptsz and the self-lookup's arity right whatever version or flags were asked.
// NULL is never replaced, and the driver's status (and symbolStatus) come back exactly as it set them.
#include "runtime/intercept.h"

CUresult TG_WRAPPER(cuGetProcAddress)(const char* symbol, void** pfn, int version, cuuint64_t flags) {
  TG_ENTER(cuGetProcAddress);
  const CUresult rc = real(symbol, pfn, version, flags);
  if (rc == CUDA_SUCCESS && pfn && *pfn) *pfn = tmaguard::route(*pfn);
  return rc;
}

CUresult TG_WRAPPER(cuGetProcAddress_v2)(const char* symbol, void** pfn, int version, cuuint64_t flags,
                                         CUdriverProcAddressQueryResult* status) {
  TG_ENTER(cuGetProcAddress_v2);
  const CUresult rc = real(symbol, pfn, version, flags, status);
  if (rc == CUDA_SUCCESS && pfn && *pfn) *pfn = tmaguard::route(*pfn);
  return rc;
}
