// A tensor map against the caller's tensor (tensor_match.h): the right map of a view, the map built from its shape as
// if it were contiguous, slices, merges, splits, and what cannot be compared.
#include <gtest/gtest.h>

#include <cstring>
#include <initializer_list>
#include <optional>
#include <vector>

#include "tmaguard/tensor_match.h"

namespace tmaguard {
namespace {

constexpr uint64_t kBase = 0x7f0000000000;

DeclaredTensor tensor(const char* name, std::vector<int64_t> shape, std::vector<int64_t> strides, uint32_t es = 2,
                      uint64_t data = kBase) {
  DeclaredTensor t;
  std::strncpy(t.name, name, sizeof t.name - 1);
  t.data = data;
  t.rank = static_cast<int>(shape.size());
  for (std::size_t j = 0; j < shape.size(); ++j) t.shape[j] = shape[j], t.strides[j] = strides[j];
  t.element_size = es;
  return t;
}

// A tiled map, dims innermost first; `strides`: the byte strides of dims 1.. (dim 0's is the element size).
TensorMapView map(std::vector<uint64_t> dims, std::vector<uint64_t> strides, uint64_t address = kBase,
                  DataType dtype = DataType::kF16) {
  TensorMapView v;
  v.kind = MapKind::kTiled;
  v.dtype = dtype;
  v.rank = static_cast<uint32_t>(dims.size());
  v.address = address;
  for (std::size_t i = 0; i < dims.size(); ++i) v.dims[i] = dims[i];
  for (std::size_t i = 0; i < strides.size(); ++i) v.strides[i] = strides[i];
  return v;
}

TensorFit fit(const TensorMapView& m, const DeclaredTensor& t) { return match_tensor(m, t).fit; }

// (B, H, S, D) = (2, 4, 128, 64) contiguous, seen as (B, S, H, D) through transpose(1, 2).
const DeclaredTensor kTransposed = tensor("q", {2, 128, 4, 64}, {32768, 64, 8192, 1});

TEST(TensorMatch, AViewsMapBuiltFromItsRealStridesDescribesIt) {
  EXPECT_EQ(fit(map({64, 4, 128, 2}, {16384, 128, 65536}), kTransposed), TensorFit::kDescribes);
  const DeclaredTensor contiguous = tensor("q", {2, 128, 4, 64}, {32768, 256, 64, 1});
  EXPECT_EQ(fit(map({64, 4, 128, 2}, {128, 512, 65536}), contiguous), TensorFit::kDescribes);
}

TEST(TensorMatch, AMapBuiltFromTheShapeAsIfContiguousIsAMismatch) {
  const TensorMatch m = match_tensor(map({64, 4, 128, 2}, {128, 512, 65536}), kTransposed);
  EXPECT_EQ(m.fit, TensorFit::kMismatch);
  EXPECT_NE(m.why.find("map dims 1 and 2 walk 512 elements along dim 1"), std::string::npos) << m.why;
}

TEST(TensorMatch, AnExtentPastTheTensorIsAMismatch) {
  const TensorMatch m = match_tensor(map({64, 4, 128, 3}, {16384, 128, 65536}), kTransposed);
  EXPECT_EQ(m.fit, TensorFit::kMismatch);
  EXPECT_NE(m.why.find("past its end"), std::string::npos) << m.why;
  EXPECT_EQ(fit(map({65, 4, 128, 2}, {16384, 128, 65536}), kTransposed), TensorFit::kMismatch);
}

TEST(TensorMatch, ASliceDescribesItsTensorUntilItRunsPastTheEnd) {
  const uint64_t at = kBase + 10 * 128;  // q[:, 10:]
  EXPECT_EQ(fit(map({64, 4, 100, 2}, {16384, 128, 65536}, at), kTransposed), TensorFit::kDescribes);
  EXPECT_EQ(fit(map({64, 4, 118, 2}, {16384, 128, 65536}, at), kTransposed), TensorFit::kDescribes);
  EXPECT_EQ(fit(map({64, 4, 119, 2}, {16384, 128, 65536}, at), kTransposed), TensorFit::kMismatch);
  EXPECT_EQ(fit(map({32, 2}, {16384}, kBase + 2 * 16384 + 64), kTransposed), TensorFit::kDescribes);
}

TEST(TensorMatch, AMergeOfContiguousDimsDescribesItAndOfPaddedOnesDoesNot) {
  const DeclaredTensor contiguous = tensor("k", {2, 128, 64}, {8192, 64, 1});
  EXPECT_EQ(fit(map({64, 256}, {128}), contiguous), TensorFit::kDescribes);   // (B*S, D)
  EXPECT_EQ(fit(map({8192, 2}, {16384}), contiguous), TensorFit::kDescribes);  // (B, S*D)
  EXPECT_EQ(fit(map({64, 257}, {128}), contiguous), TensorFit::kMismatch);
  const DeclaredTensor padded = tensor("k", {2, 128, 64}, {12000, 80, 1});
  EXPECT_EQ(fit(map({64, 128, 2}, {160, 24000}), padded), TensorFit::kDescribes);
  EXPECT_EQ(fit(map({64, 256}, {160}), padded), TensorFit::kMismatch) << "the batch rows are not contiguous";
  EXPECT_EQ(fit(map({80, 128, 2}, {160, 24000}), padded), TensorFit::kMismatch) << "a row's padding is no element";
}

TEST(TensorMatch, ASplitOfOneDimDescribesItAndAStridedPickDoesNot) {
  const DeclaredTensor q = tensor("q", {128, 8, 64}, {512, 64, 1});  // (S, H, D): H split as (Hkv, group)
  EXPECT_EQ(fit(map({64, 2, 4, 128}, {128, 256, 1024}), q), TensorFit::kDescribes);
  EXPECT_EQ(fit(map({64, 2, 4, 128}, {128, 512, 1024}), q), TensorFit::kMismatch);
  EXPECT_EQ(fit(map({64, 4, 128}, {256, 1024}), q), TensorFit::kMismatch) << "every other head is no slice";
}

TEST(TensorMatch, AStartThatIsNoElementIsAMismatch) {
  const DeclaredTensor padded = tensor("k", {128, 64}, {80, 1});
  EXPECT_EQ(fit(map({8, 4}, {160}, kBase + 70 * 2), padded), TensorFit::kMismatch);
  EXPECT_EQ(fit(map({8, 4}, {160}, kBase + 50 * 2), padded), TensorFit::kDescribes);
}

TEST(TensorMatch, WhatCannotBeComparedIsNotJudged) {
  EXPECT_EQ(fit(map({64, 4, 128, 2}, {16384, 128, 65536}, kBase, DataType::kF32), kTransposed),
            TensorFit::kNotJudged);
  TensorMapView im2col = map({64, 4, 128, 2}, {16384, 128, 65536});
  im2col.kind = MapKind::kIm2col;
  EXPECT_EQ(fit(im2col, kTransposed), TensorFit::kNotJudged);
  const DeclaredTensor overlapping = tensor("x", {4, 4}, {1, 2});
  EXPECT_EQ(fit(map({4, 4}, {4}), overlapping), TensorFit::kNotJudged);
}

// What no check can tell: with two dims of one extent, the map that swaps them walks the tensor's own dims.
TEST(TensorMatch, ASwapOfTwoDimsOfOneExtentIsAReordering) {
  const DeclaredTensor square = tensor("q", {2, 4, 4, 64}, {1024, 64, 256, 1});
  EXPECT_EQ(fit(map({64, 4, 4, 2}, {128, 512, 2048}), square), TensorFit::kDescribes);
}

TEST(TensorMatch, ADeclarationIsCheckedAndDescribed) {
  EXPECT_EQ(declaration_problem(kTransposed), "");
  DeclaredTensor bad = kTransposed;
  bad.strides[1] = -64;
  EXPECT_NE(declaration_problem(bad).find("negative"), std::string::npos);
  bad = kTransposed;
  bad.rank = 9;
  EXPECT_NE(declaration_problem(bad).find("rank 9"), std::string::npos);
  bad = kTransposed;
  bad.element_size = 0;
  EXPECT_NE(declaration_problem(bad), "");
  // An extent whose reach wraps 128 bits (2^62 - 1 steps of 2^62 bytes, times 16-byte elements) is refused, not
  // taken with a span of 0 that nothing is judged against.
  bad = tensor("huge", {2, int64_t{1} << 62, int64_t{3} << 60}, {int64_t{1} << 60, int64_t{1} << 62, 1}, 16, 0);
  EXPECT_NE(declaration_problem(bad).find("past the end of memory"), std::string::npos) << declaration_problem(bad);
  bad = tensor("edge", {2}, {int64_t{1} << 62}, 2, 0);
  EXPECT_EQ(declaration_problem(bad), "");
  bad = tensor("over", {5}, {int64_t{1} << 62}, 2, 0);
  EXPECT_NE(declaration_problem(bad), "");
  EXPECT_EQ(tensor_span(kTransposed), 2u * 128 * 4 * 64 * 2);
  EXPECT_TRUE(points_into(kBase + 100, kTransposed));
  EXPECT_FALSE(points_into(kBase + 65536 * 2, kTransposed));
  EXPECT_EQ(describe_tensor(kTransposed),
            "q (shape [2, 128, 4, 64], strides [32768, 64, 8192, 1] elements, 2-byte elements, at 0x7f0000000000)");
  EXPECT_EQ(describe_map_walk(map({64, 4}, {16384})),
            "dims [64, 4], byte strides [2, 16384] (innermost first), at 0x7f0000000000");
}

TensorMapParam param(const TensorMapView& v, uint32_t index) {
  TensorMapParam m;
  m.place = {index, 0};
  m.decoded.view = v;
  return m;
}

// q, k and v sliced from one fused QKV buffer (B, S, 3, H, D): each lies inside the others' bytes, and a map is judged
// against every tensor it points into; the finding names the one whose data pointer is the map's address.
TEST(TensorMatch, AFindingNamesTheTensorTheMapStartsAtAndAnyTensorThatFitsClearsIt) {
  const int64_t s = 3 * 4 * 64;  // a token's stride
  const DeclaredTensor qkv[] = {tensor("q", {2, 128, 4, 64}, {128 * s, s, 64, 1}, 2, kBase),
                                tensor("k", {2, 128, 4, 64}, {128 * s, s, 64, 1}, 2, kBase + 4 * 64 * 2),
                                tensor("v", {2, 128, 4, 64}, {128 * s, s, 64, 1}, 2, kBase + 8 * 64 * 2)};
  const uint64_t token = s * 2;
  const TensorMapView right_k = map({64, 4, 128, 2}, {128, token, 128 * token}, qkv[1].data);
  EXPECT_FALSE(tensor_finding("kern", param(right_k, 1), qkv, 3)) << "k's own map drew a finding";
  const TensorMapView packed_k = map({64, 4, 128, 2}, {128, 512, 65536}, qkv[1].data);  // as if k were contiguous
  const std::optional<Finding> f = tensor_finding("kern", param(packed_k, 1), qkv, 3);
  ASSERT_TRUE(f);
  EXPECT_EQ(f->rule, "map-tensor-mismatch");
  EXPECT_EQ(f->severity, Severity::kError);
  EXPECT_EQ(f->tensor, "k");
  EXPECT_EQ(f->place->param, 1u);
  EXPECT_NE(f->expected.find("shape [2, 128, 4, 64], strides [98304, 768, 64, 1]"), std::string::npos) << f->expected;
  EXPECT_NE(f->observed.find("byte strides [2, 128, 512, 65536]"), std::string::npos) << f->observed;
  const TensorMapView elsewhere = map({64}, {}, kBase + 0x100000000);
  EXPECT_FALSE(tensor_finding("kern", param(elsewhere, 0), qkv, 3)) << "a map into no declared tensor is not judged";
  EXPECT_FALSE(tensor_finding("kern", param(packed_k, 1), qkv, 0));
}

// Triton #11583, measured on an H200 (docs/gpu-runs/nvidia-h200-spill.txt): a TMA store writes whole 16-byte chunks
// of a row. A uint8 map over out[:, :466] of a (32, 512) buffer ends its rows 2 bytes into a chunk, so its stores write
// columns 466-479, which are no element of the view.
TEST(TensorMatch, AStoredMapWhoseRowsEndInsideAChunkSpillsOutOfAView) {
  const DeclaredTensor view = tensor("out", {32, 466}, {512, 1}, 1);
  const TensorMapView m = map({466, 32}, {512}, kBase, DataType::kU8);
  ASSERT_EQ(fit(m, view), TensorFit::kDescribes) << "the map is the view's own";
  const std::optional<std::string> why = store_spill(m, view);
  ASSERT_TRUE(why);
  EXPECT_NE(why->find("writes bytes 466-479 of each row"), std::string::npos) << *why;
  const std::optional<Finding> f = tensor_finding("kern", param(m, 2), &view, 1, true);
  ASSERT_TRUE(f);
  EXPECT_EQ(f->rule, "map-store-spill");
  EXPECT_EQ(f->severity, Severity::kError);
  EXPECT_EQ(f->tensor, "out");
  EXPECT_FALSE(tensor_finding("kern", param(m, 2), &view, 1, false)) << "a map not named as stored is only matched";
  EXPECT_TRUE(store_spill(map({470, 32}, {512}, kBase, DataType::kU8), tensor("out", {32, 470}, {512, 1}, 1)));
}

TEST(TensorMatch, AStoreEndingOnAChunkOrInsideItsOwnTensorDoesNotSpill) {
  EXPECT_FALSE(store_spill(map({480, 32}, {512}, kBase, DataType::kU8), tensor("out", {32, 480}, {512, 1}, 1)));
  // The whole (32, 512) buffer declared: the chunk's rest is its own columns 466-479 (another map may store them).
  EXPECT_FALSE(store_spill(map({466, 32}, {512}, kBase, DataType::kU8), tensor("out", {32, 512}, {512, 1}, 1)));
  // A 466-byte vector stored as a 1-D map: its one row's chunk runs past the tensor's end.
  const std::optional<std::string> why = store_spill(map({466}, {}, kBase, DataType::kU8), tensor("v", {466}, {1}, 1));
  ASSERT_TRUE(why);
  EXPECT_NE(why->find("is none of its elements"), std::string::npos) << *why;
  EXPECT_FALSE(store_spill(map({64, 4, 128, 2}, {16384, 128, 65536}), kTransposed)) << "128-byte rows";
}

// A ragged map (varlen attention) is judged as the tensor under it: its 2^30 sequence extent is not the tensor's.
TEST(TensorMatch, ARaggedMapIsMatchedAsTheTensorUnderIt) {
  const uint64_t h = 4, d = 64, s = 2 * h * d;
  const DeclaredTensor thd = tensor("dk", {1000, 4, 64}, {256, 64, 1});
  // Triton's tools/ragged_tma.py form: the tensor's own address, two extra modes.
  const TensorMapView wrap = map({d, 1ULL << 30, h, 0x7fff0000, 0x7fff0000}, {s, 2 * d, s, (1ULL << 34) * 2 - s});
  ASSERT_TRUE(ragged_tensor(wrap));
  EXPECT_FALSE(tensor_finding("kern", param(wrap, 0), &thd, 1, true));
  // quack's ptr_shift form, its address 2^30 tokens before the tensor: the heads made contiguous is a mismatch.
  const TensorMapView shifted = map({h, 1ULL << 30, d, (1ULL << 31) - 1}, {s, 2 * h, s}, kBase - (1ULL << 30) * s);
  ASSERT_TRUE(ragged_tensor(shifted));
  const std::optional<Finding> f = tensor_finding("kern", param(shifted, 0), &thd, 1);
  ASSERT_TRUE(f);
  EXPECT_EQ(f->rule, "map-tensor-mismatch");
  const TensorMapView right = map({d, 1ULL << 30, h, (1ULL << 31) - 1}, {s, 2 * d, s}, kBase - (1ULL << 30) * s);
  EXPECT_FALSE(tensor_finding("kern", param(right, 0), &thd, 1));
}

}  // namespace
}  // namespace tmaguard
