// Host cost of a launch and of an encode, as the caller sees it, on the real driver: per-call steady_clock timing
// of cuLaunchKernel (an empty kernel no rule matches, an empty kernel with 4 tensor maps, the FA4-shaped kernel
// with 6, a CUTLASS-style 1792-byte Params struct holding 3 maps, a 3144-byte struct without maps like PyTorch's
// multi_tensor_apply, the FA4 kernel launched for 8 layers in turn on each layer's tensors, the FA4 kernel whose six
// tensors move before every launch: a training loop whose allocator hands out other blocks) and of
// cuTensorMapEncodeTiled. Within ONE process, calls alternate between the driver's own function
// (found in libcuda's symbol table, bypassing any interposer) and the function dlsym hands out (tmaguard's wrapper
// when it is preloaded), so process-to-process drift (10-20% of a ~4 us launch on an H200 host) cancels out.
// Without tmaguard both columns are the same function: their difference is the method's noise floor.
// Prints "BENCH name direct_median_ns=.. direct_p99_ns=.. via_dlsym_median_ns=.. via_dlsym_p99_ns=.. pairs=..".
// Then, for each launch, the same in batches: 400 pairs of 256 back-to-back launches, one batch through each
// function (their order alternating), each batch timed whole; prints "BATCH name direct_ns=.. via_dlsym_ns=..
// batches=.." with the median per-launch time of each side's batches.
// `launch_bench probe [batches [other builds of libtmaguard.so...]]` instead runs the launch probe
// (tests/bench/probe_steps.h) on the same launches: what reading, comparing or hashing their maps costs between two
// real launches, and what each build of tmaguard adds, side by side in one process.
// `launch_bench threads [launches]` launches the FA4 kernel from 1, 8 and 64 threads at once, each thread on its own
// stream, through the driver's own function and through the one dlsym hands out in turn (6 pairs of rounds, the order
// alternating), and prints "THREADS n=T direct_ns=.. via_dlsym_ns=.. added_ns=.. rounds=6": the process's wall time
// per launch (all threads' launches over the time from the start signal to the last thread's end), median over the
// rounds, and the median of the pairs' differences.
#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

#include <dlfcn.h>

#include "../bench/direct_symbol.h"
#include "../bench/probe_steps.h"

namespace {
using clk = std::chrono::steady_clock;

void report(const char* name, std::vector<double>& direct, std::vector<double>& via) {
  std::sort(direct.begin(), direct.end());
  std::sort(via.begin(), via.end());
  std::printf(
      "BENCH %s direct_median_ns=%.1f direct_p99_ns=%.1f via_dlsym_median_ns=%.1f via_dlsym_p99_ns=%.1f pairs=%zu\n",
      name, direct[direct.size() / 2], direct[direct.size() * 99 / 100], via[via.size() / 2],
      via[via.size() * 99 / 100], direct.size());
}

double time_ns(const std::function<CUresult()>& f) {
  const auto t0 = clk::now();
  const CUresult r = f();
  const auto t1 = clk::now();
  if (r != CUDA_SUCCESS) std::exit(1);
  return std::chrono::duration<double, std::nano>(t1 - t0).count();
}

#define CK(x)                                                     \
  do {                                                            \
    CUresult r_ = (x);                                            \
    if (r_ != CUDA_SUCCESS) {                                     \
      std::fprintf(stderr, "%s: %d\n", #x, static_cast<int>(r_)); \
      std::exit(1);                                               \
    }                                                             \
  } while (0)
// Wall time per launch of `threads` threads launching `f` at once, each `per_thread` times on a stream of its own.
double threads_wall_ns(PFN_cuLaunchKernel_v4000 fn, CUfunction f, void** args, int threads, int per_thread,
                       CUcontext ctx) {
  std::atomic<int> ready{0};
  std::atomic<bool> go{false};
  std::atomic<bool> failed{false};
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&] {
      cuCtxSetCurrent(ctx);
      CUstream s = nullptr;
      if (cuStreamCreate(&s, CU_STREAM_NON_BLOCKING) != CUDA_SUCCESS) failed = true;
      for (int w = 0; w < 64; ++w)  // this thread's first launches (its memo entry) are not timed
        if (fn(f, 1, 1, 1, 32, 1, 1, 0, s, args, nullptr) != CUDA_SUCCESS) failed = true;
      cuStreamSynchronize(s);
      ready.fetch_add(1);
      while (!go.load(std::memory_order_acquire)) std::this_thread::yield();
      for (int i = 0; i < per_thread; ++i)
        if (fn(f, 1, 1, 1, 32, 1, 1, 0, s, args, nullptr) != CUDA_SUCCESS) failed = true;
      cuStreamSynchronize(s);  // the queue drains inside the timed span: the same for both sides
      cuStreamDestroy(s);
    });
  while (ready.load() < threads) std::this_thread::yield();
  const auto t0 = clk::now();
  go.store(true, std::memory_order_release);
  for (auto& th : pool) th.join();
  const auto t1 = clk::now();
  if (failed) std::exit(1);
  return std::chrono::duration<double, std::nano>(t1 - t0).count() / (static_cast<double>(threads) * per_thread);
}
}  // namespace

