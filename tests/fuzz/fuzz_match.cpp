// libFuzzer target: rule matching with arbitrary patterns (substring, glob, regex) against arbitrary and very long
// kernel names (mangled-looking ones included). Pathological patterns must stay within the match limits: libFuzzer's
// -timeout catches a match that does not.
#include "input.h"
#include "tmaguard/rules.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzInput in{data, size};
  const uint8_t kind = in.take<uint8_t>() % 3;
  std::string pattern = in.take_string(in.take<uint8_t>() % 64);
  for (char& c : pattern)  // a TOML literal string holds any byte but ', newlines and control characters
    if (c == '\'' || static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) >= 0x7f) c = '.';
  const char* key = kind == 0 ? "kernel" : kind == 1 ? "kernel_glob" : "kernel_regex";
  const std::string text = std::string("[[rule]]\nid = \"m\"\n") + key + " = '" + pattern + "'\nexpect_map_count = [1]\n";
  const tmaguard::RulesResult r = tmaguard::parse_rules(text, "fuzz.toml");
  if (!r.rules) return 0;
  // The name: a seed repeated up to 40,000 characters, sometimes made to look mangled.
  const std::string seed = in.take_string(64);
  const std::size_t reps = in.take<uint16_t>() % 40000;
  std::string name = in.take<uint8_t>() % 2 ? "_ZN" : "";
  while (!seed.empty() && name.size() < reps) name += seed;
  name += in.take_string(in.n);
  std::vector<std::string> notes;
  (void)tmaguard::rules_for_kernel(*r.rules, name, &notes);
  return 0;
}
