// tmaguard shim: cuTensorMapEncode* and cuTensorMapReplaceAddress wrappers. They record provenance (which call
// made which descriptor, bounded) and explain a failed encode in one line. The driver's return code is never changed.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <array>
#include <cstring>
#include <mutex>

#include "driver.h"
#include "kernel_cache.h"
#include "runtime.h"
#include "tmaguard/tensormap.h"

namespace tmaguard {
namespace {

constexpr std::size_t kProvSlots = 1 << 12;  // bounded: about 1 MiB whatever the number of encodes
struct ProvSlot {
  uint64_t hash = 0;
  const char* api = nullptr;
  EncodeArgs args;
};
std::mutex g_prov_mu;
ProvSlot* g_prov = nullptr;  // allocated on the first encode

void prov_prepare() { g_prov_mu.lock(); }
void prov_release() { g_prov_mu.unlock(); }

void record(uint64_t hash, const char* api, const EncodeArgs& a) {
  static std::once_flag once;
  std::call_once(once, [] { pthread_atfork(prov_prepare, prov_release, prov_release); });
  std::lock_guard<std::mutex> lock(g_prov_mu);
  if (!g_prov) g_prov = new ProvSlot[kProvSlots];
  ProvSlot& s = g_prov[hash & (kProvSlots - 1)];
  s.hash = hash;
  s.api = api;
  s.args = a;
}

bool lookup(uint64_t hash, const char** api, EncodeArgs* a) {
  std::lock_guard<std::mutex> lock(g_prov_mu);
  if (!g_prov || g_prov[hash & (kProvSlots - 1)].hash != hash) return false;
  *api = g_prov[hash & (kProvSlots - 1)].api;
  *a = g_prov[hash & (kProvSlots - 1)].args;
  return true;
}

// Copies the caller's arrays defensively: NULL arrays stay zero, and at most kMaxRank entries are read.
EncodeArgs gather(MapKind kind, CUtensorMapDataType dt, cuuint32_t rank, void* addr, const cuuint64_t* dims,
                  const cuuint64_t* strides, const cuuint32_t* es) {
  EncodeArgs a;
  a.kind = kind;
  a.dtype = static_cast<uint32_t>(dt);
  a.rank = rank;
  a.address = reinterpret_cast<uint64_t>(addr);
  const uint32_t n = rank < kMaxRank ? rank : kMaxRank;
  for (uint32_t i = 0; i < n; ++i) {
    if (dims) a.dims[i] = dims[i];
    if (es) a.element_strides[i] = es[i];
    if (strides && i + 1 < n) a.strides[i] = strides[i];
  }
  return a;
}

const char* result_name(CUresult rc) {
  switch (rc) {
    case CUDA_ERROR_INVALID_VALUE: return "CUDA_ERROR_INVALID_VALUE";
    case CUDA_ERROR_NOT_INITIALIZED: return "CUDA_ERROR_NOT_INITIALIZED";
    case CUDA_ERROR_INVALID_CONTEXT: return "CUDA_ERROR_INVALID_CONTEXT";
    default: return "error";
  }
}

void after_encode(const char* api, CUresult rc, const CUtensorMap* map, const EncodeArgs& a) {
  HookScope scope;
  if (scope.nested() || !armed()) return;
  try {
    if (rc == CUDA_SUCCESS && map) {
      record(content_hash(reinterpret_cast<const uint8_t*>(map)), api, a);
    } else if (rc == CUDA_ERROR_INVALID_VALUE) {
      const EncodeProblem p = validate_encode(a);
      const std::string why = p ? p.message : "no documented requirement explains it";
      report_notice(fmt::format("encode|{}|{}", api, why), "encode-rejected",
                    fmt::format("{} returned {} ({}): {}", api, static_cast<int>(rc), result_name(rc), why));
    }
  } catch (...) {
    // Provenance is best effort; the encode result stands either way.
  }
}

std::string describe(const char* api, const EncodeArgs& a) {
  const uint32_t r = a.rank < kMaxRank ? a.rank : kMaxRank;
  auto list = [](const auto& v, uint32_t n) { return fmt::format("{{{}}}", fmt::join(v.begin(), v.begin() + n, ",")); };
  std::string s = fmt::format("{}(dtype={}, rank={}, address=0x{:x}, dims={}, strides={}", api,
                              to_string(static_cast<DataType>(a.dtype)), a.rank, a.address, list(a.dims, r),
                              list(a.strides, r ? r - 1 : 0));
  if (a.kind == MapKind::kTiled) s += fmt::format(", box={}", list(a.box, r));
  else s += fmt::format(", channelsPerPixel={}, pixelsPerColumn={}", a.channels_per_pixel, a.pixels_per_column);
  return s + fmt::format(", swizzle={})", swizzle_name(a.swizzle));
}

}  // namespace

std::string provenance_for(uint64_t hash) {
  const char* api = nullptr;
  EncodeArgs a;
  if (lookup(hash, &api, &a)) return describe(api, a);
  return "no cuTensorMapEncode* call in this process produced these bytes (filled inline, e.g. by CuTe DSL)";
}

}  // namespace tmaguard

