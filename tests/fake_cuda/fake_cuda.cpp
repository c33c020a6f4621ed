// Stand-in CUDA driver (libcuda.so.1) for GPU-free tests. It implements what tmaguard and the test clients call,
// rejects what the real driver rejects, and encodes the real byte format: encoding goes through the same rules and
// layout as tmaguard's core, both pinned to real-driver output captured on an H200 (tests/data). Kernels are
// declared by test clients (fakecuda_define_kernel) and "run" by counting launches.
#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <type_traits>
#include <vector>

#include "driver/cuda_names.h"
#include "fakecuda.h"
#include "tmaguard/tensormap.h"

// Every entry point tmaguard interposes or calls (shim/driver/entry_points.def), plus what test clients call besides. The
// cuGetProcAddress table (kRows, below) takes each one's address, so a row the stand-in does not define fails the
// link (-z defs). The pre-12.4 build hides cuFuncGetParamInfo/cuKernelGetParamInfo with a version script
// (old_driver.map).
#define FAKE_EXPORT(name, pfn) \
  extern "C" __attribute__((visibility("default"))) std::remove_pointer_t<pfn> fake_##name __asm__(#name);
#define TG_ENTRY(name, pfn, kind) FAKE_EXPORT(name, pfn)
#define TG_REAL_ONLY(name, pfn) FAKE_EXPORT(name, pfn)
#include "driver/entry_points.def"
#define FAKE_ONLY_ENTRIES(X)                                \
  X(cuInit, PFN_cuInit_v2000)                               \
  X(cuDriverGetVersion, PFN_cuDriverGetVersion_v2020)       \
  X(cuGetErrorString, PFN_cuGetErrorString_v6000)           \
  X(cuKernelGetFunction, PFN_cuKernelGetFunction_v12000)    \
  X(cuMemAlloc_v2, PFN_cuMemAlloc_v3020)                    \
  X(cuMemFreeHost, PFN_cuMemFreeHost_v2000)                 \
  X(cuStreamBeginCapture_v2, PFN_cuStreamBeginCapture_v10010) \
  X(cuStreamEndCapture, PFN_cuStreamEndCapture_v10000)
FAKE_ONLY_ENTRIES(FAKE_EXPORT)
#undef TG_ENTRY
#undef TG_REAL_ONLY

