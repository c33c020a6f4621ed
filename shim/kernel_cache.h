// tmaguard shim: per-kernel facts (name, parameter layout, which rules apply), built once per CUfunction/CUkernel.
#pragma once

#include <cuda.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "hot.h"

namespace tmaguard {

struct KernelInfo {
  std::string name;
  std::vector<int> rules;         // indices of the rules whose kernel matcher accepts this kernel
  std::vector<std::size_t> offsets;  // every parameter's byte offset
  std::vector<std::size_t> sizes;    // every parameter's size
  std::vector<int> map_params;    // indices of 128-byte parameters (tensor-map candidates)
};

//! Facts for a launch handle (CUfunction, or a CUkernel passed where a CUfunction is expected). Never null.
//! Read-mostly: a lock-free table, filled on a kernel's first launch.
const KernelInfo* kernel_info(CUfunction f);
//! This thread's front-cache entry for `f` (hot.h), filled from kernel_info() when it holds another kernel.
FrontEntry& front_entry(CUfunction f);

//! Set of launch keys that were checked and found clean: a repeated launch costs a hash and a lookup.
bool clean_cache_contains(uint64_t key);
void clean_cache_insert(uint64_t key);

//! The encode call that produced a descriptor with this content hash, or a sentence saying none was seen.
std::string provenance_for(uint64_t content_hash);

}  // namespace tmaguard
