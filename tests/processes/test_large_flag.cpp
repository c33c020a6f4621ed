// Real processes with libtmaguard.so preloaded: the Blackwell driver's large-tensor-flag hazard (NVIDIA 595.71.05
// release notes). The stand-in plays an affected Blackwell (FAKECUDA_AFFECTED_BLACKWELL=1: compute capability 10.0,
// driver 13010, bit 85 set over small tensors that are not dense). A map it encodes so is stopped like any error;
// TMAGUARD_REPAIR=large-tensor-flag clears the bit at the encode instead; neither happens on a platform the notes do
// not name.
#include <gtest/gtest.h>

#include <csignal>

#include "client_run.h"

namespace {

ClientRun run_flag(std::map<std::string, std::string> env) {
  env.emplace("FAKECUDA_AFFECTED_BLACKWELL", "1");
  env.emplace("TMAGUARD_MODE", "reject");
  return run_client({"getproc", "ex", "large_flag"}, env);
}

}  // namespace

TEST(LargeFlag, TheHazardIsAnErrorInEveryMode) {
  const ClientRun rej = run_flag({});
  ASSERT_TRUE(rej.p.exited) << describe(rej);
  EXPECT_EQ(rej.ran, 0) << describe(rej);
  ASSERT_EQ(rej.events("violation").size(), 1u) << describe(rej);
  const auto v = rej.events("violation")[0];
  EXPECT_EQ(v["rule"], "tmap-large-flag-small-tensor");
  EXPECT_EQ(v["kernel"], "blackwell_gemm_epilogue");
  const std::string observed = v["observed"].get<std::string>();
  EXPECT_NE(observed.find("spans 25472 bytes"), std::string::npos) << observed;
  EXPECT_NE(observed.find("sm_100 with driver 13.1 (13010)"), std::string::npos) << observed;
  EXPECT_NE(observed.find("; its allocation [0x7f0000000000, "), std::string::npos) << observed;
  EXPECT_NE(v["hint"].get<std::string>().find("TMAGUARD_REPAIR=large-tensor-flag"), std::string::npos);
  const ClientRun ab = run_flag({{"TMAGUARD_MODE", "abort"}});
  EXPECT_TRUE(ab.p.signaled && ab.p.signal == SIGABRT) << describe(ab);
  const ClientRun lg = run_flag({{"TMAGUARD_MODE", "log"}});
  ASSERT_TRUE(lg.p.exited && lg.p.code == 0) << describe(lg);
  EXPECT_EQ(lg.ran, 2) << describe(lg);
  EXPECT_EQ(lg.events("violation").size(), 1u) << "the repeat launch is the same layout\n" << describe(lg);
}

// Where the notes say nothing, nothing is said: a dense or large tensor (the stand-in leaves the flag clear, or it is
// right), a driver newer than 13.1 other than 13.2/13.3's forward compatibility, a Hopper GPU.
TEST(LargeFlag, SilentWhereTheNotesNameNoHazard) {
  for (const auto& env : std::vector<std::map<std::string, std::string>>{
           {{"TG_LARGE_TENSOR", "dense"}},
           {{"TG_LARGE_TENSOR", "big"}},
           {{"FAKECUDA_DRIVER_VERSION", "13040"}},
           {{"FAKECUDA_DRIVER_VERSION", "13100"}},
           {{"FAKECUDA_CC", "9.0"}}}) {
    const ClientRun r = run_flag(env);
    ASSERT_TRUE(r.p.exited && r.p.code == 0) << describe(r);
    EXPECT_EQ(r.ran, 2) << describe(r);
    EXPECT_TRUE(r.events("violation").empty()) << describe(r);
  }
  for (const char* v : {"13020", "13030", "12080"}) {  // the forward-compatibility drivers, and an older one
    const ClientRun r = run_flag({{"FAKECUDA_DRIVER_VERSION", v}});
    ASSERT_EQ(r.events("violation").size(), 1u) << v << "\n" << describe(r);
  }
}

// The repair: bit 85 cleared where the driver set it, each map counted, said once; the launch then runs clean. On a
// platform the notes do not name it touches nothing (the flag stays, and nothing is judged of it).
TEST(LargeFlag, RepairClearsTheFlagOnlyWhereItIsAHazard) {
  const ClientRun r = run_flag({{"TMAGUARD_REPAIR", "large-tensor-flag"}});
  ASSERT_TRUE(r.p.exited && r.p.code == 0) << describe(r);
  EXPECT_EQ(r.ran, 2) << describe(r);
  EXPECT_TRUE(r.events("violation").empty()) << describe(r);
  ASSERT_EQ(r.events("repair").size(), 1u) << describe(r);
  EXPECT_NE(r.events("repair")[0]["message"].get<std::string>().find("spanning 25472 bytes"), std::string::npos)
      << describe(r);
  ASSERT_EQ(r.events("summary").size(), 1u) << describe(r);
  EXPECT_EQ(r.events("summary")[0]["large_flags_cleared"], 1) << describe(r);
  for (const char* v : {"13040", "13100"}) {
    const ClientRun u = run_flag({{"TMAGUARD_REPAIR", "large-tensor-flag"}, {"FAKECUDA_DRIVER_VERSION", v}});
    ASSERT_TRUE(u.p.exited && u.p.code == 0) << describe(u);
    EXPECT_TRUE(u.events("repair").empty()) << describe(u);
    EXPECT_FALSE(u.events("summary")[0].contains("large_flags_cleared")) << describe(u);
  }
  const ClientRun bad = run_flag({{"TMAGUARD_REPAIR", "everything"}});
  EXPECT_TRUE(bad.p.exited && bad.p.code == 78) << describe(bad);
  EXPECT_NE(bad.p.err.find("TMAGUARD_REPAIR"), std::string::npos) << describe(bad);
  EXPECT_EQ(bad.ran, -1) << "stopped before its first launch\n" << describe(bad);
}
