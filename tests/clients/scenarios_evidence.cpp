// Scenarios: what bytes must prove before they count as a tensor map, by where they sit (launch.h: MapEvidence).
//
//   float_params        five kernels no rule names, each with a 128-byte parameter holding a float[32] of zeros and
//                       one stray value where word 13 goes (0.5f, -0.5f, an int 0x0F000000, a half 1.75 or 28.0),
//                       each launched twice: never a map, never a finding (abort mode must not abort)
//   fa4_ignored_words   FA4's 1-CTA backward with TG_VARIANT applied to every map (words the TMA unit does not read:
//                       w15 | w17 | w19 | w19_31 | w31 | w2_top | w16 | w18 | w16_w18); TG_FA4_BAD=dk transposes dK;
//                       two launches
//   struct_false_block  cutlass_params' Params struct (scenarios_structs.cpp) with a block at +640 that once read as
//                       a map: an aligned device pointer, zeros, 0.5f at +692 (its word 13); TG_STRUCT_BAD=d
//                       transposes D; five launches
//   bit21_repeat        a kernel whose one map has a box the sm_90 driver refuses (a 128 B inner box with a 32B
//                       swizzle), launched with word 2 bit 21 set (the large-tensor flag: the finding is a warning),
//                       then with the same bytes but bit 21 clear (an error)
#include <cstdlib>
#include <cstring>
#include <string>

#include "client.h"
#include "tmaguard/tensormap.h"

