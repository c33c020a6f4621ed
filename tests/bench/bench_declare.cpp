// What declaring tensors through the C API costs (include/tmaguard/declare.h), in the process tmaguard is preloaded
// into (with the stand-in driver): a block of N tensors declared in one call and ended in one
// (tmaguard_declare_tensors, tmaguard_end_declaration_to), and the same N one call each (tmaguard_declare_tensor,
// tmaguard_end_declaration). Prints Google Benchmark's table, with the time per tensor (per_tensor) per row; asserts
// nothing about time.
//
//   LD_PRELOAD=build/libtmaguard.so LD_LIBRARY_PATH=build/tests/fake_cuda build/tests/bench_declare
#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "tmaguard/declare.h"

namespace {

constexpr int kMost = 16;
const char* const kNames[kMost] = {"q", "k", "v", "out", "dout", "lse", "dq", "dk",
                                   "dv", "t9", "t10", "t11", "t12", "t13", "t14", "t15"};
const int64_t kShape[4] = {2, 1024, 8, 128};
const int64_t kStrides[4] = {1048576, 1024, 128, 1};

tmaguard_tensor tensor(int i) {
  return {kNames[i], reinterpret_cast<const void*>(uintptr_t{0x7f0000000000} + (uintptr_t(i) << 24)), kShape, kStrides,
          4, 2};
}

// Seconds per tensor, printed with an SI prefix ("70n": 70 ns).
void per_tensor(benchmark::State& state, int n) {
  state.counters["per_tensor"] = benchmark::Counter(
      n, benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}

void Block(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  tmaguard_tensor t[kMost];
  for (int i = 0; i < n; ++i) t[i] = tensor(i);
  for (auto _ : state) {
    int depth = 0;
    if (tmaguard_declare_tensors(t, n, &depth) != 0) state.SkipWithError("a tensor was refused");
    tmaguard_end_declaration_to(depth);
  }
  per_tensor(state, n);
}
BENCHMARK(Block)->Arg(1)->Arg(4)->Arg(8)->Arg(16);

void OneCallEach(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  for (auto _ : state) {
    for (int i = 0; i < n; ++i) tmaguard_declare_tensor(kNames[i], tensor(i).data, 4, kShape, kStrides, 2);
    tmaguard_end_declaration();
  }
  per_tensor(state, n);
}
BENCHMARK(OneCallEach)->Arg(4)->Arg(8);

}  // namespace

int main(int argc, char** argv) {
  if (!tmaguard_declare_tensors || !tmaguard_end_declaration_to) {
    std::fprintf(stderr, "bench_declare: tmaguard is not preloaded (LD_PRELOAD=.../libtmaguard.so)\n");
    return 2;
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 2;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
