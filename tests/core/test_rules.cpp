// The rule language: validation messages (file:line: what), kernel matching, every check kind, overrides.
#include <fnmatch.h>
#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <set>
#include <sstream>

#include "tmaguard/rules.h"

using namespace tmaguard;

namespace {

TensorMapParam map2d(int param, uint64_t addr, uint64_t d0, uint64_t d1, uint64_t stride, uint32_t dtype = 9,
                     uint32_t swizzle = 3) {
  EncodeArgs a;
  a.dtype = dtype;
  a.rank = 2;
  a.address = addr;
  a.dims = {d0, d1};
  a.strides = {stride};
  a.box = {static_cast<uint32_t>(64 / element_size(static_cast<DataType>(dtype))), 64};
  a.element_strides = {1, 1};
  a.swizzle = swizzle;
  uint8_t b[128];
  EXPECT_EQ(encode(a, b), 0) << validate_encode(a).message;
  return {{static_cast<uint32_t>(param), 0}, decode(b)};
}

std::string first_error(const std::string& text) {
  const RulesResult r = parse_rules(text, "r.toml");
  return r.errors.empty() ? "" : r.errors.front();
}

std::vector<Finding> run(const std::string& text, const std::string& kernel, const std::vector<TensorMapParam>& maps) {
  const RulesResult r = parse_rules(text, "r.toml");
  EXPECT_TRUE(r.errors.empty()) << (r.errors.empty() ? "" : r.errors.front());
  std::vector<Finding> out;
  if (r.rules) evaluate_rules(*r.rules, rules_for_kernel(*r.rules, kernel), kernel, maps, out);
  return out;
}

const char* kGemm = R"([[rule]]
id = "gemm-epilogue"
kernel = "sm90_gemm"
hint = "allocate D like C"
action = "reject"
[rule.maps]
C = 1
D = -1
[[rule.check]]
kind = "same_innermost"
a = "D"
b = "C"
[[rule.check]]
kind = "dtype"
map = "D"
allowed = ["bfloat16"]
)";

}  // namespace

TEST(RulesParse, ValidFileParses) {
  const RulesResult r = parse_rules(kGemm, "r.toml");
  ASSERT_TRUE(r.errors.empty()) << r.errors.front();
  EXPECT_EQ(rule_count(*r.rules), 1u);
}

