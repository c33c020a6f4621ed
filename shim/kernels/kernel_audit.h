// tmaguard shim: what the device-map audit keeps per kernel. Each KernelInfo holds one (built with the kernel's facts,
// freed with them): planned with the facts (kernel_audit.cpp), changed by the audit alone (launch/device_audit.cpp).
#pragma once

#include <atomic>
#include <cstdint>
#include <vector>

#include "tmaguard/place.h"

namespace tmaguard {

//! Consecutive 8-byte words of one parameter that may hold device addresses: `words` of them from `offset`.
struct PointerWords {
  uint32_t param = 0;
  uint32_t offset = 0;
  uint32_t words = 0;
  MapPlace word(uint32_t i) const { return {param, offset + 8 * i}; }
};

struct KernelAudit {
  std::vector<int> rules;              // the rules that name maps in device memory ("param:N->AT")
  std::vector<PointerWords> pointers;  // the places in the parameters that may hold device addresses (words of maps
                                       // found in the parameters excluded), as runs: a struct's 32 words are 12 bytes
  //! How many places `pointers` holds.
  std::size_t pointer_count() const {
    std::size_t n = 0;
    for (const PointerWords& w : pointers) n += w.words;
    return n;
  }
  mutable std::atomic<uint64_t> launches_left{0};  // how many more launches are audited (kAuditEveryLaunch: all)
  mutable std::atomic<int> pins{0};        // reads in flight that refer to the kernel's facts (never freed while any)
  mutable std::atomic<int> most_maps{0};   // the most maps one audited launch found in device memory
};

}  // namespace tmaguard
