// tmaguard shim: the kernel table: per-kernel facts (name, parameter layout, tensor-map places, which rules apply),
// built once per CUfunction/CUkernel and forgotten when its module or library is unloaded. What was found clean is the
// memo's (memo.h).
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "driver/cuda_names.h"
#include "thread/thread_words.h"
#include "core/struct_search.h"
#include "kernels/census.h"
#include "kernels/kernel_audit.h"
#include "tmaguard/judge.h"
#include "tmaguard/launch.h"

namespace tmaguard {

//! Layouts of a kernel whose moved maps are judged by their addresses (KernelInfo::moved): a few sequence-length
//! buckets of one training loop.
inline constexpr std::size_t kMovedLayouts = 4;

struct KernelInfo {
  uint64_t serial = 0;  // this record's number, unique in the process: what clean launch keys start from
  std::string name;
  std::vector<int> rules;  // indices of the rules whose kernel matcher accepts this kernel
  ParamLayout layout;      // every parameter's offset and size
  // Tensor-map candidates, in parameter then offset order: 128-byte parameters, maps found inside larger ones,
  // then the places rules name by parameter that held no map at the search (named_only, read on every launch).
  std::vector<MapPlace> maps;
  std::vector<bool> named_only;  // per entry of `maps`
  // Places inside larger parameters that were all zeros at the search, as an unfilled map member is, and could hold a
  // map later (struct_search.h: unfilled_place): when one holds a map, the kernel is searched again, with that
  // launch's bytes (other data there changes nothing).
  std::vector<MapPlace> watch;
  const void* owner = nullptr;    // its CUmodule (CUfunction) or CUlibrary (CUkernel); nullptr when unknown
  bool params_truncated = false;  // more parameters than tmaguard reads (kMaxParams): the rest were not checked
  bool search_pending = false;    // a parameter over 128 bytes not (fully) searched yet: the launch that built this
                                  // gave no readable bytes for it; the next launch that does searches again
  unsigned searches = 0;          // searches made for this handle so far (bounded: kMaxSearches)
  // Two tiers of "known clean" kept with the kernel's facts, read and written by the memo room alone (memo/look.h).
  // The launch key of this kernel's last launch found clean on any thread (memo.h: is_clean_key): a kernel whose
  // thread entry and process-wide key were pushed out by thousands of other kernels is known again by it, for 8 bytes.
  mutable std::atomic<uint64_t> clean_key{0};
  // Launches judged in full with nothing said and every map decoded, compiled (judge.h: MovedMaps), one per layout
  // (memo.h: moved_layout_key, learn_moved_maps), from the kernel's second such launch on: a launch of one of these
  // layouts whose maps only moved is judged by what reads their addresses. Each slot set once, freed with the record;
  // about 250 bytes per map and layout. `judged_clean`: a first such launch was seen (a kernel launched once compiles
  // nothing); `uncompiled`: launches that could not be compiled (a map no map, a rule whose `when` reads addresses):
  // after kMovedLayouts of them the kernel stops trying, so a full check never pays for a compile that cannot succeed.
  mutable std::atomic<const MovedMaps*> moved[kMovedLayouts] = {};
  mutable std::atomic<uint64_t> moved_layout[kMovedLayouts] = {};
  mutable std::atomic<uint8_t> judged_clean{0};
  mutable std::atomic<uint8_t> uncompiled{0};

  KernelInfo() = default;
  KernelInfo(const KernelInfo&) = delete;
  KernelInfo& operator=(const KernelInfo&) = delete;
  ~KernelInfo();

  KernelAudit audit;    // the device-map audit's (kernel_audit.h, device_audit.h)
  KernelCensus census;  // inspect mode's (census.h)

  bool embedded(const MapPlace& s) const { return layout.sizes[s.param] > kTensorMapBytes; }
  //! How much map slot i's bytes must prove (launch.h): every slot of a kernel a rule names is a known place.
  MapEvidence evidence(std::size_t i) const {
    if (!rules.empty()) return MapEvidence::kKnown;
    return embedded(maps[i]) ? MapEvidence::kInStruct : MapEvidence::kParameter;
  }
};

//! Facts for a launch handle (CUfunction, or a CUkernel passed where a CUfunction is expected). Never null.
//! Read-mostly: a lock-free table, filled on a kernel's first launch. Facts an unload (or a new search) replaced are
//! freed only once every thread that launches has seen the new epoch and no device-audit read refers to them, so a
//! pointer a thread got from its memo entry (memo.h) stays valid until it looks again.
//! `args`: the launch's arguments, with which a kernel's first launch searches its parameters over 128 bytes for
//! embedded maps (nullptr: no bytes to search; the search waits for the first launch that has them).
//! `built`, when given: set when this call built the facts (with `args`), so that its caller need not search again.
const KernelInfo* kernel_info(CUfunction f, const LaunchArgs* args, bool* built = nullptr);
//! A fresh search of `stale`'s kernel with this launch's bytes (a watched place holds a map, or the kernel waited
//! for readable bytes): the new KernelInfo replaces the old one for every thread. Returns what is in force.
const KernelInfo* search_again(CUfunction f, const KernelInfo* stale, const LaunchArgs& args);
//! Whether this launch calls for a new search of its kernel's parameters (kernel_table.cpp says when).
bool needs_new_search(const KernelInfo& k, const LaunchArgs& args);
inline constexpr unsigned kMaxSearches = 64;

//! A thread that launches has caught up with the kernel epoch (its memo dropped every entry made before it): facts
//! forgotten meanwhile that no thread holds any more are freed.
void kernel_facts_released();

//! Every kernel known (for inspect mode's census at exit).
void for_each_kernel(void (*fn)(const KernelInfo&));

//! Forgets every kernel of this module or library (and of `module`, a library's context module, when given), so
//! that a handle the driver reuses after the unload is looked up afresh; nullptr owner: forget every kernel.
void forget_kernels_of(const void* owner, const void* module = nullptr);

//! The identity a launch key starts from (launch.h's launch_key): the record's serial, never its address. A record an
//! unload (or a new search) freed may be reallocated at the same address for another kernel, and a key started from
//! the address would then find the freed kernel's clean launches (a transposed dK passed as another kernel's clean
//! maps).
inline uint64_t kernel_identity(const KernelInfo* k) { return k->serial; }

// ---- the audit's share of a kernel (kernel_audit.h), planned with its facts (kernel_audit.cpp) and changed by the
// device audit alone (launch/device_audit.cpp)

//! Plans the audit of a kernel whose facts are being built (`stale`: the facts they replace, whose budget carries
//! over; nullptr for a new kernel): which places may hold device addresses, and how many launches are audited.
void plan_audit(KernelInfo& k, const KernelInfo* stale);
//! Whether launches of this kernel are still audited (its first TMAGUARD_DEVICE_AUDIT launches with pointers).
inline bool audit_due(const KernelInfo& k) { return k.audit.launches_left.load(std::memory_order_relaxed) != 0; }
//! Whether the audit is done with this kernel after the launch now being checked (its last audited one).
inline bool audit_ending(const KernelInfo& k) { return k.audit.launches_left.load(std::memory_order_relaxed) <= 1; }

}  // namespace tmaguard
