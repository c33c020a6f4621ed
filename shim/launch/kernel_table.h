// tmaguard shim: per-kernel facts (name, parameter layout, tensor-map slots, which rules apply), built once per
// CUfunction/CUkernel and forgotten when its module or library is unloaded, and the set of launches already
// found clean.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "base/cuda_names.h"
#include "base/hot.h"
#include "tmaguard/launch.h"

namespace tmaguard {

struct KernelInfo {
  std::string name;
  std::vector<int> rules;  // indices of the rules whose kernel matcher accepts this kernel
  ParamLayout layout;      // every parameter's offset and size
  // Tensor-map candidates, in parameter then offset order: 128-byte parameters, maps found inside larger ones,
  // then the places rules name by parameter that held no map at the search (named_only, read on every launch).
  std::vector<MapPlace> maps;
  std::vector<bool> named_only;  // per entry of `maps`
  // Places inside larger parameters that held no map at the search and could later (launch.h: still_empty): when
  // one holds a map, the kernel is searched again, with that launch's bytes (other data there changes nothing).
  std::vector<MapPlace> watch;
  const void* owner = nullptr;    // its CUmodule (CUfunction) or CUlibrary (CUkernel); nullptr when unknown
  bool params_truncated = false;  // more parameters than tmaguard reads (kMaxParams): the rest were not checked
  bool search_pending = false;    // a parameter over 128 bytes not (fully) searched yet: the launch that built this
                                  // gave no readable bytes for it; the next launch that does searches again
  unsigned searches = 0;          // searches made for this handle so far (bounded: kMaxSearches)

  // The device-map audit (device_audit.h): the rules that name maps in device memory ("param:N->AT"), the places in
  // the parameters that may hold device addresses (words inside maps found there excluded), and how many more
  // launches are audited (kAuditEveryLaunch: all).
  std::vector<int> device_rules;
  std::vector<MapPlace> pointers;
  mutable std::atomic<uint64_t> audits_left{0};
  mutable std::atomic<int> pins{0};  // device-audit reads in flight that refer to these facts (never freed while any)
  mutable std::atomic<int> device_maps{0};  // the most maps one audited launch found in device memory

