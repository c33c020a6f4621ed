// Real processes with libtmaguard.so preloaded: launches that must not escape the guard, hangs, lost or garbled
// records, and crashes of the host job (each test names the failure it pins).
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "client_run.h"

namespace fs = std::filesystem;

namespace {

// A rules file of n rules that match no kernel: starting tmaguard with it takes a while (parsing), which opens the
// startup window wide.
std::string many_rules(const std::string& name, int n) {
  std::string text;
  text.reserve(static_cast<std::size_t>(n) * 60);
  for (int i = 0; i < n; ++i)
    text += "[[rule]]\nid = \"r" + std::to_string(i) + "\"\nkernel = \"no_such_kernel_" + std::to_string(i) +
            "\"\nexpect_map_count = [1]\n";
  return write_file(name, text);
}



// ---- 1. the startup window: launches while tmaguard initialises are checked, never passed through
TEST(Startup, FirstLaunchesOfEightThreadsAtOnceAreAllChecked) {
  const std::string rules = many_rules("slow.toml", 20000);
  for (int round = 0; round < 4; ++round) {
    const ClientRun r = run_client({"getproc", "launch", "startup_threads", "--inline"},
                                   {{"TMAGUARD_MODE", "reject"}, {"TMAGUARD_RULES", rules}});
    EXPECT_EQ(r.ran, 0) << "launches ran unchecked while tmaguard was starting\n" << describe(r);
    EXPECT_EQ(r.failed, 8000) << describe(r);
    ASSERT_EQ(r.events("summary").size(), 1u) << describe(r);
    EXPECT_EQ(r.events("summary")[0]["launches_seen"], 8000) << describe(r);
    EXPECT_EQ(r.events("summary")[0]["violations"]["fa4-dk-not-k-major"], 8000);
  }
  std::remove(rules.c_str());
}

TEST(Startup, ChildForkedWhileTmaguardInitialisesIsGuarded) {
  const std::string rules = many_rules("slow_fork.toml", 20000);
  const ClientRun r = run_client({"getproc", "launch", "fork_during_init", "--inline"},
                                 {{"TMAGUARD_MODE", "reject"}, {"TMAGUARD_RULES", rules}});
  EXPECT_FALSE(r.p.timed_out) << describe(r);
  EXPECT_NE(r.p.out.find("CHILD failed=1 ran_bad=0"), std::string::npos) << describe(r);
  std::remove(rules.c_str());
}

// ---- 2. TMAGUARD_LIBCUDA naming a second copy of the driver the job already uses
TEST(Driver, SecondCopyOfTheDriverNeverBreaksTheJobAndIsSaidOnce) {
  const std::string dir = temp_dir("drivercopy");
  fs::copy_file(std::string(TG_FAKE_DIR) + "/libcuda.so.1", dir + "/libcuda.so.1");
  for (const bool linked : {true, false}) {
    const ClientRun r = run_client({linked ? "direct" : "dlsym", "launch", "fa4_dk_bad"},
                                   {{"TMAGUARD_MODE", "reject"}, {"TMAGUARD_LIBCUDA", dir + "/libcuda.so.1"}}, linked);
    ASSERT_TRUE(r.p.exited) << describe(r);
    EXPECT_EQ(r.p.code, 3) << "the bad launches are rejected, the job is not broken\n" << describe(r);
    EXPECT_EQ(r.ran, 0) << describe(r);
    EXPECT_EQ(r.events("violation").size(), 1u) << describe(r);
    const auto lines = std::count(r.p.err.begin(), r.p.err.end(), '\n');
    EXPECT_EQ(lines, 1) << describe(r);
    EXPECT_NE(r.p.err.find("names another file than the CUDA driver the job loaded"), std::string::npos)
        << describe(r);
  }
  // A directory is said to be one (it was once called "a second copy of the CUDA driver").
  const ClientRun d = run_client({"direct", "launch", "fa4_dk_bad"}, {{"TMAGUARD_MODE", "reject"}, {"TMAGUARD_LIBCUDA", dir}},
                                 true);
  EXPECT_EQ(d.ran, 0) << describe(d);
  EXPECT_NE(d.p.err.find("TMAGUARD_LIBCUDA='" + dir + "' names a directory, not a driver library"), std::string::npos)
      << describe(d);
  fs::remove_all(dir);
}

// A module loaded, launched and unloaded 20000 times: the kernel facts of unloaded modules are freed (they grew
// 533 bytes a cycle before), and each unload costs in proportion to its own kernels.
TEST(Unload, ManyLoadUnloadCyclesDoNotGrowMemory) {
  const ClientRun r = run_client({"dlsym", "launch", "unload_cycles"}, {{"TMAGUARD_MODE", "abort"}});
  ASSERT_TRUE(r.p.exited && r.p.code == 0) << describe(r);
  EXPECT_EQ(r.ran, 20000) << describe(r);
  long cycles = 0;
  long long grew = -1;
  const auto at = r.p.out.find("UNLOAD ");
  ASSERT_NE(at, std::string::npos) << describe(r);
  std::sscanf(r.p.out.c_str() + at, "UNLOAD cycles=%ld grew=%lld", &cycles, &grew);
  EXPECT_LT(grew, 64 * 1024) << "the heap grew " << grew << " bytes over " << cycles * 9 / 10 << " cycles";
}

// ---- 3. kernels with more than 4096 parameters
TEST(Params, KernelWithFiveThousandParametersIsCheckedWhole) {
  const ClientRun r = run_client({"dlsym", "launch", "many_params"}, {{"TMAGUARD_MODE", "reject"}});
  EXPECT_EQ(r.ran, 0) << describe(r);
  ASSERT_EQ(r.events("violation").size(), 1u) << describe(r);
  EXPECT_EQ(r.events("violation")[0]["rule"], "tmap-null-address");
  EXPECT_EQ(r.events("violation")[0]["param_index"], 4500);
}

// ---- 4. a handle reused after cuModuleUnload / cuLibraryUnload
TEST(Unload, ReusedHandleIsCheckedAsTheKernelItNowNames) {
  for (const bool library : {false, true}) {
    std::vector<std::string> args = {"getproc", "launch", "unload_reuse"};
    if (library) args.push_back("--cukernel");
    const ClientRun r = run_client(args, {{"TMAGUARD_MODE", "reject"}});
    ASSERT_NE(r.p.out.find("HANDLE_REUSED=1"), std::string::npos) << "the stand-in must reuse the handle\n"
                                                                  << describe(r);
    EXPECT_EQ(r.ran, 0) << describe(r);
    ASSERT_EQ(r.events("violation").size(), 1u) << describe(r);
    EXPECT_EQ(r.events("violation")[0]["rule"], "tmap-null-address");
    EXPECT_EQ(r.events("violation")[0]["kernel"], "plain_kernel_with_a_null_map");
    EXPECT_EQ(r.events("violation")[0]["param_index"], 1);
  }
}

// ---- 5. another interposer that uses dlsym(RTLD_NEXT), before and after tmaguard in LD_PRELOAD
TEST(Interposers, AnotherRtldNextShimInEitherOrderNeitherHangsNorLetsABadLaunchThrough) {
  for (const bool tmaguard_first : {true, false}) {
    const std::string preload =
        tmaguard_first ? std::string(TG_LIB) + ":" + TG_OTHER_SHIM : std::string(TG_OTHER_SHIM) + ":" + TG_LIB;
    ProcessOptions opt;
    opt.timeout_s = 20;
    const ClientRun r = run_client({"direct", "launch", "fa4_dk_bad"},
                                   {{"TMAGUARD_MODE", "reject"}, {"LD_PRELOAD", preload}}, true, true, opt);
    ASSERT_TRUE(r.p.exited) << (tmaguard_first ? "tmaguard first\n" : "other shim first\n") << describe(r);
    EXPECT_EQ(r.p.code, 3) << describe(r);
    EXPECT_EQ(r.ran, 0) << describe(r);
    EXPECT_EQ(r.events("violation").size(), 1u) << describe(r);
    EXPECT_NE(r.p.err.find("OTHER_SHIM cuInit=1 "), std::string::npos) << describe(r);
    if (!tmaguard_first) EXPECT_NE(r.p.err.find("cuLaunchKernel=3"), std::string::npos) << describe(r);
  }
}

// ---- 6. a job whose SIGABRT handler calls exit()
TEST(Abort, JobsAbortHandlerCallingExitNeitherHangsNorLosesTheRecord) {
  ProcessOptions opt;
  opt.timeout_s = 20;
  const ClientRun r = run_client({"dlsym", "launch", "abort_handler_exit"}, {}, false, true, opt);
  ASSERT_TRUE(r.p.exited) << describe(r);
  EXPECT_EQ(r.p.code, 7) << describe(r);
  EXPECT_EQ(r.events("violation").size(), 1u) << describe(r);
  EXPECT_EQ(r.events("summary").size(), 1u) << "one summary, written before the abort\n" << describe(r);
}

// ---- 7. rules files that are not regular files, or are too large
TEST(RulesFiles, OnlyBoundedRegularFilesAreReadEverythingElseIsOneClearError) {
  const std::string dir = temp_dir("rulesfiles");
  const std::string fifo = dir + "/rules.fifo", big = dir + "/big.toml";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  { std::ofstream(big).close(); }
  fs::resize_file(big, 65ULL << 20);  // sparse: 65 MiB of zeros
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"/dev/zero", "/dev/zero: not a regular file (a character device)"},
      {fifo, fifo + ": not a regular file (a FIFO)"},
      {dir, dir + ": not a regular file (a directory)"},
      {big, big + ": 68157440 bytes, more than a rules file may hold (64 MiB)"},
  };
  ProcessOptions opt;
  opt.timeout_s = 20;
  for (const auto& [path, why] : cases) {
    const ClientRun r = run_client({"dlsym", "launch", "fa4_ok"}, {{"TMAGUARD_RULES", path}}, false, true, opt);
    ASSERT_TRUE(r.p.exited) << path << "\n" << describe(r);
    EXPECT_EQ(r.p.code, 78) << describe(r);
    EXPECT_NE(r.p.err.find("tmaguard: rules error: " + why + "\n"), std::string::npos) << describe(r);
    const ProcessResult tool = run_process({TG_TOOL, "check-rules", path}, {}, opt);
    EXPECT_EQ(tool.code, 1) << path << " " << tool.out << tool.err;
    EXPECT_EQ(tool.err, why + "\n") << path;
  }
  fs::remove_all(dir);
}

