// tmaguard shim: per-kernel facts (name, parameter layout, tensor-map slots, which rules apply), built once per
// CUfunction/CUkernel, and the set of launches already found clean.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "cuda_names.h"
#include "hot.h"
#include "tmaguard/launch.h"

namespace tmaguard {

struct KernelInfo {
  std::string name;
  std::vector<int> rules;     // indices of the rules whose kernel matcher accepts this kernel
  ParamLayout layout;         // every parameter's offset and size
  std::vector<MapSlot> maps;  // tensor-map candidates, in parameter order
};

//! Facts for a launch handle (CUfunction, or a CUkernel passed where a CUfunction is expected). Never null.
//! Read-mostly: a lock-free table, filled on a kernel's first launch.
const KernelInfo* kernel_info(CUfunction f);
//! This thread's front-cache entry for `f` (hot.h), filled from kernel_info() when it holds another kernel.
FrontEntry& front_entry(CUfunction f);

//! The identity a launch key starts from (launch.h's launch_key): the kernel's handle.
inline uint64_t kernel_identity(CUfunction f) { return reinterpret_cast<uintptr_t>(f); }

//! Set of launch keys that were checked and found clean: a repeated launch costs a hash and a lookup.
bool clean_cache_contains(uint64_t key);
void clean_cache_insert(uint64_t key);

}  // namespace tmaguard
