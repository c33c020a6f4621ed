// A user of tmaguard's core (docs/core-api.md): encode two tensor maps as the driver would, decode them back from their
// 128 bytes, and judge a launch of them with a rule written in tmaguard's rule language. Prints what it found; exits 0
// when the transposed map drew its finding and the healthy one none. Built against an installed prefix by
// scripts/test-install.sh.
#include <tmaguard/judge.h>
#include <tmaguard/records.h>
#include <tmaguard/rules.h>
#include <tmaguard/tensormap.h>

#include <cstdio>

namespace tg = tmaguard;

// A bf16 matrix of `rows` x `cols` at `address`, as cuTensorMapEncodeTiled would encode it (dim 0 innermost).
static tg::TensorMapParam matrix(uint64_t address, uint64_t inner, uint64_t outer, uint32_t param) {
  const uint64_t dims[2] = {inner, outer};
  const uint64_t strides[1] = {inner * 2};
  const uint32_t element_strides[2] = {1, 1};
  tg::EncodeArgs a = tg::encode_args(tg::MapKind::kTiled, /*CU_TENSOR_MAP_DATA_TYPE_BFLOAT16*/ 9, 2, address, dims,
                                     strides, element_strides, 0, /*128B*/ 3, 2, 0);
  a.box = {64, 64};
  uint8_t bytes[tg::kTensorMapBytes];
  tg::EncodeProblem problem;
  if (tg::encode(a, bytes, &problem) != 0) std::printf("encode refused: %s\n", problem.message.c_str());
  tg::TensorMapParam m;
  m.place = tg::MapPlace{param, 0};
  m.decoded = tg::decode(bytes);
  return m;
}

int main() {
  const char* rule = R"([[rule]]
id = "my-gemm-d-k-major"
kernel = "my_gemm"
[rule.maps]
A = 0
D = 1
[[rule.check]]
kind = "same_innermost"
a = "D"
b = "A"
hint = "allocate D with A's layout"
)";
  const tg::RulesResult parsed = tg::parse_rules(rule, "inline");
  for (const std::string& e : parsed.errors) std::printf("rules error: %s\n", e.c_str());
  if (!parsed.rules) return 1;
  const std::vector<int> which = tg::rules_for_kernel(*parsed.rules, "my_gemm_kernel");
  const tg::Arch sm90{9, 0};
  tg::ProcessContext ctx;
  int findings_healthy = -1, findings_transposed = -1;
  for (const bool transposed : {false, true}) {
    const std::vector<tg::TensorMapParam> maps = {matrix(0x7f0000000000, 512, 256, 0),
                                                  transposed ? matrix(0x7f0001000000, 256, 512, 1)
                                                             : matrix(0x7f0001000000, 512, 256, 1)};
    std::printf("D: %s\n", tg::render_map(maps[1].decoded.view, tg::LogFormat::kText).c_str());
    const tg::Judgement j = tg::judge_launch(*parsed.rules, which, "my_gemm_kernel", maps, sm90);
    for (const tg::Finding& f : j.findings)
      std::printf("%s\n", tg::render_finding(f, ctx, tg::Action::kLog, tg::LogFormat::kText).c_str());
    (transposed ? findings_transposed : findings_healthy) = static_cast<int>(j.findings.size());
  }
  std::printf("healthy: %d finding(s); transposed: %d finding(s)\n", findings_healthy, findings_transposed);
  return findings_healthy == 0 && findings_transposed == 1 ? 0 : 1;
}
