// tmaguard: a tensor map against the caller's own tensor. A map can be well formed, inside its allocation and
// accepted by the driver, and still describe the wrong memory: built from a view's shape as if it were contiguous, or
// from a compact layout while the tensor is padded. Only the tensor's own metadata (its data pointer, shape and
// strides, as PyTorch's data_ptr(), shape, stride() and element_size() give them) shows it. Pure: no state.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tmaguard/finding.h"
#include "tmaguard/tensormap.h"

namespace tmaguard {

inline constexpr int kMaxDeclaredRank = 8;
inline constexpr std::size_t kDeclaredNameBytes = 32;  // a name's bytes, its terminating NUL included

//! A tensor as its caller declared it (tmaguard_declare_tensor): name, data pointer, shape and strides in elements,
//! element size in bytes.
struct DeclaredTensor {
  char name[kDeclaredNameBytes] = {};
  uint64_t data = 0;
  int rank = 0;
  std::array<int64_t, kMaxDeclaredRank> shape{};
  std::array<int64_t, kMaxDeclaredRank> strides{};
  uint32_t element_size = 0;
};

//! What a declaration is wrong in ("" when nothing): a rank over kMaxDeclaredRank, a negative extent or stride, an
//! element size of 0 or over 16, a tensor whose bytes would wrap the address space.
std::string declaration_problem(const DeclaredTensor& t);

//! The bytes the tensor's elements occupy: [data, data + span). 0 for an empty tensor.
uint64_t tensor_span(const DeclaredTensor& t);
//! Whether a map's global address lies among the tensor's bytes.
bool points_into(uint64_t address, const DeclaredTensor& t);

enum class TensorFit {
  kDescribes,   // every element the map addresses is an element of the tensor, at the tensor's own address for it
  kMismatch,    // it is not (why says how)
  kNotJudged,   // the map cannot be compared with this tensor (another element size, not a tiled map, a tensor whose
                // dims overlap)
};
struct TensorMatch {
  TensorFit fit = TensorFit::kNotJudged;
  std::string why;  // for kMismatch and kNotJudged, one clause
};

//! Whether `map` describes `t`. Each map dim of more than one element must walk the tensor along its own dims: a dim of
//! the tensor (a slice: an extent no larger than what is left of it from the map's start), a split of one (map dims
//! whose strides are that dim's stride times the extents inside them, together no larger than it), or a merge of dims
//! contiguous in the tensor (one map dim at the stride of the innermost of them). A stride that is none of these, an
//! extent past the tensor's end, or a start that is no element of the tensor is a mismatch. A reordering of dims is
//! fine: when two dims have the same extent, a map that swaps them cannot be told from a transposed view's right map.
TensorMatch match_tensor(const TensorMapView& map, const DeclaredTensor& t);

//! The finding for a decoded map whose global address lies inside one or more of the `n` declared tensors and that
//! describes none of them (map-tensor-mismatch, naming the tensor: the one whose data pointer is the map's address, else
//! the first declared); nullopt for a map into no declared tensor, or one that describes (or cannot be compared with)
//! one it points into (q, k and v sliced from one buffer lie inside each other's bytes).
//! A map the kernel stores through (`stored`: the rules name it in `stores`) that describes a tensor is judged once
//! more: map-store-spill when store_spill() says its rows spill out of that tensor.
std::optional<Finding> tensor_finding(std::string_view kernel, const TensorMapParam& map, const DeclaredTensor* tensors,
                                      std::size_t n, bool stored = false);

//! What a TMA store through `map` writes outside `t` (nullopt: nothing). The TMA unit writes whole 16-byte chunks of a
//! row (measured on an H200: a uint8 map over the first 466 columns of a (32, 512) buffer overwrote columns 466-479 of
//! every row), so a map whose rows end inside a chunk also writes the chunk's rest; that is wrong when those bytes are
//! no element of the tensor (the view's row stride leaves bytes after it, or the tensor ends there). Bytes that are
//! the tensor's own elements (a map over part of a row) are not judged. Only the map's first and last rows are read.
std::optional<std::string> store_spill(const TensorMapView& map, const DeclaredTensor& t);

//! How many of the decoded `maps` (as judged_view() sees them) point into one of the `n` tensors.
std::size_t maps_into_tensors(const std::vector<TensorMapParam>& maps, const DeclaredTensor* tensors, std::size_t n);

//! The tensor as a report shows it: `q (shape [2, 128, 4, 64], strides [32768, 64, 8192, 1], 2-byte elements)`.
std::string describe_tensor(const DeclaredTensor& t);
//! The map as a report shows it against a tensor: `dims [64, 4, 128, 2], byte strides [2, 128, 512, 65536]`
//! (innermost first, dim 0's stride its element size).
std::string describe_map_walk(const TensorMapView& map);

}  // namespace tmaguard
