// tmaguard: the checks run on a launch's tensor-map parameters. Pure functions: bytes in, findings out.
#pragma once

#include <string_view>
#include <vector>

#include "tmaguard/finding.h"
#include "tmaguard/tensormap.h"

namespace tmaguard {

//! One 128-byte, 64-byte-aligned kernel parameter, decoded.
struct TensorMapParam {
  int param_index = -1;
  DecodeResult decoded;
};

//! True for FlashAttention-4's SM100 backward kernel (CuTe DSL mangles the class name into the kernel name).
bool is_fa4_sm100_bwd(std::string_view kernel_name);

//! Where FA4 SM100 backward keeps its maps, by map count. present=false: nothing to check (dKV postprocess).
struct Fa4Layout {
  bool known = false;    // the count is one of 4, 6, 7, 9
  bool present = false;  // dK/dV are TMA-stored (6 or 9 maps)
  int k = -1, v = -1, dv = -1, dk = -1;  // positions among the tensor-map parameters
};
Fa4Layout fa4_layout(std::size_t map_count);

//! FA4 SM100 backward: dK/dV must be K-major (head dim innermost) with K/V's dims and a 16-bit float type.
void check_fa4_sm100_bwd(std::string_view kernel, const std::vector<TensorMapParam>& maps, std::vector<Finding>& out);

//! Generic sanity of one decoded descriptor: what the real driver would have refused to encode.
void check_descriptor(std::string_view kernel, const TensorMapParam& map, std::vector<Finding>& out);

}  // namespace tmaguard
