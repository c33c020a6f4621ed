// tmaguard shim: what the device-map audit keeps per kernel. Each KernelInfo holds one (built with the kernel's facts,
// freed with them); only the audit (device_audit.cpp) plans and changes it.
#pragma once

#include <atomic>
#include <cstdint>
#include <vector>

#include "tmaguard/place.h"

namespace tmaguard {

struct KernelAudit {
  std::vector<int> rules;          // the rules that name maps in device memory ("param:N->AT")
  std::vector<MapPlace> pointers;  // the places in the parameters that may hold device addresses (words of maps
                                   // found in the parameters excluded)
  mutable std::atomic<uint64_t> launches_left{0};  // how many more launches are audited (kAuditEveryLaunch: all)
  mutable std::atomic<int> pins{0};        // reads in flight that refer to the kernel's facts (never freed while any)
  mutable std::atomic<int> most_maps{0};   // the most maps one audited launch found in device memory
};

}  // namespace tmaguard
