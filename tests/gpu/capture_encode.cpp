// Captures golden vectors from the real CUDA driver: encode arguments -> CUresult + 128 descriptor bytes.
// Build and run on a machine with a GPU:  g++ -O1 -I$CUDA/include capture_encode.cpp -lcuda -o cap && ./cap N SEED
// The output (one case per line) is committed as tests/data/encode_golden_<gpu>.txt and pins both the
// stand-in driver's encoder and tmaguard's decoder. Arguments are pseudo-random from SEED, mostly valid, with
// about a third mutated into one invalid field so that the driver's rejections are pinned too.
#include <cuda.h>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {
uint64_t g_state = 1;
uint64_t next() {  // splitmix64
  uint64_t z = (g_state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}
uint64_t rnd(uint64_t lo, uint64_t hi) { return lo + next() % (hi - lo + 1); }  // inclusive
bool chance(int pct) { return static_cast<int>(next() % 100) < pct; }

const int kEsize[13] = {1, 2, 4, 4, 8, 8, 2, 4, 8, 2, 4, 4, 4};

std::string join(const uint64_t* v, int n) {
  std::string s;
  for (int i = 0; i < n; ++i) s += (i ? "," : "") + std::to_string(v[i]);
  return s.empty() ? "-" : s;
}
std::string joini(const int* v, int n) {
  std::string s;
  for (int i = 0; i < n; ++i) s += (i ? "," : "") + std::to_string(v[i]);
  return s.empty() ? "-" : s;
}
std::string hex(const CUtensorMap& m) {
  const unsigned char* p = reinterpret_cast<const unsigned char*>(&m);
  std::string s;
  char b[3];
  for (int i = 0; i < 128; ++i) {
    snprintf(b, sizeof b, "%02x", p[i]);
    s += b;
  }
  return s;
}

struct Args {
  int kind = 0;  // 0 tiled, 1 im2col, 2 im2col wide
  uint32_t dtype = 9, rank = 2;
  uint64_t addr = 0x7f7152000000ULL;
  uint64_t dims[5] = {1, 1, 1, 1, 1};
  uint64_t strides[5] = {0, 0, 0, 0, 0};
  uint64_t box[5] = {1, 1, 1, 1, 1};
  uint64_t es[5] = {1, 1, 1, 1, 1};
  int lower[3] = {0, 0, 0}, upper[3] = {0, 0, 0};
  int lowerW = 0, upperW = 0;
  uint32_t cpp = 16, ppc = 16, mode = 0;
  uint32_t il = 0, sw = 0, l2 = 0, oob = 0;
  std::string mutation = "none";
};

void make_geometry(Args& a) {
  const int es = a.dtype < 13 ? kEsize[a.dtype] : 2;
  const uint64_t align = a.il == 2 ? 32 : 16;
  for (uint32_t i = 0; i < a.rank; ++i) {
    const int shape = static_cast<int>(rnd(0, 9));
    a.dims[i] = shape < 3 ? rnd(1, 16) : shape < 8 ? (1ULL << rnd(3, 12)) : rnd(1, 100000);
  }
  uint64_t s = (a.dims[0] * es + align - 1) / align * align;
  if (chance(20)) s += align * rnd(1, 4);
  for (uint32_t i = 1; i < a.rank; ++i) {
    a.strides[i - 1] = s;
    s = s * a.dims[i];
    if (chance(15)) s += align * rnd(1, 8);
    if (s >= (1ULL << 39)) {
      a.dims[i] = 1;
      s = a.strides[i - 1];
    }
  }
  for (uint32_t i = 0; i < a.rank; ++i) a.es[i] = chance(80) ? 1 : rnd(1, 8);
}

void make_tiled(Args& a) {
  a.kind = 0;
  a.rank = static_cast<uint32_t>(rnd(1, 5));
  a.dtype = static_cast<uint32_t>(rnd(0, 12));
  a.il = (a.rank >= 3 && chance(12)) ? static_cast<uint32_t>(rnd(1, 2)) : 0;
  a.sw = static_cast<uint32_t>(rnd(0, 3));
  a.l2 = static_cast<uint32_t>(rnd(0, 3));
  const bool is_float = a.dtype >= 6;
  a.oob = (is_float && chance(25)) ? 1 : 0;
  a.addr = 0x7f7100000000ULL + rnd(0, 0xffffff) * 256;
  make_geometry(a);
  const int es = kEsize[a.dtype];
  const int unit = 16 / es;  // elements per 16 bytes
  uint64_t max0_bytes = 256 * static_cast<uint64_t>(es);
  if (a.il == 0 && a.sw) max0_bytes = 16ULL << a.sw;
  if (a.il) max0_bytes = a.il == 1 ? 16 : 32;
  uint64_t max_k = max0_bytes / 16;
  if (max_k * unit > 256) max_k = 256 / unit;
  a.box[0] = unit * rnd(1, max_k ? max_k : 1);
  for (uint32_t i = 1; i < a.rank; ++i) a.box[i] = chance(30) ? rnd(1, 8) : rnd(1, 256);
  // keep the tile within the shared-memory limit (elemsize x prod(floor(box/es)) <= 233472)
  for (;;) {
    uint64_t t = es;
    for (uint32_t i = 0; i < a.rank; ++i) t *= a.box[i] / a.es[i] ? a.box[i] / a.es[i] : 0;
    if (t <= 200000) break;
    uint32_t big = 1;
    for (uint32_t i = 1; i < a.rank; ++i)
      if (a.box[i] > a.box[big]) big = i;
    if (a.rank == 1 || a.box[big] == 1) break;
    a.box[big] /= 2;
  }
}

void make_im2col(Args& a, bool wide) {
  a.kind = wide ? 2 : 1;
  a.rank = static_cast<uint32_t>(rnd(3, 5));
  a.dtype = static_cast<uint32_t>(rnd(0, 12));
  a.il = chance(10) ? static_cast<uint32_t>(rnd(1, 2)) : 0;
  a.sw = static_cast<uint32_t>(rnd(0, 3));
  if (wide && a.sw == 0) a.sw = 3;
  a.l2 = static_cast<uint32_t>(rnd(0, 3));
  a.oob = (a.dtype >= 6 && chance(25)) ? 1 : 0;
  a.addr = 0x7f7100000000ULL + rnd(0, 0xffffff) * 256;
  make_geometry(a);
  const int es = kEsize[a.dtype];
  const int unit = 16 / es;
  uint64_t max0 = a.sw && a.il == 0 ? (16ULL << a.sw) / 16 : 256 * es / 16;
  if (max0 * unit > 256) max0 = 256 / unit;
  a.cpp = static_cast<uint32_t>(unit * rnd(1, max0 ? max0 : 1));
  a.ppc = static_cast<uint32_t>(chance(50) ? rnd(1, 1024) : (1u << rnd(0, 10)));
  while (static_cast<uint64_t>(a.cpp) * a.ppc * es > 200000) a.ppc /= 2;
  if (a.ppc == 0) a.ppc = 1;
  const int sp = static_cast<int>(a.rank) - 2;
  const int lim = a.rank == 3 ? 32768 : a.rank == 4 ? 128 : 16;
  for (int i = 0; i < sp; ++i) {
    a.lower[i] = static_cast<int>(rnd(0, 2 * lim - 1)) - lim;
    a.upper[i] = static_cast<int>(rnd(0, 2 * lim - 1)) - lim;
    if (chance(60)) {
      a.lower[i] = -static_cast<int>(rnd(0, 3));
      a.upper[i] = static_cast<int>(rnd(0, 3)) - 3;
    }
  }
  a.lowerW = static_cast<int>(rnd(0, 255)) - 128;
  a.upperW = static_cast<int>(rnd(0, 255)) - 128;
  if (chance(60)) {
    a.lowerW = -static_cast<int>(rnd(0, 3));
    a.upperW = static_cast<int>(rnd(0, 3)) - 3;
  }
  a.mode = static_cast<uint32_t>(rnd(0, 1));
}

void mutate(Args& a) {
  const int which = static_cast<int>(rnd(0, 27));
  const uint32_t r = a.rank;
  const uint32_t d = static_cast<uint32_t>(rnd(0, r - 1));
  switch (which) {
    case 0:
      a.addr += 8;
      a.mutation = "addr+8";
      break;
    case 1:
      a.addr += 16;
      a.mutation = "addr+16";
      break;
    case 2:
      if (r > 1) {
        a.strides[rnd(0, r - 2)] += 8;
        a.mutation = "stride+8";
      }
      break;
    case 3:
      if (r > 1) {
        a.strides[rnd(0, r - 2)] = 1ULL << 40;
        a.mutation = "stride=2^40";
      }
      break;
    case 4:
      a.dims[d] = 0;
      a.mutation = "dim=0";
      break;
    case 5:
      a.dims[d] = (1ULL << 32) + 1;
      a.mutation = "dim=2^32+1";
      break;
    case 6:
      a.dims[d] = 1ULL << 32;
      a.mutation = "dim=2^32";
      break;
    case 7:
      a.box[d] = 0;
      a.cpp = 0;
      a.mutation = "box=0";
      break;
    case 8:
      a.box[d] = 257;
      a.cpp = 257;
      a.mutation = "box=257";
      break;
    case 9:
      a.box[0] += 1;
      a.cpp += 1;
      a.mutation = "box0+1";
      break;
    case 10:
      a.box[0] *= 2;
      a.cpp *= 2;
      a.mutation = "box0*2";
      break;
    case 11:
      a.es[d] = 0;
      a.mutation = "es=0";
      break;
    case 12:
      a.es[d] = 9;
      a.mutation = "es=9";
      break;
    case 13:
      a.rank = chance(50) ? 0 : 6;
      a.mutation = "rank";
      break;
    case 14:
      a.dtype = static_cast<uint32_t>(rnd(13, 16));
      a.mutation = "dtype";
      break;
    case 15:
      a.sw = static_cast<uint32_t>(rnd(4, 7));
      a.mutation = "swizzle";
      break;
    case 16:
      a.l2 = 4;
      a.mutation = "l2";
      break;
    case 17:
      a.oob = chance(50) ? 2 : 1;
      a.mutation = "oob";
      break;
    case 18:
      a.il = static_cast<uint32_t>(rnd(1, 3));
      a.mutation = "interleave";
      break;
    case 19:
      a.addr = 0;
      a.mutation = "addr=0";
      break;
    case 20:
      for (uint32_t i = 1; i < r; ++i) a.box[i] = 256;
      a.ppc = 1024;
      a.mutation = "bigtile";
      break;
    case 21:
      a.ppc = chance(50) ? 0 : 1025;
      a.mutation = "ppc";
      break;
    case 22:
      a.lower[0] = a.rank == 3 ? 32768 : a.rank == 4 ? 128 : 16;
      a.lowerW = 1000;
      a.mutation = "corner";
      break;
    case 23:
      a.upper[0] = a.rank == 3 ? -32769 : a.rank == 4 ? -129 : -17;
      a.upperW = -1000;
      a.mutation = "corner2";
      break;
    case 24:
      a.mode = 2;
      a.mutation = "mode";
      break;
    case 25:
      if (r > 2) {
        a.strides[r - 2] = a.strides[0] / 2 / 16 * 16;
        a.mutation = "stride_nonmono";
      }
      break;
    case 26:
      if (r > 1) {
        a.strides[0] = 0;
        a.mutation = "stride0=0";
      }
      break;
    default:
      a.sw = 0;
      a.mutation = "sw0";
      break;
  }
}

void run_case(const Args& a) {
  CUtensorMap m;
  memset(&m, 0, sizeof m);
  CUresult rc;
  const cuuint32_t box32[5] = {(cuuint32_t)a.box[0], (cuuint32_t)a.box[1], (cuuint32_t)a.box[2], (cuuint32_t)a.box[3],
                               (cuuint32_t)a.box[4]};
  const cuuint32_t es32[5] = {(cuuint32_t)a.es[0], (cuuint32_t)a.es[1], (cuuint32_t)a.es[2], (cuuint32_t)a.es[3],
                              (cuuint32_t)a.es[4]};
  void* addr = reinterpret_cast<void*>(a.addr);
  const uint32_t r = a.rank > 5 ? 5 : a.rank;
  const int sp = a.rank >= 3 && a.rank <= 5 ? static_cast<int>(a.rank) - 2 : 0;
  if (a.kind == 0) {
    rc = cuTensorMapEncodeTiled(&m, (CUtensorMapDataType)a.dtype, a.rank, addr, a.dims, a.strides, box32, es32,
                                (CUtensorMapInterleave)a.il, (CUtensorMapSwizzle)a.sw, (CUtensorMapL2promotion)a.l2,
                                (CUtensorMapFloatOOBfill)a.oob);
    printf(
        "tiled rc=%d dtype=%u rank=%u addr=0x%llx dims=%s strides=%s box=%s es=%s il=%u sw=%u l2=%u oob=%u mut=%s "
        "map=%s\n",
        (int)rc, a.dtype, a.rank, (unsigned long long)a.addr, join(a.dims, r).c_str(),
        join(a.strides, r ? r - 1 : 0).c_str(), join(a.box, r).c_str(), join(a.es, r).c_str(), a.il, a.sw, a.l2, a.oob,
        a.mutation.c_str(), hex(m).c_str());
  } else if (a.kind == 1) {
    rc = cuTensorMapEncodeIm2col(&m, (CUtensorMapDataType)a.dtype, a.rank, addr, a.dims, a.strides, a.lower, a.upper,
                                 a.cpp, a.ppc, es32, (CUtensorMapInterleave)a.il, (CUtensorMapSwizzle)a.sw,
                                 (CUtensorMapL2promotion)a.l2, (CUtensorMapFloatOOBfill)a.oob);
    printf(
        "im2col rc=%d dtype=%u rank=%u addr=0x%llx dims=%s strides=%s lower=%s upper=%s cpp=%u ppc=%u es=%s il=%u "
        "sw=%u l2=%u oob=%u mut=%s map=%s\n",
        (int)rc, a.dtype, a.rank, (unsigned long long)a.addr, join(a.dims, r).c_str(),
        join(a.strides, r ? r - 1 : 0).c_str(), joini(a.lower, sp).c_str(), joini(a.upper, sp).c_str(), a.cpp, a.ppc,
        join(a.es, r).c_str(), a.il, a.sw, a.l2, a.oob, a.mutation.c_str(), hex(m).c_str());
  } else {
    rc = cuTensorMapEncodeIm2colWide(&m, (CUtensorMapDataType)a.dtype, a.rank, addr, a.dims, a.strides, a.lowerW,
                                     a.upperW, a.cpp, a.ppc, es32, (CUtensorMapInterleave)a.il,
                                     (CUtensorMapIm2ColWideMode)a.mode, (CUtensorMapSwizzle)a.sw,
                                     (CUtensorMapL2promotion)a.l2, (CUtensorMapFloatOOBfill)a.oob);
    printf(
        "wide rc=%d dtype=%u rank=%u addr=0x%llx dims=%s strides=%s lowerw=%d upperw=%d cpp=%u ppc=%u es=%s il=%u "
        "mode=%u sw=%u l2=%u oob=%u mut=%s map=%s\n",
        (int)rc, a.dtype, a.rank, (unsigned long long)a.addr, join(a.dims, r).c_str(),
        join(a.strides, r ? r - 1 : 0).c_str(), a.lowerW, a.upperW, a.cpp, a.ppc, join(a.es, r).c_str(), a.il, a.mode,
        a.sw, a.l2, a.oob, a.mutation.c_str(), hex(m).c_str());
  }
}
}  // namespace

