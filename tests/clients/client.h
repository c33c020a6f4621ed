// Test client library: reaches the (stand-in) driver the way real stacks do (exported symbols, dlsym on a libcuda
// handle, cuGetProcAddress in its forms), builds tensor maps (driver-encoded or filled inline) and launches
// kernels through every launch entry point and graph-node call. Scenarios (scenarios_*.cpp) are built on it.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "driver/cuda_names.h"

namespace client {

//! Options from the command line (tg_client PATH ENTRY SCENARIO [--cukernel] [--extra] [--inline | --cute]).
struct Options {
  std::string path;   // direct | dlsym | getproc | getproc_self | getproc_legacy
  std::string entry;  // launch | launch_ptsz | ex | ex_ptsz | coop | coop_ptsz | graph_*
  bool cukernel = false, extra = false, inline_maps = false;
  bool cute_maps = false;  // --cute: filled inline in CuTe DSL's form (word 2 bit 1, no tile-size word), not the driver's
};
extern Options g_opt;
extern CUstream g_stream;  // the stream every launch uses (nullptr: the default stream)
extern void* g_lib;  // the dlopen handle of libcuda.so.1
extern std::atomic<int> g_ok, g_failed;

[[noreturn]] void die(const char* what);
//! A driver function by the chosen path; `version` is what cudart would ask for.
void* resolve(const std::string& base, bool ptsz, int version);
//! A test-API function of the stand-in driver (fakecuda.h), by name.
void* fake_api(const char* name);

struct Tensor {
  uint64_t addr;
  std::vector<uint64_t> dims, strides;
};
//! torch (b, s, h, d) bf16, contiguous: dims {d, s, h, b}; mn = seqlen-contiguous (a transposed view).
Tensor bshd(uint64_t addr, uint64_t b, uint64_t s, uint64_t h, uint64_t d, bool mn = false);

//! Geometry and element type of a map beyond its tensor (defaults: FA4 hd128's bf16 {64,128,1,1} 128B).
struct MapShape {
  std::vector<uint32_t> box = {64, 128, 1, 1};
  uint32_t dtype = CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
  uint32_t swizzle = CU_TENSOR_MAP_SWIZZLE_128B;
};
//! A tensor map of `t` (rank = t.dims.size()), encoded by the driver or, with --inline, filled in the client (in
//! the driver's byte form, or with --cute in CuTe DSL's).
CUtensorMap encode_map(const Tensor& t, const MapShape& shape = {});

//! A NULL-address bf16 map (encoded the driver's way, in the client): an error on any kernel.
CUtensorMap null_address_map();

//! A kernel declared to the stand-in driver, with the values of its parameters.
struct Kernel {
  void* handle = nullptr;
  std::vector<std::size_t> sizes;
  std::vector<std::vector<uint8_t>> values;
};
//! A parameter's bytes as they lie at `p` (for make_kernel_raw).
std::vector<uint8_t> param_bytes(const void* p, std::size_t n);
//! A tensor argument as CuTe DSL flattens it: its pointer, then `words` dynamic shape and stride words (int32).
std::vector<uint8_t> tensor_param(uint64_t ptr, int words);

//! A kernel whose parameters interleave small scalars with tensor maps, as CuTe DSL's flattened signatures do:
//! int, maps[0], maps[1], maps[2], float, maps[3..], int64.
Kernel make_kernel(const std::string& name, const std::vector<CUtensorMap>& maps);
//! A kernel with exactly these parameters (sizes and values); `aligns`, when given, each parameter's alignment.
Kernel make_kernel_raw(const std::string& name, const std::vector<std::vector<uint8_t>>& values,
                       const std::vector<std::size_t>& aligns = {});

//! Launches through the chosen ENTRY (a graph-node ENTRY adds/updates a node instead). Counts g_ok / g_failed.
CUresult launch(const Kernel& k);
//! Launches of this kernel that reached the stand-in driver.
unsigned long ran(const Kernel& k);
//! Calls that reached the stand-in driver through the entry point the chosen ENTRY must reach.
unsigned long via();
//! True when ENTRY is a graph-node call.
bool graph_entry_chosen();

//! Prints "RESULT ok=.. failed=.. ran=.. via=.." and returns the exit status (3 when a launch failed).
int finish(unsigned long total_ran);

//! FA4 SM100 backward, 1-CTA (Q K V dO dV dK) or 2-CTA (Q Qt K Kt V dO dOt dV dK); postprocess drops dV dK.
extern const char* const kFa4Name;
Kernel fa4_kernel(bool two_cta, bool dk_bad, bool dv_bad, bool postprocess);

//! Scenario tables, by topic.
struct Scenario {
  const char* name;
  int (*run)();
};
const std::vector<Scenario>& core_scenarios();
const std::vector<Scenario>& hardening_scenarios();
const std::vector<Scenario>& fa4_scenarios();
const std::vector<Scenario>& fa4_forward_scenarios();
const std::vector<Scenario>& blackwell_scenarios();
const std::vector<Scenario>& struct_scenarios();
const std::vector<Scenario>& fail_closed_scenarios();
const std::vector<Scenario>& device_scenarios();
const std::vector<Scenario>& evidence_scenarios();
const std::vector<Scenario>& loophole_scenarios();
const std::vector<Scenario>& fleet_scenarios();
const std::vector<Scenario>& tensor_scenarios();
const std::vector<Scenario>& robustness_scenarios();

}  // namespace client
