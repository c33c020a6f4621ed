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

// The line `tg_client` printed for its thread `name` (TG_PRINT_THREADS), or "".
std::string thread_line(const std::string& out, const std::string& name) {
  const std::size_t at = out.find("THREAD " + name + " ");
  return at == std::string::npos ? "" : out.substr(at, out.find('\n', at) - at);
}

// Whether a thread's line says it blocks the signals a job handles.
bool blocks_job_signals(const std::string& line) {
  const std::size_t blk = line.find("sigblk=");
  if (blk == std::string::npos) return false;
  const unsigned long long blocked = std::stoull(line.substr(blk + 7), nullptr, 16);
  for (const int sig : {SIGINT, SIGTERM, SIGUSR1, SIGCHLD, SIGPIPE, SIGALRM})
    if (!(blocked & (1ull << (sig - 1)))) return false;
  return true;
}

// tmaguard starts no thread at load: a process that never touches CUDA keeps its one thread. The first kernel's facts
// start the preparer (tmaguard-facts, SCHED_BATCH), the first device read the audit's worker (tmaguard-audit); a job's
// signal handler never runs on either.
TEST(Hygiene, TmaguardsThreadsStartWithTheirWorkNotAtLoad) {
  const ProcessResult idle =
      run_process({TG_CLIENT, "nocuda"}, {{"LD_PRELOAD", TG_LIB}, {"TG_PRINT_THREADS", "1"}});
  ASSERT_TRUE(idle.exited && idle.code == 0) << idle.err;
  EXPECT_EQ(std::count(idle.out.begin(), idle.out.end(), '\n'), 2) << "a thread beside the job's one:\n" << idle.out;
  const ClientRun r = run_client({"dlsym", "launch", "fa4_ok"}, {{"TG_PRINT_THREADS", "tmaguard-facts"}});
  ASSERT_EQ(r.p.code, 0) << describe(r);
  const std::string facts = thread_line(r.p.out, "tmaguard-facts");
  ASSERT_FALSE(facts.empty()) << r.p.out;
  EXPECT_NE(facts.find(" policy=3 "), std::string::npos) << "not SCHED_BATCH: " << facts;
  EXPECT_TRUE(blocks_job_signals(facts)) << facts;
  const ClientRun d = run_client({"getproc", "launch", "device_desc"}, {{"TG_PRINT_THREADS", "tmaguard-audit"}});
  const std::string audit = thread_line(d.p.out, "tmaguard-audit");
  ASSERT_FALSE(audit.empty()) << d.p.out;
  EXPECT_TRUE(blocks_job_signals(audit)) << audit;
}

// A value tmaguard cannot understand stops the job before its first launch, like a broken rules file: one line
// naming it and the way out, exit status 78, nothing launched.
TEST(Hygiene, BadValueStopsTheJobBeforeItsFirstLaunch) {
  for (const auto& [var, value] : std::vector<std::pair<std::string, std::string>>{
           {"TMAGUARD_MODE", "abrot"}, {"TMAGUARD_LOG_FORMAT", "yaml"}, {"TMAGUARD_BUILTIN_RULES", "maybe"}}) {
    const ClientRun r = run_client({"dlsym", "launch", "fa4_ok"}, {{var, value}});
    ASSERT_TRUE(r.p.exited) << describe(r);
    EXPECT_EQ(r.p.code, 78) << describe(r);
    EXPECT_EQ(r.ran, -1) << "nothing launched\n" << describe(r);
    EXPECT_EQ(r.p.err.rfind("tmaguard: stopping the job before its first launch: " + var + "='" + value + "'", 0), 0u)
        << r.p.err;
    EXPECT_NE(r.p.err.find("or set TMAGUARD_MODE=off to run without tmaguard"), std::string::npos) << r.p.err;
    EXPECT_EQ(std::count(r.p.err.begin(), r.p.err.end(), '\n'), 1) << r.p.err;
  }
}

