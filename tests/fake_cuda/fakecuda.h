// The stand-in driver's test API (not part of CUDA): test clients declare kernels and read what ran.
#pragma once
#include <cstddef>

extern "C" {
//! Declares a kernel with parameters of the given sizes, laid out as the real driver reports them (see fake_cuda.cpp).
//! Returns a CUfunction, or a CUkernel when as_cukernel is non-zero.
void* fakecuda_define_kernel(const char* name, int nparams, const std::size_t* sizes, int as_cukernel);
//! The same with each parameter's alignment given (a CUTLASS Params struct holding CUtensorMaps is 128-aligned).
void* fakecuda_define_kernel_aligned(const char* name, int nparams, const std::size_t* sizes, const std::size_t* aligns,
                                     int as_cukernel);
//! Starts a new module (or, with as_library, a library): kernels defined from now on belong to it and are freed by
//! cuModuleUnload / cuLibraryUnload, after which new kernels reuse their addresses. Returns the CUmodule/CUlibrary.
void* fakecuda_new_module(int as_library);
//! How many launches of this handle reached the stand-in driver (the kernel "ran").
unsigned long fakecuda_launches(void* handle);
//! Declares [addr, addr + size) as device memory the driver allocated (cuPointerGetAttribute answers for it).
void fakecuda_register_memory(unsigned long long addr, unsigned long long size);
//! How many launches came through the named entry point (e.g. "cuLaunchKernel_ptsz").
unsigned long fakecuda_launches_via(const char* entry);
//! Every argument of the last launch that reached the stand-in on this thread, as it arrived (what a caller passed
//! must reach the driver unchanged, whichever path tmaguard took).
struct FakeLaunchRecord {
  void* f;
  unsigned grid[3], block[3], shared_bytes;
  void* stream;
  void** params;
  void** extra;
  const void* config;  // cuLaunchKernelEx's CUlaunchConfig (nullptr for the other entries)
  const char* via;     // the entry point
};
void fakecuda_last_launch(struct FakeLaunchRecord* out);
//! Declares [addr, addr + size) as pinned host memory (cuPointerGetAttribute(s) say CU_MEMORYTYPE_HOST).
void fakecuda_register_host_memory(unsigned long long addr, unsigned long long size);
//! What a kernel does when it runs (at launch: the stand-in's stream order is program order), e.g. write descriptor
//! bytes into a device buffer its parameters point to.
void fakecuda_set_kernel_effect(void* handle, void (*effect)(void** params, void* user), void* user);
//! Copies and events refused because their stream was being captured (tmaguard must never cause one).
unsigned long fakecuda_capture_violations();
//! Device-to-host copies made (cuMemcpyDtoHAsync).
unsigned long fakecuda_copies();
//! cuPointerGetAttributes calls answered.
unsigned long fakecuda_pointer_queries();
}
