// tmaguard shim: the provenance table (content hash of a descriptor -> the encode entry point that made it).
//
// The arguments themselves need no storing: the descriptor encodes them and the report prints them decoded. One
// 64-bit word per entry (the hash with its low 3 bits replaced by the entry-point code), lock-free, a fixed 32 KiB
// whatever the number of encodes. Eight-way buckets of one cache line each: a job's working set of descriptors
// (Triton re-encodes every one on every launch) must not evict itself, or each re-encode would pay the first-seen
// path (a direct-mapped table of the same size had a quarter of 1024 descriptors colliding).
#include "driver/provenance.h"

#include <atomic>
#include <cstddef>

namespace tmaguard {
namespace {

constexpr std::size_t kProvWays = 8;
constexpr std::size_t kProvBuckets = (1 << 12) / kProvWays;
struct alignas(64) ProvBucket {
  std::atomic<uint64_t> way[kProvWays];
};
ProvBucket g_prov[kProvBuckets];  // zero-initialised: nothing runs at load time

// The low 3 bits of an entry: 0 empty, 1..3 the entry point, +3 when the address was replaced afterwards.
constexpr uint64_t kTagMask = ~uint64_t{7};
constexpr uint64_t kReplacedOffset = 3;

uint64_t code(Provenance p) {
  return p.api == EncodeApi::kNone ? 0 : static_cast<uint64_t>(p.api) + (p.replaced ? kReplacedOffset : 0);
}
Provenance from_code(uint64_t c) {
  if (c == 0) return {};
  const bool replaced = c > kReplacedOffset;
  return {static_cast<EncodeApi>(replaced ? c - kReplacedOffset : c), replaced};
}

ProvBucket& bucket(uint64_t hash) { return g_prov[(hash >> 40) & (kProvBuckets - 1)]; }

}  // namespace

const char* encode_api_name(EncodeApi api) {
  switch (api) {
    case EncodeApi::kTiled: return "cuTensorMapEncodeTiled";
    case EncodeApi::kIm2col: return "cuTensorMapEncodeIm2col";
    case EncodeApi::kIm2colWide: return "cuTensorMapEncodeIm2colWide";
    default: return "";
  }
}

void provenance_record(uint64_t hash, Provenance p) {
  ProvBucket& b = bucket(hash);
  std::size_t victim = (hash >> 3) & (kProvWays - 1);  // when the bucket is full: a pseudo-random way
  for (std::size_t i = 0; i < kProvWays; ++i) {
    const uint64_t v = b.way[i].load(std::memory_order_relaxed);
    if ((v & kTagMask) == (hash & kTagMask) || v == 0) {
      victim = i;
      break;
    }
  }
  b.way[victim].store((hash & kTagMask) | code(p), std::memory_order_relaxed);
}

Provenance provenance_lookup(uint64_t hash) {
  ProvBucket& b = bucket(hash);
  for (std::size_t i = 0; i < kProvWays; ++i) {
    const uint64_t v = b.way[i].load(std::memory_order_relaxed);
    if ((v & kTagMask) == (hash & kTagMask) && v != 0) return from_code(v & 7);
  }
  return {};
}

std::string provenance_for(uint64_t hash) {
  const Provenance p = provenance_lookup(hash);
  if (p.api == EncodeApi::kNone)
    return "no cuTensorMapEncode* call in this process produced these bytes (filled inline, e.g. by CuTe DSL)";
  std::string s = std::string("encoded by ") + encode_api_name(p.api) + " in this process";
  if (p.replaced) s += ", address replaced by cuTensorMapReplaceAddress";
  return s;
}

}  // namespace tmaguard