// ---- 8. kernel regexes on pathological patterns and very long names
TEST(Regex, CatastrophicPatternsAndLongNamesNeitherHangNorCrash) {
  const std::string rules = write_file("regex.toml", R"([[rule]]
id = "nested-quantifier"
kernel_regex = "(a+)+$"
expect_map_count = [1]
[[rule]]
id = "gemm-anywhere"
kernel_regex = ".*gemm.*"
expect_map_count = [1]
[[rule]]
id = "many-stars"
kernel_glob = "*a*a*a*a*a*a*a*a*a*b"
expect_map_count = [1]
)");
  ProcessOptions opt;
  opt.timeout_s = 30;
  const ClientRun a = run_client({"dlsym", "launch", "named_kernel"},
                                 {{"TMAGUARD_RULES", rules},
                                  {"TG_KERNEL_NAME_REPEAT", "40"},
                                  {"TG_KERNEL_NAME_CHAR", "a"},
                                  {"TG_KERNEL_NAME_TAIL", "!"}},
                                 false, true, opt);
  ASSERT_TRUE(a.p.exited && a.p.code == 0) << describe(a);
  const ClientRun b = run_client({"dlsym", "launch", "named_kernel"},
                                 {{"TMAGUARD_RULES", rules},
                                  {"TG_KERNEL_NAME_REPEAT", "40000"},
                                  {"TG_KERNEL_NAME_CHAR", "x"},
                                  {"TG_KERNEL_NAME_TAIL", "_gemm_tail"}},
                                 false, true, opt);
  ASSERT_TRUE(b.p.exited && b.p.code == 0) << describe(b);
  EXPECT_EQ(b.events("warning").size(), 0u) << "the 40000-character name matches gemm-anywhere: one map, as expected";
  std::remove(rules.c_str());
}

