// Scenarios of loopholes (tests/processes/test_loopholes.cpp): clean keys outliving an unload, a forged launch key, dK and dV sharing bytes,
// transposed dKs of another shape, a relative rules file after chdir, a library replaced
// under its call sites, Python loaded after the first finding, and kernel names one digit off.
#include <dlfcn.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "client.h"
#include "fakecuda.h"
#include "tmaguard/tensormap.h"

namespace client {
namespace {

using Bytes = std::vector<uint8_t>;

Bytes bytes_of(const void* p, std::size_t n) {
  return {static_cast<const uint8_t*>(p), static_cast<const uint8_t*>(p) + n};
}

const char* env_or_die(const char* name) {
  const char* v = std::getenv(name);
  if (!v || !*v) die(name);
  return v;
}

CUresult unload_module(void* module) {
  return reinterpret_cast<PFN_cuModuleUnload_v2000>(resolve("cuModuleUnload", false, 2000))(
      static_cast<CUmodule>(module));
}

// FA4 SM100 1-CTA maps of these tensors (b, s, h, d): Q K V dO contiguous, dV and dK as given.
struct Fa4Tensors {
  uint64_t b = 2, s = 256, h = 4, d = 128;
  uint64_t base = 0x7f0000000000ULL, step = 0x1000000ULL;
};
std::vector<CUtensorMap> fa4_inputs(const Fa4Tensors& t) {
  return {encode_map(bshd(t.base, t.b, t.s, t.h, t.d)), encode_map(bshd(t.base + t.step, t.b, t.s, t.h, t.d)),
          encode_map(bshd(t.base + 2 * t.step, t.b, t.s, t.h, t.d)),
          encode_map(bshd(t.base + 3 * t.step, t.b, t.s, t.h, t.d))};
}
Kernel fa4_with(const Tensor& dv, const Tensor& dk, const std::string& name = kFa4Name) {
  std::vector<CUtensorMap> maps = fa4_inputs({});
  maps.push_back(encode_map(dv));
  maps.push_back(encode_map(dk));
  return make_kernel(name, maps);
}
// The index in Kernel::values of the n-th 128-byte parameter (make_kernel interleaves scalars).
std::size_t map_value(const Kernel& k, std::size_t n) {
  for (std::size_t i = 0; i < k.values.size(); ++i)
    if (k.values[i].size() == sizeof(CUtensorMap) && n-- == 0) return i;
  die("no such map");
}

// 1. A kernel no rule names is launched with a transposed dK's maps (clean: nothing judges its layout), its module is
// unloaded, and FA4's backward is launched with the same maps: every round's FA4 launch must be judged as FA4's (the
// freed kernel's record is often reallocated at the same address, and its clean keys must not answer for it).
int unload_clean_keys() {
  auto new_module = reinterpret_cast<decltype(&fakecuda_new_module)>(fake_api("fakecuda_new_module"));
  const Fa4Tensors t;
  const Tensor dv = bshd(t.base + 4 * t.step, t.b, t.s, t.h, t.d);
  const Tensor dk = bshd(t.base + 5 * t.step, t.b, t.s, t.h, t.d, /*mn=*/true);
  unsigned long fa4_ran = 0;
  const int rounds = 300;
  for (int round = 0; round < rounds; ++round) {
    void* first = new_module(0);
    const Kernel plain = fa4_with(dv, dk, "plain_kernel_no_rule_names");
    launch(plain);
    if (unload_module(first) != CUDA_SUCCESS) die("unload failed");
    void* second = new_module(0);
    const Kernel fa4 = fa4_with(dv, dk);
    launch(fa4);
    fa4_ran += ran(fa4);
    if (unload_module(second) != CUDA_SUCCESS) die("unload failed");
  }
  std::printf("UNLOAD_KEYS rounds=%d fa4_ran=%lu\n", rounds, fa4_ran);
  return finish(fa4_ran);
}

// The content hash of the tree before round 5: a public sum over 16-byte lanes with constants in the source. The
// sum before its avalanche (lanes 0..lanes-1); the avalanche is a bijection: equal sums, equal hashes.
constexpr uint64_t kOldKeys[16] = {0xbe4ba423396cfeb8ULL, 0x1cad21f72c81017cULL, 0xdb979083e96dd4deULL,
                                   0x1f67b3b7a4a44072ULL, 0x78e5c0cc4ee679cbULL, 0x2172ffcc7dd05a82ULL,
                                   0x8e2443f7744608b8ULL, 0x4c263a81e69035e0ULL, 0xcb00c391bb52283cULL,
                                   0xa32e531b8b65d088ULL, 0x4ef90da297486471ULL, 0xd8acdea946ef1938ULL,
                                   0x3f349ce33f76faa8ULL, 0x1d4f0bc7c7bbdcf9ULL, 0x3159b4cd4be0518aULL,
                                   0x647378d9c97e9fc8ULL};
uint64_t old_lane_sum(const uint8_t* bytes, int lanes) {
  uint64_t acc = 0x9e3779b97f4a7c15ULL;
  for (int i = 0; i < lanes; ++i) {
    uint64_t a, b;
    std::memcpy(&a, bytes + 16 * i, 8);
    std::memcpy(&b, bytes + 16 * i + 8, 8);
    const unsigned __int128 p = static_cast<unsigned __int128>(a ^ kOldKeys[2 * i]) * (b ^ kOldKeys[2 * i + 1]);
    acc += static_cast<uint64_t>(p) ^ static_cast<uint64_t>(p >> 64);
  }
  return acc;
}
uint64_t old_content_hash(const uint8_t* bytes) {
  uint64_t acc = old_lane_sum(bytes, 8);
  acc ^= acc >> 37;
  acc *= 0x165667919e3779f9ULL;
  acc ^= acc >> 32;
  return acc;
}
// Lane 7 (words 28-31, which the TMA unit never reads) of `bad` set so that the old hash of `bad` is the old hash
// of `good`: lane 7's term is (a ^ k14) * (b ^ k15) folded, so a ^ k14 = 1 makes it b ^ k15, any value wanted.
void forge_old(uint8_t* bad, const uint8_t* good) {
  const uint64_t want = old_lane_sum(good, 8) - old_lane_sum(bad, 7);
  const uint64_t a = 1 ^ kOldKeys[14], b = want ^ kOldKeys[15];
  std::memcpy(bad + 112, &a, 8);
  std::memcpy(bad + 120, &b, 8);
  if (old_content_hash(bad) != old_content_hash(good)) die("the old hash was not forged");
}
// The same against content_hash with the published fixed key (NH): lanes 4-7 (words 16-31, none read by the TMA
// unit for a tiled map) set so that the 128-bit sums agree. A shim keyed with kFixedHashKey would take it as clean.
void forge_fixed(uint8_t* bad, const uint8_t* good) {
  const tmaguard::HashKey& k = tmaguard::kFixedHashKey;
  auto sum = [&](const uint8_t* m, int lanes) {
    unsigned __int128 acc = 0;
    for (int i = 0; i < lanes; ++i) {
      uint64_t a, b;
      std::memcpy(&a, m + 16 * i, 8);
      std::memcpy(&b, m + 16 * i + 8, 8);
      acc += static_cast<unsigned __int128>(a + k.k[2 * i]) * (b + k.k[2 * i + 1]);
    }
    return acc;
  };
  const unsigned __int128 want = sum(good, 8) - sum(bad, 4);
  const uint64_t hi = static_cast<uint64_t>(want >> 64), lo = static_cast<uint64_t>(want);
  auto set_lane = [&](int lane, uint64_t x, uint64_t y) {  // the lane's term becomes x * y
    const uint64_t a = x - k.k[2 * lane], b = y - k.k[2 * lane + 1];
    std::memcpy(bad + 16 * lane, &a, 8);
    std::memcpy(bad + 16 * lane + 8, &b, 8);
  };
  const uint64_t top = hi >> 63;                             // 2^127 from two lanes of 2^63 * 2^63 each
  set_lane(4, top ? 1ULL << 63 : 0, 1ULL << 63);
  set_lane(5, top ? 1ULL << 63 : 0, 1ULL << 63);
  set_lane(6, 1ULL << 63, (hi << 1));                        // 2^64 * (hi mod 2^63)
  set_lane(7, 1, lo);
  if (tmaguard::content_hash(bad) != tmaguard::content_hash(good)) die("the fixed-key hash was not forged");
}

// 8. After healthy launches of FA4, the same kernel gets a transposed dK whose ignored words make its hash the
// healthy dK's (under the hash an attacker can compute): it must be judged, not passed by its key.
int forged_key(void (*forge)(uint8_t*, const uint8_t*)) {
  const Kernel good = fa4_kernel(false, false, false, false);
  for (int i = 0; i < 3; ++i) launch(good);
  const Kernel bad_maps = fa4_kernel(false, true, false, false);
  Kernel forged = good;  // the same kernel handle: only dK's bytes differ
  const std::size_t dk = map_value(good, 5);
  forged.values[dk] = bad_maps.values[dk];
  forge(forged.values[dk].data(), good.values[dk].data());
  const unsigned long before = ran(good);
  for (int i = 0; i < 3; ++i) launch(forged);
  const unsigned long forged_ran = ran(good) - before;
  std::printf("FORGED ran=%lu\n", forged_ran);
  return finish(forged_ran);
}
int forged_old_key() { return forged_key(forge_old); }
int forged_fixed_key() { return forged_key(forge_fixed); }

// 5. dK and dV in one buffer, dV over dK at another base, and (healthy) dK/dV interleaved in one packed buffer.
int dkdv_same_buffer() {
  const Fa4Tensors t;
  const Tensor d = bshd(t.base + 5 * t.step, t.b, t.s, t.h, t.d);
  const Kernel k = fa4_with(d, d);
  launch(k);
  return finish(ran(k));
}
int dkdv_overlapping() {
  const Fa4Tensors t;
  const Tensor dk = bshd(t.base + 5 * t.step, t.b, t.s, t.h, t.d);
  const Tensor dv = bshd(t.base + 5 * t.step + 64 * t.h * t.d * 2, t.b, t.s, t.h, t.d);  // 64 rows into dK
  const Kernel k = fa4_with(dv, dk);
  launch(k);
  return finish(ran(k));
}
int dkdv_packed() {
  // torch.empty(b, s, h, 2, d): dK = [..., 0, :], dV = [..., 1, :], strides {1, 2hd, 2d, 2shd} in elements.
  const Fa4Tensors t;
  const uint64_t base = t.base + 5 * t.step, e = 2;
  const Tensor dk{base, {t.d, t.s, t.h, t.b}, {2 * t.h * t.d * e, 2 * t.d * e, 2 * t.s * t.h * t.d * e}};
  Tensor dv = dk;
  dv.addr = base + t.d * e;
  const Kernel k = fa4_with(dv, dk);
  launch(k);
  return finish(ran(k));
}

// 6. Transposed dKs whose dims are not K's in another order: a padded sequence, and batch folded into heads.
int dk_transposed_padded() {
  const Fa4Tensors t;
  const uint64_t e = 2, sp = 1088;  // dK (b, h, d, s_padded) contiguous: dim 0 is the sequence
  const Tensor dk{t.base + 5 * t.step, {sp, t.d, t.h, t.b}, {sp * e, sp * t.d * e, sp * t.d * t.h * e}};
  const Kernel k = fa4_with(bshd(t.base + 4 * t.step, t.b, t.s, t.h, t.d), dk);
  launch(k);
  return finish(ran(k));
}
int dk_transposed_folded() {
  const Fa4Tensors t;
  const uint64_t e = 2;  // rank 3: {s, d, h * b}, sequence contiguous
  const Tensor dk{t.base + 5 * t.step, {t.s, t.d, t.h * t.b}, {t.s * e, t.s * t.d * e}};
  const Kernel k = fa4_with(bshd(t.base + 4 * t.step, t.b, t.s, t.h, t.d), dk);
  launch(k);
  return finish(ran(k));
}
int dk_padded_k_major() {  // healthy layout, padded sequence: K-major, only its shape differs from K's
  const Fa4Tensors t;
  const uint64_t e = 2, sp = 272;
  const Tensor dk{t.base + 5 * t.step, {t.d, sp, t.h, t.b}, {t.h * t.d * e, t.d * e, sp * t.h * t.d * e}};
  const Kernel k = fa4_with(bshd(t.base + 4 * t.step, t.b, t.s, t.h, t.d), dk);
  launch(k);
  return finish(ran(k));
}

// 3. The job changes its directory before its first CUDA call (as Hydra does), then launches a transposed dK.
int chdir_then_launch() {
  if (chdir(env_or_die("TG_CHDIR_TO")) != 0) die("chdir");
  const Kernel bad = fa4_kernel(false, true, false, false);
  launch(bad);
  return finish(ran(bad));
}

// 2. A library with a function only its file's .symtab names launches (a finding names the call site), is unloaded,
// rewritten in place with a shorter build (same inode), loaded again and launches; then, while loaded, replaced by
// rename with the longer build, and launches again. Nothing may fault, and no frame may be named from a file that is
// not the loaded object.
int null_map_launch(const char* name) {
  const CUtensorMap m = null_address_map();
  const int32_t n = 1;
  const Kernel k = make_kernel_raw(name, {bytes_of(&n, 4), bytes_of(&m, sizeof m)});
  launch(k);
  return static_cast<int>(ran(k));
}
int launch_replaced_1() { return null_map_launch("replaced_library_kernel_1"); }
int launch_replaced_2() { return null_map_launch("replaced_library_kernel_2"); }
int launch_replaced_3() { return null_map_launch("replaced_library_kernel_3"); }

void copy_file(const char* from, const char* to, bool in_place) {
  FILE* in = std::fopen(from, "rb");
  if (!in) die(from);
  Bytes bytes;
  for (int c; (c = std::fgetc(in)) != EOF;) bytes.push_back(static_cast<uint8_t>(c));
  std::fclose(in);
  const std::string target = in_place ? to : std::string(to) + ".new";
  const int fd = open(target.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0755);  // in place: the same inode, as cp does
  if (fd < 0 || write(fd, bytes.data(), bytes.size()) != static_cast<ssize_t>(bytes.size())) die("write");
  close(fd);
  if (!in_place && std::rename(target.c_str(), to) != 0) die("rename");
}

int replaced_library() {
  const char* big = env_or_die("TG_HIDDEN_BIG");
  const char* small = env_or_die("TG_HIDDEN_SMALL");
  const char* target = env_or_die("TG_HIDDEN_TARGET");
  using Run = int (*)(int (*)());
  auto load = [&]() -> void* {
    void* h = dlopen(target, RTLD_NOW | RTLD_LOCAL);
    if (!h) die(dlerror());
    return h;
  };
  copy_file(big, target, false);
  void* h = load();
  reinterpret_cast<Run>(dlsym(h, "tg_hidden_run"))(launch_replaced_1);
  dlclose(h);
  copy_file(small, target, true);  // rewritten in place, shorter
  h = load();
  reinterpret_cast<Run>(dlsym(h, "tg_hidden_run"))(launch_replaced_2);
  copy_file(big, target, false);  // replaced by rename while loaded
  reinterpret_cast<Run>(dlsym(h, "tg_hidden_run"))(launch_replaced_3);
  dlclose(h);
  std::printf("REPLACED done\n");
  return finish(0);
}

// 10. A C++ host that embeds Python later: a finding before libpython is loaded, then Python code that launches.
int embedded_launch() { return null_map_launch("embedded_python_kernel"); }
int python_loaded_later() {
  null_map_launch("before_python_kernel");
  void* py = dlopen(env_or_die("TG_LIBPYTHON"), RTLD_NOW | RTLD_GLOBAL);
  if (!py) die(dlerror());
  auto init = reinterpret_cast<void (*)()>(dlsym(py, "Py_Initialize"));
  auto run = reinterpret_cast<int (*)(const char*)>(dlsym(py, "PyRun_SimpleString"));
  if (!init || !run) die("libpython symbols");
  init();
  char code[512];
  std::snprintf(code, sizeof code,
                "import ctypes\n"
                "def launch_from_embedded_python():\n"
                "    return ctypes.CFUNCTYPE(ctypes.c_int)(%llu)()\n"
                "launch_from_embedded_python()\n",
                static_cast<unsigned long long>(reinterpret_cast<uintptr_t>(&embedded_launch)));
  if (run(code) != 0) die("PyRun_SimpleString");
  return finish(0);
}

// 12. A kernel of a class one digit off a known one (FlashAttentionBackwardSm900): no SM90 rule may judge it.
int sm900_kernel() {
  const Fa4Tensors t;
  std::vector<CUtensorMap> maps = fa4_inputs(t);
  maps.push_back(encode_map(bshd(t.base + 5 * t.step, t.b, t.s, t.h, t.d, true)));  // dK transposed (SM90: dK first)
  maps.push_back(encode_map(bshd(t.base + 4 * t.step, t.b, t.s, t.h, t.d)));
  const Kernel k = make_kernel("kernel_cutlass_kernel_flash_attncuteflash_bwd_sm90FlashAttentionBackwardSm900_object_at_",
                               maps);
  launch(k);
  return finish(ran(k));
}

}  // namespace

const std::vector<Scenario>& loophole_scenarios() {
  static const std::vector<Scenario> v = {
      {"unload_clean_keys", unload_clean_keys},
      {"forged_old_key", forged_old_key},
      {"forged_fixed_key", forged_fixed_key},
      {"dkdv_same_buffer", dkdv_same_buffer},
      {"dkdv_overlapping", dkdv_overlapping},
      {"dkdv_packed", dkdv_packed},
      {"dk_transposed_padded", dk_transposed_padded},
      {"dk_transposed_folded", dk_transposed_folded},
      {"dk_padded_k_major", dk_padded_k_major},
      {"chdir_then_launch", chdir_then_launch},
      {"replaced_library", replaced_library},
      {"python_loaded_later", python_loaded_later},
      {"sm900_kernel", sm900_kernel},
  };
  return v;
}

}  // namespace client
