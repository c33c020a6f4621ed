// tmaguard core, internal (not installed): the clean-launch key, ONE definition, used by the launch fast path and by
// the full check alike. A key that the two computed differently would make the clean cache silently never hit.
#pragma once

#include <cstddef>
#include <cstdint>

#include "tmaguard/tensormap.h"

namespace tmaguard {

//! Folds one map's content hash into a launch key.
inline uint64_t launch_key_fold(uint64_t key, uint64_t map_hash) {
  return key ^ (map_hash + 0x9e3779b97f4a7c15ULL + (key << 6) + (key >> 2));
}
//! The key of a launch: the kernel's identity folded with the keyed content hash of each map (`hash_key`: the
//! process's secret one in the shim), in place order (never 0). The identity must never name two kernels (the shim
//! numbers its kernel records; an address of a freed record could be reused). `bytes_of(i)` returns map i's bytes
//! (nullptr: not available, and then there is no key). `hash_out`, when given, receives each map's hash for reuse.
template <typename BytesOf>
inline bool launch_key(uint64_t kernel_identity, const HashKey& hash_key, std::size_t n, BytesOf&& bytes_of,
                       uint64_t* key, uint64_t* hash_out = nullptr) {
  uint64_t k = kernel_identity * 0x9e3779b97f4a7c15ULL;
  for (std::size_t i = 0; i < n; ++i) {
    const uint8_t* p = bytes_of(i);
    if (!p) return false;
    const uint64_t h = content_hash(p, hash_key);
    if (hash_out) hash_out[i] = h;
    k = launch_key_fold(k, h);
  }
  *key = k | (k == 0);  // never 0: every cache of keys reads 0 as "no key"
  return true;
}

}  // namespace tmaguard