namespace client {
namespace {

std::vector<uint8_t> bytes_of(const void* p, std::size_t n) {
  return {static_cast<const uint8_t*>(p), static_cast<const uint8_t*>(p) + n};
}

uint16_t half(float f) {  // exact for the values used here
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint32_t exp = ((x >> 23) & 0xff) - 127 + 15;
  return static_cast<uint16_t>(((x >> 16) & 0x8000) | (exp << 10) | ((x >> 13) & 0x3ff));
}

int float_params() {
  struct Stray {
    const char* name;
    std::size_t at;
    uint32_t value;
    std::size_t size;
  };
  auto f32 = [](float f) {
    uint32_t v;
    std::memcpy(&v, &f, 4);
    return v;
  };
  const Stray strays[] = {{"f32_0.5", 52, f32(0.5f), 4},
                          {"f32_-0.5", 52, f32(-0.5f), 4},
                          {"int_0x0F000000", 52, 0x0F000000u, 4},
                          {"half_1.75", 54, half(1.75f), 2},
                          {"half_28", 54, half(28.0f), 2}};
  unsigned long total = 0;
  for (const Stray& s : strays) {
    std::vector<uint8_t> window(128, 0);
    std::memcpy(window.data() + s.at, &s.value, s.size);
    const int32_t n = 32;
    const int64_t tail = 7;
    const Kernel k = make_kernel_raw(std::string("plain_float_kernel_") + s.name,
                                     {bytes_of(&n, 4), window, bytes_of(&tail, 8)}, {4, 128, 8});
    launch(k);
    launch(k);
    total += ran(k);
  }
  return finish(total);
}

void apply_variant(const std::string& v, uint8_t* b) {
  auto word = [&](int i, uint32_t x) { std::memcpy(b + 4 * i, &x, 4); };
  if (v == "w15") word(15, 0xdeadbeef);
  else if (v == "w17") word(17, 0x12345678);
  else if (v == "w19") word(19, 0xffffffff);
  else if (v == "w19_31")
    for (int i = 19; i < 32; ++i) word(i, 0x9e3779b9u * static_cast<uint32_t>(i));
  else if (v == "w31") word(31, 1);
  else if (v == "w2_top") b[11] = 0xff;
  else if (v == "w16") word(16, 7);
  else if (v == "w18") word(18, 3);
  else if (v == "w16_w18") {
    word(16, 7);
    word(18, 3);
  } else {
    die("unknown TG_VARIANT");
  }
}

int fa4_ignored_words() {
  const char* v = std::getenv("TG_VARIANT");
  const char* bad = std::getenv("TG_FA4_BAD");
  if (!v) die("TG_VARIANT is not set");
  Kernel k = fa4_kernel(false, bad && std::string(bad) == "dk", false, false);
  for (auto& p : k.values)
    if (p.size() == 128) apply_variant(v, p.data());
  launch(k);
  launch(k);
  return finish(ran(k));
}

int struct_false_block() {
  constexpr uint64_t kBase = 0x7f0000000000ULL, kStep = 0x1000000ULL;
  const char* bad = std::getenv("TG_STRUCT_BAD");
  const bool d_bad = bad && std::string(bad) == "d";
  auto matrix = [](uint64_t addr, uint64_t rows, uint64_t cols, bool transposed) {
    Tensor t = transposed ? Tensor{addr, {rows, cols}, {2 * rows}} : Tensor{addr, {cols, rows}, {2 * cols}};
    MapShape s;
    s.box = {64, 64};
    return encode_map(t, s);
  };
  const CUtensorMap a = matrix(kBase, 512, 128, false), b = matrix(kBase + kStep, 256, 128, false),
                    c = matrix(kBase + 2 * kStep, 512, 256, false), d = matrix(kBase + 3 * kStep, 512, 256, d_bad);
  std::vector<uint8_t> s(1792, 0);
  auto put = [&](std::size_t at, const void* p, std::size_t n) { std::memcpy(s.data() + at, p, n); };
  const int32_t shape[4] = {512, 256, 128, 1};
  put(0, shape, sizeof shape);
  const uint64_t workspace = kBase + 7 * kStep, other = kBase + 8 * kStep, block_ptr = kBase + 9 * kStep;
  put(32, &workspace, 8);
  put(128, &a, 128);
  put(384, &b, 128);
  put(520, &other, 8);
  put(640, &block_ptr, 8);  // the false block: a pointer, zeros, 0.5f as its word 13
  const float half_f = 0.5f;
  put(692, &half_f, 4);
  put(896, &c, 128);
  put(1152, &d, 128);
  const Kernel k = make_kernel_raw("_ZN7cutlass13device_kernelINS_4gemm6kernel13GemmUniversalIiEEEEvNT_6ParamsE", {s},
                                   {128});
  for (int i = 0; i < 5; ++i) launch(k);
  return finish(ran(k));
}

int bit21_repeat() {
  tmaguard::EncodeArgs a;
  a.dtype = CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
  a.rank = 2;
  a.address = 0x7f0000000000ULL;
  a.dims = {128, 64};
  a.strides = {256};
  a.box = {64, 128};
  a.element_strides = {1, 1};
  a.swizzle = CU_TENSOR_MAP_SWIZZLE_128B;
  CUtensorMap m;
  if (tmaguard::encode(a, reinterpret_cast<uint8_t*>(&m)) != 0) die("encode failed");
  uint32_t w2;
  std::memcpy(&w2, reinterpret_cast<uint8_t*>(&m) + 8, 4);
  w2 = (w2 & ~(3u << 13)) | 1u << 13;  // a 32B swizzle for a 128 B inner box, its span word to match
  const uint32_t span = 0x100;
  std::memcpy(reinterpret_cast<uint8_t*>(&m) + 72, &span, 4);
  Kernel k = make_kernel("plain_bit21_kernel", {m});
  const std::size_t at = 1;  // make_kernel: int, then the map
  const uint32_t flagged = w2 | 1u << 21;
  std::memcpy(k.values[at].data() + 8, &flagged, 4);
  const CUresult with_flag = launch(k);
  std::memcpy(k.values[at].data() + 8, &w2, 4);
  const CUresult without = launch(k);
  std::printf("BIT21 with=%d without=%d\n", static_cast<int>(with_flag), static_cast<int>(without));
  return finish(ran(k));
}

}  // namespace

const std::vector<Scenario>& evidence_scenarios() {
  static const std::vector<Scenario> v = {
      {"float_params", float_params},
      {"fa4_ignored_words", fa4_ignored_words},
      {"struct_false_block", struct_false_block},
      {"bit21_repeat", bit21_repeat},
  };
  return v;
}

}  // namespace client
