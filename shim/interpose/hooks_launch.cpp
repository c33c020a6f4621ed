// tmaguard shim: the generated wrappers, one per row of driver/entry_points.def whose kind is a launch or a graph
// node kind, each with the driver's exact signature (wrapper_params.h).
//
// Launches (cuLaunchKernel, cuLaunchKernelEx, cuLaunchCooperativeKernel and their _ptsz forms): every launch wrapper
// is the same three stages; only how a kind's arguments make a LaunchView differs (one function per kind, below).
//
//   client --> cuLaunchKernel (ours, a thunk): passed(f, kernelParams): repeat_look (memo/look.h) --> real
//                                 \-> after_fast_pass: slow_pass(view) (memo/passes.cpp) --> real (tail call)
//                                     \-> checked: TG_ENTER, check_launch(view) (full_check.h) --> run | reject |
//                                         abort; after a run, audit_after_launch(view) (device_audit.h)
//
// The thunk (x86-64; elsewhere the same stages in C++) jumps to the driver or to after_fast_pass with the caller's
// registers and stack as they came. The later stages hand each other the driver's own arguments in the same order
// (a tail call spills nothing), and each sees them through its kind's view(), which is the arguments named.
//
// CUDA graph kernel nodes added or updated explicitly (cuGraphAddKernelNode, cuGraph[Exec]KernelNodeSetParams,
// cuGraphAddNode, cuGraph[Exec]NodeSetParams and their versions) are checked like launches: a replay never calls a
// launch API, so the node's parameters (each call's last argument) are the last chance. Launches during stream capture
// go through the launch wrappers already. A rejected node is not added (or not updated): the call returns
// CUDA_ERROR_INVALID_VALUE without reaching the driver.
#include "arch/launch_thunk_x86_64.h"
#include "driver/driver.h"
#include "interpose/wrapper_params.h"
#include "launch/device_audit.h"
#include "launch/graph_node.h"
#include "launch/full_check.h"
#include "memo/look.h"
#include "memo/memo.h"
#include "runtime/intercept.h"

namespace tmaguard {
namespace {

//! Whether an entry's name is a _ptsz form (stream 0 means the per-thread default stream).
constexpr bool per_thread_name(const char* name) {
  const char* end = name;
  while (*end) ++end;
  return end - name >= 5 && end[-5] == '_' && end[-4] == 'p' && end[-3] == 't' && end[-2] == 's' && end[-1] == 'z';
}
static_assert(per_thread_name("cuLaunchKernel_ptsz") && !per_thread_name("cuLaunchKernel"));

// ---- the launch kinds: how their arguments make a LaunchView

struct KindLaunch {  // cuLaunchKernel
  __attribute__((always_inline)) static LaunchView view(bool per_thread, CUfunction f, unsigned gx, unsigned gy,
                                                        unsigned gz, unsigned bx, unsigned by, unsigned bz, unsigned,
                                                        CUstream s, void** params, void** extra) {
    return LaunchView{f, {gx, gy, gz, bx, by, bz}, s, per_thread, params, extra};
  }
};
struct KindLaunchEx {  // cuLaunchKernelEx: geometry and stream in the config
  __attribute__((always_inline)) static LaunchView view(bool per_thread, const CUlaunchConfig* c, CUfunction f,
                                                        void** params, void** extra) {
    if (!c) return LaunchView{f, {}, nullptr, per_thread, params, extra};
    return LaunchView{f,      {c->gridDimX, c->gridDimY, c->gridDimZ, c->blockDimX, c->blockDimY, c->blockDimZ},
                      c->hStream, per_thread, params, extra};
  }
};
struct KindLaunchCoop {  // cuLaunchCooperativeKernel: kernelParams only
  __attribute__((always_inline)) static LaunchView view(bool per_thread, CUfunction f, unsigned gx, unsigned gy,
                                                        unsigned gz, unsigned bx, unsigned by, unsigned bz, unsigned,
                                                        CUstream s, void** params) {
    return LaunchView{f, {gx, gy, gz, bx, by, bz}, s, per_thread, params, nullptr};
  }
};

// ---- the three stages, one template for every launch entry

template <EntryId Id, typename Kind, bool PerThread, typename Fn>
struct LaunchEntry;
template <EntryId Id, typename Kind, bool PerThread, typename... A>
struct LaunchEntry<Id, Kind, PerThread, CUresult (*)(A...)> {
  using Fn = CUresult (*)(A...);