TEST(RulesParse, ErrorsNameFileLineAndProblem) {
  EXPECT_EQ(first_error("[[rule]]\nid = \"x\"\nkernel = \"k\"\nkernal_glob = \"y\"\nexpect_map_count = [1]\n"),
            "r.toml:4: unknown key 'kernal_glob' in rule 'x' (known: id, kernel, kernel_glob, kernel_regex, map_count, "
            "expect_map_count, severity, action, hint, maps, when, require, signature_id, not_checkable, "
            "not_checkable_message, check, replaces_builtin, stores)");
  EXPECT_EQ(first_error("[[rule]]\nid = \"x\"\nkernel = \"k\"\nmap_count = \"6\"\nexpect_map_count = [1]\n"),
            "r.toml:4: 'map_count' in rule 'x' must be an integer, got a string");
  EXPECT_EQ(first_error("[[rule]]\nid = \"x\"\nkernel_regex = \"fa4(\"\nexpect_map_count = [1]\n")
                .rfind("r.toml:3: bad kernel_regex 'fa4(' in rule 'x': ", 0),
            0u);
  EXPECT_EQ(first_error("[[rule]]\nid = \"x\"\nkernel = \"k\"\nmap_count = 6\n[rule.maps]\ndK = 7\n"
                        "[[rule.check]]\nkind = \"rank\"\nmap = \"dK\"\nequals = 4\n"),
            "r.toml:6: map 'dK' = 7 in rule 'x' cannot exist with map_count = 6");
  EXPECT_EQ(
      first_error("[[rule]]\nid = \"x\"\nkernel = \"k\"\n[rule.maps]\nA = 0\n[[rule.check]]\nkind = \"same_dims\"\n"
                  "a = \"A\"\nb = \"B\"\n"),
      "r.toml:9: rule 'x' check #1 refers to map 'B', which [rule.maps] does not name");
  EXPECT_EQ(
      first_error("[[rule]]\nid = \"x\"\nkernel = \"k\"\n[rule.maps]\nA = 0\n[[rule.check]]\nkind = \"same_shape\"\n"
                  "a = \"A\"\nb = \"A\"\n")
          .rfind("r.toml:7: unknown check kind 'same_shape'", 0),
      0u);
  EXPECT_EQ(first_error("[[rule]]\nid = \"x\"\nkernel = \"k\"\n"),
            "r.toml:1: rule 'x' has no [[rule.check]], no expect_map_count, no not_checkable and no stores: it can never "
            "report anything");
  EXPECT_EQ(first_error("[[rule]]\nid = \"x\"\nkernel = \"k\"\nexpect_map_count = [1]\n[[rule]]\nid = \"x\"\n"
                        "kernel = \"j\"\nexpect_map_count = [2]\n"),
            "r.toml: rule id 'x' is defined twice");
  EXPECT_EQ(first_error("[[rule]\nid = 1").rfind("r.toml:1: TOML syntax: ", 0), 0u);
  EXPECT_EQ(first_error("[[rule]]\nid = \"x\"\n\xc9\xbft"),
            "r.toml:3: byte 0xc9 is not allowed: rule files are plain ASCII text");
  EXPECT_EQ(first_error("[[rule]]\nid = \"x\"\nkernel = \"k\"\nexpect_map_count = [1]\naction = \"crash\"\n"),
            "r.toml:5: action 'crash' in rule 'x' is not one of abort, reject, log");
  EXPECT_EQ(first_error("[[rule]]\nid = \"x\"\nkernel = \"k\"\n[rule.maps]\nA = 0\n[[rule.check]]\nkind = \"dtype\"\n"
                        "map = \"A\"\nallowed = [\"bf16\"]\n")
                .rfind("r.toml:9: 'bf16' in rule 'x' check #1 is not a known data type", 0),
            0u);
}

TEST(RulesMatch, SubstringGlobRegexAndDemangled) {
  const RulesResult r = parse_rules(R"(
[[rule]]
id = "a"
kernel_glob = "*gemm_kernel*"
expect_map_count = [3]
[[rule]]
id = "b"
kernel_regex = "^matmul_.*_tma$"
expect_map_count = [3]
[[rule]]
id = "c"
kernel = "cutlass::GemmUniversal"
expect_map_count = [3]
)",
                                    "r.toml");
  ASSERT_TRUE(r.errors.empty()) << r.errors.front();
  EXPECT_EQ(rules_for_kernel(*r.rules, "my_gemm_kernel_v2"), std::vector<int>({0}));
  EXPECT_EQ(rules_for_kernel(*r.rules, "matmul_kernel_tma"), std::vector<int>({1}));
  EXPECT_TRUE(rules_for_kernel(*r.rules, "matmul_kernel_tma_v2").empty());
  // Mangled name of cutlass::GemmUniversal<int>(): matches through its demangled form.
  EXPECT_EQ(rules_for_kernel(*r.rules, "_ZN7cutlass13GemmUniversalIiEEvv"), std::vector<int>({2}));
}

TEST(RulesEval, InnermostAndDtypeWithActionOverrideAndHint) {
  const auto c = map2d(3, 0x7f0000000000ULL, 128, 256, 256);
  const auto d_ok = map2d(5, 0x7f1000000000ULL, 128, 256, 256);
  const auto d_mn = map2d(5, 0x7f1000000000ULL, 256, 128, 512);
  EXPECT_TRUE(run(kGemm, "sm90_gemm_tn", {c, c, d_ok}).empty());
  auto out = run(kGemm, "sm90_gemm_tn", {c, c, d_mn});
  ASSERT_EQ(out.size(), 1u) << "the dtype check of D is skipped once D failed";
  EXPECT_EQ(out[0].rule, "gemm-epilogue");
  EXPECT_EQ(out[0].tensor, "D");
  EXPECT_EQ(out[0].place, (MapPlace{5, 0}));
  EXPECT_EQ(out[0].action, Action::kReject);
  EXPECT_EQ(out[0].hint, "allocate D like C");
  EXPECT_TRUE(run(kGemm, "other_kernel", {c, c, d_mn}).empty());
  const auto d_f16 = map2d(5, 0x7f1000000000ULL, 128, 256, 256, 6);
  out = run(kGemm, "sm90_gemm_tn", {c, c, d_f16});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].expected, "D is bfloat16");
  EXPECT_EQ(out[0].observed, "D is float16");
}