int main(int argc, char** argv) {
  const int n = argc > 1 ? atoi(argv[1]) : 1000;
  g_state = argc > 2 ? strtoull(argv[2], nullptr, 0) : 1;
  if (cuInit(0) != CUDA_SUCCESS) {
    fprintf(stderr, "cuInit failed\n");
    return 1;
  }
  CUdevice dev;
  CUcontext ctx;
  int drv = 0, maj = 0, min = 0;
  char name[256] = {0};
  cuDeviceGet(&dev, 0);
  cuDevicePrimaryCtxRetain(&ctx, dev);
  cuCtxSetCurrent(ctx);
  cuDriverGetVersion(&drv);
  cuDeviceGetName(name, sizeof name, dev);
  cuDeviceGetAttribute(&maj, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev);
  cuDeviceGetAttribute(&min, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev);
  printf("# device=%s cc=%d.%d driver_api=%d cases=%d seed=%s\n", name, maj, min, drv, n, argc > 2 ? argv[2] : "1");
  for (int i = 0; i < n; ++i) {
    Args a;
    const int k = static_cast<int>(rnd(0, 9));
    if (k < 7)
      make_tiled(a);
    else
      make_im2col(a, k == 9);
    if (chance(35)) mutate(a);
    run_case(a);
  }
  // ReplaceAddress: same map, each new address
  Args base;
  make_tiled(base);
  base.sw = 0;
  base.il = 0;
  const uint64_t adds[] = {0x7f7152000010ULL, 0x7f7152000008ULL, 0, 0x7f7152000020ULL, 0x10ULL};
  for (uint64_t na : adds) {
    CUtensorMap m;
    memset(&m, 0, sizeof m);
    const cuuint64_t dims[2] = {128, 64};
    const cuuint64_t st[1] = {256};
    const cuuint32_t box[2] = {64, 32}, es[2] = {1, 1};
    CUresult rc0 = cuTensorMapEncodeTiled(&m, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, (void*)0x7f7152000000ULL, dims, st,
                                          box, es, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                                          CU_TENSOR_MAP_L2_PROMOTION_L2_128B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    CUresult rc = cuTensorMapReplaceAddress(&m, (void*)na);
    printf("replace rc0=%d rc=%d addr=0x%llx map=%s\n", (int)rc0, (int)rc, (unsigned long long)na, hex(m).c_str());
  }
  return 0;
}
