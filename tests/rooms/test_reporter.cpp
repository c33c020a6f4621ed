// The report room without a process: what a finding does in each mode, what is said once and what is counted.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "report/reporter.h"
#include "room_launch.h"
#include "room_mode.h"
#include "tmaguard/config.h"

namespace tmaguard {
namespace {

Finding finding(const std::string& kernel, Severity severity = Severity::kError) {
  Finding f;
  f.rule = "tmap-null-address";
  f.severity = severity;
  f.kernel = kernel;
  f.tensor = "param 0";
  f.expected = "a tensor map over a tensor";
  f.observed = "a tensor map whose global address is 0";
  return f;
}

TEST(Reporter, AFindingIsWrittenOnceAndCountedEveryTime) {
  const InMode log(Mode::kLog);
  std::vector<Finding> first = {finding("reporter_kernel_once")};
  EXPECT_TRUE(findings_unreported(first));
  const uint64_t before = count_of(current_summary().violations_by_rule, "tmap-null-address");
  EXPECT_EQ(report_findings(first), Verdict::kRun) << "log mode: the launch runs";
  EXPECT_FALSE(findings_unreported(first)) << "its record was written: a repeat writes none";
  std::vector<Finding> again = {finding("reporter_kernel_once")};
  EXPECT_EQ(report_findings(again), Verdict::kRun);
  EXPECT_EQ(count_of(current_summary().violations_by_rule, "tmap-null-address"), before + 2);
  EXPECT_TRUE(findings_unreported({finding("reporter_kernel_other")})) << "another kernel's finding is its own";
}

TEST(Reporter, RejectModeRefusesALaunchWithAnErrorNeverOneWithAWarning) {
  const InMode reject(Mode::kReject);
  std::vector<Finding> error = {finding("reporter_kernel_reject")};
  EXPECT_EQ(report_findings(error), Verdict::kReject);
  std::vector<Finding> warning = {finding("reporter_kernel_warn", Severity::kWarning)};
  const uint64_t before = count_of(current_summary().warnings_by_rule, "tmap-null-address");
  EXPECT_EQ(report_findings(warning), Verdict::kRun);
  EXPECT_EQ(count_of(current_summary().warnings_by_rule, "tmap-null-address"), before + 1);
  std::vector<Finding> none;
  EXPECT_EQ(report_findings(none), Verdict::kRun);
}

}  // namespace
}  // namespace tmaguard