TEST(RulesEval, StridesOverlapAlignmentRankSwizzleParamRefs) {
  const char* text = R"([[rule]]
id = "io"
kernel = "k"
[rule.maps]
X = "param:2"
Y = "param:4"
[[rule.check]]
id = "io-rows"
kind = "strides_increasing"
map = "X"
[[rule.check]]
id = "io-overlap"
kind = "no_overlap"
a = "Y"
b = "X"
[[rule.check]]
id = "io-align"
kind = "alignment"
map = "Y"
bytes = 1024
[[rule.check]]
id = "io-rank"
kind = "rank"
map = "X"
equals = 2
[[rule.check]]
id = "io-swizzle"
kind = "swizzle"
map = "X"
allowed = ["128B"]
)";
  // X: 128 bf16 per row but rows only 128 bytes apart: rows overlap.
  const auto x_bad = map2d(2, 0x7f0000000000ULL, 128, 64, 128);
  const auto x_ok = map2d(2, 0x7f0000000000ULL, 128, 64, 256);
  const auto y_far = map2d(4, 0x7f1000000000ULL, 128, 64, 256);
  const auto y_inside = map2d(4, 0x7f0000000400ULL, 128, 64, 256);
  EXPECT_TRUE(run(text, "k", {x_ok, y_far}).empty());
  auto out = run(text, "k", {x_bad, y_far});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].rule, "io-rows");
  EXPECT_EQ(out[0].observed, "stride of dim 1 = 128 bytes (strides {128}, dims {128,64})");
  out = run(text, "k", {x_ok, y_inside});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].rule, "io-overlap");
  EXPECT_EQ(out[0].observed, "Y spans [0x7f0000000400, 0x7f0000004400) and X spans [0x7f0000000000, 0x7f0000004000)");
  const auto y_misaligned = map2d(4, 0x7f1000000100ULL, 128, 64, 256);
  out = run(text, "k", {x_ok, y_misaligned});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].rule, "io-align");
  const auto x_sw64 = map2d(2, 0x7f0000000000ULL, 128, 64, 256, 9, 2);
  out = run(text, "k", {x_sw64, y_far});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].rule, "io-swizzle");
  EXPECT_EQ(out[0].observed, "X swizzle 64B");
  EXPECT_TRUE(run(text, "k", {x_ok}).empty()) << "a rule whose maps are missing does not apply";
}

// An output map whose elements share bytes (a broadcast row, overlapping rows in any argument order) fails
// distinct_elements; a permuted but valid layout, and stride 0 over a single index, do not.
TEST(RulesEval, DistinctElementsForMapsAKernelStoresThrough) {
  const char* text = R"([[rule]]
id = "out"
kernel = "k"
[rule.maps]
D = "param:0"
[[rule.check]]
id = "d-aliased"
kind = "distinct_elements"
map = "D"
)";
  EXPECT_TRUE(run(text, "k", {map2d(0, 0x7f0000000000ULL, 128, 64, 256)}).empty());
  EXPECT_TRUE(run(text, "k", {map2d(0, 0x7f0000000000ULL, 128, 1, 0)}).empty()) << "one row: nothing shared";
  auto out = run(text, "k", {map2d(0, 0x7f0000000000ULL, 128, 64, 0)});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].rule, "d-aliased");
  EXPECT_EQ(out[0].expected, "D's elements have bytes of their own (no stride-0 dimension, no overlapping rows)");
  EXPECT_EQ(out[0].observed,
            "D globalStrides[0] = 0: dimension 1 is broadcast (64 indices share the same bytes) (dims {128,64}, "
            "strides {0})");
  out = run(text, "k", {map2d(0, 0x7f0000000000ULL, 128, 64, 128)});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_NE(out[0].observed.find("rows overlap"), std::string::npos) << out[0].observed;
}

