// tmaguard shim: inspect mode's census, what tmaguard could see of each kernel over the run: one record per kernel
// launched, at exit. Each KernelInfo holds one KernelCensus; only census.cpp changes it.
#pragma once

#include <atomic>
#include <cstdint>
#include <vector>

#include "tmaguard/launch.h"

namespace tmaguard {

struct KernelInfo;

struct KernelCensus {
  mutable std::atomic<uint64_t> launches{0};
  // What the kernel's last inspected launch let tmaguard see.
  mutable std::atomic<int> maps_in_params{0}, maps_in_structs{0}, template_maps{0};
};

//! An inspected launch of `k` (the first one registers the census at exit).
void census_count_launch(const KernelInfo& k);
//! The maps an inspected launch of `k` decoded.
void census_note_maps(const KernelInfo& k, const std::vector<TensorMapParam>& maps);

}  // namespace tmaguard
