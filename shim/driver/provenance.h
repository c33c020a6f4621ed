// tmaguard shim: provenance, i.e. which cuTensorMapEncode* entry point produced a descriptor's bytes (if any).
#pragma once

#include <cstdint>
#include <string>

namespace tmaguard {

//! The encode entry points, as recorded. A descriptor whose address cuTensorMapReplaceAddress changed keeps its
//! entry point and is marked `replaced`.
enum class EncodeApi : uint8_t { kNone = 0, kTiled, kIm2col, kIm2colWide };
const char* encode_api_name(EncodeApi api);

struct Provenance {
  EncodeApi api = EncodeApi::kNone;
  bool replaced = false;
};

//! Remembers that `api` produced the bytes with this content hash. Lock-free, bounded (32 KiB).
void provenance_record(uint64_t content_hash, Provenance p);
//! What produced these bytes; api kNone when no encode call in this process did (or it was evicted).
Provenance provenance_lookup(uint64_t content_hash);
//! The same as a sentence for reports.
std::string provenance_for(uint64_t content_hash);

}  // namespace tmaguard
