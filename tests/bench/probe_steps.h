// Launch probe: what the reads a guard might make before a launch cost when a driver's launch runs between two of
// them. Used by tests/gpu/launch_bench.cu (`launch_bench probe`, the real driver) and tests/bench/bench_hot_path.cpp
// (`bench_hot_path --probe`, the stand-in driver behind a cache-evicting step that plays the real driver's part).
//
// For each case (a kernel and the (parameter, offset) places of its maps), every step below runs before the driver's
// own cuLaunchKernel, in batches of 256 launches; all steps take turns, batch by batch, in one process, so that drift
// between processes cancels. Prints, per step, what it adds to a launch: step + launch timed with the TSC, per
// launch, less the plain launch's in the same round, the median over rounds ("added_ns"); the same from the
// batches' wall time ("batch_added_ns"); and the step's own time ("step_ns"). `via_tmaguard`
// launches through the function dlsym hands out instead (tmaguard's wrapper when it is preloaded, else the driver's
// own function: then its added_ns is the method's noise floor).
//
//   PROBE <case> <step> added_ns=<+ns> batch_added_ns=<+ns> step_ns=<ns> driver_ns=<ns> batches=<n>
//
// PROBE_ONLY=case,case runs only those cases.
#pragma once

#include <cuda.h>
#include <cudaTypedefs.h>
#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "arch/cpu.h"
#include "core/launch_key.h"
#include "core/struct_search.h"
#include "tmaguard/launch.h"

