// tmaguard: cuda.h with the driver's exact exported names. Shared by the shim and the stand-in driver.
//
// CUDA 13's cuda.h #defines several entry points to their newest ABI (cuGetProcAddress -> cuGetProcAddress_v2, ...).
// Code that defines or looks up symbols by their exported name needs the plain names, so they are undone here, once.
#pragma once

#include <cuda.h>
#include <cudaTypedefs.h>

#undef cuGetProcAddress
#undef cuGraphAddKernelNode
#undef cuGraphKernelNodeSetParams
#undef cuGraphExecKernelNodeSetParams
#undef cuGraphAddNode
