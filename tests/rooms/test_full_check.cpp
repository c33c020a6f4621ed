// The launch room's full check without a process: what check_launch judges, counts and remembers of one launch.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "fakecuda.h"
#include "launch/full_check.h"
#include "memo/memo.h"
#include "report/reporter.h"
#include "room_launch.h"
#include "room_maps.h"
#include "room_mode.h"
#include "runtime/intercept.h"
#include "tmaguard/tensormap.h"

namespace tmaguard {
namespace {

// A kernel no rule names, with a 128-byte map parameter and an int: what every map gets, the generic checks.
CUfunction define(const char* name) {
  const std::vector<std::size_t> sizes = {kTensorMapBytes, 4};
  return static_cast<CUfunction>(fakecuda_define_kernel(name, 2, sizes.data(), 0));
}

// One launch's parameters, as a wrapper sees them.
struct Launch {
  alignas(64) uint8_t map[kTensorMapBytes] = {};
  int n = 7;
  void* params[2] = {map, &n};
  LaunchView view(CUfunction f) { return launch_of(f, params); }
};

// check_launch as a launch wrapper calls it, inside its Intercepted call.
Verdict check(const LaunchView& v) {
  const Intercepted call;
  return check_launch(call, v);
}

uint64_t errors(const Summary& s, const std::string& rule) { return count_of(s.violations_by_rule, rule); }

TEST(LaunchCheck, AHealthyMapIsJudgedOnceAndItsRepeatPassesByTheMemo) {
  const CUfunction f = define("launch_check_healthy_kernel");
  Launch l;
  ASSERT_EQ(encode(half_map(0x7f0000000000), l.map), 0);
  const LaunchView v = l.view(f);
  EXPECT_FALSE(fast_pass(v)) << "a kernel never launched is known to nobody";
  const Summary before = current_summary();
  EXPECT_EQ(check(v), Verdict::kRun);
  const Summary after = current_summary();
  EXPECT_EQ(after.launches_checked, before.launches_checked + 1);
  EXPECT_EQ(after.tensor_maps_decoded, before.tensor_maps_decoded + 1);
  EXPECT_EQ(after.violations_by_rule, before.violations_by_rule);
  EXPECT_EQ(after.warnings_by_rule, before.warnings_by_rule);
  EXPECT_TRUE(fast_pass(v)) << "the same bytes again: the memo knows them clean";
  l.n = 9;  // a parameter that is no map: the same launch to the memo
  EXPECT_TRUE(fast_pass(v));
  l.map[0] ^= 0x10;  // the map's address moves by 16 bytes: bytes the memo never saw
  EXPECT_FALSE(fast_pass(v));
}

TEST(LaunchCheck, AMapOverAddressZeroIsAnErrorCountedEachTimeAndNeverRemembered) {
  const CUfunction f = define("launch_check_null_kernel");
  Launch l;
  ASSERT_EQ(encode(half_map(0), l.map), 0);
  const LaunchView v = l.view(f);
  const InMode log(Mode::kLog);
  const uint64_t before = errors(current_summary(), "tmap-null-address");
  EXPECT_EQ(check(v), Verdict::kRun) << "log mode: the launch runs, the finding is said";
  EXPECT_EQ(errors(current_summary(), "tmap-null-address"), before + 1);
  EXPECT_FALSE(fast_pass(v)) << "a launch with an error is never remembered as clean";
  EXPECT_FALSE(slow_pass(v));
  EXPECT_EQ(check(v), Verdict::kRun);
  EXPECT_EQ(errors(current_summary(), "tmap-null-address"), before + 2) << "every bad launch counts, said or not";
  ASSERT_EQ(encode(half_map(0x7f0000100000), l.map), 0);  // the caller fixes the map: judged, then remembered
  EXPECT_EQ(check(v), Verdict::kRun);
  EXPECT_EQ(errors(current_summary(), "tmap-null-address"), before + 2);
  EXPECT_TRUE(fast_pass(v));
}

}  // namespace
}  // namespace tmaguard