// ---- 9. many rules start in linear time
TEST(Rules, ThreeHundredThousandRulesStart) {
  const std::string rules = many_rules("many.toml", 300000);
  ProcessOptions opt;
  opt.timeout_s = 90;
  const ClientRun r = run_client({"dlsym", "launch", "fa4_ok"}, {{"TMAGUARD_RULES", rules}}, false, true, opt);
  EXPECT_TRUE(r.p.exited && r.p.code == 0) << describe(r).substr(0, 2000);
  EXPECT_EQ(r.ran, 3);
  std::remove(rules.c_str());
}

// ---- 10. a log that cannot be written (full disk)
TEST(Log, FullDiskSendsTheReportToStderrAndTheSummaryCountsTheLoss) {
  const ClientRun logged =
      run_client({"dlsym", "launch", "fa4_dk_bad"}, {{"TMAGUARD_MODE", "log"}, {"TMAGUARD_LOG", "/dev/full"}});
  ASSERT_TRUE(logged.p.exited && logged.p.code == 0) << describe(logged);
  EXPECT_NE(logged.p.err.find("\"rule\":\"fa4-dk-not-k-major\""), std::string::npos) << describe(logged);
  EXPECT_NE(logged.p.err.find("\"log_records_lost\":3"), std::string::npos)
      << "the start record, the violation and the summary itself could not be written\n"
      << describe(logged);
  const ClientRun aborted = run_client({"dlsym", "launch", "fa4_dk_bad"}, {{"TMAGUARD_LOG", "/dev/full"}});
  EXPECT_TRUE(aborted.p.signaled && aborted.p.signal == SIGABRT) << describe(aborted);
  EXPECT_NE(aborted.p.err.find("\"rule\":\"fa4-dk-not-k-major\""), std::string::npos) << describe(aborted);
}