// Settings that would guard nothing are refused or said: a TMAGUARD_RULES with an empty entry and an empty rules file
// stop the job like a broken rules file; a misspelled variable (TMAGUARD_RULE) is said once, and the job runs guarded.
TEST(Hygiene, SettingsThatWouldGuardNothingAreRefusedOrSaid) {
  const std::string empty = write_file("empty.toml", "# nothing yet\n");
  for (const std::string& rules : {std::string("::::"), empty}) {
    const ClientRun r = run_client({"dlsym", "launch", "fa4_ok"}, {{"TMAGUARD_RULES", rules}});
    ASSERT_TRUE(r.p.exited) << describe(r);
    EXPECT_EQ(r.p.code, 78) << rules << "\n" << describe(r);
    EXPECT_EQ(r.ran, -1) << "nothing launched\n" << describe(r);
  }
  std::remove(empty.c_str());
  const std::string rules = std::string(TG_SOURCE_DIR) + "/rules/examples/triton_matmul.toml";
  const ClientRun typo = run_client({"dlsym", "launch", "fa4_dk_bad"}, {{"TMAGUARD_RULE", rules}, {"TMAGUARD_MODE", "reject"}});
  ASSERT_TRUE(typo.p.exited) << describe(typo);
  EXPECT_EQ(typo.ran, 0) << describe(typo);
  EXPECT_NE(typo.p.err.find("tmaguard: warning: TMAGUARD_RULE is not a tmaguard variable and is ignored (did you mean "
                            "TMAGUARD_RULES?)"),
            std::string::npos)
      << describe(typo);
}

// Values that are unambiguous keep the guard on: each of these lets no NULL-address launch through.
TEST(Hygiene, UnambiguousSpellingsKeepGuarding) {
  for (const auto& [var, value] : std::vector<std::pair<std::string, std::string>>{{"TMAGUARD_MODE", "Reject"},
                                                                                   {"TMAGUARD_MODE", "reject "},
                                                                                   {"TMAGUARD_BUILTIN_RULES", "0"},
                                                                                   {"TMAGUARD_RULES_ON_ERROR", "Continue"},
                                                                                   {"TMAGUARD_LOG_FORMAT", "JSON"},
                                                                                   {"TMAGUARD_LOG", ""},
                                                                                   {"TMAGUARD_LIBCUDA", ""}}) {
    std::map<std::string, std::string> env = {{var, value}};
    if (var != "TMAGUARD_MODE") env["TMAGUARD_MODE"] = "reject";
    const ClientRun r = run_client({"dlsym", "launch", "many_params"}, env, false, false);
    ASSERT_TRUE(r.p.exited) << var << "=" << value << "\n" << describe(r);
    EXPECT_EQ(r.p.code, 3) << var << "='" << value << "': the NULL-address launch must be rejected\n" << describe(r);
    EXPECT_EQ(r.ran, 0) << describe(r);
  }
}

// A log tmaguard cannot open yet still guards: the job is stopped, the reason goes to stderr, said once.
TEST(Hygiene, UnwritableLogPathStillGuards) {
  const ClientRun r = run_client({"dlsym", "launch", "fa4_dk_bad"},
                                 {{"TMAGUARD_LOG", "/dev/null/tg.log"}, {"TMAGUARD_MODE", "reject"}}, false, false);
  ASSERT_TRUE(r.p.exited) << describe(r);
  EXPECT_EQ(r.ran, 0) << describe(r);
  EXPECT_EQ(r.p.err.rfind("tmaguard: warning: cannot open TMAGUARD_LOG='/dev/null/tg.log' yet: Not a directory; "
                          "reporting to stderr until it opens\n",
                          0),
            0u)
      << r.p.err;
  EXPECT_NE(r.p.err.find("tmaguard: violation fa4-dk-not-k-major"), std::string::npos) << r.p.err;
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
