// Real processes with libtmaguard.so preloaded in front of the stand-in driver: user rule files: actions, broken
// files, the built-in preset, the example files.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>

#include "client_run.h"

namespace {

const char* kMatmulRule = R"toml([[rule]]
id = "matmul-b-k-major"
kernel_regex = "^matmul_.*_tma$"
map_count = 4
action = "reject"
hint = "pass B K-major (b.contiguous())"
[rule.maps]
A = 0
B = 2
[[rule.check]]
kind = "same_innermost"
a = "B"
b = "A"
)toml";

TEST(Rules, UserRuleWithActionOverride) {
  const std::string path = write_file("matmul.toml", kMatmulRule);
  const ClientRun r =
      run_client({"getproc", "launch", "other_maps_ok"}, {{"TMAGUARD_MODE", "log"}, {"TMAGUARD_RULES", path}});
  ASSERT_TRUE(r.p.exited) << describe(r);
  EXPECT_EQ(r.p.code, 3) << "the rule's action=reject overrides log mode\n" << describe(r);
  EXPECT_EQ(r.ran, 0);
  ASSERT_EQ(r.events("violation").size(), 1u) << describe(r);
  const json v = r.events("violation")[0];
  EXPECT_EQ(v["rule"], "matmul-b-k-major");
  EXPECT_EQ(v["tensor"], "B");
  EXPECT_EQ(v["action"], "reject");
  EXPECT_EQ(v["hint"], "pass B K-major (b.contiguous())");
  std::remove(path.c_str());
}

TEST(Rules, BrokenFileStopsTheJobBeforeItsFirstLaunch) {
  const std::string path = write_file("broken.toml", "[[rule]]\nid = \"x\"\nkernel = \"k\"\nmap_count = \"4\"\n");
  const ClientRun r = run_client({"dlsym", "launch", "fa4_ok"}, {{"TMAGUARD_RULES", path}});
  ASSERT_TRUE(r.p.exited) << describe(r);
  EXPECT_EQ(r.p.code, 78);
  EXPECT_EQ(r.p.out.find("RESULT"), std::string::npos);
  EXPECT_NE(
      r.p.err.find("tmaguard: rules error: " + path + ":4: 'map_count' in rule 'x' must be an integer, got a string"),
      std::string::npos)
      << r.p.err;
  EXPECT_NE(r.p.err.find("tmaguard: stopping the job before its first launch: fix " + path), std::string::npos);
  const ClientRun c =
      run_client({"dlsym", "launch", "fa4_dk_bad"},
                 {{"TMAGUARD_RULES", path}, {"TMAGUARD_RULES_ON_ERROR", "continue"}, {"TMAGUARD_MODE", "reject"}});
  EXPECT_EQ(c.ran, 0) << "the built-in rules still guard the job\n" << describe(c);
  EXPECT_NE(c.p.err.find("tmaguard: continuing without " + path), std::string::npos) << c.p.err;
  std::remove(path.c_str());
  const ClientRun missing = run_client({"dlsym", "launch", "fa4_ok"}, {{"TMAGUARD_RULES", "/nonexistent/rules.toml"}});
  EXPECT_EQ(missing.p.code, 78);
  EXPECT_NE(missing.p.err.find("tmaguard: rules error: /nonexistent/rules.toml: cannot read the rules file"),
            std::string::npos);
}

TEST(Rules, BuiltinPresetCanBeSwitchedOffOrOverridden) {
  const ClientRun off = run_client({"dlsym", "launch", "fa4_dk_bad"}, {{"TMAGUARD_BUILTIN_RULES", "off"}});
  EXPECT_TRUE(off.p.exited && off.p.code == 0) << describe(off);
  EXPECT_TRUE(off.events("violation").empty());
  const std::string path = write_file("fa4.toml", R"([[rule]]
id = "fa4-1cta-dkdv"
replaces_builtin = true
kernel = "FlashAttentionBackwardSm100"
map_count = 6
severity = "warning"
[rule.maps]
K = 1
dK = 5
[[rule.check]]
id = "fa4-dk-not-k-major"
kind = "same_innermost"
a = "dK"
b = "K"
)");
  const ClientRun ov = run_client({"dlsym", "launch", "fa4_dk_bad"}, {{"TMAGUARD_RULES", path}});
  EXPECT_TRUE(ov.p.exited && ov.p.code == 0) << "the user's warning-level rule replaced the preset's\n" << describe(ov);
  ASSERT_EQ(ov.events("warning").size(), 1u) << describe(ov);
  EXPECT_EQ(ov.events("warning")[0]["rule"], "fa4-dk-not-k-major");
  std::remove(path.c_str());
}

TEST(Rules, TritonExampleFileCatchesATransposedB) {
  const std::string rules = std::string(TG_SOURCE_DIR) + "/rules/examples/triton_matmul.toml";
  const ClientRun ok = run_client({"dlsym", "launch", "triton_ok"}, {{"TMAGUARD_RULES", rules}});
  EXPECT_TRUE(ok.p.exited && ok.p.code == 0) << describe(ok);
  EXPECT_TRUE(ok.events("violation").empty() && ok.events("warning").empty()) << describe(ok);
  const ClientRun bad =
      run_client({"dlsym", "launch", "triton_b_transposed"}, {{"TMAGUARD_RULES", rules}, {"TMAGUARD_MODE", "log"}});
  EXPECT_EQ(bad.p.code, 3) << "the example's action = reject wins over log mode\n" << describe(bad);
  EXPECT_EQ(bad.ran, 0);
  ASSERT_EQ(bad.events("violation").size(), 1u) << describe(bad);
  EXPECT_EQ(bad.events("violation")[0]["rule"], "triton-b-k-major");
  EXPECT_EQ(bad.events("violation")[0]["tensor"], "B");
}

}  // namespace