// ---- 11. several processes and threads appending records over 4 KiB to one log
TEST(Log, ConcurrentWritersNeverSplitARecord) {
  const std::string log = "/tmp/tmaguard_concurrent_" + std::to_string(getpid()) + ".jsonl";
  std::remove(log.c_str());
  const std::string cmd =
      std::string("for i in 1 2 3 4; do ") + TG_CLIENT + " getproc launch inspect_many_kernels >/dev/null & done; wait";
  const ProcessResult p = run_process({"/bin/sh", "-c", cmd}, {{"LD_PRELOAD", TG_LIB},
                                                               {"LD_LIBRARY_PATH", TG_FAKE_DIR},
                                                               {"TMAGUARD_LOG", log},
                                                               {"TMAGUARD_MODE", "inspect"},
                                                               {"TMAGUARD_LOG_FORMAT", "json"}});
  ASSERT_EQ(p.code, 0) << p.err;
  std::istringstream lines(read_all(log));
  int inspect = 0, bad = 0, big = 0;
  for (std::string line; std::getline(lines, line);) {
    const json j = json::parse(line, nullptr, false);
    if (j.is_discarded())
      ++bad;
    else if (j.value("event", "") == "inspect")
      ++inspect;
    if (line.size() > 4096) ++big;
  }
  EXPECT_EQ(bad, 0) << "records were split or interleaved";
  EXPECT_EQ(inspect, 4 * 8 * 16);
  EXPECT_GE(big, 4 * 8 * 16) << "the records must be over 4 KiB for this test to mean anything";
  std::remove(log.c_str());
}