// Every check kind the language has is documented in docs/rules.md's table of check kinds, and the table names no
// kind the language lacks.
TEST(RulesDocs, RulesDocTableListsEveryCheckKind) {
  std::ifstream in(std::string(TG_SOURCE_DIR) + "/docs/rules.md");
  const std::string readme((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::size_t start = readme.find("| check `kind` |");
  ASSERT_NE(start, std::string::npos) << "docs/rules.md has no table of check kinds";
  const std::string table = readme.substr(start, readme.find("\n\n", start) - start);
  std::set<std::string> documented;
  std::istringstream rows(table);
  std::string header, rule;
  std::getline(rows, header);
  std::getline(rows, rule);
  for (std::string row; std::getline(rows, row);) {
    const std::string first = row.substr(0, row.find(" |", 2));  // "| `a` / `b`"
    for (std::size_t b = first.find('`'); b != std::string::npos; b = first.find('`', first.find('`', b + 1) + 1))
      documented.insert(first.substr(b + 1, first.find('`', b + 1) - b - 1));
  }
  const std::vector<std::string> names = check_kind_names();
  EXPECT_EQ(documented, std::set<std::string>(names.begin(), names.end()));
}

TEST(RulesMerge, UserRuleReplacesPresetById) {
  const auto preset = parse_rules(builtin_rules_text(), "built-in").rules;
  const auto user = parse_rules(R"([[rule]]
id = "fa4-unexpected-map-count"
kernel = "FlashAttentionBackwardSm100"
expect_map_count = [4, 5, 6, 7, 9]
severity = "warning"
)",
                                "user.toml")
                        .rules;
  ASSERT_TRUE(preset && user);
  const auto merged = merge_rules({preset, user});
  EXPECT_EQ(rule_count(*merged), rule_count(*preset)) << "replaced in place, not added";
  const auto m = map2d(1, 0x7f0000000000ULL, 128, 256, 256);
  std::vector<Finding> out;
  const std::string k = "kernel_FlashAttentionBackwardSm100_0";
  evaluate_rules(*merged, rules_for_kernel(*merged, k), k, {m, m, m, m, m}, out);
  EXPECT_TRUE(out.empty()) << "5 maps are allowed by the user's replacement";
  evaluate_rules(*preset, rules_for_kernel(*preset, k), k, {m, m, m, m, m}, out);
  EXPECT_EQ(out.size(), 1u);
}

// Globs are translated to anchored PCRE2 patterns: they must mean exactly what fnmatch(3) (no flags) says.
TEST(RulesMatch, GlobsMeanWhatFnmatchSays) {
  const std::vector<std::string> globs = {"*gemm*", "gemm_?_tile",   "kernel_[0-9]*", "kernel_[!0-9]*",
                                          "a\\*b",  "[]x]*",         "*[a-c]z",       "x[",
                                          "*.*",    "cutlass::*<*>", "[^a]*",         "*a*a*a*b"};
  const std::vector<std::string> names = {
      "my_gemm_kernel", "gemm_1_tile", "gemm_12_tile", "kernel_7x", "kernel_x7",       "a*b",  "axb", "]abc",
      "xabc",           "bz",          "x[",           "a.b",       "cutlass::f<int>", "aaab", "aaaa"};
  for (const std::string& g : globs) {
    const RulesResult r = parse_rules("[[rule]]\nid = \"g\"\nkernel_glob = '" + g + "'\nexpect_map_count = [1]\n", "g");
    ASSERT_TRUE(r.errors.empty()) << g;
    for (const std::string& n : names) {
      const bool want = fnmatch(g.c_str(), n.c_str(), 0) == 0;
      EXPECT_EQ(!rules_for_kernel(*r.rules, n).empty(), want) << "glob '" << g << "' on '" << n << "'";
    }
  }
}

// A pattern whose backtracking PCRE2's match limit does not count ("......+$..." on a long name took 7.5 s) ends at
// the callout budget, counts as no match, and says so; ordinary patterns match as before.
TEST(RulesMatch, PathologicalPatternsStopAtTheirBudgetAndSaySo) {
  const RulesResult r = parse_rules(R"([[rule]]
id = "slow"
kernel_regex = '......+$........$..............8$555555555555555555555555'
expect_map_count = [1]
[[rule]]
id = "nested"
kernel_regex = "(a+)+$"
expect_map_count = [1]
[[rule]]
id = "plain"
kernel_regex = "^_ZN5"
expect_map_count = [1]
)",
                                    "r.toml");
  ASSERT_TRUE(r.errors.empty()) << r.errors.front();
  std::string name = "_ZN";
  while (name.size() < 29135) name += std::string(64, '5');
  std::vector<std::string> notes;
  EXPECT_EQ(rules_for_kernel(*r.rules, name, &notes), std::vector<int>({2}));
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_EQ(notes[0],
            "rule 'slow': its kernel pattern reached the match limit on a kernel name of 29187 characters "
            "and counts as not matching it");
  notes.clear();
  EXPECT_EQ(rules_for_kernel(*r.rules, std::string(40, 'a') + "!", &notes), std::vector<int>());
  EXPECT_EQ(notes.size(), 1u) << "(a+)+$ on 40 a's and a '!' is the textbook catastrophic case";
}

