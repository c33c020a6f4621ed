// Scenarios: tensor maps judged against the tensors the caller declared (include/tmaguard/declare.h). The tensor is
// q, a transposed view: (B, H, S, D) = (2, 4, 128, 64) bf16 contiguous, seen as (B, S, H, D). Each scenario launches
// one map of it (a kernel no rule names) and prints what ran.
//
//   declared_right      declared, the map built from q's real strides: runs
//   declared_shape      declared, the map built from q's shape as if it were contiguous, over q's pointer
//   declared_past       declared, the right map one batch past q's end
//   undeclared_shape    the shape-built map, nothing declared: judged as before (it runs)
//   ended_shape         declared, the declaration ended, then the shape-built map: as undeclared
//   declared_twice      the right map launched twice under the same declaration, then the shape-built one
//   spill_view          Triton's matmul_kernel_tma (rules/examples/triton_matmul.toml names C stored): C over
//                      out = buf[:, :466] of a (32, 512) bf16 buffer, declared: its rows end inside a 16-byte chunk
//   spill_chunk         the same over buf[:, :464]: its rows end on a chunk
//   spill_undeclared    spill_view's maps, nothing declared
//   q_right, q_shape, q_past   the three maps launched without a declaration of their own (the Python job declares
//                      q around them: tests/python/declared_job.py)
#include <cstdio>
#include <cstdint>

#include "client.h"
#include "tmaguard/declare.h"

namespace client {
namespace {

constexpr uint64_t kQ = 0x7f0000000000ULL;
constexpr uint64_t kB = 2, kS = 128, kH = 4, kD = 64;

void declare_q() {
  const int64_t shape[] = {kB, kS, kH, kD};
  const int64_t strides[] = {kH * kS * kD, kD, kS * kD, 1};
  if (tmaguard_declare("q", reinterpret_cast<const void*>(kQ), 4, shape, strides, 2) != 0)
    die("tmaguard_declare refused q");
}

// Dims innermost first (D, H, S, B); byte strides of H, S, B.
CUtensorMap right_map(uint64_t batches = kB) {
  MapShape s;
  s.box = {64, 4, 16, 1};
  return encode_map({kQ, {kD, kH, kS, batches}, {kS * kD * 2, kD * 2, kH * kS * kD * 2}}, s);
}
CUtensorMap shape_map() {  // strides as if (B, S, H, D) were contiguous
  MapShape s;
  s.box = {64, 4, 16, 1};
  return encode_map({kQ, {kD, kH, kS, kB}, {kD * 2, kH * kD * 2, kS * kH * kD * 2}}, s);
}

int launch_one(const CUtensorMap& m, const char* what) {
  const Kernel k = make_kernel("my_attention_fwd_kernel", {m});
  launch(k);
  std::printf("TENSORS %s ran=%lu\n", what, ran(k));
  return finish(ran(k));
}

int declared_right() {
  declare_q();
  return launch_one(right_map(), "right");
}
int declared_shape() {
  declare_q();
  return launch_one(shape_map(), "shape");
}
int declared_past() {
  declare_q();
  return launch_one(right_map(kB + 1), "past");
}
int undeclared_shape() { return launch_one(shape_map(), "undeclared"); }
int q_right() { return launch_one(right_map(), "right"); }
int q_shape() { return launch_one(shape_map(), "shape"); }
int q_past() { return launch_one(right_map(kB + 1), "past"); }
int ended_shape() {
  declare_q();
  tmaguard_end();
  return launch_one(shape_map(), "ended");
}
int declared_twice() {
  declare_q();
  const Kernel right = make_kernel("my_attention_fwd_kernel", {right_map()});
  launch(right);
  launch(right);
  const Kernel shape = make_kernel("my_attention_fwd_kernel", {shape_map()});
  launch(shape);
  std::printf("TENSORS twice right_ran=%lu shape_ran=%lu\n", ran(right), ran(shape));
  return finish(ran(right) + ran(shape));
}

constexpr uint64_t kA = 0x7f0000400000ULL, kBt = 0x7f0000800000ULL, kOut = 0x7f0000c00000ULL;
constexpr uint64_t kRows = 32, kK = 64, kBufCols = 512;

// C = A @ B.T into out = buf[:, :cols] (bf16), A (32, 64), B (cols, 64): Triton's three host descriptors.
int matmul_into_view(uint64_t cols, bool declare, const char* what) {
  if (declare) {
    const int64_t shape[] = {kRows, static_cast<int64_t>(cols)}, strides[] = {kBufCols, 1};
    if (tmaguard_declare("out", reinterpret_cast<const void*>(kOut), 2, shape, strides, 2) != 0)
      die("tmaguard_declare refused out");
  }
  MapShape s;
  s.box = {64, 32};
  const CUtensorMap a = encode_map({kA, {kK, kRows}, {kK * 2}}, s);
  const CUtensorMap b = encode_map({kBt, {kK, cols}, {kK * 2}}, s);
  const CUtensorMap c = encode_map({kOut, {cols, kRows}, {kBufCols * 2}}, s);
  const Kernel k = make_kernel("matmul_kernel_tma", {a, b, c});
  launch(k);
  std::printf("TENSORS %s ran=%lu\n", what, ran(k));
  return finish(ran(k));
}
int spill_view() { return matmul_into_view(466, true, "spill"); }
int spill_chunk() { return matmul_into_view(464, true, "chunk"); }
int spill_undeclared() { return matmul_into_view(466, false, "undeclared"); }

}  // namespace

const std::vector<Scenario>& tensor_scenarios() {
  static const std::vector<Scenario> v = {
      {"declared_right", declared_right},   {"declared_shape", declared_shape}, {"declared_past", declared_past},
      {"undeclared_shape", undeclared_shape}, {"ended_shape", ended_shape},     {"declared_twice", declared_twice},
      {"q_right", q_right},                   {"q_shape", q_shape},             {"q_past", q_past},
      {"spill_view", spill_view},             {"spill_chunk", spill_chunk},     {"spill_undeclared", spill_undeclared},
  };
  return v;
}

}  // namespace client