  // The full check, entered (TG_ENTER) like every other wrapper: memo -> check -> driver -> audit.
  __attribute__((noinline)) static CUresult checked(A... a) {
    TG_ENTER_ENTRY(Fn, Id);
    const LaunchView launch = Kind::view(PerThread, a...);
    const KernelInfo* k = nullptr;
    if (const Verdict v = check_launch(call, launch, &k); v != Verdict::kRun) return refused(v);
    const CUresult rc = real(a...);
    if (rc == CUDA_SUCCESS && k && audit_due(*k)) audit_after_launch(*k, launch);
    return rc;
  }
  // What the memo knows beyond the wrapper's own look (the process's clean keys, kernels with many maps).
  __attribute__((noinline)) static CUresult after_fast_pass(A... a) {
    const auto real = reinterpret_cast<Fn>(real_function_if_resolved(Id));
    if (real && slow_pass(Kind::view(PerThread, a...))) return real(a...);
    return checked(a...);
  }
  // The memo's look, given only what it reads (the handle and kernelParams): the driver's function when the memo
  // passes the launch, else nullptr. Called by the exported entry's thunk (below), which keeps the caller's
  // arguments where they came: the look has every register to itself.
  __attribute__((always_inline)) static void* passed(CUfunction f, void** params) {
    LaunchView v;
    v.f = f;
    v.kernel_params = params;
    return repeat_look(real_function_if_resolved(Id), v);
  }
  // What the exported entry runs where the CPU has no thunk (aarch64, and every CPU with TMAGUARD_PORTABLE_CPU): the
  // same two stages in C++.
  __attribute__((always_inline)) static CUresult wrapper(A... a) {
    const LaunchView v = Kind::view(PerThread, a...);
    if (void* const real = passed(v.f, v.kernel_params); __builtin_expect(real != nullptr, 1))
      return reinterpret_cast<Fn>(real)(a...);
    return after_fast_pass(a...);
  }
};

// ---- a graph node call: its node parameters (the last argument) checked as a launch, then the driver

template <typename... A>
auto last_of(A... a) {
  return std::get<sizeof...(A) - 1>(std::tuple<A...>(a...));
}

template <EntryId Id, typename Fn>
struct GraphNodeEntry;
template <EntryId Id, typename... A>
struct GraphNodeEntry<Id, CUresult (*)(A...)> {
  using Fn = CUresult (*)(A...);
  static CUresult wrapper(A... a) {
    TG_ENTER_ENTRY(Fn, Id);
    const NodeLaunch n = node_launch(last_of(a...));
    // Nothing to launch, or a node the driver refuses itself: the driver's answer.
    if (n.is_kernel && n.launch.f)
      if (const Verdict v = check_launch(call, n.launch); v != Verdict::kRun) return refused(v);
    return real(a...);
  }
};

}  // namespace
}  // namespace tmaguard

// ---- the exported wrappers: one per launch or graph node row of entry_points.def
#define TG_LAUNCH_ENTRY(name, kind) ::tmaguard::LaunchEntry<::tmaguard::EntryId::name, ::tmaguard::kind, \
    ::tmaguard::per_thread_name(#name), tg_pfn_##name>
#if defined(TG_CPU_LAUNCH_THUNK)
// Where the CPU has a launch thunk (arch/launch_thunk_x86_64.h), a launch entry is one: the memo's look through
// tg_passed_<name>, then the driver's function or tg_slow_<name>, the caller's registers and stack untouched.
#define TG_LAUNCH_THUNK(name, n, kind, f_at, params_at, setup)                                                     \
  using tg_entry_##name = TG_LAUNCH_ENTRY(name, kind);                                                             \
  static_assert(::tmaguard::Params<tg_pfn_##name>::kCount == n, #name " does not take " #n " parameters");        \
  static_assert(std::is_same_v<::tmaguard::ParamOf<tg_pfn_##name, f_at>, CUfunction> &&                            \
                    std::is_same_v<::tmaguard::ParamOf<tg_pfn_##name, params_at>, void**>,                         \
                #name ": the thunk reads the handle and kernelParams elsewhere");                                  \
  extern "C" __attribute__((visibility("hidden"), used)) void* tg_passed_##name(CUfunction f, void** params) {     \
    return tg_entry_##name::passed(f, params);                                                                     \
  }                                                                                                                \
  extern "C" __attribute__((visibility("hidden"), used)) CUresult tg_slow_##name(TG_PARAMS_##n(tg_pfn_##name)) {  \
    return tg_entry_##name::after_fast_pass(TG_ARGS_##n);                                                          \
  }                                                                                                                \
  TG_CPU_LAUNCH_THUNK(name, setup)
#define TG_KIND_Launch(name) TG_LAUNCH_THUNK(name, 11, KindLaunch, 0, 9, TG_CPU_THUNK_STACK_PARAMS)
#define TG_KIND_LaunchEx(name) TG_LAUNCH_THUNK(name, 4, KindLaunchEx, 1, 2, TG_CPU_THUNK_EX_PARAMS)
#define TG_KIND_LaunchCoop(name) TG_LAUNCH_THUNK(name, 10, KindLaunchCoop, 0, 9, TG_CPU_THUNK_STACK_PARAMS)
#else
#define TG_KIND_Launch(name) TG_GENERATED_WRAPPER(name, 11, TG_LAUNCH_ENTRY(name, KindLaunch))
#define TG_KIND_LaunchEx(name) TG_GENERATED_WRAPPER(name, 4, TG_LAUNCH_ENTRY(name, KindLaunchEx))
#define TG_KIND_LaunchCoop(name) TG_GENERATED_WRAPPER(name, 10, TG_LAUNCH_ENTRY(name, KindLaunchCoop))
#endif
#define TG_GRAPH_ENTRY(name) ::tmaguard::GraphNodeEntry<::tmaguard::EntryId::name, tg_pfn_##name>
#define TG_KIND_GraphNode2(name) TG_GENERATED_WRAPPER(name, 2, TG_GRAPH_ENTRY(name))
#define TG_KIND_GraphNode3(name) TG_GENERATED_WRAPPER(name, 3, TG_GRAPH_ENTRY(name))
#define TG_KIND_GraphNode5(name) TG_GENERATED_WRAPPER(name, 5, TG_GRAPH_ENTRY(name))
#define TG_KIND_GraphNode6(name) TG_GENERATED_WRAPPER(name, 6, TG_GRAPH_ENTRY(name))
// The other kinds' wrappers are written by hand in the file each names (entry_points.def); a row with a kind not
// listed here does not compile.
#define TG_KIND_Encode(name)
#define TG_KIND_Lookup(name)
#define TG_KIND_Unload(name)
#define TG_KIND_Free(name)
#define TG_ENTRY(name, pfn, kind) TG_KIND_##kind(name)
#define TG_REAL_ONLY(name, pfn)
#include "driver/entry_points.def"
#undef TG_ENTRY
#undef TG_REAL_ONLY