// ---- 12. stderr a pipe whose reader is gone: every record tmaguard writes (the start line, the finding, the summary)
// meets EPIPE, and the job (SIGPIPE at its default, as a shell starts it) lives on, guarded: its transposed dK is
// still rejected, so the finding was made and its record written into the dead pipe.
TEST(Log, StderrWithoutAReaderNeverKillsTheJob) {
  ProcessOptions opt;
  opt.stderr_reader_gone = true;
  for (const char* sc : {"fa4_ok", "fa4_dk_bad"}) {
    const bool bad = std::string(sc) == "fa4_dk_bad";
    const ClientRun r =
        run_client({"dlsym", "launch", sc}, {{"TMAGUARD_LOG", ""}, {"TMAGUARD_MODE", "reject"}}, false, false, opt);
    EXPECT_TRUE(r.p.exited && !r.p.signaled) << sc << "\n" << describe(r);
    EXPECT_NE(r.p.out.find("RESULT "), std::string::npos) << sc << ": the job did not run to its end\n" << describe(r);
    if (bad) {
      EXPECT_EQ(r.ran, 0) << "the transposed dK ran: nothing judged it\n" << describe(r);
    } else {
      EXPECT_EQ(r.failed, 0) << describe(r);
      EXPECT_GT(r.ran, 0) << describe(r);
    }
  }
}

// ---- 13. fork() with %p in TMAGUARD_LOG
TEST(Log, ForkedChildWritesItsOwnLogWhenThePathHasPid) {
  const std::string dir = temp_dir("forklogs");
  const ClientRun r =
      run_client({"dlsym", "launch", "fork"}, {{"TMAGUARD_MODE", "log"}, {"TMAGUARD_LOG", dir + "/tg.%p.jsonl"}});
  ASSERT_TRUE(r.p.exited && r.p.code == 0) << describe(r);
  std::vector<std::string> files;
  for (const auto& e : fs::directory_iterator(dir)) files.push_back(e.path().string());
  ASSERT_EQ(files.size(), 2u) << "one log per process";
  int violations = 0;
  for (const std::string& f : files) {
    std::istringstream lines(read_all(f));
    int summaries = 0;
    long pid = -1;
    for (std::string line; std::getline(lines, line);) {
      const json j = json::parse(line);
      if (j["event"] == "summary") ++summaries;
      if (j["event"] == "violation") ++violations;
      if (pid < 0) pid = j["pid"];
      EXPECT_EQ(j["pid"], pid) << f << ": records of two processes in one file";
    }
    EXPECT_EQ(summaries, 1) << f;
    EXPECT_NE(f.find(std::to_string(pid)), std::string::npos) << f;
  }
  EXPECT_EQ(violations, 1);
  fs::remove_all(dir);
}

// ---- 14. the `extra` form with BUFFER_POINTER but no BUFFER_SIZE
TEST(Extra, BufferWithoutSizeIsNeverReadPastAndSaidOnce) {
  const ClientRun r = run_client({"getproc", "launch", "extra_without_size"}, {{"TMAGUARD_MODE", "reject"}});
  ASSERT_TRUE(r.p.exited && r.p.code == 0) << describe(r);
  EXPECT_EQ(r.ran, 1) << "tmaguard cannot read the parameters: the launch is the driver's to judge";
  EXPECT_TRUE(r.events("violation").empty() && r.events("warning").empty()) << describe(r);
  ASSERT_EQ(r.events("not-checked").size(), 1u) << describe(r);
  EXPECT_NE(r.events("not-checked")[0]["message"].get<std::string>().find("CU_LAUNCH_PARAM_BUFFER_SIZE"),
            std::string::npos);
}

// ---- 15. a driver without cuPointerGetAttribute
TEST(Explainer, NoAllocationClaimsWithoutCuPointerGetAttribute) {
  const ClientRun r = run_client({"getproc", "launch", "encode_healthy"}, {{"LD_LIBRARY_PATH", TG_FAKE_NOPTR_DIR}});
  ASSERT_TRUE(r.p.exited && r.p.code == 0) << describe(r);
  EXPECT_TRUE(r.events("encode-warning").empty()) << describe(r);
}

