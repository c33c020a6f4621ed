// Google Benchmark micro-benchmarks of each step of a launch through tmaguard, measured on the library's own rooms
// in one process (no wrapper, no driver call between steps), on FA4's six maps:
//   lookup        fast_pass of a known kernel without maps: the thread's entry found and the memo usable
//   byte_compare  the six maps against the entry's copy of a clean launch (AVX2 where the CPU has it, and SSE2)
//   memo_hit      fast_pass of a repeated clean launch: lookup, compare, counters; memo_hit_struct the same for a
//                 CUTLASS-style 1792-byte Params struct holding 3 maps (its other places fields: none watched);
//                 memo_hit_struct_unfilled the same struct with its last 640 bytes zero, as members not filled in
//                 yet are (9 places watched: the cost of watching)
//   memo_hit_threads  memo_hit on 1, 8 and 64 threads at once, each with its own memo (no driver call, so no
//                 driver's shared state): items_per_second over all threads, the process's cost per launch
//   launch_key    the keyed hash of the six maps (what a repeat pays when its bytes differ from the copy)
//   ring_hit      fast_pass of the kernel on two layers' tensors in turn: each launch's bytes differ from the copy
//                 (the other layer's) and equal the ring's next copy (memo_inside.h, LayerRing)
//   key_hit       the same two launches known by their keys (what a repeat pays when neither the copy nor the
//                 ring's next copy is its bytes)
//   moved         MovedMaps::clean_at: a clean launch whose maps only moved (new addresses every step)
//   full_judge    decode of the six maps and judge_launch (a launch never seen: what the moved step spares)
// Prints numbers; asserts nothing (scripts/bench.sh runs it).
#include <benchmark/benchmark.h>
#include <dlfcn.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "process/counters.h"
#include "process/hash_key.h"
#include "arch/cpu.h"
#include "core/launch_key.h"
#include "fakecuda.h"
#include "memo/memo_inside.h"
#include "runtime/runtime.h"
#include "tmaguard/judge.h"
#include "tmaguard/rules.h"

namespace tmaguard {
namespace {

constexpr uint64_t kBase = 0x7f0000000000ULL, kStep = 0x1000000ULL;
constexpr int kMaps = 6;

struct Fa4Launch {
  CUfunction f = nullptr, plain = nullptr, structs = nullptr, unfilled = nullptr;
  alignas(128) uint8_t params_struct[1792] = {};  // pointer-like and small-integer fields, 3 maps at 128, 384, 896
  alignas(128) uint8_t params_unfilled[1792] = {};  // the same, its last 640 bytes zero
  void* struct_params[1] = {};
  void* unfilled_params[1] = {};
  alignas(64) uint8_t maps[kMaps][kTensorMapBytes] = {};
  alignas(64) uint8_t layer[kMaps][kTensorMapBytes] = {};  // the same maps on another layer's tensors
  int n = 1, plain_arg = 0;
  float scale = 0.5f;
  long long tail = 0;
  void* params[9] = {};
  void* layer_params[9] = {};
  void* plain_params[1] = {};