// Merging keeps the last definition of an id, in the order of first appearance (the preset's rules stay first).
TEST(RulesParse, MergeReplacesByIdInPlace) {
  const auto a = parse_rules(
                     "[[rule]]\nid = \"x\"\nkernel = \"k1\"\nexpect_map_count = [1]\n[[rule]]\nid = \"y\"\n"
                     "kernel = \"k2\"\nexpect_map_count = [1]\n",
                     "a")
                     .rules;
  const auto b = parse_rules("[[rule]]\nid = \"x\"\nkernel = \"k3\"\nexpect_map_count = [1]\n", "b").rules;
  const auto m = merge_rules({a, b});
  EXPECT_EQ(rule_count(*m), 2u);
  EXPECT_TRUE(rules_for_kernel(*m, "k1").empty());
  EXPECT_EQ(rules_for_kernel(*m, "k3"), std::vector<int>({0}));
  EXPECT_EQ(rules_for_kernel(*m, "k2"), std::vector<int>({1}));
}

TEST(RulesParse, WhenRequireAndNotCheckableAreValidated) {
  // Rule-level keys go before [rule.maps]; entries follow it.
  auto rule = [](const std::string& keys, const std::string& entries) {
    return "[[rule]]\nid = \"x\"\nkernel = \"k\"\n" + keys + "[rule.maps]\nA = 0\nB = 1\n" + entries;
  };
  EXPECT_EQ(first_error(rule("",
                             "[[rule.require]]\nkind = \"same_address\"\na = \"A\"\nb = \"B\"\nid = \"y\"\n"
                             "[[rule.check]]\nkind = \"rank\"\nmap = \"A\"\nequals = 2\n")),
            "r.toml:11: unknown key 'id' in rule 'x' require #1 (known: kind, a, b)");
  EXPECT_EQ(first_error(rule("not_checkable = \"n\"\n",
                             "[[rule.when]]\nkind = \"distinct_address\"\na = \"A\"\nb = [\"B\", \"C\"]\n")),
            "r.toml:11: rule 'x' when #1 refers to map 'C', which [rule.maps] does not name");
  EXPECT_EQ(first_error(rule("not_checkable_message = \"m\"\nexpect_map_count = [2]\n", "")),
            "r.toml:4: rule 'x' has a not_checkable_message but no not_checkable");
  EXPECT_EQ(first_error(rule("not_checkable = \"n\"\n", "[[rule.check]]\nkind = \"rank\"\nmap = \"A\"\nequals = 2\n")),
            "r.toml:1: rule 'x' is not_checkable: it cannot also have [[rule.check]] entries");
  EXPECT_EQ(first_error(rule("", "[[rule.check]]\nkind = \"same_dim\"\na = \"A\"\nb = \"B\"\n")),
            "r.toml:7: rule 'x' check #1 needs 'dim' = 0..4");
  EXPECT_EQ(first_error(rule("not_checkable = \"n\"\n", "")), "");
}