  // Inspect mode's census (what tmaguard could see over the run), updated by every inspected launch.
  mutable std::atomic<uint64_t> launches{0};
  mutable std::atomic<int> maps_in_params{0}, maps_in_structs{0}, template_maps{0};

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
//! pointer a thread got from its front entry stays valid until it looks again.
//! `args`: the launch's arguments, with which a kernel's first launch searches its parameters over 128 bytes for
//! embedded maps (nullptr: no bytes to search; the search waits for the first launch that has them).
const KernelInfo* kernel_info(CUfunction f, const LaunchArgs* args);
//! This thread's front-cache entry for `f` (hot.h), filled from kernel_info() when it holds another kernel, when
//! kernel facts were replaced since this thread last looked, or when its kernel still waits for a struct search
//! and `args` can serve it.
FrontEntry& front_entry(CUfunction f, const LaunchArgs* args);
//! Remembers a launch found clean in this thread's front entry `e` for its kernel: its key (the entry's last clean
//! key, and one of its block's clean keys), and for a kernel with few maps, a copy of their bytes (`bytes(i)`: map
//! i's 128 bytes, in the kernel's map order).
template <typename BytesOf>
void remember_clean(FrontEntry& e, uint64_t key, BytesOf&& bytes);
//! How many maps front entry `e` keeps a clean copy of (0: none; hot.h kCleanCopyMaps).
inline std::size_t copied_maps(const FrontEntry& e) {
  std::size_t n = 0;
  if (e.n_maps == kManyMaps) n = e.info ? e.info->maps.size() : 0;
  else if (e.n_maps == kAuditing) n = 0;
  else n = e.n_maps < kPairs ? e.n_maps : e.n_maps & ~kPairs;
  return n <= kCleanCopyMaps ? n : 0;
}
//! This thread's clean block for front entry `e` (nullptr: none allocated). `allocate`: make the blocks if needed.
CleanBlock* clean_block_of(const FrontEntry& e, bool allocate);
//! Forgets the clean keys of front entry `e` (nullptr: of every entry), when it is given to another kernel.
void forget_clean_keys(const FrontEntry* e);
//! 128 bytes equal (all of them, word 2's bit 21 too: a difference there only sends the launch to the key).
__attribute__((always_inline)) inline bool same_map_bytes(const uint8_t* a, const uint8_t* b) {
  typedef uint64_t v2 __attribute__((vector_size(16)));
  v2 d = {0, 0};
  for (int i = 0; i < 8; ++i) {
    v2 x, y;
    __builtin_memcpy(&x, a + 16 * i, 16);
    __builtin_memcpy(&y, b + 16 * i, 16);
    d |= x ^ y;
  }
  return (d[0] | d[1]) == 0;
}
//! Whether `key` is among a block's clean keys (one line: the key's set).
__attribute__((always_inline)) inline bool has_clean_key(const CleanBlock& b, uint64_t key) {
  const uint64_t* set = b.keys[key % kCleanKeySets];
  bool found = false;
  for (std::size_t w = 0; w < kCleanKeyWays; ++w) found |= set[w] == key;
  return found && key != 0;
}
//! Adds a clean key to a block (newest first in its set; the oldest of a full set goes).
inline void add_clean_key(CleanBlock& b, uint64_t key) {
  if (key == 0 || has_clean_key(b, key)) return;
  uint64_t* set = b.keys[key % kCleanKeySets];
  for (std::size_t w = kCleanKeyWays - 1; w > 0; --w) set[w] = set[w - 1];
  set[0] = key;
}
template <typename BytesOf>
void remember_clean(FrontEntry& e, uint64_t key, BytesOf&& bytes) {
  e.clean_key = 0;
  const std::size_t n = copied_maps(e);
  CleanBlock* b = clean_block_of(e, true);
  if (b) add_clean_key(*b, key);
  if (n) {
    if (!b) return;  // no copies: the entry keeps no key either (a key without its bytes would be read as both)
    for (std::size_t i = 0; i < n; ++i) {
      const uint8_t* m = bytes(i);
      if (!m) return;
      __builtin_memcpy(b->maps + kTensorMapBytes * i, m, kTensorMapBytes);
    }
    bump(t_hot.clean_copies);
  }
  e.clean_key = key;
}
//! A fresh search of `stale`'s kernel with this launch's bytes (a watched place holds a map, or the kernel waited
//! for readable bytes): the new KernelInfo replaces the old one for every thread. Returns what is in force.
const KernelInfo* research(CUfunction f, const KernelInfo* stale, const LaunchArgs& args);
//! Whether this launch calls for a new search of its kernel's parameters (kernel_cache.cpp says when).
bool needs_research(const KernelInfo& k, const LaunchArgs& args);
inline constexpr unsigned kMaxSearches = 64;

//! Every kernel known (for inspect mode's census at exit).
void for_each_kernel(void (*fn)(const KernelInfo&));

//! Forgets every kernel of this module or library (and of `module`, a library's context module, when given), so
//! that a handle the driver reuses after the unload is looked up afresh; nullptr owner: forget every kernel.
void forget_kernels_of(const void* owner, const void* module = nullptr);

//! The identity a launch key starts from (launch.h's launch_key).
inline uint64_t kernel_identity(const KernelInfo* k) { return reinterpret_cast<uintptr_t>(k); }

//! Set of launch keys that were checked and found clean: a repeated launch costs a hash and a lookup.
bool clean_cache_contains(uint64_t key);
void clean_cache_insert(uint64_t key);
//! Set of map content hashes whose bytes passed the generic descriptor check (which depends on the bytes alone): a
//! launch whose key is new because one of its many maps changed judges only that map again.
bool clean_map_contains(uint64_t hash);
void clean_map_insert(uint64_t hash);

}  // namespace tmaguard
