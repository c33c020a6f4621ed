// CPU micro-benchmarks of tmaguard's hot paths, run in a process with libtmaguard.so preloaded in front of the
// stand-in driver (scripts/bench.sh). Each pair times the same stand-in function straight (found in its symbol
// table) and through tmaguard's wrapper: the difference is what tmaguard adds to a launch or an encode. The
// stand-in's own launch is a few nanoseconds, so the difference is not hidden under a real driver's microseconds.
// Also: decode, content hash and the FA4 rule on their own (pure core).
// `bench_hot_path --probe [KiB [batches [other builds of libtmaguard.so...]]]` runs the launch probe (probe_steps.h)
// instead: each launch to the stand-in is preceded by writing KiB of unrelated memory (default 1024), the part a real
// driver's microseconds play; other builds are measured in the same process, beside the preloaded one.
#include <benchmark/benchmark.h>
#include <cuda.h>
#include <cudaTypedefs.h>
#include <dlfcn.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "direct_symbol.h"
#include "fakecuda.h"
#include "probe_steps.h"
#include "tmaguard/descriptor_checks.h"
#include "tmaguard/rules.h"
#include "tmaguard/tensormap.h"

namespace {

struct Env {
  void* lib = nullptr;
  PFN_cuLaunchKernel_v4000 wrapped = nullptr, direct = nullptr;
  PFN_cuTensorMapEncodeTiled_v12000 enc_wrapped = nullptr, enc_direct = nullptr;
  void *plain = nullptr, *tma4 = nullptr, *fa4 = nullptr, *structs = nullptr, *large = nullptr;
  CUtensorMap maps[6];
  alignas(128) unsigned char params_struct[1792] = {};  // a CUTLASS-style Params holding 3 maps
  unsigned char params_large[3144] = {};                // a large by-value struct without maps
  std::vector<void*> args_plain, args_tma4, args_fa4, args_struct, args_large;
  int n = 1;
  float scale = 0.5f;
  long long tail = 0;
  float* out = nullptr;
};

Env& env() {
  static Env e = [] {
    Env e;
    e.lib = dlopen("libcuda.so.1", RTLD_NOW);
    if (!e.lib) std::abort();
    e.wrapped = reinterpret_cast<PFN_cuLaunchKernel_v4000>(dlsym(e.lib, "cuLaunchKernel"));
    e.direct = reinterpret_cast<PFN_cuLaunchKernel_v4000>(direct_symbol(e.lib, "cuLaunchKernel"));
    e.enc_wrapped = reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(dlsym(e.lib, "cuTensorMapEncodeTiled"));
    e.enc_direct = reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(direct_symbol(e.lib, "cuTensorMapEncodeTiled"));
    reinterpret_cast<PFN_cuInit_v2000>(dlsym(e.lib, "cuInit"))(0);
    // the addresses the benchmarks encode are "device memory" (as a real job's tensors are)
    reinterpret_cast<decltype(&fakecuda_register_memory)>(dlsym(e.lib, "fakecuda_register_memory"))(0x7f0000000000ULL,
                                                                                                    1ULL << 40);
    auto define = reinterpret_cast<decltype(&fakecuda_define_kernel)>(dlsym(e.lib, "fakecuda_define_kernel"));
    const size_t plain[] = {4, 8}, tma4[] = {128, 128, 128, 128, 4}, fa4[] = {4, 128, 128, 128, 4, 128, 128, 128, 8};
    e.plain = define("bench_plain_kernel", 2, plain, 0);
    e.tma4 = define("bench_tma4_kernel", 5, tma4, 0);
    e.fa4 = define("kernel_cutlass_kernel_flash_attncuteflash_bwd_sm100FlashAttentionBackwardSm100_bench_0", 9, fa4, 0);
    auto define_aligned =
        reinterpret_cast<decltype(&fakecuda_define_kernel_aligned)>(dlsym(e.lib, "fakecuda_define_kernel_aligned"));
    const size_t st_sizes[] = {1792}, st_align[] = {128}, lg_sizes[] = {3144}, lg_align[] = {8};
    e.structs = define_aligned("_ZN7cutlass13device_kernelINS_4gemm6kernel13GemmBenchIiEEEEvNT_6ParamsE", 1, st_sizes,
                               st_align, 0);
    e.large = define_aligned("bench_large_param_kernel", 1, lg_sizes, lg_align, 0);
    for (int i = 0; i < 6; ++i) {
      const cuuint64_t dims[4] = {128, 256, 4, 2}, strides[3] = {1024, 256, 262144};
      const cuuint32_t box[4] = {64, 128, 1, 1}, es[4] = {1, 1, 1, 1};
      e.enc_direct(&e.maps[i], CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 4,
                   reinterpret_cast<void*>(0x7f0000000000ULL + (i << 24)), dims, strides, box, es,
                   CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
                   CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    }
    // the struct's maps at 64-aligned offsets, the rest pointer-like and small-integer fields
    for (std::size_t off = 0; off + 8 <= sizeof e.params_struct; off += 8) {
      const uint64_t v = off % 24 == 0 ? 0x7f0000100000ULL + off * 64 : off % 24 == 8 ? off / 8 : 0;
      std::memcpy(e.params_struct + off, &v, 8);
    }
    const std::size_t map_offsets[] = {128, 384, 896};
    for (int i = 0; i < 3; ++i) std::memcpy(e.params_struct + map_offsets[i], &e.maps[i], sizeof(CUtensorMap));
    for (std::size_t off = 0; off + 8 <= sizeof e.params_large; off += 8) {
      const uint64_t v = off % 16 == 0 ? 0x7f0000200000ULL + off * 32 : off;
      std::memcpy(e.params_large + off, &v, 8);
    }
    e.args_struct = {e.params_struct};
    e.args_large = {e.params_large};
    e.args_plain = {&e.n, &e.out};
    e.args_tma4 = {&e.maps[0], &e.maps[1], &e.maps[2], &e.maps[3], &e.n};
    e.args_fa4 = {&e.n, &e.maps[0], &e.maps[1], &e.maps[2], &e.scale, &e.maps[3], &e.maps[4], &e.maps[5], &e.tail};
    return e;
  }();
  return e;
}

// One launch of kernel `which` (0: no maps, 1: 4 maps, 2: FA4 signature, 3: one 1792-byte Params struct holding 3
// maps, 4: one 3144-byte struct without maps), straight or through tmaguard.
struct Launch {
  PFN_cuLaunchKernel_v4000 fn;
  CUfunction k;
  void** args;
  CUresult operator()() const { return fn(k, 1, 1, 1, 32, 1, 1, 0, nullptr, args, nullptr); }
};
Launch pick(bool through_tmaguard, int which) {
  Env& e = env();
  void* const ks[] = {e.plain, e.tma4, e.fa4, e.structs, e.large};
  void** const as[] = {e.args_plain.data(), e.args_tma4.data(), e.args_fa4.data(), e.args_struct.data(),
                       e.args_large.data()};
  void* k = ks[which];
  void** a = as[which];
  return {through_tmaguard ? e.wrapped : e.direct, static_cast<CUfunction>(k), a};
}

void launch(benchmark::State& st, bool through_tmaguard, int which) {
  const Launch l = pick(through_tmaguard, which);
  for (auto _ : st) benchmark::DoNotOptimize(l());
}

// The FA4 signature launched for `layers` layers in turn, each with its own tensors (its maps' addresses differ),
// as a training step launches one kernel for every layer: a repeated launch of the kernel on this thread rarely
// has the bytes of the launch just before it.
void launch_layers(benchmark::State& st, bool through_tmaguard, int layers) {
  Env& e = env();
  struct Layer {
    CUtensorMap maps[6];
    std::vector<void*> args;
  };
  std::vector<Layer> ls(static_cast<std::size_t>(layers));
  for (int l = 0; l < layers; ++l) {
    Layer& y = ls[static_cast<std::size_t>(l)];
    for (int i = 0; i < 6; ++i) {
      const cuuint64_t dims[4] = {128, 256, 4, 2}, strides[3] = {1024, 256, 262144};
      const cuuint32_t box[4] = {64, 128, 1, 1}, es[4] = {1, 1, 1, 1};
      e.enc_direct(&y.maps[i], CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 4,
                   reinterpret_cast<void*>(0x7f0000000000ULL + (static_cast<uint64_t>(l) << 28) + (i << 24)), dims,
                   strides, box, es, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                   CU_TENSOR_MAP_L2_PROMOTION_L2_128B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    }
    y.args = {&e.n, &y.maps[0], &y.maps[1], &y.maps[2], &e.scale, &y.maps[3], &y.maps[4], &y.maps[5], &e.tail};
  }
  auto fn = through_tmaguard ? e.wrapped : e.direct;
  std::size_t i = 0;
  for (auto _ : st) {
    benchmark::DoNotOptimize(fn(static_cast<CUfunction>(e.fa4), 1, 1, 1, 32, 1, 1, 0, nullptr, ls[i].args.data(), nullptr));
    if (++i == ls.size()) i = 0;
  }
}
BENCHMARK_CAPTURE(launch_layers, fa4_4layers_direct, false, 4);
BENCHMARK_CAPTURE(launch_layers, fa4_4layers_tmaguard, true, 4);
BENCHMARK_CAPTURE(launch_layers, fa4_32layers_direct, false, 32);
BENCHMARK_CAPTURE(launch_layers, fa4_32layers_tmaguard, true, 32);

// ring == 0: a distinct descriptor every call, the worst case (the encode explainer looks at bytes it has not
// seen). ring == N: a working set of N descriptors re-encoded in rotation (Triton re-encodes every descriptor on
// every launch): after the first round each call should be a hash and a provenance lookup.
void encode(benchmark::State& st, bool through_tmaguard, uint64_t ring) {
  Env& e = env();
  auto fn = through_tmaguard ? e.enc_wrapped : e.enc_direct;
  const cuuint64_t dims[4] = {128, 256, 4, 2}, strides[3] = {1024, 256, 262144};
  const cuuint32_t box[4] = {64, 128, 1, 1}, es[4] = {1, 1, 1, 1};
  CUtensorMap m;
  uint64_t i = 0;
  for (auto _ : st) {
    ++i;
    const uint64_t addr = 0x7f0000000000ULL + ((ring ? i % ring : i) << 8);
    benchmark::DoNotOptimize(fn(&m, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 4, reinterpret_cast<void*>(addr), dims, strides,
                                box, es, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                                CU_TENSOR_MAP_L2_PROMOTION_L2_128B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE));
  }
}

// Cold variants: a real driver spends microseconds between two launches and evicts tmaguard's lines from L1/L2,
// so what matters on a GPU host is how many distinct cache lines (data and code) a launch touches. Before each
// timed call, 4 MiB of unrelated memory is written (not timed); the call itself is timed with steady_clock.
std::vector<uint64_t>& scratch() {
  static std::vector<uint64_t> s(4 << 17);
  return s;
}
void evict_caches() {
  auto& s = scratch();
  for (std::size_t i = 0; i < s.size(); i += 8) s[i] += i;
  benchmark::ClobberMemory();
}
void launch_cold(benchmark::State& st, bool through_tmaguard, int which) {
  const Launch l = pick(through_tmaguard, which);
  for (auto _ : st) {
    evict_caches();
    const auto t0 = std::chrono::steady_clock::now();
    benchmark::DoNotOptimize(l());
    const auto t1 = std::chrono::steady_clock::now();
    st.SetIterationTime(std::chrono::duration<double>(t1 - t0).count());
  }
}
#define TG_COLD(name, through, which) \
  BENCHMARK_CAPTURE(launch_cold, name, through, which)->UseManualTime()->Iterations(20000)
TG_COLD(unmatched_direct, false, 0);
TG_COLD(unmatched_tmaguard, true, 0);
TG_COLD(tma4_direct, false, 1);
TG_COLD(tma4_tmaguard, true, 1);
TG_COLD(fa4_6maps_direct, false, 2);
TG_COLD(fa4_6maps_tmaguard, true, 2);
TG_COLD(struct_3maps_direct, false, 3);
TG_COLD(struct_3maps_tmaguard, true, 3);
TG_COLD(large_param_direct, false, 4);
TG_COLD(large_param_tmaguard, true, 4);

BENCHMARK_CAPTURE(launch, unmatched_direct, false, 0);
BENCHMARK_CAPTURE(launch, unmatched_tmaguard, true, 0);
BENCHMARK_CAPTURE(launch, tma4_direct, false, 1);
BENCHMARK_CAPTURE(launch, tma4_tmaguard, true, 1);
BENCHMARK_CAPTURE(launch, fa4_6maps_direct, false, 2);
BENCHMARK_CAPTURE(launch, fa4_6maps_tmaguard, true, 2);
BENCHMARK_CAPTURE(launch, struct_3maps_direct, false, 3);
BENCHMARK_CAPTURE(launch, struct_3maps_tmaguard, true, 3);
BENCHMARK_CAPTURE(launch, large_param_direct, false, 4);
BENCHMARK_CAPTURE(launch, large_param_tmaguard, true, 4);
BENCHMARK_CAPTURE(encode, rotation_direct, false, 1024);
BENCHMARK_CAPTURE(encode, rotation_tmaguard, true, 1024);
BENCHMARK_CAPTURE(encode, fresh_direct, false, 0);
BENCHMARK_CAPTURE(encode, fresh_tmaguard, true, 0);

void core_decode(benchmark::State& st) {
  Env& e = env();
  for (auto _ : st) benchmark::DoNotOptimize(tmaguard::decode(reinterpret_cast<const uint8_t*>(&e.maps[0])));
}
void core_hash(benchmark::State& st) {
  Env& e = env();
  for (auto _ : st) benchmark::DoNotOptimize(tmaguard::content_hash(reinterpret_cast<const uint8_t*>(&e.maps[0])));
}
void core_fa4_rule(benchmark::State& st) {
  Env& e = env();
  std::vector<tmaguard::TensorMapParam> maps;
  for (int i = 0; i < 6; ++i)
    maps.push_back({{static_cast<uint32_t>(i + 1), 0}, tmaguard::decode(reinterpret_cast<const uint8_t*>(&e.maps[i]))});
  const auto rules = tmaguard::parse_rules(tmaguard::builtin_rules_text(), "built-in").rules;
  const std::string name = "kernel_FlashAttentionBackwardSm100_0";
  const auto which = tmaguard::rules_for_kernel(*rules, name);
  std::vector<tmaguard::Finding> out;
  for (auto _ : st) {
    out.clear();
    tmaguard::evaluate_rules(*rules, which, name, maps, out);
    benchmark::DoNotOptimize(out.data());
  }
}
// One 32,704-byte parameter holding 255 maps (at 128-byte steps), as a CUTLASS grouped kernel with many descriptors
// might pass: stable bytes (every launch the same), or one map's address changed before each launch (its bytes, and
// so the launch key, are new every time; the other 254 are as before).
struct ManyMaps {
  void* kernel = nullptr;
  std::vector<uint8_t> param = std::vector<uint8_t>(32704, 0);
  void* args[1] = {nullptr};
};
ManyMaps& many_maps() {
  static ManyMaps m = [] {
    ManyMaps m;
    Env& e = env();
    auto define_aligned =
        reinterpret_cast<decltype(&fakecuda_define_kernel_aligned)>(dlsym(e.lib, "fakecuda_define_kernel_aligned"));
    const size_t sizes[] = {32704}, aligns[] = {128};
    m.kernel = define_aligned("_ZN7cutlass13device_kernelINS_4gemm6kernel15GemmManyMapsIiEEEEvNT_6ParamsE", 1, sizes,
                              aligns, 0);
    for (int i = 0; i < 255; ++i) {
      const cuuint64_t dims[2] = {128, 256}, strides[1] = {256};
      const cuuint32_t box[2] = {64, 64}, es[2] = {1, 1};
      CUtensorMap map;
      e.enc_direct(&map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, reinterpret_cast<void*>(0x7f0000000000ULL + (i << 20)),
                   dims, strides, box, es, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                   CU_TENSOR_MAP_L2_PROMOTION_L2_128B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
      std::memcpy(m.param.data() + 128 * i, &map, sizeof map);
    }
    m.args[0] = m.param.data();
    return m;
  }();
  return m;
}
void launch_many_maps(benchmark::State& st, bool through_tmaguard, bool one_changes) {
  Env& e = env();
  ManyMaps& m = many_maps();
  auto fn = through_tmaguard ? e.wrapped : e.direct;
  uint64_t i = 0;
  for (auto _ : st) {
    if (one_changes) {  // map i % 255 moves to another address (16-byte steps inside its tensor)
      uint64_t addr;
      std::memcpy(&addr, m.param.data() + 128 * (i % 255), 8);
      addr = (addr & ~0xffffULL) | (((i / 255) % 4096) << 4);
      std::memcpy(m.param.data() + 128 * (i % 255), &addr, 8);
      ++i;
    }
    benchmark::DoNotOptimize(fn(static_cast<CUfunction>(m.kernel), 1, 1, 1, 32, 1, 1, 0, nullptr, m.args, nullptr));
  }
}
BENCHMARK_CAPTURE(launch_many_maps, stable_direct, false, false);
BENCHMARK_CAPTURE(launch_many_maps, stable_tmaguard, true, false);
BENCHMARK_CAPTURE(launch_many_maps, one_changes_direct, false, true);
BENCHMARK_CAPTURE(launch_many_maps, one_changes_tmaguard, true, true);

// The FA4 signature launched from 1, 8 and 64 threads at once, each thread its own stream of launches of the same
// kernel and maps (a data-parallel job's ranks do not share a process, but a serving process's workers do).
// items_per_second counts launches of all threads: 1e9 / it is the process's cost per launch.
void launch_threads(benchmark::State& st, bool through_tmaguard) {
  const Launch l = pick(through_tmaguard, 2);
  for (auto _ : st) benchmark::DoNotOptimize(l());
  st.SetItemsProcessed(st.iterations());
}
BENCHMARK_CAPTURE(launch_threads, fa4_6maps_direct, false)->Threads(1)->Threads(8)->Threads(64)->UseRealTime();
BENCHMARK_CAPTURE(launch_threads, fa4_6maps_tmaguard, true)->Threads(1)->Threads(8)->Threads(64)->UseRealTime();

// A known kernel launched with new maps every time: the FA4 signature whose six tensors move each launch (a training
// loop whose allocator hands out other blocks), so every launch is a full check of maps never seen before.
void launch_new_maps(benchmark::State& st, bool through_tmaguard) {
  Env& e = env();
  CUtensorMap maps[6];
  std::memcpy(maps, e.maps, sizeof maps);
  void* args[] = {&e.n, &maps[0], &maps[1], &maps[2], &e.scale, &maps[3], &maps[4], &maps[5], &e.tail};
  auto fn = through_tmaguard ? e.wrapped : e.direct;
  uint64_t i = 0;
  for (auto _ : st) {
    ++i;
    for (int m = 0; m < 6; ++m) {  // word 0 is the global address (driver form): 4 KiB steps through 1 TiB
      const uint64_t addr = 0x7f0000000000ULL + (static_cast<uint64_t>(m) << 36) + ((i << 12) & ((1ULL << 36) - 1));
      std::memcpy(&maps[m], &addr, 8);
    }
    benchmark::DoNotOptimize(fn(static_cast<CUfunction>(e.fa4), 1, 1, 1, 32, 1, 1, 0, nullptr, args, nullptr));
  }
}
BENCHMARK_CAPTURE(launch_new_maps, fa4_direct, false);
BENCHMARK_CAPTURE(launch_new_maps, fa4_tmaguard, true);

BENCHMARK(core_decode);
BENCHMARK(core_hash);
BENCHMARK(core_fa4_rule);

int run_probe(std::size_t kib, int batches, const std::vector<const char*>& builds) {
  Env& e = env();
  static std::vector<uint64_t> dirt(kib * 128 + 1);
  auto dirty = [] {  // one write per line
    for (std::size_t i = 0; i + 8 <= dirt.size(); i += 8) dirt[i] += i;
    benchmark::ClobberMemory();
  };
  constexpr int kLayers = 8;
  static CUtensorMap layer_maps[kLayers][6];
  static void* layer_args[kLayers][9];
  for (int l = 0; l < kLayers; ++l) {
    for (int i = 0; i < 6; ++i) {
      const cuuint64_t dims[4] = {128, 256, 4, 2}, strides[3] = {1024, 256, 262144};
      const cuuint32_t box[4] = {64, 128, 1, 1}, es[4] = {1, 1, 1, 1};
      e.enc_direct(&layer_maps[l][i], CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 4,
                   reinterpret_cast<void*>(0x7f0000000000ULL + (static_cast<uint64_t>(l) << 28) + (i << 24)), dims,
                   strides, box, es, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                   CU_TENSOR_MAP_L2_PROMOTION_L2_128B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    }
    void* a[] = {&e.n, &layer_maps[l][0], &layer_maps[l][1], &layer_maps[l][2], &e.scale,
                 &layer_maps[l][3], &layer_maps[l][4], &layer_maps[l][5], &e.tail};
    std::memcpy(layer_args[l], a, sizeof a);
  }
  const std::vector<std::pair<int, std::size_t>> fa4_maps = {{1, 0}, {2, 0}, {3, 0}, {5, 0}, {6, 0}, {7, 0}};
  std::printf("PROBE_INFO stand-in driver, %zu KiB written before each launch\n", kib);
  const std::vector<probe::NamedLaunch> vias = probe::launches_to_measure(e.wrapped, builds);
  if (vias.empty()) return 2;
  return probe::run({{"unmatched", static_cast<CUfunction>(e.plain), {e.args_plain.data()}, {}},
                     {"large_param", static_cast<CUfunction>(e.large), {e.args_large.data()}, {}},
                     {"fa4_6maps", static_cast<CUfunction>(e.fa4), {e.args_fa4.data()}, fa4_maps},
                     {"tma4", static_cast<CUfunction>(e.tma4), {e.args_tma4.data()}, {{0, 0}, {1, 0}, {2, 0}, {3, 0}}},
                     {"struct_3maps", static_cast<CUfunction>(e.structs), {e.args_struct.data()},
                      {{0, 128}, {0, 384}, {0, 896}}, false, sizeof e.params_struct},
                     {"fa4_8layers", static_cast<CUfunction>(e.fa4), {std::begin(layer_args), std::end(layer_args)},
                      fa4_maps},
                     {"fa4_6maps_written", static_cast<CUfunction>(e.fa4), {e.args_fa4.data()}, fa4_maps, true},
                     {"struct_3maps_written", static_cast<CUfunction>(e.structs), {e.args_struct.data()},
                      {{0, 128}, {0, 384}, {0, 896}}, true, sizeof e.params_struct},
                     {"fa4_8layers_written", static_cast<CUfunction>(e.fa4),
                      {std::begin(layer_args), std::end(layer_args)}, fa4_maps, true}},
                    batches, probe::launch_with(e.direct), vias, dirty, [] {});
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::strcmp(argv[1], "--probe") == 0)
    return run_probe(argc > 2 ? std::strtoul(argv[2], nullptr, 10) : 1024, argc > 3 ? std::atoi(argv[3]) : 100,
                     std::vector<const char*>(argv + std::min(argc, 4), argv + argc));
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
