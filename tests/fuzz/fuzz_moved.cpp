// libFuzzer target: a clean launch compiled into what its judgement asks of addresses (judge.h: MovedMaps), then the
// same maps at addresses the fuzzer picks. Layouts start from FA4's tensors (b, s, h, d) and are bent by the input
// (transposed, broadcast, other element types and boxes), in the driver's form or CuTe DSL's (FA4's own encoder), for
// an FA4 backward kernel on SM100 and SM90 and for a kernel no rule names. Whenever clean_at says clean, the full judgement of the moved maps must find nothing; where
// every address is one clean_at takes (below 2^57), the two must agree both ways.
#include <memory>
#include <vector>

#include "input.h"
#include "tmaguard/judge.h"
#include "tmaguard/rules.h"

namespace {

using namespace tmaguard;

constexpr uint64_t kBase = 0x7f0000000000ULL, kStep = 0x1000000ULL;

// One map of a (b, s, h, d) bf16 tensor at `address`, bent by the input; false when the driver would not encode it.
bool fa4_map(FuzzInput& in, uint64_t b, uint64_t s, uint64_t h, uint64_t d, uint64_t address, Encoder form,
             uint8_t out[128]) {
  EncodeArgs a;
  a.dtype = 9;
  a.rank = 4;
  a.address = address;
  a.dims = {d, s, h, b};
  a.strides = {2 * h * d, 2 * d, 2 * s * h * d};
  const uint8_t bend = in.take<uint8_t>();
  if (bend % 16 == 1) a.dims = {s, d, h, b}, a.strides = {2 * s, 2 * s * d, 2 * s * h * d};  // transposed view
  if (bend % 16 == 2) a.strides[2] = 0;                                                     // batch broadcast
  if (bend % 16 == 3) a.dtype = 6;                                                          // float16
  if (bend % 16 == 4) a.dims[3] = 1;
  a.box = {64, 128, 1, 1};
  if (bend % 16 == 5) a.box[0] = 32;
  a.element_strides = {1, 1, 1, 1};
  a.swizzle = a.box[0] * 2 >= 128 ? 3 : 2;
  if (form == Encoder::kCuteDsl) a.l2_promotion = 2;  // what CuTe DSL's host fill always asks for
  return encode_in_form(form, a, out) == 0;
}

struct Kernel {
  const char* name;
  MapEvidence evidence;
};
const Kernel kKernels[] = {
    {"kernel_cutlass_kernel_flash_attncuteflash_bwd_sm100FlashAttentionBackwardSm100_object_at__x_0", MapEvidence::kKnown},
    {"kernel_cutlass_kernel_flash_attncuteflash_bwd_sm90FlashAttentionBackwardSm90_object_at__x_0", MapEvidence::kKnown},
    {"plain_tma_kernel", MapEvidence::kParameter}};

uint64_t moved_address(FuzzInput& in, const std::vector<uint64_t>& so_far) {
  const uint8_t how = in.take<uint8_t>();
  const uint64_t block = kBase + (in.take<uint8_t>() % 8) * kStep + (in.take<uint16_t>() % 8192) * 16;
  switch (how % 16) {
    case 0: return in.take<uint64_t>();  // anything
    case 1: return block + 8;
    case 2: return 0;
    case 3: return so_far.empty() ? block : so_far[in.take<uint8_t>() % so_far.size()];
    default: return block;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const auto rules = parse_rules(builtin_rules_text(), "built-in").rules;
  FuzzInput in{data, size};
  const Kernel& k = kKernels[in.take<uint8_t>() % 3];
  const uint64_t b = 1 + in.take<uint8_t>() % 2, s = 64 * (1 + in.take<uint8_t>() % 8), h = 1 + in.take<uint8_t>() % 8;
  const uint64_t d = in.take<uint8_t>() % 2 ? 64 : 128;
  const std::size_t n = 4 + in.take<uint8_t>() % 3;  // 4..6 maps: Q K V dO [dV dK]
  const Encoder form = in.take<uint8_t>() % 2 ? Encoder::kCuteDsl : Encoder::kDriver;
  std::vector<std::vector<uint8_t>> bytes(n, std::vector<uint8_t>(kTensorMapBytes));
  std::vector<TensorMapParam> maps;
  for (std::size_t i = 0; i < n; ++i) {
    if (!fa4_map(in, b, s, h, d, kBase + i * kStep, form, bytes[i].data())) return 0;
    maps.push_back({{static_cast<uint32_t>(i + 1), 0}, read_map(bytes[i].data(), k.evidence)});
  }
  const std::vector<int> which = rules_for_kernel(*rules, k.name);
  const Arch arch{9, 0};
  const Judgement first = judge_launch(*rules, which, k.name, maps, arch);
  if (!first.findings.empty() || !first.not_checkable.empty()) return 0;
  const std::unique_ptr<const MovedMaps> compiled = MovedMaps::compile(*rules, which, maps);
  if (!compiled) return 0;
  for (int round = 0; round < 4 && in.n; ++round) {
    std::vector<uint64_t> to;
    for (std::size_t i = 0; i < n; ++i) to.push_back(moved_address(in, to));
    std::vector<TensorMapParam> now;
    bool all_maps = true, takes = true;
    for (std::size_t i = 0; i < n; ++i) {
      std::vector<uint8_t> m = bytes[i];
      __builtin_memcpy(m.data(), &to[i], 8);
      now.push_back({maps[i].place, read_map(m.data(), k.evidence)});
      all_maps &= now.back().decoded.ok();
      takes &= to[i] < (1ULL << 57);
    }
    const bool fast = compiled->clean_at(to.data());
    if (fast && !all_maps) __builtin_trap();  // said clean, yet a map no longer reads as one
    if (!all_maps) continue;
    const Judgement full = judge_launch(*rules, which, k.name, now, arch);
    const bool clean = full.findings.empty() && full.not_checkable.empty();
    if (fast && !clean) __builtin_trap();  // the shortcut passed what the full judgement finds wrong
    if (takes && clean && !fast) __builtin_trap();  // clean, at addresses it takes, and not said so
  }
  return 0;
}