namespace probe {

struct Case {
  const char* name;
  CUfunction f;
  std::vector<void**> args;                       // launch j of a batch uses args[j % size] (one per layer)
  std::vector<std::pair<int, std::size_t>> maps;  // (parameter, offset) of each map
  bool written = false;  // the caller writes the maps (the same bytes) just before each launch, as CuTe DSL's host
                         // code and Triton's launcher do: then they are in the caller's cache, not cold (with
                         // struct_bytes: the whole structure, as a CUTLASS host fills its Params on every call)
  std::size_t struct_bytes = 0;  // the maps sit in parameter 0, a structure of this many bytes (0: whole parameters)
};

// touch_maps: read the launch's map bytes (what any check must read); copy_lines_only: read a copy of them alone;
// compare_128: the bytes against a 128-byte-per-map copy of the same bytes; compare_80: the first 80 bytes against an
// 80-byte-per-map copy, the other 48 against 0; hash: the launch key of the bytes (content_hash per map, folded)
// against the key of the same bytes; hash_8keys: the key against 8 stored keys (one kernel launched per layer);
// touch_struct: touch_maps, and word 13 of every other 64-byte place of the structure the maps sit in (what a guard
// reads to see a map appear where there was none; the same as touch_maps for maps in whole parameters);
// touch_line0: the first 64 bytes of each map alone (whether a read costs per line or per map); prefetch_compare:
// a prefetch of every line compare_128 reads (maps and copy), then compare_128; prefetch_struct: a prefetch of every
// line touch_struct reads, then touch_struct (whether issuing every miss first, before any load waits, is cheaper);
// touch_line1: the second 64 bytes of each map alone; touch_maps_vec: the launch's map bytes read 16 bytes at a time
// and OR-ed as a tree (touch_maps's reads without its chain of 16 dependent XORs per map: what the reads cost alone).
enum Step {
  kDirect,
  kVia,
  kTouch,
  kCopyOnly,
  kCmp128,
  kCmp80,
  kHash,
  kHashSet,
  kTouchStruct,
  kTouchLine0,
  kPrefetchCmp,
  kPrefetchStruct,
  kTouchLine1,
  kTouchVec,
  kSteps
};
inline const char* const kStepNames[kSteps] = {"direct",      "via_tmaguard", "touch_maps",   "copy_lines_only",
                                               "compare_128", "compare_80",   "hash",         "hash_8keys",
                                               "touch_struct", "touch_line0", "prefetch_compare", "prefetch_struct",
                                               "touch_line1",  "touch_maps_vec"};

constexpr int kMaxLayers = 16, kMaxMaps = 9;
struct Copies {
  alignas(64) uint8_t full[kMaxLayers][kMaxMaps * 128];
  alignas(64) uint8_t dense[kMaxLayers][kMaxMaps * 80];
  uint64_t keys[kMaxLayers];
};
inline Copies g_copies;
inline uint64_t g_struct_places;  // touch_struct: the case's 64-byte places of its structure that hold no map
inline std::vector<uint8_t> g_struct_copy;  // a written structure case: the bytes written before each launch
inline volatile uint64_t g_sink;

inline const uint8_t* map_at(void** args, const std::pair<int, std::size_t>& m) {
  return static_cast<const uint8_t*>(args[m.first]) + m.second;
}
inline bool same_bytes(const uint8_t* a, const uint8_t* b, std::size_t n) {
  typedef uint64_t v2 __attribute__((vector_size(16)));
  v2 d = {0, 0};
  for (std::size_t i = 0; i < n; i += 16) {
    v2 x, y;
    __builtin_memcpy(&x, a + i, 16);
    __builtin_memcpy(&y, b + i, 16);
    d |= x ^ y;
  }
  return (d[0] | d[1]) == 0;
}
inline uint64_t xor_words(const uint8_t* p, std::size_t n) {
  uint64_t x = 0;
  for (std::size_t i = 0; i < n; i += 8) {
    uint64_t w;
    __builtin_memcpy(&w, p + i, 8);
    x ^= w;
  }
  return x;
}
inline uint64_t key_of(const Case& c, void** a) {
  uint64_t k = 0x1234;
  for (const auto& m : c.maps) k = tmaguard::launch_key_fold(k, tmaguard::content_hash(map_at(a, m)));
  return k;
}

// One step on launch `a` (layer `layer`'s bytes); false: the bytes were not the expected ones (a probe bug).
__attribute__((noinline)) inline bool step(Step s, const Case& c, void** a, int layer) {
  const std::size_t n = c.maps.size();
  bool same = true;
  switch (s) {
    case kTouch: {
      uint64_t x = 0;
      for (const auto& m : c.maps) x ^= xor_words(map_at(a, m), 128);
      g_sink = x;
      return true;
    }
    case kCopyOnly: g_sink = xor_words(g_copies.full[layer], 128 * n); return true;
    case kCmp128:
      for (std::size_t i = 0; same && i < n; ++i)
        same = same_bytes(map_at(a, c.maps[i]), g_copies.full[layer] + 128 * i, 128);
      return same;
    case kCmp80:
      for (std::size_t i = 0; same && i < n; ++i) {
        const uint8_t* p = map_at(a, c.maps[i]);
        same = same_bytes(p, g_copies.dense[layer] + 80 * i, 80) && xor_words(p + 80, 48) == 0;
      }
      return same;
    case kHash: return key_of(c, a) == g_copies.keys[layer];
    case kHashSet: {
      const uint64_t k = key_of(c, a);
      bool found = false;
      for (int i = 0; i < 8; ++i) found |= g_copies.keys[i] == k;
      return found;
    }
    case kTouchLine0: {
      uint64_t x = 0;
      for (const auto& m : c.maps) x ^= xor_words(map_at(a, m), 64);
      g_sink = x;
      return true;
    }
    case kTouchLine1: {
      uint64_t x = 0;
      for (const auto& m : c.maps) x ^= xor_words(map_at(a, m) + 64, 64);
      g_sink = x;
      return true;
    }
    case kTouchVec: {
      typedef uint64_t v2 __attribute__((vector_size(16)));
      v2 d = {0, 0};
      for (const auto& m : c.maps) {
        const uint8_t* p = map_at(a, m);
        v2 w[8];
        __builtin_memcpy(w, p, 128);
        d |= ((w[0] | w[1]) | (w[2] | w[3])) | ((w[4] | w[5]) | (w[6] | w[7]));
      }
      g_sink = d[0] | d[1];
      return true;
    }
    case kPrefetchCmp:
      for (std::size_t i = 0; i < n; ++i) {
        const uint8_t* p = map_at(a, c.maps[i]);
        __builtin_prefetch(reinterpret_cast<const char*>(p), 0, 3);
        __builtin_prefetch(reinterpret_cast<const char*>(p + 64), 0, 3);
      }
      for (std::size_t l = 0; l < 2 * n; ++l)
        __builtin_prefetch(reinterpret_cast<const char*>(g_copies.full[layer] + 64 * l), 0, 3);
      for (std::size_t i = 0; same && i < n; ++i)
        same = same_bytes(map_at(a, c.maps[i]), g_copies.full[layer] + 128 * i, 128);
      return same;
    case kPrefetchStruct:
    case kTouchStruct: {
      if (s == kPrefetchStruct) {
        for (const auto& m : c.maps) {
          __builtin_prefetch(reinterpret_cast<const char*>(map_at(a, m)), 0, 3);
          __builtin_prefetch(reinterpret_cast<const char*>(map_at(a, m) + 64), 0, 3);
        }
        const auto* st = static_cast<const char*>(a[0]);
        for (uint64_t m = g_struct_places; m; m &= m - 1)
          __builtin_prefetch(st + 64 * static_cast<std::size_t>(__builtin_ctzll(m)), 0, 3);
      }
      uint64_t x = 0;
      for (const auto& m : c.maps) x ^= xor_words(map_at(a, m), 128);
      const auto* st = static_cast<const uint8_t*>(a[0]);  // the structure
      for (uint64_t m = g_struct_places; m; m &= m - 1) {
        uint32_t w13;
        std::memcpy(&w13, st + 64 * static_cast<std::size_t>(__builtin_ctzll(m)) + tmaguard::kWord13Offset, 4);
        x ^= w13;
      }
      g_sink = x;
      return true;
    }
    default: return true;
  }
}

// `direct`: one launch straight to the driver; `vias`: named launch functions to measure against it (the one dlsym
// hands out, "via_tmaguard", and any other builds of tmaguard loaded beside it); `between`: before every launch, not
// timed in-process (the stand-in's stand-in for a real driver's cache traffic); `sync`: after each batch, not timed.
using LaunchFn = std::function<CUresult(CUfunction, void**)>;
using NamedLaunch = std::pair<std::string, LaunchFn>;
inline int run(const std::vector<Case>& cases, int batches, const LaunchFn& direct,
               const std::vector<NamedLaunch>& vias, const std::function<void()>& between,
               const std::function<void()>& sync) {
  using clk = std::chrono::steady_clock;
  constexpr int kBatch = 256;
  // the rows: the hand-written steps, then each launch function
  struct Row {
    std::string name;
    Step step;
    const LaunchFn* launch;
  };
  std::vector<Row> rows;
  for (int s = 0; s < kSteps; ++s)
    if (s != kVia) rows.push_back({kStepNames[s], static_cast<Step>(s), &direct});
  for (const auto& v : vias) rows.push_back({v.first, kVia, &v.second});
  const int nrows = static_cast<int>(rows.size());
  const char* only = std::getenv("PROBE_ONLY");  // a comma-separated list of cases to run (default: all)
  for (const Case& c : cases) {
    if (only && (std::string(",") + only + ",").find(std::string(",") + c.name + ",") == std::string::npos)
      continue;
    const int layers = static_cast<int>(c.args.size());
    if (layers > kMaxLayers || c.maps.size() > kMaxMaps) return 2;
    for (int l = 0; l < layers; ++l) {
      for (std::size_t i = 0; i < c.maps.size(); ++i) {
        std::memcpy(g_copies.full[l] + 128 * i, map_at(c.args[l], c.maps[i]), 128);
        std::memcpy(g_copies.dense[l] + 80 * i, map_at(c.args[l], c.maps[i]), 80);
      }
      g_copies.keys[l] = key_of(c, c.args[l]);
    }
    if (c.struct_bytes) {
      const auto* s = static_cast<const uint8_t*>(c.args[0][0]);
      g_struct_copy.assign(s, s + c.struct_bytes);
    }
    g_struct_places = 0;
    for (std::size_t off = 0; off < c.struct_bytes && off < 64 * 64; off += 64)
      if (std::none_of(c.maps.begin(), c.maps.end(), [&](const auto& m) { return off - m.second < 128; }))
        g_struct_places |= uint64_t{1} << (off / 64);
    const auto t0 = clk::now();
    const uint64_t c0 = tmaguard::cpu::ticks();
    // per row and round: the batch's wall time, the in-process time of step + launch, the step's alone (ticks)
    std::vector<std::vector<double>> wall(rows.size()), call(rows.size()), alone(rows.size());
    for (int b = 0; b < batches; ++b) {
      for (int v = 0; v < nrows; ++v) {
        const int r = (v + b) % nrows;
        const Row& row = rows[static_cast<std::size_t>(r)];
        const bool hand = row.step != kDirect && row.step != kVia;
        uint64_t in_step = 0, in_call = 0;
        const auto b0 = clk::now();
        for (int j = 0; j < kBatch; ++j) {
          void** a = c.args[static_cast<std::size_t>(j % layers)];
          between();
          if (c.written && c.struct_bytes)  // not timed: the caller's own work
            std::memcpy(a[0], g_struct_copy.data(), c.struct_bytes);
          else if (c.written)
            for (std::size_t i = 0; i < c.maps.size(); ++i)
              std::memcpy(const_cast<uint8_t*>(map_at(a, c.maps[i])), g_copies.full[j % layers] + 128 * i, 128);
          const uint64_t s0 = tmaguard::cpu::ticks();
          if (hand && !step(row.step, c, a, j % layers)) return 3;
          const uint64_t s1 = tmaguard::cpu::ticks();
          if ((*row.launch)(c.f, a) != CUDA_SUCCESS) return 1;
          const uint64_t s2 = tmaguard::cpu::ticks();
          in_step += s1 - s0;
          in_call += s2 - s0;
        }
        const auto b1 = clk::now();
        sync();
        wall[r].push_back(std::chrono::duration<double, std::nano>(b1 - b0).count() / kBatch);
        call[r].push_back(static_cast<double>(in_call) / kBatch);
        alone[r].push_back(static_cast<double>(in_step) / kBatch);
      }
    }
    const double ns_per_tick =
        std::chrono::duration<double, std::nano>(clk::now() - t0).count() / static_cast<double>(tmaguard::cpu::ticks() - c0);
    auto median = [](std::vector<double> v) {
      std::sort(v.begin(), v.end());
      return v[v.size() / 2];
    };
    // the median over rounds of each round's difference to the plain launch of the same round (row 0)
    auto added = [&](const std::vector<std::vector<double>>& x, std::size_t r, double scale) {
      std::vector<double> d;
      for (std::size_t b = 0; b < x[r].size(); ++b) d.push_back((x[r][b] - x[0][b]) * scale);
      return median(d);
    };
    for (std::size_t r = 0; r < rows.size(); ++r)
      std::printf("PROBE %s %s added_ns=%+.1f batch_added_ns=%+.1f step_ns=%.1f driver_ns=%.1f batches=%d\n", c.name,
                  rows[r].name.c_str(), added(call, r, ns_per_tick), added(wall, r, 1.0),
                  median(alone[r]) * ns_per_tick, median(call[0]) * ns_per_tick, batches);
    std::fflush(stdout);
  }
  return 0;
}

//! Another build of tmaguard, loaded beside the one in force (RTLD_LOCAL: it interposes nothing): its cuLaunchKernel
//! wrapper, or nullptr. Two builds need more static TLS than glibc sets aside by default: run with
//! GLIBC_TUNABLES=glibc.rtld.optional_static_tls=65536.
inline PFN_cuLaunchKernel_v4000 load_build(const char* path) {
  void* h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    std::fprintf(stderr, "probe: cannot load %s: %s\n", path, dlerror());
    return nullptr;
  }
  return reinterpret_cast<PFN_cuLaunchKernel_v4000>(dlsym(h, "cuLaunchKernel"));
}

//! One block of 32 threads launched through `fn`.
inline LaunchFn launch_with(PFN_cuLaunchKernel_v4000 fn) {
  return [fn](CUfunction f, void** a) { return fn(f, 1, 1, 1, 32, 1, 1, 0, nullptr, a, nullptr); };
}

//! The launches to measure: `via` (the function dlsym hands out, "via_tmaguard"), then each of `builds` loaded beside
//! it ("build:PATH"). Empty when a build cannot be loaded (load_build says why).
inline std::vector<NamedLaunch> launches_to_measure(PFN_cuLaunchKernel_v4000 via,
                                                    const std::vector<const char*>& builds) {
  std::vector<NamedLaunch> out = {{"via_tmaguard", launch_with(via)}};
  for (const char* b : builds) {
    auto fn = load_build(b);
    if (!fn) return {};
    out.push_back({std::string("build:") + b, launch_with(fn)});
  }
  return out;
}

}  // namespace probe
