// Real processes with libtmaguard.so preloaded in front of the stand-in driver: many threads, exited threads, fork.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>

#include "client_run.h"

namespace {

// ---- concurrency and fork
TEST(Threads, EightThreadsLaunchingAtOnce) {
  const ClientRun r = run_client({"getproc", "launch_ptsz", "threads"});
  ASSERT_TRUE(r.p.exited && r.p.code == 0) << describe(r);
  EXPECT_EQ(r.ran, 4000);
  EXPECT_EQ(r.events("summary")[0]["launches_seen"], 4000);
}

TEST(Threads, HundredThreadsSomeExitedAllCountedExactly) {
  const ClientRun r = run_client({"dlsym", "launch", "threads_many"});
  ASSERT_TRUE(r.p.exited && r.p.code == 0) << describe(r);
  EXPECT_EQ(r.ran, 1010);
  const auto s = r.events("summary");
  ASSERT_EQ(s.size(), 1u) << describe(r);
  EXPECT_EQ(s[0]["launches_seen"], 1010);
  EXPECT_EQ(s[0]["launches_checked"], 510) << "the FA4 kernel's launches (50 threads x 10, and 10 from main)";
}

TEST(Threads, EightThreadsRejectingOneReportAllCounted) {
  const ClientRun r = run_client({"dlsym", "launch", "threads_bad"}, {{"TMAGUARD_MODE", "reject"}});
  EXPECT_EQ(r.failed, 1600) << describe(r);
  EXPECT_EQ(r.ran, 0);
  EXPECT_EQ(r.events("violation").size(), 1u);
  EXPECT_EQ(r.events("summary")[0]["violations"]["fa4-dk-not-k-major"], 1600);
}

TEST(Fork, ChildIsGuardedAndBothReport) {
  const ClientRun r = run_client({"dlsym", "launch", "fork"}, {{"TMAGUARD_MODE", "log"}});
  ASSERT_TRUE(r.p.exited && r.p.code == 0) << describe(r);
  EXPECT_NE(r.p.out.find("CHILD ok=3 failed=0 ran_bad=1"), std::string::npos) << describe(r);
  const auto v = r.events("violation");
  ASSERT_EQ(v.size(), 1u) << describe(r);
  const auto s = r.events("summary");
  ASSERT_EQ(s.size(), 2u) << "one summary per process\n" << describe(r);
  EXPECT_EQ(v[0]["pid"], s[0]["pid"]) << "the child reports first, under its own pid";
  EXPECT_NE(s[0]["pid"], s[1]["pid"]);
  EXPECT_EQ(s[0]["launches_seen"], 2) << "the child counts only its own launches";
  EXPECT_EQ(s[1]["launches_seen"], 2) << "the parent: one launch before fork, one after";
}

}  // namespace
