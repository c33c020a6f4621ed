// Real processes with libtmaguard.so preloaded: nothing may switch the guard off, or make it disturb the job, in
// silence. Template maps draw no warning; a job's own file on descriptor 2 never receives tmaguard's records; a
// blocked log never lets two threads report at once; a child forked while other threads launch is guarded; values
// from the environment cannot forge a record; a log FIFO nobody reads yet still guards.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <thread>

#include "client_run.h"

namespace {

std::string read_all(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string temp_path(const std::string& name) {
  return "/tmp/tmaguard_" + name + "_" + std::to_string(getpid());
}

// CUTLASS's grouped GEMMs encode per-group templates (every dim 1, stride 0, a box larger than the dims) that device
// code fills in: torch._grouped_mm drew two encode warnings on a healthy job before.
TEST(FailClosed, TemplateMapsDrawNoEncodeWarning) {
  const ClientRun r = run_client({"getproc", "launch", "encode_template"});
  ASSERT_TRUE(r.p.exited && r.p.code == 0) << describe(r);
  EXPECT_NE(r.p.out.find("ENCODE rc=0"), std::string::npos) << describe(r);
  EXPECT_TRUE(r.events("encode-warning").empty()) << describe(r);
}

// A job that closes descriptor 2 and opens its own file (which then gets descriptor 2) must find only its own data
// there: tmaguard's records are dropped and counted instead.
TEST(FailClosed, AJobsFileOnDescriptorTwoNeverReceivesRecords) {
  const std::string data = temp_path("data");
  std::remove(data.c_str());
  const ClientRun r = run_client({"getproc", "launch", "stderr_reused"},
                                 {{"TG_DATA_FILE", data}, {"TMAGUARD_LOG", ""}, {"TMAGUARD_MODE", "log"}}, false, false);
  ASSERT_TRUE(r.p.exited && r.p.code == 0) << describe(r);
  EXPECT_EQ(r.ran, 1) << describe(r);
  EXPECT_EQ(read_all(data), "job data\n");
  std::remove(data.c_str());
}

// A log that blocks (a FIFO whose reader stalls) holds one reporting thread; another may wait 2 s at most and then
// drops its record, counted in the summary, without touching what the reporter's lock guards.
TEST(FailClosed, ABlockedLogNeverLetsTwoThreadsReportAtOnce) {
  const std::string fifo = temp_path("fifo");
  std::remove(fifo.c_str());
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  const int rd = ::open(fifo.c_str(), O_RDONLY | O_NONBLOCK);
  ASSERT_GE(rd, 0);
  std::atomic<bool> done{false};
  std::string text;
  std::thread drain([&] {
    const auto start = std::chrono::steady_clock::now();
    while (!done && std::chrono::steady_clock::now() - start < std::chrono::seconds(4))
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    char buf[65536];
    for (;;) {
      const ssize_t n = ::read(rd, buf, sizeof buf);
      if (n > 0) {
        text.append(buf, static_cast<std::size_t>(n));
      } else if (done) {
        break;
      } else {
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      }
    }
  });
  const ClientRun r =
      run_client({"dlsym", "launch", "log_blocked"}, {{"TMAGUARD_LOG", fifo}, {"TMAGUARD_MODE", "log"}});
  done = true;
  drain.join();
  ::close(rd);
  std::remove(fifo.c_str());
  ASSERT_TRUE(r.p.exited && r.p.code == 0) << describe(r);
  std::istringstream lines(text);
  json summary;
  int violations = 0;
  for (std::string line; std::getline(lines, line);) {
    const json j = json::parse(line, nullptr, false);
    if (j.is_discarded()) continue;
    if (j.value("event", "") == "summary") summary = j;
    if (j.value("event", "") == "violation") ++violations;
  }
  ASSERT_TRUE(summary.is_object()) << text.substr(text.size() > 2000 ? text.size() - 2000 : 0);
  EXPECT_GE(summary.value("records_dropped", 0), 1) << summary.dump();
  EXPECT_EQ(violations + summary.value("records_dropped", 0), 201) << "every record written or counted";
}

// A child forked while other threads launch is guarded like its parent (and nothing hangs: the stand-in driver is
// fork-safe as a real one is).
TEST(FailClosed, AChildForkedWhileOtherThreadsLaunchIsGuarded) {
  ProcessOptions opt;
  opt.timeout_s = 60;
  const ClientRun r = run_client({"dlsym", "launch", "fork_while_launching"}, {{"TMAGUARD_MODE", "reject"}}, false, true,
                                 opt);
  ASSERT_TRUE(r.p.exited && r.p.code == 0) << describe(r);
  EXPECT_NE(r.p.out.find("CHILDREN ok=20 of 20"), std::string::npos) << describe(r);
}

// A value from the environment cannot forge a record: RANK with a newline stays inside its own record.
TEST(FailClosed, EnvironmentValuesAreEscapedInTextRecords) {
  const ClientRun r = run_client({"dlsym", "launch", "fa4_dk_bad"},
                                 {{"TMAGUARD_MODE", "log"}, {"RANK", "1\ntmaguard: SUMMARY: forged"}}, false, false);
  ASSERT_TRUE(r.p.exited && r.p.code == 0) << describe(r);
  EXPECT_EQ(r.log_text.find("\ntmaguard: SUMMARY: forged"), std::string::npos) << r.log_text;
  EXPECT_NE(r.log_text.find("rank=1\\ntmaguard: SUMMARY: forged"), std::string::npos) << r.log_text;
}

// A log FIFO nobody reads yet (open fails with ENXIO) still guards: stderr until it opens.
TEST(FailClosed, ALogFifoNobodyReadsYetStillGuards) {
  const std::string fifo = temp_path("fifo_unread");
  std::remove(fifo.c_str());
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  const ClientRun r =
      run_client({"dlsym", "launch", "fa4_dk_bad"}, {{"TMAGUARD_LOG", fifo}, {"TMAGUARD_MODE", "reject"}});
  std::remove(fifo.c_str());
  ASSERT_TRUE(r.p.exited) << describe(r);
  EXPECT_EQ(r.ran, 0) << describe(r);
  EXPECT_NE(r.p.err.find("cannot open TMAGUARD_LOG='" + fifo + "' yet: a FIFO nobody reads yet"), std::string::npos)
      << describe(r);
  EXPECT_NE(r.p.err.find("fa4-dk-not-k-major"), std::string::npos) << describe(r);
}

}  // namespace
