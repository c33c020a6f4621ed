// Real processes with libtmaguard.so preloaded: FlashAttention-4's forward kernels (and the sparse MLA dK GEMM) as
// stand-in kernels with the upstream argument order. Healthy launches (sliced views included) run untouched; a
// transposed Q, K or V, an O over Q or over itself is stopped; a kernel first launched healthy and then, as a compile-
// cache hit, with a transposed tensor (FA #2886) is stopped at that launch in every mode.
#include <gtest/gtest.h>

#include <csignal>

#include "client_run.h"

namespace {

struct Case {
  std::string config, bad, rule;  // rule: the violation expected ("" none); a "?" suffix: a warning, the job runs
  std::string cc = "10.0";
};

const std::vector<Case> kCases = {
    {"sm100", "none", ""},
    {"sm100", "sliced", ""},
    {"sm100", "q", "fa4-fwd-qk-not-k-major"},
    {"sm100", "k", "fa4-fwd-qk-not-k-major"},
    {"sm100", "v", "fa4-fwd-v-not-k-major"},
    {"sm100", "o", "fa4-fwd-o-layout?"},
    {"sm100", "o_over_q", "fa4-fwd-o-overlaps-input"},
    {"sm100", "o_expand", "fa4-fwd-o-aliased"},
    {"sm100_gqa", "none", ""},
    {"sm100_gqa", "k", "fa4-fwd-qk-not-k-major"},
    {"sm100_varlen", "none", ""},
    {"sm100_varlen", "q", "fa4-fwd-qk-not-k-major"},
    {"hd256", "none", ""},
    {"hd256", "k", "fa4-fwd-qk-not-k-major"},
    {"hd256", "o_over_q", "fa4-fwd-o-overlaps-input"},
    {"sm90", "none", "", "9.0"},
    {"sm90", "q", "fa4-fwd-qk-not-k-major", "9.0"},
    {"sm90", "o", "fa4-fwd-o-not-row-major", "9.0"},
    {"mla_gather", "none", ""},
    {"mla_gather", "o_over_q", "fa4-fwd-o-overlaps-input"},
    {"mla_gather", "o_expand", "fa4-fwd-o-aliased"},
    {"mla_dense", "none", ""},
    {"mla_dense", "k", "fa4-fwd-qk-not-k-major"},
    {"mla_dk", "none", ""},
    {"mla_dk", "ds", "fa4-mla-dk-operand-layout"},
    {"unknown", "none", "fa4-unknown-forward-kernel?"},
};

ClientRun run_forward(const Case& c, const std::string& form, const std::string& mode = "reject",
                      const std::string& cached = "0") {
  std::vector<std::string> args = {"getproc", "ex", "fa4_forward"};
  if (form == "cute") args.push_back("--cute");
  return run_client(args, {{"TMAGUARD_MODE", mode},
                           {"FAKECUDA_CC", c.cc},
                           {"TG_FWD_CONFIG", c.config},
                           {"TG_FWD_BAD", c.bad},
                           {"TG_FWD_CACHED", cached}});
}

}  // namespace

// Every case in the driver's descriptor form and in CuTe DSL's (FA4's own encoder), in reject mode.
TEST(Fa4Forward, HealthyRunsTransposedOrAliasedIsStopped) {
  for (const Case& c : kCases)
  for (const std::string form : {"driver", "cute"}) {
    const ClientRun r = run_forward(c, form);
    const std::string what = c.config + " bad=" + c.bad + " " + form + "-form\n" + describe(r);
    ASSERT_TRUE(r.p.exited) << what;
    const bool warning = !c.rule.empty() && c.rule.back() == '?';
    if (c.rule.empty() || warning) {
      EXPECT_EQ(r.p.code, 0) << what;
      EXPECT_EQ(r.ran, 2) << what;
      EXPECT_TRUE(r.events("violation").empty()) << what;
      if (warning) {
        ASSERT_EQ(r.events("warning").size(), 1u) << "said once, not per launch\n" << what;
        EXPECT_EQ(r.events("warning")[0]["rule"], c.rule.substr(0, c.rule.size() - 1)) << what;
      } else {
        EXPECT_TRUE(r.events("warning").empty()) << what;
      }
    } else {
      EXPECT_EQ(r.ran, 0) << what;
      ASSERT_EQ(r.events("violation").size(), 1u) << what;
      EXPECT_EQ(r.events("violation")[0]["rule"], c.rule) << what;
      EXPECT_TRUE(r.events("warning").empty()) << what;
    }
  }
}

// FA #2886's shape: the kernel ran healthy twice (remembered clean), then a cache hit hands it transposed Q. The
// third launch is judged on its own bytes: refused in reject mode, the process stopped in abort mode before it
// reaches the driver, logged (and run) in log mode.
TEST(Fa4Forward, ACachedKernelGivenATransposedTensorIsStoppedInEveryMode) {
  for (const Case& c : {Case{"sm100", "q", "fa4-fwd-qk-not-k-major"}, Case{"hd256", "k", "fa4-fwd-qk-not-k-major"},
                        Case{"sm90", "o", "fa4-fwd-o-not-row-major", "9.0"}}) {
    const ClientRun rej = run_forward(c, "driver", "reject", "1");
    const std::string what = c.config + " bad=" + c.bad + "\n";
    ASSERT_TRUE(rej.p.exited) << what << describe(rej);
    EXPECT_EQ(rej.ran, 2) << what << describe(rej);
    ASSERT_EQ(rej.events("violation").size(), 1u) << what << describe(rej);
    EXPECT_EQ(rej.events("violation")[0]["rule"], c.rule);
    const ClientRun ab = run_forward(c, "driver", "abort", "1");
    EXPECT_TRUE(ab.p.signaled && ab.p.signal == SIGABRT) << what << describe(ab);
    ASSERT_EQ(ab.events("violation").size(), 1u) << what << describe(ab);
    EXPECT_EQ(ab.events("violation")[0]["action"], "abort");
    const ClientRun lg = run_forward(c, "driver", "log", "1");
    ASSERT_TRUE(lg.p.exited && lg.p.code == 0) << what << describe(lg);
    EXPECT_EQ(lg.ran, 3) << what << describe(lg);
    ASSERT_EQ(lg.events("violation").size(), 1u) << what << describe(lg);
    EXPECT_EQ(lg.events("violation")[0]["rule"], c.rule);
  }
}