int main(int argc, char** argv) {
  const bool probing = argc > 1 && std::strcmp(argv[1], "probe") == 0;
  const bool threading = argc > 1 && std::strcmp(argv[1], "threads") == 0;
  const int n = probing || threading ? 0 : argc > 1 ? std::atoi(argv[1]) : 100000;
  cudaSetDevice(0);
  cudaFree(nullptr);
  std::ifstream in(std::string(argv[0]) + ".cubin", std::ios::binary);
  const std::vector<char> cubin(std::istreambuf_iterator<char>(in), {});
  CUmodule mod;
  CK(cuModuleLoadData(&mod, cubin.data()));
  CUfunction plain, tma4, fa4, struct3, large;
  CK(cuModuleGetFunction(&struct3, mod, "bench_struct3_kernel"));
  CK(cuModuleGetFunction(&large, mod, "bench_large_param_kernel"));
  CK(cuModuleGetFunction(&plain, mod, "bench_plain_kernel"));
  CK(cuModuleGetFunction(&tma4, mod, "bench_tma4_kernel"));
  CK(cuModuleGetFunction(&fa4, mod,
                         "kernel_cutlass_kernel_flash_attncuteflash_bwd_sm100FlashAttentionBackwardSm100_bench_0"));

  void* buf;
  cudaMalloc(&buf, 64 << 20);
  const cuuint64_t dims[4] = {128, 256, 4, 2}, strides[3] = {1024, 256, 262144};
  const cuuint32_t box[4] = {64, 128, 1, 1}, es[4] = {1, 1, 1, 1};
  auto encode = [&](CUtensorMap* m, size_t off) {
    return cuTensorMapEncodeTiled(m, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 4, static_cast<char*>(buf) + off, dims, strides,
                                  box, es, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                                  CU_TENSOR_MAP_L2_PROMOTION_L2_128B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  };
  CUtensorMap maps[6];
  for (int i = 0; i < 6; ++i) CK(encode(&maps[i], static_cast<size_t>(i) << 21));

  int ni = 1, seqlen = 256;
  float* fp = nullptr;
  float scale = 0.1f;
  long long tail = 0;
  void* a_plain[] = {&ni, &fp};
  void* a_tma4[] = {&maps[0], &maps[1], &maps[2], &maps[3], &ni};
  void* a_fa4[] = {&seqlen, &maps[0], &maps[1], &maps[2], &scale, &maps[3], &maps[4], &maps[5], &tail};
  // The structs: pointer-like and small-integer fields, the maps at 128, 384, 1152 (PyTorch's grouped GEMM layout).
  alignas(64) static unsigned char s3[1792];
  static unsigned long long lp[393];
  for (size_t off = 0; off < sizeof s3; off += 8) {
    const unsigned long long v = off % 24 == 0 ? reinterpret_cast<unsigned long long>(buf) + off : off % 7;
    std::memcpy(s3 + off, &v, 8);
  }
  const size_t map_off[3] = {128, 384, 1152};
  for (int i = 0; i < 3; ++i) std::memcpy(s3 + map_off[i], &maps[i], sizeof(CUtensorMap));
  for (size_t i = 0; i < 393; ++i) lp[i] = i % 2 ? reinterpret_cast<unsigned long long>(buf) + (i << 12) : i * 3;
  void* a_struct3[] = {s3};
  void* a_large[] = {lp};
  // The FA4 kernel once per layer of an 8-layer model, each layer on its own tensors: consecutive launches of the
  // kernel never have the same map bytes (as in a training step), where the other cases repeat one launch.
  constexpr int kLayers = 8;
  static CUtensorMap layer_maps[kLayers][6];
  static void* layer_args[kLayers][9];
  for (int l = 0; l < kLayers; ++l) {
    for (int i = 0; i < 6; ++i) CK(encode(&layer_maps[l][i], static_cast<size_t>(6 * l + i) << 20));
    void* a[] = {&seqlen, &layer_maps[l][0], &layer_maps[l][1], &layer_maps[l][2], &scale,
                 &layer_maps[l][3], &layer_maps[l][4], &layer_maps[l][5], &tail};
    std::memcpy(layer_args[l], a, sizeof a);
  }
  // The FA4 kernel whose maps move before each launch: the same layouts, every tensor 256 bytes further on inside a
  // 128 MiB region of its own (522,240 places, more than the ~410,000 moves of a default run, so no launch's addresses
  // repeat and none is known by a key from an earlier launch); the maps' bytes are new on every launch, their layouts
  // never.
  constexpr unsigned long long kRegion = 128ull << 20, kStep = 256, kTensor = 512ull << 10;  // a tensor: 512 KiB
  void* moving_buf;
  if (cudaMalloc(&moving_buf, 6 * kRegion) != cudaSuccess) {
    std::fprintf(stderr, "cannot allocate the moving tensors' regions\n");
    return 1;
  }
  static CUtensorMap moving[6];
  std::memcpy(moving, maps, sizeof moving);
  void* a_moving[] = {&seqlen, &moving[0], &moving[1], &moving[2], &scale, &moving[3], &moving[4], &moving[5], &tail};
  unsigned long long moves = 0;
  auto move_maps = [&] {
    ++moves;
    for (int m = 0; m < 6; ++m) {
      const unsigned long long a = reinterpret_cast<unsigned long long>(moving_buf) + m * kRegion +
                                   (moves % ((kRegion - kTensor) / kStep)) * kStep;
      std::memcpy(&moving[m], &a, 8);  // bytes 0..7: the global address
    }
  };
  struct K {
    const char* name;
    CUfunction f;
    void** args;
    int rotate = 0;      // > 0: launch i uses layer i % rotate's arguments
    bool move = false;   // the maps move before every launch (not timed per call; inside a batch, for both sides)
  } ks[] = {{"launch_unmatched", plain, a_plain},       {"launch_tma4", tma4, a_tma4},
             {"launch_fa4_6maps", fa4, a_fa4},            {"launch_struct_3maps", struct3, a_struct3},
             {"launch_large_param", large, a_large},       {"launch_fa4_8layers", fa4, nullptr, kLayers},
             {"launch_fa4_new_maps", fa4, a_moving, 0, true}};
  auto args_of = [&](const K& k, int i) {
    if (k.move) move_maps();
    return k.rotate ? layer_args[i % k.rotate] : k.args;
  };
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  auto launch_direct = reinterpret_cast<PFN_cuLaunchKernel_v4000>(direct_symbol(lib, "cuLaunchKernel"));
  auto launch_via = reinterpret_cast<PFN_cuLaunchKernel_v4000>(dlsym(lib, "cuLaunchKernel"));
  auto enc_direct = reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(direct_symbol(lib, "cuTensorMapEncodeTiled"));
  auto enc_via = reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(dlsym(lib, "cuTensorMapEncodeTiled"));
  if (!launch_direct || !launch_via || !enc_direct || !enc_via) {
    std::fprintf(stderr, "cannot resolve the driver's functions\n");
    return 1;
  }
  Dl_info info{};
  dladdr(reinterpret_cast<void*>(launch_via), &info);
  std::printf("BENCH_INFO via_dlsym_is=%s\n", info.dli_fname ? info.dli_fname : "?");
  if (threading) {
    const int total = argc > 2 ? std::atoi(argv[2]) : 64000;  // launches per round, all threads together
    CUcontext ctx;
    CK(cuCtxGetCurrent(&ctx));
    for (const int t : {1, 8, 64}) {
      const int per = std::max(total / t, 200);
      std::vector<double> d, v, diff;
      for (int r = 0; r < 6; ++r) {  // pairs in the order direct-via, via-direct, ...: the first side of a pair
        double dn, vn;               // is no side's in particular
        if (r & 1) {
          vn = threads_wall_ns(launch_via, fa4, a_fa4, t, per, ctx);
          dn = threads_wall_ns(launch_direct, fa4, a_fa4, t, per, ctx);
        } else {
          dn = threads_wall_ns(launch_direct, fa4, a_fa4, t, per, ctx);
          vn = threads_wall_ns(launch_via, fa4, a_fa4, t, per, ctx);
        }
        d.push_back(dn);
        v.push_back(vn);
        diff.push_back(vn - dn);
      }
      auto median = [](std::vector<double> x) {
        std::sort(x.begin(), x.end());
        return (x[x.size() / 2 - 1] + x[x.size() / 2]) / 2;
      };
      std::printf("THREADS n=%d direct_ns=%.1f via_dlsym_ns=%.1f added_ns=%+.1f rounds=6\n", t, median(d), median(v),
                  median(diff));
      std::fflush(stdout);
    }
    return 0;
  }
  if (probing) {
    const std::vector<std::pair<int, std::size_t>> fa4_maps = {{1, 0}, {2, 0}, {3, 0}, {5, 0}, {6, 0}, {7, 0}};
    // other builds of tmaguard, measured beside the preloaded one
    const std::vector<probe::NamedLaunch> vias =
        probe::launches_to_measure(launch_via, std::vector<const char*>(argv + std::min(argc, 3), argv + argc));
    if (vias.empty()) return 2;
    const int rc = probe::run({{"unmatched", plain, {a_plain}, {}},
                               {"large_param", large, {a_large}, {}},
                               {"fa4_6maps", fa4, {a_fa4}, fa4_maps},
                               {"tma4", tma4, {a_tma4}, {{0, 0}, {1, 0}, {2, 0}, {3, 0}}},
                               {"struct_3maps", struct3, {a_struct3}, {{0, 128}, {0, 384}, {0, 1152}}, false, sizeof s3},
                               {"fa4_8layers", fa4, {std::begin(layer_args), std::end(layer_args)}, fa4_maps},
                               {"fa4_6maps_written", fa4, {a_fa4}, fa4_maps, true},
                               {"struct_3maps_written", struct3, {a_struct3}, {{0, 128}, {0, 384}, {0, 1152}}, true,
                                sizeof s3},
                               {"fa4_8layers_written", fa4, {std::begin(layer_args), std::end(layer_args)}, fa4_maps,
                                true}},
                              argc > 2 ? std::atoi(argv[2]) : 400, probe::launch_with(launch_direct), vias, [] {},
                              [] { cuCtxSynchronize(); });
    if (rc) std::fprintf(stderr, "probe failed: %d\n", rc);
    return rc;
  }
  std::vector<double> direct(static_cast<size_t>(n)), via(static_cast<size_t>(n));
  for (const K& k : ks) {
    int at = 0;  // which layer's arguments the next pair uses (rotating cases)
    auto call = [&](PFN_cuLaunchKernel_v4000 fn) {
      void** a = args_of(k, at);  // (moves the maps before the timing starts)
      return [&k, fn, a] { return fn(k.f, 1, 1, 1, 32, 1, 1, 0, nullptr, a, nullptr); };
    };
    for (int w = 0; w < 2000; ++w) CK(launch_via(k.f, 1, 1, 1, 32, 1, 1, 0, nullptr, args_of(k, w), nullptr));
    CK(cuCtxSynchronize());
    for (int i = 0; i < n; ++i) {
      if (i & 1) {
        via[static_cast<size_t>(i)] = time_ns(call(launch_via));
        direct[static_cast<size_t>(i)] = time_ns(call(launch_direct));
      } else {
        direct[static_cast<size_t>(i)] = time_ns(call(launch_direct));
        via[static_cast<size_t>(i)] = time_ns(call(launch_via));
      }
      if ((i & 127) == 127) cuCtxSynchronize();  // keep the launch queue short; not timed
      ++at;
    }
    report(k.name, direct, via);
  }
  constexpr int kBatch = 256, kBatches = 400;
  for (const K& k : ks) {
    std::vector<double> bd, bv;
    auto batch = [&](PFN_cuLaunchKernel_v4000 fn) {
      const auto t0 = clk::now();
      for (int j = 0; j < kBatch; ++j) CK(fn(k.f, 1, 1, 1, 32, 1, 1, 0, nullptr, args_of(k, j), nullptr));
      const auto t1 = clk::now();
      CK(cuCtxSynchronize());  // not timed
      return std::chrono::duration<double, std::nano>(t1 - t0).count() / kBatch;
    };
    for (int b = 0; b < kBatches; ++b) {
      if (b & 1) {
        bv.push_back(batch(launch_via));
        bd.push_back(batch(launch_direct));
      } else {
        bd.push_back(batch(launch_direct));
        bv.push_back(batch(launch_via));
      }
    }
    std::sort(bd.begin(), bd.end());
    std::sort(bv.begin(), bv.end());
    std::printf("BATCH %s direct_ns=%.1f via_dlsym_ns=%.1f batches=%d\n", k.name, bd[bd.size() / 2], bv[bv.size() / 2],
                kBatches);
  }
  CUtensorMap m;
  auto enc = [&](PFN_cuTensorMapEncodeTiled_v12000 fn, int i) {
    return [&, fn, i] {
      return fn(&m, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 4, static_cast<char*>(buf) + (static_cast<size_t>(i & 1023) << 8),
                dims, strides, box, es, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                CU_TENSOR_MAP_L2_PROMOTION_L2_128B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    };
  };
  for (int i = 0; i < n; ++i) {
    if (i & 1) {
      via[static_cast<size_t>(i)] = time_ns(enc(enc_via, i));
      direct[static_cast<size_t>(i)] = time_ns(enc(enc_direct, i));
    } else {
      direct[static_cast<size_t>(i)] = time_ns(enc(enc_direct, i));
      via[static_cast<size_t>(i)] = time_ns(enc(enc_via, i));
    }
  }
  report("encode_tiled", direct, via);
  return 0;
}
