// Real processes with libtmaguard.so preloaded: what bytes must prove before they count as a tensor map (launch.h,
// MapEvidence). A window that is not a map never stops a healthy job, and words the TMA unit does not read never
// hide a bad map where one is known to sit.
#include <gtest/gtest.h>

#include <csignal>
#include <cstdio>

#include "client_run.h"

namespace {

// Float arrays with one round value where word 13 goes once read as device-built NULL-address maps and aborted the
// job (abort mode, the default): no map, no finding, every launch runs.
TEST(Evidence, AFloatArrayParameterNeverStopsAHealthyJob) {
  for (const char* path : {"dlsym", "getproc"}) {
    const ClientRun r = run_client({path, "launch", "float_params"}, {{"TMAGUARD_MODE", "abort"}});
    ASSERT_TRUE(r.p.exited && r.p.code == 0) << describe(r);
    EXPECT_EQ(r.ran, 10) << describe(r);
    EXPECT_TRUE(r.events("violation").empty() && r.events("warning").empty()) << describe(r);
    ASSERT_EQ(r.events("summary").size(), 1u) << describe(r);
    EXPECT_EQ(r.events("summary")[0]["tensor_maps_decoded"], 0) << describe(r);
  }
}

// FA4's backward with each kind of word the TMA unit ignores set in every map (measured on an H200: its stores land
// right): a healthy launch is clean, a transposed dK is stopped in abort and reject mode, in the driver's form and in
// CuTe DSL's.
TEST(Evidence, WordsTheTmaUnitIgnoresNeverHideATransposedDk) {
  for (const char* variant : {"w15", "w17", "w19", "w19_31", "w31", "w2_top", "w16", "w18", "w16_w18"}) {
    for (const char* form : {"--inline", "--cute"}) {
      const ClientRun ok = run_client({"getproc", "ex", "fa4_ignored_words", form},
                                      {{"TG_VARIANT", variant}, {"TMAGUARD_MODE", "abort"}});
      ASSERT_TRUE(ok.p.exited && ok.p.code == 0) << variant << form << "\n" << describe(ok);
      EXPECT_EQ(ok.ran, 2);
      EXPECT_TRUE(ok.events("violation").empty() && ok.events("warning").empty()) << variant << "\n" << describe(ok);
      const ClientRun ab = run_client({"getproc", "ex", "fa4_ignored_words", form},
                                      {{"TG_VARIANT", variant}, {"TG_FA4_BAD", "dk"}, {"TMAGUARD_MODE", "abort"}});
      EXPECT_TRUE(ab.p.signaled && ab.p.signal == SIGABRT) << variant << form << "\n" << describe(ab);
      ASSERT_EQ(ab.events("violation").size(), 1u) << variant << "\n" << describe(ab);
      EXPECT_EQ(ab.events("violation")[0]["rule"], "fa4-dk-not-k-major");
      EXPECT_FALSE(ab.events("violation")[0]["tensor_map"]["ignored_words"].empty()) << describe(ab);
      const ClientRun rej = run_client({"dlsym", "launch", "fa4_ignored_words", form},
                                       {{"TG_VARIANT", variant}, {"TG_FA4_BAD", "dk"}, {"TMAGUARD_MODE", "reject"}});
      EXPECT_EQ(rej.ran, 0) << variant << form << "\n" << describe(rej);
      EXPECT_EQ(rej.failed, 2);
    }
  }
}

// A block inside a CUTLASS Params struct (an aligned pointer, zeros, 0.5f as its word 13) once read as a map: with a
// map_count rule the fifth "map" made a transposed D run; with a rule that counts maps by order, a healthy launch was
// judged against the wrong map. Inside structures only the driver's form is taken.
TEST(Evidence, AFalseMapInsideAStructNeverChangesWhatRulesSee) {
  const std::string example = std::string(TG_SOURCE_DIR) + "/rules/examples/cutlass_gemm_epilogue.toml";
  const ClientRun bad = run_client({"getproc", "launch", "struct_false_block"},
                                   {{"TMAGUARD_RULES", example}, {"TG_STRUCT_BAD", "d"}, {"TMAGUARD_MODE", "reject"}});
  EXPECT_EQ(bad.ran, 0) << describe(bad);
  ASSERT_GE(bad.events("violation").size(), 1u) << describe(bad);
  EXPECT_EQ(bad.events("violation")[0]["rule"], "gemm-d-layout");
  const std::string by_order = write_file("by_order.toml", R"([[rule]]
id = "d-like-c-by-order"
kernel = "GemmUniversal"
[rule.maps]
C = 2
D = 3
[[rule.check]]
kind = "same_innermost"
a = "D"
b = "C"
)");
  const ClientRun ok = run_client({"getproc", "launch", "struct_false_block"},
                                  {{"TMAGUARD_RULES", by_order}, {"TMAGUARD_MODE", "reject"}});
  EXPECT_EQ(ok.ran, 5) << describe(ok);
  EXPECT_TRUE(ok.events("violation").empty()) << describe(ok);
  const ClientRun ins = run_client({"getproc", "launch", "struct_false_block"}, {{"TMAGUARD_MODE", "inspect"}});
  ASSERT_EQ(ins.events("inspect").size(), 1u) << describe(ins);
  EXPECT_EQ(ins.events("inspect")[0]["tensor_maps"].size(), 4u) << describe(ins);
  std::remove(by_order.c_str());
}

// Word 2 bit 21 decides whether a would-reject finding is an error: a launch with it set (a warning, remembered as
// clean) and the same bytes without it (an error) are different launches to the clean-launch cache.
TEST(Evidence, TheCleanCacheKeysEveryBitThatChangesAVerdict) {
  const ClientRun r = run_client({"dlsym", "launch", "bit21_repeat"}, {{"TMAGUARD_MODE", "reject"}});
  ASSERT_TRUE(r.p.exited) << describe(r);
  EXPECT_NE(r.p.out.find("BIT21 with=0 without=1"), std::string::npos) << describe(r);
  EXPECT_EQ(r.ran, 1) << describe(r);
  ASSERT_EQ(r.events("violation").size(), 1u) << describe(r);
  EXPECT_EQ(r.events("violation")[0]["rule"], "tmap-driver-would-reject");
}

}  // namespace
