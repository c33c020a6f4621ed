// Real processes with libtmaguard.so preloaded in front of the stand-in driver: abort/reject/log/off, FA4
// signatures, kernels no rule matches, descriptors filled inline.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>

#include "client_run.h"

namespace {

// ---- modes
TEST(Modes, RejectReturnsErrorAndTheKernelDoesNotRun) {
  const ClientRun r = run_client({"getproc", "launch", "fa4_dk_bad"}, {{"TMAGUARD_MODE", "reject"}});
  ASSERT_TRUE(r.p.exited) << describe(r);
  EXPECT_EQ(r.p.code, 3);
  EXPECT_EQ(r.failed, 3);
  EXPECT_EQ(r.ran, 0);
  const auto v = r.events("violation");
  ASSERT_EQ(v.size(), 1u) << "reported once, then counted\n" << describe(r);
  EXPECT_EQ(v[0]["action"], "reject");
  EXPECT_EQ(r.events("summary")[0]["violations"]["fa4-dk-not-k-major"], 3);
}

TEST(Modes, LogReportsAndTheKernelRuns) {
  const ClientRun r = run_client({"dlsym", "ex", "fa4_dk_bad"}, {{"TMAGUARD_MODE", "log"}});
  ASSERT_TRUE(r.p.exited && r.p.code == 0) << describe(r);
  EXPECT_EQ(r.ran, 3);
  ASSERT_EQ(r.events("violation").size(), 1u) << describe(r);
  EXPECT_EQ(r.events("violation")[0]["action"], "log");
}

TEST(Modes, OffPassesEverythingThroughSilently) {
  const ClientRun r = run_client({"dlsym", "launch", "fa4_dk_bad"}, {{"TMAGUARD_MODE", "off"}});
  ASSERT_TRUE(r.p.exited && r.p.code == 0) << describe(r);
  EXPECT_EQ(r.ran, 3);
  EXPECT_TRUE(r.log_text.empty()) << describe(r);
  EXPECT_TRUE(r.p.err.empty()) << describe(r);
}

TEST(Modes, RejectModeReportsOnlyDv) {
  const ClientRun r = run_client({"getproc", "ex", "fa4_dv_bad"}, {{"TMAGUARD_MODE", "reject"}});
  ASSERT_EQ(r.events("violation").size(), 1u) << describe(r);
  const json v = r.events("violation")[0];
  EXPECT_EQ(v["rule"], "fa4-dv-not-k-major");
  EXPECT_EQ(v["tensor"], "dV");
  EXPECT_EQ(v["param_index"], 6);  // params: int, Q, K, V, float, dO, dV, dK, int64
  EXPECT_EQ(r.ran, 0);
}

// ---- FA4 signatures and kernels no rule matches
TEST(Fa4, TwoCtaSignature) {
  EXPECT_EQ(run_client({"getproc", "ex", "fa4_2cta_ok"}).events("violation").size(), 0u);
  const ClientRun r = run_client({"getproc", "ex", "fa4_2cta_dk_bad"}, {{"TMAGUARD_MODE", "reject"}});
  ASSERT_EQ(r.events("violation").size(), 1u) << describe(r);
  EXPECT_EQ(r.events("violation")[0]["param_index"], 10);  // int, Q, Qt, K, float, Kt, V, dO, dOt, dV, dK
  EXPECT_EQ(r.ran, 0);
}

TEST(Fa4, PostprocessSignatureHasNothingToCheck) {
  for (const char* sc : {"fa4_postprocess", "fa4_2cta_postprocess"}) {
    const ClientRun r = run_client({"dlsym", "launch", sc});
    EXPECT_TRUE(r.p.exited && r.p.code == 0) << describe(r);
    EXPECT_EQ(r.ran, 1);
    EXPECT_TRUE(r.events("violation").empty() && r.events("warning").empty()) << describe(r);
  }
}

TEST(Fa4, UnexpectedMapCountWarnsOnceAndNeverAborts) {
  const ClientRun r = run_client({"dlsym", "launch", "fa4_odd_count"});
  ASSERT_TRUE(r.p.exited && r.p.code == 0) << describe(r);
  EXPECT_EQ(r.ran, 2);
  ASSERT_EQ(r.events("warning").size(), 1u) << describe(r);
  EXPECT_EQ(r.events("warning")[0]["rule"], "fa4-unexpected-map-count");
}

TEST(Kernels, NoRuleMatchesNoReport) {
  const ClientRun r = run_client({"dlsym", "launch", "unmatched"});
  ASSERT_TRUE(r.p.exited && r.p.code == 0) << describe(r);
  EXPECT_EQ(r.ran, 5);
  EXPECT_TRUE(r.events("violation").empty());
  EXPECT_EQ(r.events("summary")[0]["launches_checked"], 0);
  EXPECT_EQ(r.events("summary")[0]["launches_seen"], 5);
}

TEST(Kernels, HealthyMapsOfOtherKernelsIncludingMnMajor) {
  const ClientRun r = run_client({"getproc", "launch", "other_maps_ok"});
  ASSERT_TRUE(r.p.exited && r.p.code == 0) << describe(r);
  EXPECT_TRUE(r.events("violation").empty()) << describe(r);
  EXPECT_EQ(r.events("summary")[0]["tensor_maps_decoded"], 4);
}

// ---- descriptors filled inline (CuTe DSL): no encode call at all
TEST(Inline, InlineFa4DescriptorsAreCheckedToo) {
  const ClientRun ok = run_client({"getproc", "ex", "fa4_ok", "--inline"});
  EXPECT_TRUE(ok.p.exited && ok.p.code == 0) << describe(ok);
  const ClientRun bad =
      run_client({"getproc", "ex", "fa4_dk_bad", "--inline", "--cukernel"}, {{"TMAGUARD_MODE", "reject"}});
  ASSERT_EQ(bad.events("violation").size(), 1u) << describe(bad);
  EXPECT_EQ(bad.events("violation")[0]["rule"], "fa4-dk-not-k-major");
  EXPECT_NE(bad.events("violation")[0]["provenance"].get<std::string>().find("filled inline"), std::string::npos);
  EXPECT_EQ(bad.ran, 0);
}

// CuTe DSL's own form (FlashAttention-4's encoder) in every mode, through the path CuTe DSL launches by (a CUkernel,
// cuLaunchKernelEx with a cluster attribute): the record names the encoder and explains the large-tensor flag.
TEST(Inline, CuteDslFormIsStoppedInEveryMode) {
  const ClientRun ok = run_client({"getproc", "ex", "fa4_ok", "--cute", "--cukernel"});
  EXPECT_TRUE(ok.p.exited && ok.p.code == 0) << describe(ok);
  EXPECT_TRUE(ok.events("violation").empty() && ok.events("warning").empty()) << describe(ok);
  const ClientRun aborted = run_client({"getproc", "ex", "fa4_dk_bad", "--cute", "--cukernel"});
  EXPECT_TRUE(aborted.p.signaled && aborted.p.signal == SIGABRT) << describe(aborted);
  ASSERT_EQ(aborted.events("violation").size(), 1u) << describe(aborted);
  EXPECT_EQ(aborted.events("violation")[0]["action"], "abort");
  const ClientRun rejected =
      run_client({"getproc", "ex", "fa4_dv_bad", "--cute", "--cukernel"}, {{"TMAGUARD_MODE", "reject"}});
  EXPECT_EQ(rejected.ran, 0);
  ASSERT_EQ(rejected.events("violation").size(), 1u) << describe(rejected);
  EXPECT_EQ(rejected.events("violation")[0]["rule"], "fa4-dv-not-k-major");
  const ClientRun logged = run_client({"getproc", "ex", "fa4_dk_bad", "--cute", "--cukernel"}, {{"TMAGUARD_MODE", "log"}});
  EXPECT_EQ(logged.ran, 3);
  ASSERT_EQ(logged.events("violation").size(), 1u) << describe(logged);
  const json map = logged.events("violation")[0]["tensor_map"];
  EXPECT_EQ(map["encoder"], "CuTe DSL") << describe(logged);
  EXPECT_EQ(map["large_tensor_flag"], true) << describe(logged);
  EXPECT_TRUE(map["tile_bytes"].is_null()) << "the form leaves the word empty: no misleading 0";
}

TEST(Inline, DescriptorTheDriverWouldRejectIsAnError) {
  const ClientRun r = run_client({"dlsym", "launch", "inline_bad_descriptor"}, {{"TMAGUARD_MODE", "reject"}});
  ASSERT_EQ(r.events("violation").size(), 1u) << describe(r);
  EXPECT_EQ(r.events("violation")[0]["rule"], "tmap-driver-would-reject");
  EXPECT_EQ(r.events("violation")[0]["tensor"], "param 1");
  EXPECT_EQ(r.ran, 0);
}

}  // namespace