namespace {

constexpr uint32_t kFuncMagic = 0x46554e43, kKernelMagic = 0x4b45524e, kModuleMagic = 0x4d4f4455;
struct FakeModule;
struct FakeKernel {
  uint32_t magic;
  std::string name;
  void (*effect)(void** params, void* user) = nullptr;  // what the kernel "does" when it runs (fakecuda.h)
  void* effect_user = nullptr;
  std::vector<std::size_t> offsets, sizes;
  std::atomic<unsigned long> launches{0};
  FakeKernel* twin = nullptr;     // the CUfunction of a CUkernel
  FakeModule* owner = nullptr;    // the module (or library) it was loaded with
};
// A module or library (a library is its own context module here). Unloading one frees its kernels, and the next
// kernels defined reuse their addresses, as a real driver's allocator may: handles are reused after an unload.
struct FakeModule {
  uint32_t magic = kModuleMagic;
  bool library = false;
  std::vector<FakeKernel*> kernels;
};
FakeModule g_default_module;                // kernels defined before any fakecuda_new_module(); never unloaded
FakeModule* g_current = &g_default_module;  // where fakecuda_define_kernel puts kernels
std::vector<FakeKernel*>* g_free = nullptr;  // freed kernel objects, reused last-freed first
struct FakeModule;
std::vector<FakeModule*>* g_free_modules = nullptr;  // unloaded modules, reused likewise

FakeKernel* new_kernel() {
  if (g_free && !g_free->empty()) {
    FakeKernel* k = g_free->back();
    g_free->pop_back();
    return k;
  }
  return new FakeKernel;
}

std::atomic<bool> g_init{false};
std::mutex g_mu;
std::map<std::string, unsigned long>* g_via = nullptr;

FakeKernel* as_any(const void* h) {
  auto* k = static_cast<FakeKernel*>(const_cast<void*>(h));
  return (k && (k->magic == kFuncMagic || k->magic == kKernelMagic)) ? k : nullptr;
}

CUresult launch(const char* via, CUfunction f, void** params, void** extra) {
  if (!g_init) return CUDA_ERROR_NOT_INITIALIZED;
  FakeKernel* k = as_any(f);
  if (!k) return CUDA_ERROR_INVALID_HANDLE;
  if (params && extra) return CUDA_ERROR_INVALID_VALUE;
  if (!params && !extra && !k->sizes.empty()) return CUDA_ERROR_INVALID_VALUE;
  ++k->launches;
  // The real driver copies every parameter's bytes into the launch it queues: so does the stand-in, so that a
  // benchmark's baseline reads them too (tmaguard reading a map before the driver does moves that read, it does not
  // add one).
  thread_local unsigned char queued[4096];
  if (params) {
    for (std::size_t i = 0; i < k->sizes.size(); ++i)
      if (params[i] && k->offsets[i] + k->sizes[i] <= sizeof queued)
        std::memcpy(queued + k->offsets[i], params[i], k->sizes[i]);
    asm volatile("" : : "r"(queued) : "memory");  // the copy is the point: keep it
  }
  if (k->effect) k->effect(params, k->effect_user);  // the kernel runs at once: stream order is program order
  std::lock_guard<std::mutex> lock(g_mu);
  if (!g_via) g_via = new std::map<std::string, unsigned long>;
  ++(*g_via)[via];
  return CUDA_SUCCESS;
}

// What cuGetProcAddress finds, generated from the same rows (shim/driver/entry_points.def and FAKE_ONLY_ENTRIES): each row
// is a name, the ABI version in its PFN type (PFN_cuGraphAddKernelNode_v12000: 12000) and the function. A `_ptsz` row
// is its base name's per-thread-default-stream variant; a `_v2` row is what its base name resolves to from its
// version on; cuGetProcAddress itself is answered apart. The pre-12.4 and no-cuPointerGetAttribute builds leave out
// what their version scripts hide.
struct Row {
  const char* name;
  const char* pfn;
  void* fn;
};
#define FAKE_ROW(name, pfn) {#name, #pfn, reinterpret_cast<void*>(&fake_##name)},
#define TG_ENTRY(name, pfn, kind) FAKE_ROW(name, pfn)
#define TG_REAL_ONLY(name, pfn) FAKE_ROW(name, pfn)
const Row kRows[] = {
#include "driver/entry_points.def"
    FAKE_ONLY_ENTRIES(FAKE_ROW)};
#undef TG_ENTRY
#undef TG_REAL_ONLY

bool hidden(const std::string& name) {
#ifdef FAKE_OLD_DRIVER
  if (name == "cuFuncGetParamInfo" || name == "cuKernelGetParamInfo") return true;
#endif
#ifdef FAKE_NO_POINTER_ATTRIBUTE
  if (name == "cuPointerGetAttribute") return true;
#endif
  return name.rfind("cuGetProcAddress", 0) == 0;
}

struct ProcEntry {
  std::string name;
  int min_version = 0;
  void* fn = nullptr;
  void* ptsz = nullptr;
  int v2_version = 0;  // from this version on, the name resolves to its _v2 ABI
  void* v2 = nullptr;
};

// "PFN_cuLaunchKernel_v7000_ptsz" -> 7000
int version_of(const std::string& pfn) {
  const std::size_t v = pfn.rfind("_v");
  return v == std::string::npos ? 0 : std::atoi(pfn.c_str() + v + 2);
}

const std::vector<ProcEntry>& procs() {
  static const std::vector<ProcEntry> table = [] {
    std::vector<ProcEntry> t;
    auto entry = [&](const std::string& name) -> ProcEntry& {
      for (ProcEntry& e : t)
        if (e.name == name) return e;
      t.push_back({name});
      return t.back();
    };
    auto ends = [](const std::string& s, const char* suffix) {
      const std::size_t n = std::strlen(suffix);
      return s.size() > n && s.compare(s.size() - n, n, suffix) == 0;
    };
    for (const Row& r : kRows) {
      const std::string name = r.name, pfn = r.pfn;
      if (hidden(name)) continue;
      if (ends(name, "_ptsz")) {
        entry(name.substr(0, name.size() - 5)).ptsz = r.fn;
      } else if (ends(name, "_v2")) {
        ProcEntry& e = entry(name.substr(0, name.size() - 3));
        e.v2 = r.fn;
        e.v2_version = version_of(pfn);
      } else {
        ProcEntry& e = entry(name);
        e.fn = r.fn;
        e.min_version = version_of(pfn);
      }
    }
    return t;
  }();
  return table;
}
#define P(x) reinterpret_cast<void*>(&fake_##x)

// Shared by both cuGetProcAddress forms. Semantics measured on an H200 (driver 580): unknown name -> status 1,
// version too low -> status 2, both with SUCCESS and pfn NULL; a version far above the driver -> INVALID_VALUE.
CUresult get_proc(const char* symbol, void** pfn, int version, cuuint64_t flags, CUdriverProcAddressQueryResult* st,
                  bool legacy) {
  if (!symbol || !pfn) return CUDA_ERROR_INVALID_VALUE;
  if (version > 13090) return CUDA_ERROR_INVALID_VALUE;
  *pfn = nullptr;
  auto set = [&](CUdriverProcAddressQueryResult r) {
    if (st) *st = r;
  };
  if (std::strcmp(symbol, "cuGetProcAddress") == 0) {
    *pfn = version >= 12000 ? P(cuGetProcAddress_v2) : P(cuGetProcAddress);
    set(CU_GET_PROC_ADDRESS_SUCCESS);
    return CUDA_SUCCESS;
  }
  for (const ProcEntry& e : procs()) {
    if (e.name != symbol || !e.fn) continue;
    if (version < e.min_version) {
      set(CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
      return legacy ? CUDA_ERROR_NOT_FOUND : CUDA_SUCCESS;
    }
    *pfn = ((flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) && e.ptsz) ? e.ptsz : e.fn;
    if (e.v2 && version >= e.v2_version) *pfn = e.v2;
    set(CU_GET_PROC_ADDRESS_SUCCESS);
    return CUDA_SUCCESS;
  }
  set(CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
  return legacy ? CUDA_ERROR_NOT_FOUND : CUDA_SUCCESS;
}

// FAKECUDA_AFFECTED_BLACKWELL=1: the GPU and driver NVIDIA's 595.71.05 release notes name (compute capability 10.0 and
// driver 13010, unless FAKECUDA_CC / FAKECUDA_DRIVER_VERSION say otherwise), whose encoder sets the large-tensor flag
// (word 2 bit 21) over a tensor spanning under 128 KiB that is not dense and non-overlapping.
bool affected_blackwell() {
  const char* v = std::getenv("FAKECUDA_AFFECTED_BLACKWELL");
  return v && std::strcmp(v, "1") == 0;
}
// Dense and non-overlapping in the order given: each stride is the bytes of the dims inside it, nothing more.
bool dense(const tmaguard::EncodeArgs& a) {
  uint64_t inside = a.dims[0] * tmaguard::element_size(static_cast<tmaguard::DataType>(a.dtype));
  for (uint32_t i = 1; i < a.rank; ++i) {
    if (a.strides[i - 1] != inside) return false;
    inside *= a.dims[i];
  }
  return true;
}

CUresult encode(const tmaguard::EncodeArgs& a, CUtensorMap* map) {
  if (!g_init) return CUDA_ERROR_NOT_INITIALIZED;
  if (!map || reinterpret_cast<uintptr_t>(map) % 16) return CUDA_ERROR_INVALID_VALUE;
  const auto rc = static_cast<CUresult>(tmaguard::encode(a, reinterpret_cast<uint8_t*>(map)));
  const std::optional<tmaguard::ByteRange> span = tmaguard::map_range(a);
  if (rc == CUDA_SUCCESS && affected_blackwell() && span && span->end - span->first < 128 * 1024 && !dense(a))
    reinterpret_cast<uint8_t*>(map)[10] |= 1u << 5;  // word 2 bit 21: bit 85
  return rc;
}

CUresult param_info(FakeKernel* k, std::size_t i, std::size_t* off, std::size_t* size) {
  if (i >= k->sizes.size()) return CUDA_ERROR_INVALID_VALUE;
  if (off) *off = k->offsets[i];
  if (size) *size = k->sizes[i];
  return CUDA_SUCCESS;
}

}  // namespace

extern "C" __attribute__((visibility("default"))) void* fakecuda_new_module(int as_library) {
  std::lock_guard<std::mutex> lock(g_mu);
  FakeModule* m;
  if (g_free_modules && !g_free_modules->empty()) {  // an unloaded module's handle is handed out again
    m = g_free_modules->back();
    g_free_modules->pop_back();
    *m = FakeModule{};
  } else {
    m = new FakeModule;
  }
  m->library = as_library != 0;
  g_current = m;
  return m;
}

namespace {
// Lays out parameters as an H200 (driver 580) reported them: offsets are relative to a parameter block that starts
// 0x210 bytes into the constant bank, and each parameter sits at its alignment in the bank: 128-byte CUtensorMaps at
// 128 (so they come back at 112, 240, 368, ...: never 64-aligned offsets), others naturally (or as given).
void* define(const char* name, int n, const std::size_t* sizes, const std::size_t* aligns, int as_kernel) {
  std::lock_guard<std::mutex> lock(g_mu);
  FakeKernel* f = new_kernel();
  f->magic = kFuncMagic;
  f->name = name;
  f->offsets.clear();
  f->sizes.clear();
  f->launches = 0;
  f->twin = nullptr;
  f->owner = g_current;
  g_current->kernels.push_back(f);
  constexpr std::size_t kBankBase = 0x210;
  std::size_t off = 0;
  for (int i = 0; i < n; ++i) {
    const std::size_t s = sizes[i];
    const std::size_t a = aligns ? aligns[i] : s == 128 ? 128 : s >= 8 ? 8 : s >= 4 ? 4 : s >= 2 ? 2 : 1;
    off = (off + kBankBase + a - 1) / a * a - kBankBase;
    f->offsets.push_back(off);
    f->sizes.push_back(s);
    off += s;
  }
  if (!as_kernel) return f;
  FakeKernel* k = new_kernel();
  k->magic = kKernelMagic;
  k->name = f->name;
  k->offsets = f->offsets;
  k->sizes = f->sizes;
  k->launches = 0;
  k->twin = f;
  k->owner = g_current;
  g_current->kernels.push_back(k);
  return k;
}
}  // namespace

extern "C" __attribute__((visibility("default"))) void* fakecuda_define_kernel(const char* name, int n,
                                                                               const std::size_t* sizes,
                                                                               int as_kernel) {
  return define(name, n, sizes, nullptr, as_kernel);
}

extern "C" __attribute__((visibility("default"))) void* fakecuda_define_kernel_aligned(const char* name, int n,
                                                                                       const std::size_t* sizes,
                                                                                       const std::size_t* aligns,
                                                                                       int as_kernel) {
  return define(name, n, sizes, aligns, as_kernel);
}

extern "C" __attribute__((visibility("default"))) unsigned long fakecuda_launches(void* h) {
  FakeKernel* k = as_any(h);
  if (!k) return 0;
  return k->launches + (k->twin ? k->twin->launches.load() : 0);
}

extern "C" __attribute__((visibility("default"))) unsigned long fakecuda_launches_via(const char* entry) {
  std::lock_guard<std::mutex> lock(g_mu);
  if (!g_via) return 0;
  auto it = g_via->find(entry);
  return it == g_via->end() ? 0 : it->second;
}

CUresult fake_cuInit(unsigned int flags) {
  if (flags != 0) return CUDA_ERROR_INVALID_VALUE;
  // Fork-safe, as a real driver is for a child that launches: its one lock is never held across fork (a child
  // forked while another thread launched would otherwise wait on it for ever).
  static std::once_flag fork_safe;
  std::call_once(fork_safe,
                 [] { pthread_atfork([] { g_mu.lock(); }, [] { g_mu.unlock(); }, [] { g_mu.unlock(); }); });
  g_init = true;
  return CUDA_SUCCESS;
}
// The driver's version: FAKECUDA_DRIVER_VERSION, else 13010 for an affected Blackwell, else 13000.
CUresult fake_cuDriverGetVersion(int* v) {
  if (!v) return CUDA_ERROR_INVALID_VALUE;
  const char* e = std::getenv("FAKECUDA_DRIVER_VERSION");
  *v = e ? std::atoi(e) : affected_blackwell() ? 13010 : 13000;
  return CUDA_SUCCESS;
}
CUresult fake_cuGetErrorString(CUresult e, const char** s) {
  if (!s) return CUDA_ERROR_INVALID_VALUE;
  *s = e == CUDA_SUCCESS ? "no error" : "fake driver error";
  return CUDA_SUCCESS;
}
CUresult fake_cuGetProcAddress(const char* sym, void** pfn, int v, cuuint64_t flags) {
  return get_proc(sym, pfn, v, flags, nullptr, true);
}
CUresult fake_cuGetProcAddress_v2(const char* sym, void** pfn, int v, cuuint64_t flags,
                                  CUdriverProcAddressQueryResult* st) {
  return get_proc(sym, pfn, v, flags, st, false);
}

thread_local FakeLaunchRecord t_last_launch;
// Notes a launch's arguments as they arrived (fakecuda_last_launch).
FakeLaunchRecord& note_launch(const char* via, CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                              unsigned by, unsigned bz, unsigned shared, CUstream s, void** params, void** extra) {
  t_last_launch = FakeLaunchRecord{f, {gx, gy, gz}, {bx, by, bz}, shared, s, params, extra, nullptr, via};
  return t_last_launch;
}

#define FAKE_LAUNCH(name)                                                                                          \
  CUresult fake_##name(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz, \
                       unsigned shared, CUstream s, void** params, void** extra) {                                 \
    note_launch(#name, f, gx, gy, gz, bx, by, bz, shared, s, params, extra);                                       \
    return launch(#name, f, params, extra);                                                                        \
  }
FAKE_LAUNCH(cuLaunchKernel)
FAKE_LAUNCH(cuLaunchKernel_ptsz)
CUresult launch_ex(const char* via, const CUlaunchConfig* c, CUfunction f, void** p, void** e) {
  if (!c) return CUDA_ERROR_INVALID_VALUE;
  note_launch(via, f, c->gridDimX, c->gridDimY, c->gridDimZ, c->blockDimX, c->blockDimY, c->blockDimZ,
              c->sharedMemBytes, c->hStream, p, e)
      .config = c;
  return launch(via, f, p, e);
}
CUresult fake_cuLaunchKernelEx(const CUlaunchConfig* c, CUfunction f, void** p, void** e) {
  return launch_ex("cuLaunchKernelEx", c, f, p, e);
}
CUresult fake_cuLaunchKernelEx_ptsz(const CUlaunchConfig* c, CUfunction f, void** p, void** e) {
  return launch_ex("cuLaunchKernelEx_ptsz", c, f, p, e);
}
#define FAKE_LAUNCH_COOP(name)                                                                                     \
  CUresult fake_##name(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz, \
                       unsigned shared, CUstream s, void** p) {                                                    \
    note_launch(#name, f, gx, gy, gz, bx, by, bz, shared, s, p, nullptr);                                          \
    return launch(#name, f, p, nullptr);                                                                           \
  }
FAKE_LAUNCH_COOP(cuLaunchCooperativeKernel)
FAKE_LAUNCH_COOP(cuLaunchCooperativeKernel_ptsz)

extern "C" __attribute__((visibility("default"))) void fakecuda_last_launch(FakeLaunchRecord* out) {
  if (out) *out = t_last_launch;
}

CUresult fake_cuTensorMapEncodeTiled(CUtensorMap* map, CUtensorMapDataType dt, cuuint32_t rank, void* addr,
                                     const cuuint64_t* dims, const cuuint64_t* strides, const cuuint32_t* box,
                                     const cuuint32_t* es, CUtensorMapInterleave il, CUtensorMapSwizzle sw,
                                     CUtensorMapL2promotion l2, CUtensorMapFloatOOBfill oob) {
  tmaguard::EncodeArgs a = tmaguard::encode_args(tmaguard::MapKind::kTiled, dt, rank, reinterpret_cast<uint64_t>(addr),
                                                 dims, strides, es, il, sw, l2, oob);
  for (uint32_t i = 0; box && i < rank && i < 5; ++i) a.box[i] = box[i];
  return encode(a, map);
}
CUresult fake_cuTensorMapEncodeIm2col(CUtensorMap* map, CUtensorMapDataType dt, cuuint32_t rank, void* addr,
                                      const cuuint64_t* dims, const cuuint64_t* strides, const int* lower,
                                      const int* upper, cuuint32_t cpp, cuuint32_t ppc, const cuuint32_t* es,
                                      CUtensorMapInterleave il, CUtensorMapSwizzle sw, CUtensorMapL2promotion l2,
                                      CUtensorMapFloatOOBfill oob) {
  tmaguard::EncodeArgs a = tmaguard::encode_args(tmaguard::MapKind::kIm2col, dt, rank, reinterpret_cast<uint64_t>(addr),
                                                 dims, strides, es, il, sw, l2, oob);
  for (uint32_t i = 0; i + 2 < rank && i < 3; ++i) {
    a.lower_corner[i] = lower ? lower[i] : 0;
    a.upper_corner[i] = upper ? upper[i] : 0;
  }
  a.channels_per_pixel = cpp;
  a.pixels_per_column = ppc;
  return encode(a, map);
}
CUresult fake_cuTensorMapEncodeIm2colWide(CUtensorMap* map, CUtensorMapDataType dt, cuuint32_t rank, void* addr,
                                          const cuuint64_t* dims, const cuuint64_t* strides, int lo, int up,
                                          cuuint32_t cpp, cuuint32_t ppc, const cuuint32_t* es,
                                          CUtensorMapInterleave il, CUtensorMapIm2ColWideMode mode,
                                          CUtensorMapSwizzle sw, CUtensorMapL2promotion l2,
                                          CUtensorMapFloatOOBfill oob) {
  tmaguard::EncodeArgs a = tmaguard::encode_args(tmaguard::MapKind::kIm2colWide, dt, rank,
                                                 reinterpret_cast<uint64_t>(addr), dims, strides, es, il, sw, l2, oob);
  a.lower_corner[0] = lo;
  a.upper_corner[0] = up;
  a.channels_per_pixel = cpp;
  a.pixels_per_column = ppc;
  a.wide_mode = mode;
  return encode(a, map);
}
CUresult fake_cuTensorMapReplaceAddress(CUtensorMap* map, void* addr) {
  if (!g_init) return CUDA_ERROR_NOT_INITIALIZED;
  const auto a = reinterpret_cast<uint64_t>(addr);
  if (!map || !addr || a % 16) return CUDA_ERROR_INVALID_VALUE;
  uint32_t w[3];
  std::memcpy(w, map, sizeof w);
  if (((w[2] >> 11) & 3) == 2 && a % 32) return CUDA_ERROR_INVALID_VALUE;  // interleave 32B
  w[0] = static_cast<uint32_t>(a);
  w[1] = static_cast<uint32_t>(a >> 32);
  std::memcpy(map, w, 8);
  return CUDA_SUCCESS;
}

CUresult fake_cuFuncGetName(const char** name, CUfunction f) {
  FakeKernel* k = as_any(f);
  if (!name) return CUDA_ERROR_INVALID_VALUE;
  if (!k || k->magic != kFuncMagic) return CUDA_ERROR_INVALID_HANDLE;  // as the real driver does for a CUkernel
  *name = k->name.c_str();
  return CUDA_SUCCESS;
}
CUresult fake_cuKernelGetName(const char** name, CUkernel h) {
  FakeKernel* k = as_any(h);
  if (!name) return CUDA_ERROR_INVALID_VALUE;
  if (!k || k->magic != kKernelMagic) return CUDA_ERROR_INVALID_HANDLE;
  *name = k->name.c_str();
  return CUDA_SUCCESS;
}
CUresult fake_cuFuncGetParamInfo(CUfunction f, std::size_t i, std::size_t* off, std::size_t* size) {
  FakeKernel* k = as_any(f);
  if (!k || k->magic != kFuncMagic) return CUDA_ERROR_INVALID_HANDLE;
  return param_info(k, i, off, size);
}
CUresult fake_cuKernelGetParamInfo(CUkernel h, std::size_t i, std::size_t* off, std::size_t* size) {
  FakeKernel* k = as_any(h);
  if (!k || k->magic != kKernelMagic) return CUDA_ERROR_INVALID_HANDLE;
  return param_info(k, i, off, size);
}
namespace {
CUresult unload(void* h, bool library) {
  if (!g_init) return CUDA_ERROR_NOT_INITIALIZED;
  auto* m = static_cast<FakeModule*>(h);
  std::lock_guard<std::mutex> lock(g_mu);
  if (!m || m == &g_default_module || m->magic != kModuleMagic || m->library != library)
    return CUDA_ERROR_INVALID_HANDLE;
  if (!g_free) g_free = new std::vector<FakeKernel*>;
  // Freed in reverse, so that defining the same kernels again hands out the same addresses in the same order.
  for (auto it = m->kernels.rbegin(); it != m->kernels.rend(); ++it) {
    (*it)->magic = 0;
    g_free->push_back(*it);
  }
  m->kernels.clear();
  m->magic = 0;
  if (g_current == m) g_current = &g_default_module;
  if (!g_free_modules) g_free_modules = new std::vector<FakeModule*>;
  g_free_modules->push_back(m);
  return CUDA_SUCCESS;
}
FakeModule* module_of(FakeKernel* k) { return k->owner ? k->owner : &g_default_module; }
}  // namespace

CUresult fake_cuModuleUnload(CUmodule m) { return unload(m, false); }
CUresult fake_cuLibraryUnload(CUlibrary l) { return unload(l, true); }
CUresult fake_cuFuncGetModule(CUmodule* out, CUfunction f) {
  FakeKernel* k = as_any(f);
  if (!out) return CUDA_ERROR_INVALID_VALUE;
  if (!k || k->magic != kFuncMagic) return CUDA_ERROR_INVALID_HANDLE;
  *out = reinterpret_cast<CUmodule>(module_of(k));
  return CUDA_SUCCESS;
}
CUresult fake_cuKernelGetLibrary(CUlibrary* out, CUkernel h) {
  FakeKernel* k = as_any(h);
  if (!out) return CUDA_ERROR_INVALID_VALUE;
  if (!k || k->magic != kKernelMagic) return CUDA_ERROR_INVALID_HANDLE;
  *out = reinterpret_cast<CUlibrary>(module_of(k));
  return CUDA_SUCCESS;
}
CUresult fake_cuLibraryGetModule(CUmodule* out, CUlibrary l) {
  auto* m = reinterpret_cast<FakeModule*>(l);
  if (!out) return CUDA_ERROR_INVALID_VALUE;
  if (!m || m->magic != kModuleMagic || !m->library) return CUDA_ERROR_INVALID_HANDLE;
  *out = reinterpret_cast<CUmodule>(m);  // a library is its own context module in the stand-in
  return CUDA_SUCCESS;
}

// One context on one device, whose compute capability is FAKECUDA_CC ("MAJOR.MINOR", default 9.0 as the H200; 10.0
// with FAKECUDA_AFFECTED_BLACKWELL=1).
CUresult fake_cuCtxGetCurrent(CUcontext* ctx) {
  if (!g_init) return CUDA_ERROR_NOT_INITIALIZED;
  if (!ctx) return CUDA_ERROR_INVALID_VALUE;
  *ctx = reinterpret_cast<CUcontext>(0x5000);
  return CUDA_SUCCESS;
}
CUresult fake_cuCtxGetDevice(CUdevice* dev) {
  if (!g_init) return CUDA_ERROR_NOT_INITIALIZED;
  if (!dev) return CUDA_ERROR_INVALID_VALUE;
  *dev = 0;
  return CUDA_SUCCESS;
}
CUresult fake_cuDeviceGetAttribute(int* value, CUdevice_attribute attr, CUdevice dev) {
  if (!g_init) return CUDA_ERROR_NOT_INITIALIZED;
  if (!value) return CUDA_ERROR_INVALID_VALUE;
  if (dev != 0) return CUDA_ERROR_INVALID_DEVICE;
  int major = affected_blackwell() ? 10 : 9, minor = 0;
  if (const char* cc = std::getenv("FAKECUDA_CC")) std::sscanf(cc, "%d.%d", &major, &minor);
  if (attr == CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR) *value = major;
  else if (attr == CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR) *value = minor;
  else return CUDA_ERROR_NOT_SUPPORTED;
  return CUDA_SUCCESS;
}

CUresult fake_cuKernelGetFunction(CUfunction* out, CUkernel h) {
  FakeKernel* k = as_any(h);
  if (!out) return CUDA_ERROR_INVALID_VALUE;
  if (!k || k->magic != kKernelMagic) return CUDA_ERROR_INVALID_HANDLE;
  *out = reinterpret_cast<CUfunction>(k->twin);
  return CUDA_SUCCESS;
}

// CUDA graph kernel nodes: recorded as "launches via" the entry point (a node that reaches the driver).
namespace {
CUgraphNode_st* const kNode = reinterpret_cast<CUgraphNode_st*>(0x1000);
template <typename P>
CUresult node(const char* via, const P* p) {
  if (!g_init) return CUDA_ERROR_NOT_INITIALIZED;
  if (!p) return CUDA_ERROR_INVALID_VALUE;
  CUfunction f = p->func;
  if constexpr (sizeof(P) > sizeof(CUDA_KERNEL_NODE_PARAMS_v1))
    if (!f) f = reinterpret_cast<CUfunction>(p->kern);
  if (!as_any(f)) return CUDA_ERROR_INVALID_HANDLE;
  std::lock_guard<std::mutex> lock(g_mu);
  if (!g_via) g_via = new std::map<std::string, unsigned long>;
  ++(*g_via)[via];
  return CUDA_SUCCESS;
}
CUresult generic(const char* via, const CUgraphNodeParams* p) {
  if (!p || p->type != CU_GRAPH_NODE_TYPE_KERNEL) return CUDA_ERROR_INVALID_VALUE;
  return node(via, &p->kernel);
}
}  // namespace
CUresult fake_cuGraphAddKernelNode(CUgraphNode* n, CUgraph, const CUgraphNode*, size_t,
                                   const CUDA_KERNEL_NODE_PARAMS_v1* p) {
  if (n) *n = kNode;
  return node("cuGraphAddKernelNode", p);
}
CUresult fake_cuGraphAddKernelNode_v2(CUgraphNode* n, CUgraph, const CUgraphNode*, size_t,
                                      const CUDA_KERNEL_NODE_PARAMS_v2* p) {
  if (n) *n = kNode;
  return node("cuGraphAddKernelNode_v2", p);
}
CUresult fake_cuGraphKernelNodeSetParams(CUgraphNode, const CUDA_KERNEL_NODE_PARAMS_v1* p) {
  return node("cuGraphKernelNodeSetParams", p);
}
CUresult fake_cuGraphKernelNodeSetParams_v2(CUgraphNode, const CUDA_KERNEL_NODE_PARAMS_v2* p) {
  return node("cuGraphKernelNodeSetParams_v2", p);
}
CUresult fake_cuGraphExecKernelNodeSetParams(CUgraphExec, CUgraphNode, const CUDA_KERNEL_NODE_PARAMS_v1* p) {
  return node("cuGraphExecKernelNodeSetParams", p);
}
CUresult fake_cuGraphExecKernelNodeSetParams_v2(CUgraphExec, CUgraphNode, const CUDA_KERNEL_NODE_PARAMS_v2* p) {
  return node("cuGraphExecKernelNodeSetParams_v2", p);
}
CUresult fake_cuGraphAddNode(CUgraphNode* n, CUgraph, const CUgraphNode*, size_t, CUgraphNodeParams* p) {
  if (n) *n = kNode;
  return generic("cuGraphAddNode", p);
}
CUresult fake_cuGraphAddNode_v2(CUgraphNode* n, CUgraph, const CUgraphNode*, const CUgraphEdgeData*, size_t,
                                CUgraphNodeParams* p) {
  if (n) *n = kNode;
  return generic("cuGraphAddNode_v2", p);
}
CUresult fake_cuGraphNodeSetParams(CUgraphNode, CUgraphNodeParams* p) { return generic("cuGraphNodeSetParams", p); }
CUresult fake_cuGraphExecNodeSetParams(CUgraphExec, CUgraphNode, CUgraphNodeParams* p) {
  return generic("cuGraphExecNodeSetParams", p);
}

// Memory. A "device" allocation is host memory the stand-in hands out (cuMemAlloc) or a test declares
// (fakecuda_register_memory); kernels "run" on the host, so a device pointer is also a host pointer. cuMemFree
// poisons a block (0xdd) before it is reused: what tmaguard reads must have been copied while the block was live. A
// freed block's address is handed out again by the next allocation of its size or smaller.
namespace {
struct Block {
  unsigned long long start, end;
  unsigned type;  // CU_MEMORYTYPE_DEVICE or CU_MEMORYTYPE_HOST
  bool backed;    // real memory behind it (cuMemAlloc, cuMemHostAlloc); a declared range reads as zeros
};
std::vector<Block>* g_memory = nullptr;
std::vector<std::pair<void*, std::size_t>>* g_freed = nullptr;  // freed device blocks, reused for the same size

// Caller holds g_mu. The innermost block holding p: a declared range is fiction laid over the address space, and the
// process's real memory (pinned host memory tmaguard allocates, say) may be mapped inside it; there the real block
// answers, as the real driver would.
const Block* block_of(unsigned long long p) {
  const Block* found = nullptr;
  if (g_memory)
    for (const Block& b : *g_memory)
      if (p >= b.start && p < b.end && (!found || b.end - b.start < found->end - found->start)) found = &b;
  return found;
}
void add_block(unsigned long long addr, unsigned long long size, unsigned type, bool backed = true) {
  if (!g_memory) g_memory = new std::vector<Block>;
  g_memory->push_back({addr, addr + size, type, backed});
}
}  // namespace

extern "C" __attribute__((visibility("default"))) void fakecuda_register_memory(unsigned long long addr,
                                                                                unsigned long long size) {
  std::lock_guard<std::mutex> lock(g_mu);
  add_block(addr, size, CU_MEMORYTYPE_DEVICE, false);
}
extern "C" __attribute__((visibility("default"))) void fakecuda_register_host_memory(unsigned long long addr,
                                                                                     unsigned long long size) {
  std::lock_guard<std::mutex> lock(g_mu);
  add_block(addr, size, CU_MEMORYTYPE_HOST);
}
extern "C" __attribute__((visibility("default"))) void fakecuda_set_kernel_effect(void* handle,
                                                                                  void (*effect)(void**, void*),
                                                                                  void* user) {
  if (FakeKernel* k = as_any(handle)) {
    k->effect = effect;
    k->effect_user = user;
    if (k->twin) {
      k->twin->effect = effect;
      k->twin->effect_user = user;
    }
  }
}

CUresult fake_cuMemAlloc_v2(CUdeviceptr* out, size_t size) {
  if (!g_init) return CUDA_ERROR_NOT_INITIALIZED;
  if (!out || size == 0) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> lock(g_mu);
  void* p = nullptr;
  if (g_freed)  // a freed block is reused for an allocation of its size or smaller (its address handed out again)
    for (auto it = g_freed->begin(); it != g_freed->end(); ++it)
      if (it->second >= size) {
        p = it->first;
        g_freed->erase(it);
        break;
      }
  if (!p && posix_memalign(&p, 256, size) != 0) return CUDA_ERROR_OUT_OF_MEMORY;
  std::memset(p, 0, size);
  add_block(reinterpret_cast<unsigned long long>(p), size, CU_MEMORYTYPE_DEVICE);
  *out = reinterpret_cast<CUdeviceptr>(p);
  return CUDA_SUCCESS;
}
CUresult fake_cuMemFree_v2(CUdeviceptr p) {
  if (!g_init) return CUDA_ERROR_NOT_INITIALIZED;
  std::lock_guard<std::mutex> lock(g_mu);
  if (g_memory)
    for (auto it = g_memory->begin(); it != g_memory->end(); ++it)
      if (it->start == p && it->type == CU_MEMORYTYPE_DEVICE) {
        std::memset(reinterpret_cast<void*>(p), 0xdd, it->end - it->start);
        if (!g_freed) g_freed = new std::vector<std::pair<void*, std::size_t>>;
        g_freed->emplace_back(reinterpret_cast<void*>(p), it->end - it->start);
        g_memory->erase(it);
        return CUDA_SUCCESS;
      }
  return CUDA_ERROR_INVALID_VALUE;
}
// Stream order is program order here: an async free frees at once.
CUresult fake_cuMemFreeAsync(CUdeviceptr p, CUstream) { return fake_cuMemFree_v2(p); }
CUresult fake_cuMemFreeAsync_ptsz(CUdeviceptr p, CUstream) { return fake_cuMemFree_v2(p); }
// Unmapping a range a test declared (fakecuda_register_memory: PyTorch's expandable segments map pieces this way)
// forgets the declared blocks inside it.
CUresult fake_cuMemUnmap(CUdeviceptr p, size_t size) {
  if (!g_init) return CUDA_ERROR_NOT_INITIALIZED;
  std::lock_guard<std::mutex> lock(g_mu);
  if (!g_memory) return CUDA_ERROR_INVALID_VALUE;
  const auto before = g_memory->size();
  g_memory->erase(std::remove_if(g_memory->begin(), g_memory->end(),
                                 [&](const Block& b) { return !b.backed && b.start >= p && b.end <= p + size; }),
                  g_memory->end());
  return g_memory->size() < before ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}
CUresult fake_cuMemHostAlloc(void** out, size_t size, unsigned int) {
  if (!g_init) return CUDA_ERROR_NOT_INITIALIZED;
  if (!out || size == 0) return CUDA_ERROR_INVALID_VALUE;
  if (const char* no = std::getenv("FAKECUDA_NO_PINNED"); no && *no == '1') return CUDA_ERROR_OUT_OF_MEMORY;
  void* p = nullptr;
  if (posix_memalign(&p, 4096, size) != 0) return CUDA_ERROR_OUT_OF_MEMORY;
  std::lock_guard<std::mutex> lock(g_mu);
  add_block(reinterpret_cast<unsigned long long>(p), size, CU_MEMORYTYPE_HOST);
  *out = p;
  return CUDA_SUCCESS;
}
CUresult fake_cuMemFreeHost(void* p) {
  std::lock_guard<std::mutex> lock(g_mu);
  if (g_memory)
    for (auto it = g_memory->begin(); it != g_memory->end(); ++it)
      if (it->start == reinterpret_cast<unsigned long long>(p) && it->type == CU_MEMORYTYPE_HOST) {
        g_memory->erase(it);
        std::free(p);
        return CUDA_SUCCESS;
      }
  return CUDA_ERROR_INVALID_VALUE;
}

// Range queries only, as tmaguard uses them. An address the "driver" never allocated is INVALID_VALUE.
CUresult fake_cuPointerGetAttribute(void* data, CUpointer_attribute attr, CUdeviceptr ptr) {
  if (!g_init) return CUDA_ERROR_NOT_INITIALIZED;
  if (!data) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> lock(g_mu);
  const Block* b = block_of(ptr);
  if (!b) return CUDA_ERROR_INVALID_VALUE;
  if (attr == CU_POINTER_ATTRIBUTE_RANGE_START_ADDR)
    *static_cast<CUdeviceptr*>(data) = b->start;
  else if (attr == CU_POINTER_ATTRIBUTE_RANGE_SIZE)
    *static_cast<size_t*>(data) = b->end - b->start;
  else if (attr == CU_POINTER_ATTRIBUTE_MEMORY_TYPE)
    *static_cast<unsigned*>(data) = b->type;
  else
    return CUDA_ERROR_NOT_SUPPORTED;
  return CUDA_SUCCESS;
}
// As the real one: never an error for an address the driver does not know; its attributes read as zeros.
std::atomic<unsigned long> g_pointer_queries{0};
extern "C" __attribute__((visibility("default"))) unsigned long fakecuda_pointer_queries() {
  return g_pointer_queries.load();
}
CUresult fake_cuPointerGetAttributes(unsigned n, CUpointer_attribute* attrs, void** data, CUdeviceptr ptr) {
  if (!g_init) return CUDA_ERROR_NOT_INITIALIZED;
  ++g_pointer_queries;
  if (!attrs || !data) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> lock(g_mu);
  const Block* b = block_of(ptr);
  for (unsigned i = 0; i < n; ++i) {
    switch (attrs[i]) {
      case CU_POINTER_ATTRIBUTE_MEMORY_TYPE: *static_cast<unsigned*>(data[i]) = b ? b->type : 0; break;
      case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR: *static_cast<CUdeviceptr*>(data[i]) = b ? b->start : 0; break;
      case CU_POINTER_ATTRIBUTE_RANGE_SIZE: *static_cast<size_t*>(data[i]) = b ? b->end - b->start : 0; break;
      default: return CUDA_ERROR_NOT_SUPPORTED;
    }
  }
  return CUDA_SUCCESS;
}

// Streams, events and copies. Work runs at once (a kernel when launched, a copy when issued), so stream order is
// program order; an event reports NOT_READY to its first FAKECUDA_EVENT_POLLS queries (default 1) so that a caller
// must poll. A stream being captured takes no copies or events (CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, counted:
// fakecuda_capture_violations) and says so to cuStreamIsCapturing.
namespace {
std::vector<CUstream>* g_capturing = nullptr;  // under g_mu
std::atomic<unsigned long> g_capture_violations{0}, g_copies{0};
struct FakeEvent {
  std::atomic<int> polls_left{0};
};
bool capturing_locked(CUstream s) {
  return g_capturing && std::find(g_capturing->begin(), g_capturing->end(), s) != g_capturing->end();
}
bool capturing(CUstream s) {
  std::lock_guard<std::mutex> lock(g_mu);
  return capturing_locked(s);
}
}  // namespace

extern "C" __attribute__((visibility("default"))) unsigned long fakecuda_capture_violations() {
  return g_capture_violations.load();
}
extern "C" __attribute__((visibility("default"))) unsigned long fakecuda_copies() { return g_copies.load(); }

CUresult fake_cuStreamBeginCapture_v2(CUstream s, CUstreamCaptureMode) {
  if (!g_init) return CUDA_ERROR_NOT_INITIALIZED;
  std::lock_guard<std::mutex> lock(g_mu);
  if (!g_capturing) g_capturing = new std::vector<CUstream>;
  g_capturing->push_back(s);
  return CUDA_SUCCESS;
}
CUresult fake_cuStreamEndCapture(CUstream s, CUgraph* g) {
  std::lock_guard<std::mutex> lock(g_mu);
  if (g) *g = nullptr;
  if (!capturing_locked(s)) return CUDA_ERROR_ILLEGAL_STATE;
  g_capturing->erase(std::find(g_capturing->begin(), g_capturing->end(), s));
  return CUDA_SUCCESS;
}
CUresult fake_cuStreamIsCapturing(CUstream s, CUstreamCaptureStatus* status) {
  if (!g_init) return CUDA_ERROR_NOT_INITIALIZED;
  if (!status) return CUDA_ERROR_INVALID_VALUE;
  *status = capturing(s) ? CU_STREAM_CAPTURE_STATUS_ACTIVE : CU_STREAM_CAPTURE_STATUS_NONE;
  return CUDA_SUCCESS;
}
CUresult fake_cuThreadExchangeStreamCaptureMode(CUstreamCaptureMode* mode) {
  if (!mode) return CUDA_ERROR_INVALID_VALUE;
  static thread_local CUstreamCaptureMode current = CU_STREAM_CAPTURE_MODE_GLOBAL;
  std::swap(current, *mode);
  return CUDA_SUCCESS;
}
CUresult fake_cuCtxSetCurrent(CUcontext ctx) {
  if (!g_init) return CUDA_ERROR_NOT_INITIALIZED;
  return ctx == reinterpret_cast<CUcontext>(0x5000) || ctx == nullptr ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT;
}
CUresult fake_cuMemcpyDtoHAsync_v2(void* dst, CUdeviceptr src, size_t n, CUstream s) {
  if (!g_init) return CUDA_ERROR_NOT_INITIALIZED;
  if (capturing(s)) {
    ++g_capture_violations;
    return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  }
  bool backed;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    const Block* from = block_of(src);
    const Block* to = block_of(reinterpret_cast<unsigned long long>(dst));
    if (!dst || !from || from->type != CU_MEMORYTYPE_DEVICE || src + n > from->end) return CUDA_ERROR_INVALID_VALUE;
    // A pageable destination would make the copy synchronous: only pinned memory (cuMemHostAlloc) is taken here.
    if (!to || to->type != CU_MEMORYTYPE_HOST || reinterpret_cast<unsigned long long>(dst) + n > to->end)
      return CUDA_ERROR_INVALID_VALUE;
    backed = from->backed;
  }
  if (backed)
    std::memcpy(dst, reinterpret_cast<const void*>(src), n);
  else
    std::memset(dst, 0, n);
  ++g_copies;
  return CUDA_SUCCESS;
}
CUresult fake_cuEventCreate(CUevent* e, unsigned int) {
  if (!g_init) return CUDA_ERROR_NOT_INITIALIZED;
  if (!e) return CUDA_ERROR_INVALID_VALUE;
  *e = reinterpret_cast<CUevent>(new FakeEvent);
  return CUDA_SUCCESS;
}
CUresult fake_cuEventRecord(CUevent e, CUstream s) {
  if (!g_init) return CUDA_ERROR_NOT_INITIALIZED;
  if (!e) return CUDA_ERROR_INVALID_HANDLE;
  if (capturing(s)) {
    ++g_capture_violations;
    return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  }
  int polls = 1;
  if (const char* p = std::getenv("FAKECUDA_EVENT_POLLS")) polls = std::atoi(p);
  reinterpret_cast<FakeEvent*>(e)->polls_left.store(polls);
  return CUDA_SUCCESS;
}
CUresult fake_cuEventQuery(CUevent e) {
  if (!g_init) return CUDA_ERROR_NOT_INITIALIZED;
  if (!e) return CUDA_ERROR_INVALID_HANDLE;
  auto* ev = reinterpret_cast<FakeEvent*>(e);
  return ev->polls_left.fetch_sub(1) > 0 ? CUDA_ERROR_NOT_READY : CUDA_SUCCESS;
}
CUresult fake_cuEventDestroy_v2(CUevent e) {
  delete reinterpret_cast<FakeEvent*>(e);
  return CUDA_SUCCESS;
}