TEST(RulesEval, RequireFailuresAreOneWarningAndWhenFailuresAreSilence) {
  const std::string text = R"([[rule]]
id = "pair"
kernel = "k"
map_count = 2
[rule.maps]
A = 0
B = 1
[[rule.when]]
kind = "rank"
map = "A"
equals = 2
[[rule.require]]
kind = "distinct_address"
a = "B"
b = ["A"]
[[rule.require]]
kind = "same_dim"
a = "A"
b = "B"
dim = 1
[[rule.check]]
kind = "same_innermost"
a = "B"
b = "A"
)";
  const auto a = map2d(1, 0x7f0000000000ULL, 128, 64, 256), b_ok = map2d(2, 0x7f0000100000ULL, 128, 64, 256);
  const auto b_same_addr = map2d(2, 0x7f0000000000ULL, 64, 128, 128), b_t = map2d(2, 0x7f0000100000ULL, 64, 64, 128);
  EXPECT_TRUE(run(text, "k", {a, b_ok}).empty());
  const auto sig = run(text, "k", {a, b_same_addr});
  ASSERT_EQ(sig.size(), 1u);
  EXPECT_EQ(sig[0].rule, "pair-unrecognized-signature");
  EXPECT_EQ(sig[0].severity, Severity::kWarning);
  EXPECT_EQ(sig[0].observed,
            "not met: B and A have different global addresses: both at 0x7f0000000000; A dim 1 equals B dim 1: A dim 1 "
            "= 64, B dim 1 = 128");
  const auto judged = run(text, "k", {a, b_t});
  ASSERT_EQ(judged.size(), 1u);
  EXPECT_EQ(judged[0].rule, "pair");
  EXPECT_EQ(judged[0].severity, Severity::kError);
  const auto rank3 = map2d(1, 0x7f0000000000ULL, 128, 64, 256);  // rank 2 always: change the when instead
  std::string never = text;
  never.replace(never.find("equals = 2"), 10, "equals = 3");
  EXPECT_TRUE(run(never, "k", {rank3, b_same_addr}).empty()) << "a rule whose [[rule.when]] fails is silent";
}

// stores = [..] names the maps a kernel writes through: each must be one of the rule's maps, and a launch's map is
// stored only when a rule naming it applies (its map count, maps, when and signature).
TEST(RulesEval, StoresNameTheMapsARuleAppliesToAndStoresThrough) {
  const std::string text = R"([[rule]]
id = "out"
kernel = "k"
map_count = 2
stores = ["B"]
[rule.maps]
A = 0
B = 1
[[rule.require]]
kind = "distinct_address"
a = "B"
b = ["A"]
)";
  const RulesResult r = parse_rules(text, "r.toml");
  ASSERT_TRUE(r.errors.empty()) << r.errors.front();
  const std::vector<int> which = rules_for_kernel(*r.rules, "k");
  const auto a = map2d(1, 0x7f0000000000ULL, 128, 64, 256), b = map2d(2, 0x7f0000100000ULL, 128, 64, 256);
  EXPECT_EQ(stored_maps(*r.rules, which, {a, b}), (std::vector<bool>{false, true}));
  const auto b_same_addr = map2d(2, 0x7f0000000000ULL, 128, 64, 256);
  EXPECT_EQ(stored_maps(*r.rules, which, {a, b_same_addr}), (std::vector<bool>{false, false}))
      << "a launch whose signature is not the rule's has no stored map";
  EXPECT_EQ(stored_maps(*r.rules, which, {a, b, b}), (std::vector<bool>{false, false, false})) << "another map count";
  EXPECT_EQ(stored_maps(*r.rules, {}, {a, b}), (std::vector<bool>{false, false}));
  std::string bad = text;
  bad.replace(bad.find("[\"B\"]"), 5, "[\"C\"]");
  EXPECT_EQ(first_error(bad), "r.toml:5: 'stores' in rule 'out' names 'C', which is none of the rule's [rule.maps]");
  bad.replace(bad.find("[\"C\"]"), 5, "\"B\"");
  EXPECT_EQ(first_error(bad), "r.toml:5: 'stores' in rule 'out' must be an array of the rule's map names");
}