// ---- 16. descriptors built on 64-bit wraparound (Triton's ragged TMA)
TEST(Explainer, RaggedDescriptorsRelyingOnWraparoundDrawNoBoundsWarning) {
  const ClientRun r = run_client({"getproc", "launch", "encode_ragged"}, {{"TMAGUARD_MODE", "log"}});
  ASSERT_TRUE(r.p.exited && r.p.code == 0) << describe(r);
  EXPECT_NE(r.p.out.find("ENCODE rc=0,0,0"), std::string::npos) << describe(r);
  EXPECT_TRUE(r.events("encode-warning").empty()) << describe(r);
  EXPECT_TRUE(r.events("violation").empty()) << describe(r);
  // A ptr-shift map points 2^30 rows before its tensor by design; the tensor under it is what the lint judges.
  const ClientRun off =
      run_client({"getproc", "launch", "encode_ragged"}, {{"TMAGUARD_MODE", "log"}, {"TG_RAGGED_BASE", "unallocated"}});
  ASSERT_TRUE(off.p.exited && off.p.code == 0) << describe(off);
  const auto w = off.events("encode-warning");
  ASSERT_EQ(w.size(), 1u) << describe(off);
  EXPECT_NE(w[0]["message"].get<std::string>().find("globalAddress 0x7e0100000000 is not memory"), std::string::npos)
      << describe(off);
}

// ---- 17. the log file: no symlinks followed, no directories created, mode 0644 at most
TEST(Log, PathIsOpenedSafely) {
  const std::string dir = temp_dir("logsafety");
  const std::string target = dir + "/target.log", link = dir + "/link.log", dangling = dir + "/dangling.log";
  { std::ofstream(target) << "precious\n"; }
  fs::create_symlink(target, link);
  fs::create_symlink(dir + "/created_through_link.log", dangling);
  for (const std::string& path : {link, dangling}) {
    const ClientRun r = run_client({"dlsym", "launch", "fa4_ok"}, {{"TMAGUARD_LOG", path}});
    EXPECT_TRUE(r.p.exited && r.p.code == 0) << describe(r);
    EXPECT_NE(r.p.err.find("tmaguard: warning: cannot open TMAGUARD_LOG='" + path + "' yet: it is a symbolic link"),
              std::string::npos)
        << describe(r);
  }
  EXPECT_EQ(read_all(target), "precious\n");
  EXPECT_FALSE(fs::exists(dir + "/created_through_link.log"));
  // A log in directories that do not exist yet: they are made (0755), as a fleet's per-job paths need.
  const ClientRun nodir = run_client({"dlsym", "launch", "fa4_ok"}, {{"TMAGUARD_LOG", dir + "/no/such/dir/tg.log"}});
  EXPECT_EQ(nodir.p.err.find("cannot open TMAGUARD_LOG"), std::string::npos) << describe(nodir);
  EXPECT_NE(read_all(dir + "/no/such/dir/tg.log").find("\"event\":\"summary\""), std::string::npos) << describe(nodir);
  EXPECT_EQ(fs::status(dir + "/no/such").permissions() & fs::perms::all,
            fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec | fs::perms::others_read |
                fs::perms::others_exec);
  // Where a directory cannot be made (a file is in the way), it is said and the guard reports on stderr.
  { std::ofstream(dir + "/plainfile") << "x\n"; }
  const ClientRun blocked = run_client({"dlsym", "launch", "fa4_ok"}, {{"TMAGUARD_LOG", dir + "/plainfile/tg.log"}});
  EXPECT_NE(blocked.p.err.find("cannot open TMAGUARD_LOG"), std::string::npos) << describe(blocked);
  EXPECT_NE(blocked.p.err.find("\"event\":\"summary\""), std::string::npos) << "still guarding, on stderr\n"
                                                                           << describe(blocked);
  const std::string made = dir + "/made.log";
  const ProcessResult p =
      run_process({"/bin/sh", "-c", std::string("umask 0; exec ") + TG_CLIENT + " dlsym launch fa4_ok"},
                  {{"LD_PRELOAD", TG_LIB}, {"LD_LIBRARY_PATH", TG_FAKE_DIR}, {"TMAGUARD_LOG", made}});
  ASSERT_EQ(p.code, 0) << p.err;
  struct stat st {};
  ASSERT_EQ(stat(made.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0644u);
  fs::remove_all(dir);
}

}  // namespace
