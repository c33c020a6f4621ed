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

// The same when the job replaced descriptor 2 before its first CUDA call, so that tmaguard never saw its stderr: a
// file opened with close-on-exec (as Python opens every file) or created after the process started is not taken for
// stderr at all. A stderr a parent redirected to a file it just created still gets the records.
TEST(FailClosed, ADescriptorTwoTheJobOpenedBeforeItsFirstCudaCallNeverReceivesRecords) {
  for (const char* how : {"cloexec", "late"}) {
    const std::string data = temp_path(std::string("data_first_") + how);
    std::remove(data.c_str());
    const ClientRun r = run_client({"getproc", "launch", "stderr_reused"},
                                   {{"TG_DATA_FILE", data}, {"TG_STDERR_FIRST", how}, {"TMAGUARD_LOG", ""},
                                    {"TMAGUARD_MODE", "log"}},
                                   false, false);
    ASSERT_TRUE(r.p.exited && r.p.code == 0) << how << "\n" << describe(r);
    EXPECT_EQ(r.ran, 1) << describe(r);
    EXPECT_EQ(read_all(data), "job data\n") << how;
    std::remove(data.c_str());
  }
  const std::string err = temp_path("redirected_stderr");
  std::remove(err.c_str());
  const ProcessResult sh =
      run_process({"/bin/sh", "-c", std::string("exec \"$0\" dlsym launch fa4_dk_bad 2>\"$1\""), TG_CLIENT, err},
                  {{"LD_PRELOAD", TG_LIB}, {"LD_LIBRARY_PATH", TG_FAKE_DIR}, {"TMAGUARD_LOG", ""},
                   {"TMAGUARD_MODE", "log"}, {"TMAGUARD_LOG_FORMAT", ""}});
  ASSERT_TRUE(sh.exited && sh.code == 0) << sh.out << sh.err;
  const std::string text = read_all(err);
  EXPECT_NE(text.find("fa4-dk-not-k-major"), std::string::npos) << text;
  EXPECT_NE(text.find("SUMMARY"), std::string::npos) << text;
  std::remove(err.c_str());
}