// Rules can tell the encoders' forms apart: a kernel whose maps must come from the driver (for its checks) says so.
TEST(RulesEval, EncoderCheckNamesTheForm) {
  const char* text = R"([[rule]]
id = "driver-only"
kernel = "k"
[rule.maps]
X = 0
[[rule.check]]
kind = "encoder"
map = "X"
allowed = ["driver"]
)";
  const auto driver = map2d(2, 0x7f0000000000ULL, 128, 64, 256);
  EXPECT_TRUE(run(text, "k", {driver}).empty());
  EncodeArgs a = driver.decoded.view.encode_args();
  uint8_t b[128];
  ASSERT_EQ(encode_in_form(Encoder::kCuteDsl, a, b), 0);
  const auto out = run(text, "k", {{{2, 0}, decode(b)}});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].expected, "X written by driver");
  EXPECT_EQ(out[0].observed, "X is in the CuTe DSL form");
  EXPECT_EQ(first_error(R"([[rule]]
id = "x"
kernel = "k"
[rule.maps]
X = 0
[[rule.check]]
kind = "encoder"
map = "X"
allowed = ["cute"]
)"),
            "r.toml:9: 'cute' in rule 'x' check #1 is not a known encoder (driver, CuTe DSL, device-built, unknown)");
}

// A place that can never hold a map is refused (check-rules says so) instead of the rule silently never applying.
TEST(RulesParse, PlacesThatCanNeverHoldAMapAreRefused) {
  auto place = [](const std::string& spec) {
    return first_error("[[rule]]\nid = \"x\"\nkernel = \"k\"\n[rule.maps]\nD = \"" + spec +
                       "\"\n[[rule.check]]\nkind = \"rank\"\nmap = \"D\"\nequals = 2\n");
  };
  EXPECT_EQ(place("param:0+1152"), "");
  EXPECT_EQ(place("param:3"), "");
  EXPECT_EQ(place("param:0+1153"),
            "r.toml:5: map 'D' in rule 'x': \"param:0+1153\" names offset 1153, not a multiple of 64: a CUtensorMap "
            "inside a parameter sits at a multiple of 64 from its start");
  EXPECT_NE(place("param:0+100").find("names offset 100, not a multiple of 64"), std::string::npos);
  EXPECT_EQ(place("param:0+32768"),
            "r.toml:5: map 'D' in rule 'x': \"param:0+32768\" names offset 32768: a 128-byte map there ends past the "
            "32764-byte parameter space");
  for (const char* bad : {"param: 0+128", "param:0++128", "param:0+-0", "param:-1", "param:", "param:0+",
                          "param:99999999999999999999", "param:0x10"})
    EXPECT_NE(place(bad).find("is not \"param:N\", \"param:N+OFFSET\" or either followed by \"->AT\""),
              std::string::npos)
        << bad << ": " << place(bad);
  EXPECT_NE(place("param:40000").find("names parameter 40000, past any kernel's"), std::string::npos);
}

