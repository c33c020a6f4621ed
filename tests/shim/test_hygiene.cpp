// Real processes with libtmaguard.so preloaded in front of the stand-in driver: processes that never touch CUDA, and
// tmaguard's own failures (one line, then step aside).
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>

#include "client_run.h"

namespace {

// ---- a process that never touches CUDA, and tmaguard's own failures
TEST(Hygiene, ProcessThatNeverTouchesCudaSeesNothing) {
  const std::string log = "/tmp/tmaguard_nocuda.log";
  std::remove(log.c_str());
  const ProcessResult p =
      run_process({TG_CLIENT, "nocuda"}, {{"LD_PRELOAD", TG_LIB}, {"TMAGUARD_LOG", log}, {"TMAGUARD_MODE", "bogus"}});
  EXPECT_TRUE(p.exited && p.code == 0);
  EXPECT_EQ(p.out, "no CUDA here\n");
  EXPECT_TRUE(p.err.empty()) << p.err;
  EXPECT_FALSE(std::ifstream(log).good()) << "no log file may be created";
  const ProcessResult sh = run_process({"/bin/sh", "-c", "echo hi | cat"}, {{"LD_PRELOAD", TG_LIB}});
  EXPECT_EQ(sh.out, "hi\n");
  EXPECT_TRUE(sh.err.empty()) << sh.err;
}

TEST(Hygiene, BadModeSaysSoOnceAndTheJobRunsUnguarded) {
  const ClientRun r = run_client({"dlsym", "launch", "fa4_dk_bad"}, {{"TMAGUARD_MODE", "abrot"}});
  ASSERT_TRUE(r.p.exited && r.p.code == 0) << describe(r);
  EXPECT_EQ(r.ran, 3);
  EXPECT_EQ(
      r.p.err,
      "tmaguard: cannot work: TMAGUARD_MODE='abrot' is not one of abort, reject, log, inspect, off; the job runs on "
      "unguarded\n");
}

TEST(Hygiene, UnwritableLogPathSaysSoOnce) {
  const ClientRun r = run_client({"dlsym", "launch", "fa4_dk_bad"}, {{"TMAGUARD_LOG", "/dev/null/tg.log"}});
  ASSERT_TRUE(r.p.exited && r.p.code == 0) << describe(r);
  EXPECT_EQ(r.ran, 3);
  EXPECT_EQ(r.p.err.rfind("tmaguard: cannot work: cannot open TMAGUARD_LOG='/dev/null/tg.log'", 0), 0u) << r.p.err;
  EXPECT_EQ(std::count(r.p.err.begin(), r.p.err.end(), '\n'), 1);
}

// A TMAGUARD_LIBCUDA naming no file, in a job that already runs on a driver: said once, and the job's driver is
// guarded (a launch with a transposed dK is still rejected).
TEST(Hygiene, MissingDriverPathSaysSoOnceAndTheJobsDriverIsGuarded) {
  const ClientRun r = run_client({"dlsym", "launch", "fa4_dk_bad"},
                                 {{"TMAGUARD_LIBCUDA", "/nonexistent/libcuda.so.1"}, {"TMAGUARD_MODE", "reject"}});
  ASSERT_TRUE(r.p.exited) << describe(r);
  EXPECT_EQ(r.ran, 0) << describe(r);
  EXPECT_EQ(r.p.err.rfind("tmaguard: warning: TMAGUARD_LIBCUDA='/nonexistent/libcuda.so.1' names no file (No such file "
                          "or directory); the job uses '",
                          0),
            0u)
      << r.p.err;
  EXPECT_EQ(std::count(r.p.err.begin(), r.p.err.end(), '\n'), 1) << r.p.err;
}

TEST(Hygiene, DriverWithoutParameterInfoSaysSoOnce) {
  const ClientRun r = run_client({"dlsym", "launch", "fa4_dk_bad"}, {{"LD_LIBRARY_PATH", TG_FAKE_OLD_DIR}});
  ASSERT_TRUE(r.p.exited && r.p.code == 0) << describe(r);
  EXPECT_EQ(r.ran, 3) << "the job runs on, unguarded";
  EXPECT_EQ(r.p.err,
            "tmaguard: cannot work: the CUDA driver lacks cuFuncGetParamInfo/cuKernelGetParamInfo (needs a CUDA 12.4+ "
            "driver); the job runs on unguarded\n");
}

}  // namespace
