// libFuzzer target: arbitrary bytes as a rules file. Parsing must never crash, hang or trip a sanitizer; a file
// that parses is then evaluated against a few descriptors built from the input.
#include <cstdint>
#include <string>
#include <string_view>

#include "tmaguard/rules.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const tmaguard::RulesResult r = tmaguard::parse_rules(text, "fuzz.toml");
  if (!r.rules) return 0;
  std::vector<tmaguard::TensorMapParam> maps;
  for (size_t i = 0; i + 128 <= size && maps.size() < 9; i += 128)
    maps.push_back({{static_cast<uint32_t>(maps.size()), 0}, tmaguard::decode(data + i)});
  for (const char* k : {"kernel_FlashAttentionBackwardSm100_0", "sm90_gemm", "_ZN7cutlass13GemmUniversalIiEEvv"}) {
    std::vector<tmaguard::Finding> out;
    tmaguard::evaluate_rules(*r.rules, tmaguard::rules_for_kernel(*r.rules, k), k, maps, out);
  }
  return 0;
}