// fork() never waits on a log that blocks: with the log thread held in a write to a FIFO whose reader stalls (4 s),
// another thread forks at once and each child is guarded.
TEST(FailClosed, ForkNeverWaitsBehindAStalledLog) {
  const std::string fifo = temp_path("fifo_stalled");
  std::remove(fifo.c_str());
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  const int rd = ::open(fifo.c_str(), O_RDONLY | O_NONBLOCK);
  ASSERT_GE(rd, 0);
  std::atomic<bool> done{false};
  std::thread drain([&] {
    const auto start = std::chrono::steady_clock::now();
    while (!done && std::chrono::steady_clock::now() - start < std::chrono::seconds(4))
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    char buf[65536];
    for (;;) {
      const ssize_t n = ::read(rd, buf, sizeof buf);
      if (n > 0) continue;
      if (done) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  });
  ProcessOptions opt;
  opt.timeout_s = 60;
  const ClientRun r = run_client({"dlsym", "launch", "fork_behind_stalled_log"},
                                 {{"TMAGUARD_LOG", fifo}, {"TMAGUARD_MODE", "reject"}}, false, true, opt);
  done = true;
  drain.join();
  ::close(rd);
  std::remove(fifo.c_str());
  ASSERT_TRUE(r.p.exited) << describe(r);
  long long slowest = -1;
  int ok = -1;
  const auto at = r.p.out.find("FORKS slowest_ms=");
  ASSERT_NE(at, std::string::npos) << describe(r);
  std::sscanf(r.p.out.c_str() + at, "FORKS slowest_ms=%lld children_ok=%d", &slowest, &ok);
  EXPECT_EQ(ok, 5) << describe(r);
  EXPECT_LT(slowest, 1000) << "fork() waited behind the stalled log";
}

// A log that blocks (a FIFO whose reader stalls for 2.5 s) holds no launching thread: records wait in the log
// thread's queue, a launch that reports returns at once, and once the reader reads again every record is there (or
// counted as dropped), the summary last.
TEST(FailClosed, ABlockedLogHoldsNoLaunch) {
  const std::string fifo = temp_path("fifo");
  std::remove(fifo.c_str());
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  const int rd = ::open(fifo.c_str(), O_RDONLY | O_NONBLOCK);
  ASSERT_GE(rd, 0);
  std::atomic<bool> done{false};
  std::string text;
  std::thread drain([&] {
    const auto start = std::chrono::steady_clock::now();
    while (!done && std::chrono::steady_clock::now() - start < std::chrono::milliseconds(2500))
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
  EXPECT_EQ(violations + summary.value("records_dropped", 0), 201) << "every record written or counted";
  long long late_ms = -1;
  const auto at = r.p.out.find("LATE_DONE ms=");
  ASSERT_NE(at, std::string::npos) << describe(r);
  std::sscanf(r.p.out.c_str() + at, "LATE_DONE ms=%lld", &late_ms);
  EXPECT_LT(late_ms, 1000) << "a launch that reports while the log is stalled returns at once";
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

// A host memory shortage during checks never switches the guard off: each launch tmaguard could not check for want
// of memory is refused in reject mode (CUDA_ERROR_OUT_OF_MEMORY, it does not run), counted in the summary and said in
// the log; once memory is back, the same bad launch is judged and rejected again, and a healthy one runs.
TEST(FailClosed, AnAllocationFailureNeverSwitchesTheGuardOff) {
  const ClientRun r = run_client({"dlsym", "launch", "alloc_failure"},
                                 {{"LD_PRELOAD", std::string(TG_LIB) + ":" + TG_FAIL_ALLOC}, {"TMAGUARD_MODE", "reject"}});
  ASSERT_TRUE(r.p.exited && r.p.code == 0) << describe(r);
  EXPECT_NE(r.p.out.find("ALLOC before=1 during_oom=64 of 64 after=1 healthy=0"), std::string::npos) << describe(r);
  EXPECT_EQ(r.ran, 0) << "no bad launch ran, during the shortage or after it";
  const auto summary = r.events("summary");
  ASSERT_EQ(summary.size(), 1u) << describe(r);
  EXPECT_EQ(summary[0]["launches_not_checked"]["no memory to check it"], 64) << summary[0].dump();
  bool said = false;
  for (const json& n : r.events("not-checked")) said |= n.value("message", "").find("no memory") != std::string::npos;
  EXPECT_TRUE(said) << describe(r);
  // Log mode lets what it could not check run, and says so all the same.
  const ClientRun log = run_client({"dlsym", "launch", "alloc_failure"},
                                   {{"LD_PRELOAD", std::string(TG_LIB) + ":" + TG_FAIL_ALLOC}, {"TMAGUARD_MODE", "log"}});
  ASSERT_TRUE(log.p.exited && log.p.code == 0) << describe(log);
  EXPECT_NE(log.p.out.find("during_oom=0 of 64"), std::string::npos) << describe(log);
  EXPECT_EQ(log.ran, 66) << describe(log);
  EXPECT_EQ(log.events("summary")[0]["launches_not_checked"]["no memory to check it"], 64) << describe(log);
}

// A launch from a signal handler that interrupted another tmaguard call of its thread cannot be checked there (no
// lock may be taken): every one that ran is counted in the summary and said in the log; the others are rejected.
TEST(FailClosed, LaunchesFromASignalHandlerAreCountedAndSaid) {
  const ClientRun r =
      run_client({"getproc", "launch", "launch_from_signal_handler"}, {{"TMAGUARD_MODE", "reject"}});
  ASSERT_TRUE(r.p.exited && r.p.code == 0) << describe(r);
  int calls = -1, ran = -1;
  const auto at = r.p.out.find("HANDLER calls=");
  ASSERT_NE(at, std::string::npos) << describe(r);
  std::sscanf(r.p.out.c_str() + at, "HANDLER calls=%d ran=%d", &calls, &ran);
  ASSERT_GT(calls, 100) << describe(r);
  ASSERT_GT(ran, 0) << "no handler launch interrupted a tmaguard call: the test proves nothing\n" << describe(r);
  const auto summary = r.events("summary");
  ASSERT_EQ(summary.size(), 1u) << describe(r);
  EXPECT_EQ(summary[0]["launches_not_checked"]["made inside another tmaguard call on its thread (a signal handler)"],
            ran)
      << summary[0].dump();
  bool said = false;
  for (const json& n : r.events("not-checked"))
    said |= n.value("message", "").find("ran unchecked: they were made while their thread was inside another "
                                        "tmaguard call") != std::string::npos;
  EXPECT_TRUE(said) << describe(r);
}

}  // namespace