  LaunchView view(void** p, CUfunction k) const {
    LaunchView v;
    v.f = k;
    v.kernel_params = p;
    return v;
  }
};

EncodeArgs fa4_map(uint64_t address) {
  EncodeArgs a;
  a.dtype = 9;  // bfloat16
  a.rank = 4;
  a.address = address;
  a.dims = {128, 256, 4, 2};
  a.strides = {1024, 256, 262144};
  a.box = {64, 128, 1, 1};
  a.element_strides = {1, 1, 1, 1};
  a.swizzle = 3;
  return a;
}

// This thread's memo of the FA4 kernel: its clean launch and its other layer, remembered as the full check would (the
// layer first: the entry's copy is of the main launch).
void remember_on_this_thread(Fa4Launch& l) {
  register_thread();  // as the full check does: a registered thread keeps copies of clean launches
  for (void** p : {l.layer_params, l.params}) {
    const LaunchArgs a = LaunchArgs::of_params(p);
    MemoEntry& e = entry(l.f, &a, kNothingDeclared);
    const auto bytes = [&](std::size_t i) { return a.map(e.info->layout, e.info->maps[i]); };
    uint64_t key = 0;
    if (!launch_key(e.identity, g_hash_key, e.info->maps.size(), bytes, &key)) std::abort();
    remember(e, key, bytes, true);
  }
}

// A CUTLASS-style kernel taking one 1792-byte struct, whose thread entry is none of `others`', and its launch with
// `params` (3 maps) remembered as clean.
CUfunction struct_kernel(void** params, const std::string& name, std::initializer_list<CUfunction> others) {
  const std::size_t size[] = {1792}, align[] = {128};
  CUfunction k = nullptr;
  const auto taken = [&] {
    return std::any_of(others.begin(), others.end(),
                       [&](CUfunction o) { return &memo_detail::slot(k) == &memo_detail::slot(o); });
  };
  for (int i = 0; !k || taken(); ++i)
    k = static_cast<CUfunction>(fakecuda_define_kernel_aligned(
        ("_ZN7cutlass13device_kernelINS_4gemm6kernel" + std::to_string(name.size()) + name + "ILi" +
         std::to_string(i) + "EEEEEvNT_6ParamsE").c_str(), 1, size, align, 0));
  const LaunchArgs a = LaunchArgs::of_params(params);
  MemoEntry& e = entry(k, &a, kNothingDeclared);
  const auto bytes = [&](std::size_t i) { return a.map(e.info->layout, e.info->maps[i]); };
  uint64_t key = 0;
  if (e.info->maps.size() != 3 || !launch_key(e.identity, g_hash_key, 3, bytes, &key)) std::abort();
  remember(e, key, bytes, true);
  return k;
}

// Armed as a job's first call arms it (without the device audit), with the stand-in linked as the driver; the FA4
// kernel's clean launch and its other layer remembered as the full check would.
Fa4Launch& fa4() {
  static Fa4Launch l = [] {
    Fa4Launch l;
    // The device audit takes a kernel's first launches through the full check: here every launch is a repeat.
    setenv("TMAGUARD_DEVICE_AUDIT", "off", 1);
    if (!armed()) std::abort();
    auto init = reinterpret_cast<int (*)(unsigned)>(dlsym(dlopen("libcuda.so.1", RTLD_LAZY), "cuInit"));
    if (!init || init(0) != 0) std::abort();
    const std::size_t sizes[] = {4, 128, 128, 128, 4, 128, 128, 128, 8}, plain[] = {4};
    l.f = static_cast<CUfunction>(fakecuda_define_kernel(
        "kernel_cutlass_kernel_flash_attncuteflash_bwd_sm100FlashAttentionBackwardSm100_steps_0", 9, sizes, 0));
    // a kernel without maps whose entry is not the FA4 kernel's (a thread's entries are slots by handle)
    for (int i = 0; !l.plain || &memo_detail::slot(l.plain) == &memo_detail::slot(l.f); ++i)
      l.plain = static_cast<CUfunction>(
          fakecuda_define_kernel(("steps_plain_kernel_" + std::to_string(i)).c_str(), 1, plain, 0));
    for (int i = 0; i < kMaps; ++i) {
      if (encode(fa4_map(kBase + i * kStep), l.maps[i]) || encode(fa4_map(kBase + (8 + i) * kStep), l.layer[i]))
        std::abort();
    }
    void* args[] = {&l.n, l.maps[0], l.maps[1], l.maps[2], &l.scale, l.maps[3], l.maps[4], l.maps[5], &l.tail};
    void* layer_args[] = {&l.n,     l.layer[0], l.layer[1], l.layer[2], &l.scale,
                          l.layer[3], l.layer[4], l.layer[5], &l.tail};
    std::memcpy(l.params, args, sizeof args);
    std::memcpy(l.layer_params, layer_args, sizeof layer_args);
    l.plain_params[0] = &l.plain_arg;
    remember_on_this_thread(l);
    entry(l.plain, nullptr, kNothingDeclared);
    // the struct: every third word pointer-like, the next a small integer, the rest 0; its maps at 64-aligned offsets
    for (std::size_t off = 0; off + 8 <= sizeof l.params_struct; off += 8) {
      const uint64_t v = off % 24 == 0 ? 0x7f0000100000ULL + off * 64 : off % 24 == 8 ? off / 8 : 0;
      std::memcpy(l.params_struct + off, &v, 8);
    }
    const std::size_t at[] = {128, 384, 896};
    for (int i = 0; i < 3; ++i) std::memcpy(l.params_struct + at[i], l.maps[i], kTensorMapBytes);
    l.struct_params[0] = l.params_struct;
    std::memcpy(l.params_unfilled, l.params_struct, 1152);
    l.unfilled_params[0] = l.params_unfilled;
    l.structs = struct_kernel(l.struct_params, "StepsGemm", {l.f, l.plain});
    l.unfilled = struct_kernel(l.unfilled_params, "StepsUnfilledGemm", {l.f, l.plain, l.structs});
    return l;
  }();
  return l;
}

// fast_pass of one launch, again and again; `hit`: whether it passes (what the step times is the step that hits).
void time_fast_pass(benchmark::State& st, const LaunchView& v) {
  for (auto _ : st) benchmark::DoNotOptimize(fast_pass(v));
  st.counters["hit"] = fast_pass(v);
}

void lookup(benchmark::State& st) {
  Fa4Launch& l = fa4();
  time_fast_pass(st, l.view(l.plain_params, l.plain));
}
BENCHMARK(lookup);

void byte_compare(benchmark::State& st) {
  Fa4Launch& l = fa4();
  const bool wide = st.range(0) && cpu::compares_wide();
  static uint8_t copy[kMaps][kTensorMapBytes];
  std::memcpy(copy, l.maps, sizeof copy);
  for (auto _ : st) {
    bool same = true;
    for (int i = 0; i < kMaps; ++i) same &= cpu::same_map_bytes(l.maps[i], copy[i], wide);
    benchmark::DoNotOptimize(same);
  }
  st.SetLabel(wide ? "avx2" : "sse2");
}
BENCHMARK(byte_compare)->Arg(1)->Arg(0);

void memo_hit(benchmark::State& st) {
  Fa4Launch& l = fa4();
  time_fast_pass(st, l.view(l.params, l.f));
}
BENCHMARK(memo_hit);

void memo_hit_struct(benchmark::State& st) {
  Fa4Launch& l = fa4();
  time_fast_pass(st, l.view(l.struct_params, l.structs));
  st.counters["watched"] = memo_detail::slot(l.structs).watch_count;
}
BENCHMARK(memo_hit_struct);

void memo_hit_struct_unfilled(benchmark::State& st) {
  Fa4Launch& l = fa4();
  time_fast_pass(st, l.view(l.unfilled_params, l.unfilled));
  st.counters["watched"] = memo_detail::slot(l.unfilled).watch_count;
}
BENCHMARK(memo_hit_struct_unfilled);

void memo_hit_threads(benchmark::State& st) {
  Fa4Launch& l = fa4();
  thread_local bool ready = false;
  if (!ready) remember_on_this_thread(l), ready = true;
  time_fast_pass(st, l.view(l.params, l.f));
  st.SetItemsProcessed(st.iterations());
}
BENCHMARK(memo_hit_threads)->Threads(1)->Threads(8)->Threads(64)->UseRealTime();

void launch_key_of_maps(benchmark::State& st) {
  Fa4Launch& l = fa4();
  for (auto _ : st) {
    uint64_t key = 0;
    launch_key(1, g_hash_key, kMaps, [&](std::size_t i) { return l.maps[i]; }, &key);
    benchmark::DoNotOptimize(key);
  }
}
BENCHMARK(launch_key_of_maps)->Name("launch_key");

void ring_hit(benchmark::State& st) {
  Fa4Launch& l = fa4();
  const LaunchView layer = l.view(l.layer_params, l.f), main = l.view(l.params, l.f);
  // Alternating layers: each launch's bytes differ from the copy (the other layer's); the first two are known by
  // their keys and make the ring, every later one is the ring's next copy.
  for (auto _ : st) {
    benchmark::DoNotOptimize(fast_pass(layer));
    benchmark::DoNotOptimize(fast_pass(main));
  }
  st.counters["hit"] = fast_pass(layer) && fast_pass(main);
  st.SetLabel("per pair of launches");
}
BENCHMARK(ring_hit);

void key_hit(benchmark::State& st) {
  Fa4Launch& l = fa4();
  MemoEntry& e = memo_detail::slot(l.f);
  const memo_detail::EntrySlots layer{e, l.layer_params}, main{e, l.params};
  for (auto _ : st) {
    benchmark::DoNotOptimize(memo_detail::pass_by_entry_key(e, kMaps, layer));
    benchmark::DoNotOptimize(memo_detail::pass_by_entry_key(e, kMaps, main));
  }
  st.counters["hit"] =
      memo_detail::pass_by_entry_key(e, kMaps, layer) && memo_detail::pass_by_entry_key(e, kMaps, main);
  st.SetLabel("per pair of launches");
}
BENCHMARK(key_hit);

std::vector<TensorMapParam> decoded(const Fa4Launch& l) {
  std::vector<TensorMapParam> maps;
  const uint32_t params[kMaps] = {1, 2, 3, 5, 6, 7};
  for (int i = 0; i < kMaps; ++i) maps.push_back({{params[i], 0}, read_map(l.maps[i], MapEvidence::kKnown)});
  return maps;
}

void moved(benchmark::State& st) {
  Fa4Launch& l = fa4();
  const auto rules = parse_rules(builtin_rules_text(), "built-in").rules;
  const auto which = rules_for_kernel(*rules, "kernel_flash_attncuteflash_bwd_sm100FlashAttentionBackwardSm100_0");
  const std::unique_ptr<const MovedMaps> m = MovedMaps::compile(*rules, which, decoded(l));
  if (!m) std::abort();
  uint64_t at[kMaps];
  uint64_t step = 0;
  for (auto _ : st) {
    ++step;
    for (int i = 0; i < kMaps; ++i) at[i] = kBase + i * kStep + ((step << 12) & (kStep - 1));
    benchmark::DoNotOptimize(m->clean_at(at));
  }
  st.counters["clean"] = m->clean_at(at);
}
BENCHMARK(moved);

void full_judge(benchmark::State& st) {
  Fa4Launch& l = fa4();
  const auto rules = parse_rules(builtin_rules_text(), "built-in").rules;
  const std::string name = "kernel_flash_attncuteflash_bwd_sm100FlashAttentionBackwardSm100_0";
  const auto which = rules_for_kernel(*rules, name);
  for (auto _ : st) {
    const Judgement j = judge_launch(*rules, which, name, decoded(l), Arch{9, 0});
    benchmark::DoNotOptimize(j.findings.data());
  }
}
BENCHMARK(full_judge);

}  // namespace
}  // namespace tmaguard

BENCHMARK_MAIN();