// Maps in device memory: "param:N->AT" (AT bytes past the address parameter N holds) or "param:N+OFFSET->AT" (a
// pointer inside a parameter); a rule names only such places, and has no map counts.
TEST(RulesParse, DevicePlacesNameMapsPastAPointer) {
  auto place = [](const std::string& spec, const std::string& more = "") {
    return first_error("[[rule]]\nid = \"x\"\nkernel = \"k\"\n" + more + "[rule.maps]\nD = \"" + spec +
                       "\"\n[[rule.check]]\nkind = \"rank\"\nmap = \"D\"\nequals = 2\n");
  };
  EXPECT_EQ(place("param:3->128"), "");
  EXPECT_EQ(place("param:0+64->0"), "");
  EXPECT_NE(place("param:0+60->0").find("names offset 60, not a multiple of 8"), std::string::npos);
  EXPECT_NE(place("param:3->100").find("names 100 bytes past the pointer, not a multiple of 16"), std::string::npos);
  EXPECT_NE(place("param:3->65536").find("tmaguard reads at most 65536 bytes there"), std::string::npos);
  for (const char* bad : {"param:3->", "param:3->-16", "param:3->>16", "param:3-> 16", "param:3->99999999"})
    EXPECT_NE(place(bad).find("is not \"param:N\""), std::string::npos) << bad << ": " << place(bad);
  EXPECT_NE(place("param:3->128", "map_count = 2\n").find("names maps in device memory: map_count"),
            std::string::npos);
  const std::string mixed = first_error(
      "[[rule]]\nid = \"x\"\nkernel = \"k\"\n[rule.maps]\nD = \"param:3->128\"\nA = 0\n[[rule.check]]\n"
      "kind = \"same_dims\"\na = \"D\"\nb = \"A\"\n");
  EXPECT_NE(mixed.find("names maps in device memory (\"param:N->AT\") and maps in the parameters"), std::string::npos)
      << mixed;
}

// Settings that would never guard are refused, or said: an order past any launch's maps, an empty kernel matcher, a
// file without rules; an order past this kernel's maps (no map_count) draws one warning instead of silence.
TEST(RulesParse, RulesThatCouldNeverApplyAreRefusedOrSaid) {
  const std::string head = "[[rule]]\nid = \"x\"\nkernel = \"k\"\n";
  const std::string check = "[[rule.check]]\nkind = \"same_innermost\"\na = \"A\"\nb = \"B\"\n";
  EXPECT_EQ(first_error(head + "map_count = 2\n[rule.maps]\nA = 0\nB = 2\n" + check),
            "r.toml:7: map 'B' = 2 in rule 'x' cannot exist with map_count = 2");
  EXPECT_EQ(first_error(head + "expect_map_count = [1, 3]\n[rule.maps]\nA = 0\nB = 3\n" + check),
            "r.toml:7: map 'B' = 3 in rule 'x' cannot exist with expect_map_count's largest count, 3");
  EXPECT_EQ(first_error(head + "[rule.maps]\nA = 0\nB = 9223372036854775807\n" + check),
            "r.toml:6: map 'B' = 9223372036854775807 in rule 'x' is past any launch's maps (a kernel has at most "
            "32764 parameters)");
  EXPECT_EQ(first_error(head + "[rule.maps]\nA = 0\nB = -9223372036854775808\n" + check),
            "r.toml:6: map 'B' = -9223372036854775808 in rule 'x' is past any launch's maps (a kernel has at most "
            "32764 parameters)");
  for (const char* key : {"kernel", "kernel_glob", "kernel_regex"})
    EXPECT_EQ(first_error(std::string("[[rule]]\nid = \"x\"\n") + key + " = \"\"\n[rule.maps]\nA = 0\nB = 1\n" + check),
              std::string("r.toml:3: ") + key +
                  " = \"\" in rule 'x' names no kernel: give a substring, glob or regex of kernel names");
  EXPECT_EQ(first_error(""), "r.toml: no [[rule]] in it: a rules file that guards nothing is a mistake");
  EXPECT_EQ(first_error("# only a comment\n"), "r.toml: no [[rule]] in it: a rules file that guards nothing is a mistake");
  // TOML's 1_0 is 10: past a 2-map launch, said once per kernel as a warning naming the rule.
  const auto out = run(head + "[rule.maps]\nA = 0\nB = 1_0\n" + check, "k",
                       {map2d(0, 0x7f0000000000ULL, 64, 64, 128), map2d(1, 0x7f0001000000ULL, 64, 64, 128)});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].rule, "x-map-missing");
  EXPECT_EQ(out[0].severity, Severity::kWarning);
  EXPECT_EQ(out[0].expected, "map 'B' = 10 among the launch's tensor maps");
  EXPECT_EQ(out[0].observed, "the launch has 2 tensor map(s)");
}