using namespace tmaguard;

CUresult TG_WRAPPER(cuTensorMapEncodeTiled)(CUtensorMap* map, CUtensorMapDataType dt, cuuint32_t rank, void* addr,
                                            const cuuint64_t* dims, const cuuint64_t* strides, const cuuint32_t* box,
                                            const cuuint32_t* es, CUtensorMapInterleave il, CUtensorMapSwizzle sw,
                                            CUtensorMapL2promotion l2, CUtensorMapFloatOOBfill oob) {
  auto real = TG_REAL(cuTensorMapEncodeTiled);
  if (!real) return CUDA_ERROR_NOT_INITIALIZED;
  const CUresult rc = real(map, dt, rank, addr, dims, strides, box, es, il, sw, l2, oob);
  EncodeArgs a = gather(MapKind::kTiled, dt, rank, addr, dims, strides, es);
  for (uint32_t i = 0; box && i < rank && i < kMaxRank; ++i) a.box[i] = box[i];
  a.interleave = il;
  a.swizzle = sw;
  a.l2_promotion = l2;
  a.oob_fill = oob;
  after_encode("cuTensorMapEncodeTiled", rc, map, a);
  return rc;
}

CUresult TG_WRAPPER(cuTensorMapEncodeIm2col)(CUtensorMap* map, CUtensorMapDataType dt, cuuint32_t rank, void* addr,
                                             const cuuint64_t* dims, const cuuint64_t* strides, const int* lower,
                                             const int* upper, cuuint32_t cpp, cuuint32_t ppc, const cuuint32_t* es,
                                             CUtensorMapInterleave il, CUtensorMapSwizzle sw, CUtensorMapL2promotion l2,
                                             CUtensorMapFloatOOBfill oob) {
  auto real = TG_REAL(cuTensorMapEncodeIm2col);
  if (!real) return CUDA_ERROR_NOT_INITIALIZED;
  const CUresult rc = real(map, dt, rank, addr, dims, strides, lower, upper, cpp, ppc, es, il, sw, l2, oob);
  EncodeArgs a = gather(MapKind::kIm2col, dt, rank, addr, dims, strides, es);
  for (uint32_t i = 0; i + 2 < rank && i < 3; ++i) {
    if (lower) a.lower_corner[i] = lower[i];
    if (upper) a.upper_corner[i] = upper[i];
  }
  a.channels_per_pixel = cpp;
  a.pixels_per_column = ppc;
  a.interleave = il;
  a.swizzle = sw;
  a.l2_promotion = l2;
  a.oob_fill = oob;
  after_encode("cuTensorMapEncodeIm2col", rc, map, a);
  return rc;
}

CUresult TG_WRAPPER(cuTensorMapEncodeIm2colWide)(CUtensorMap* map, CUtensorMapDataType dt, cuuint32_t rank,
                                                 void* addr, const cuuint64_t* dims, const cuuint64_t* strides,
                                                 int lower_w, int upper_w, cuuint32_t cpp, cuuint32_t ppc,
                                                 const cuuint32_t* es, CUtensorMapInterleave il,
                                                 CUtensorMapIm2ColWideMode mode, CUtensorMapSwizzle sw,
                                                 CUtensorMapL2promotion l2, CUtensorMapFloatOOBfill oob) {
  auto real = TG_REAL(cuTensorMapEncodeIm2colWide);
  if (!real) return CUDA_ERROR_NOT_INITIALIZED;
  const CUresult rc = real(map, dt, rank, addr, dims, strides, lower_w, upper_w, cpp, ppc, es, il, mode, sw, l2, oob);
  EncodeArgs a = gather(MapKind::kIm2colWide, dt, rank, addr, dims, strides, es);
  a.lower_corner[0] = lower_w;
  a.upper_corner[0] = upper_w;
  a.channels_per_pixel = cpp;
  a.pixels_per_column = ppc;
  a.wide_mode = mode;
  a.interleave = il;
  a.swizzle = sw;
  a.l2_promotion = l2;
  a.oob_fill = oob;
  after_encode("cuTensorMapEncodeIm2colWide", rc, map, a);
  return rc;
}

CUresult TG_WRAPPER(cuTensorMapReplaceAddress)(CUtensorMap* map, void* addr) {
  auto real = TG_REAL(cuTensorMapReplaceAddress);
  if (!real) return CUDA_ERROR_NOT_INITIALIZED;
  uint64_t before = 0;
  if (map) before = content_hash(reinterpret_cast<const uint8_t*>(map));
  const CUresult rc = real(map, addr);
  if (rc == CUDA_SUCCESS && map) {
    HookScope scope;
    if (!scope.nested() && armed()) {
      const char* api = nullptr;
      EncodeArgs a;
      if (lookup(before, &api, &a)) {
        a.address = reinterpret_cast<uint64_t>(addr);
        record(content_hash(reinterpret_cast<const uint8_t*>(map)), api, a);
      }
    }
  }
  return rc;
}
