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

}  // namespace

const std::vector<Scenario>& tensor_scenarios() {
  static const std::vector<Scenario> v = {
      {"declared_right", declared_right},   {"declared_shape", declared_shape}, {"declared_past", declared_past},
      {"undeclared_shape", undeclared_shape}, {"ended_shape", ended_shape},     {"declared_twice", declared_twice},
      {"q_right", q_right},                   {"q_shape", q_shape},             {"q_past", q_past},
  };
  return v;
}

}  // namespace client
