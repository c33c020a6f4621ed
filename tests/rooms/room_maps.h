// Maps the rooms' tests put in parameters: encoded by the project's encoder (pinned to the real driver's bytes).
#pragma once

#include <cstdint>

#include "tmaguard/tensormap.h"

namespace tmaguard {

//! A float16 2-D map over (64, 64) at `address`, as the driver encodes it.
inline EncodeArgs half_map(uint64_t address) {
  EncodeArgs a;
  a.dtype = 6;  // float16
  a.rank = 2;
  a.address = address;
  a.dims = {64, 64};
  a.strides = {128};
  a.box = {64, 64};
  a.element_strides = {1, 1};
  return a;
}

}  // namespace tmaguard
