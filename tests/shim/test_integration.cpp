// Real client processes with libtmaguard.so preloaded in front of the stand-in driver, through every resolution
// path and launch entry point. Each test reads what a user would: exit status, the kernel's launch count, the log.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "process.h"

using nlohmann::json;

namespace {

struct ClientRun {
  ProcessResult p;
  std::vector<json> records;
  std::string log_text;
  int ran = -1, ok = -1, failed = -1, via = -1;

  std::vector<json> events(const std::string& e) const {
    std::vector<json> v;
    for (const auto& r : records)
      if (r.value("event", "") == e) v.push_back(r);
    return v;
  }
};

std::string log_path() {
  static int n = 0;
  return "/tmp/tmaguard_test_" + std::to_string(getpid()) + "_" + std::to_string(n++) + ".log";
}

ClientRun run_client(std::vector<std::string> args, std::map<std::string, std::string> env = {},
               bool linked = false, bool json_log = true) {
  const std::string log = log_path();
  std::map<std::string, std::string> e = {{"LD_PRELOAD", TG_LIB},
                                          {"LD_LIBRARY_PATH", TG_FAKE_DIR},
                                          {"TMAGUARD_LOG", log},
                                          {"TMAGUARD_LOG_FORMAT", json_log ? "json" : "text"},
                                          {"RANK", ""},
                                          {"LOCAL_RANK", ""},
                                          {"TMAGUARD_MODE", ""}};
  for (const auto& [k, v] : env) e[k] = v;
  args.insert(args.begin(), linked ? TG_CLIENT_LINKED : TG_CLIENT);
  ClientRun r;
  r.p = run_process(args, e);
  std::ifstream in(log);
  std::stringstream ss;
  ss << in.rdbuf();
  r.log_text = ss.str();
  std::istringstream lines(r.log_text);
  for (std::string line; std::getline(lines, line);)
    if (json_log && !line.empty()) r.records.push_back(json::parse(line));
  std::remove(log.c_str());
  const auto pos = r.p.out.find("RESULT ");
  if (pos != std::string::npos) std::sscanf(r.p.out.c_str() + pos, "RESULT ok=%d failed=%d ran=%d via=%d", &r.ok, &r.failed, &r.ran, &r.via);
  return r;
}

std::string describe(const ClientRun& r) {
  return "exit=" + std::to_string(r.p.code) + " signal=" + std::to_string(r.p.signal) + "\nstdout:\n" + r.p.out +
         "\nstderr:\n" + r.p.err + "\nlog:\n" + r.log_text;
}

// ---- every path x every entry point: clean FA4 launch runs silently, bad dK is stopped (abort mode)
struct PathEntry {
  std::string path, entry;
  bool linked;
};
std::vector<PathEntry> all_paths() {
  std::vector<PathEntry> v;
  for (const char* e : {"launch", "launch_ptsz", "ex", "ex_ptsz", "coop", "coop_ptsz"}) {
    v.push_back({"direct", e, true});
    for (const char* p : {"dlsym", "getproc", "getproc_self", "getproc_legacy"}) v.push_back({p, e, false});
  }
  return v;
}
class Paths : public ::testing::TestWithParam<PathEntry> {};

TEST_P(Paths, CleanFa4LaunchRunsWithoutReport) {
  const auto& pe = GetParam();
  const ClientRun r = run_client({pe.path, pe.entry, "fa4_ok"}, {}, pe.linked);
  ASSERT_TRUE(r.p.exited && r.p.code == 0) << describe(r);
  EXPECT_EQ(r.ran, 3) << describe(r);
  EXPECT_EQ(r.via, 3) << "every launch must reach the driver entry point asked for (_ptsz included)\n" << describe(r);
  EXPECT_TRUE(r.events("violation").empty()) << describe(r);
  EXPECT_TRUE(r.events("encode-warning").empty()) << "healthy FA4 maps (strides not increasing) draw no warning\n"
                                                  << describe(r);
  const auto s = r.events("summary");
  ASSERT_EQ(s.size(), 1u) << describe(r);
  EXPECT_EQ(s[0]["launches_seen"], 3) << "the launches must have gone through tmaguard\n" << describe(r);
  EXPECT_EQ(s[0]["tensor_maps_decoded"], 6) << "decoded once, then cached by content\n" << describe(r);
}

TEST_P(Paths, BadDkAbortsBeforeTheKernelRuns) {
  const auto& pe = GetParam();
  const ClientRun r = run_client({pe.path, pe.entry, "fa4_dk_bad"}, {}, pe.linked);
  ASSERT_TRUE(r.p.signaled) << describe(r);
  EXPECT_EQ(r.p.signal, SIGABRT);
  const auto v = r.events("violation");
  ASSERT_EQ(v.size(), 1u) << describe(r);
  EXPECT_EQ(v[0]["rule"], "fa4-dk-not-k-major");
  EXPECT_EQ(v[0]["action"], "abort");
  EXPECT_EQ(r.events("summary").size(), 1u);
  EXPECT_EQ(r.p.out.find("RESULT"), std::string::npos) << "the process must not get past the launch";
}

INSTANTIATE_TEST_SUITE_P(AllPathsAllEntries, Paths, ::testing::ValuesIn(all_paths()),
                         [](const auto& info) { return info.param.path + "_" + info.param.entry; });

// ---- modes
TEST(Modes, RejectReturnsErrorAndTheKernelDoesNotRun) {
  const ClientRun r = run_client({"getproc", "launch", "fa4_dk_bad"}, {{"TMAGUARD_MODE", "reject"}});
  ASSERT_TRUE(r.p.exited) << describe(r);
  EXPECT_EQ(r.p.code, 3);
  EXPECT_EQ(r.failed, 3);
  EXPECT_EQ(r.ran, 0);
  const auto v = r.events("violation");
  ASSERT_EQ(v.size(), 1u) << "reported once, then counted\n" << describe(r);
  EXPECT_EQ(v[0]["action"], "reject");
  EXPECT_EQ(r.events("summary")[0]["violations"]["fa4-dk-not-k-major"], 3);
}

TEST(Modes, LogReportsAndTheKernelRuns) {
  const ClientRun r = run_client({"dlsym", "ex", "fa4_dk_bad"}, {{"TMAGUARD_MODE", "log"}});
  ASSERT_TRUE(r.p.exited && r.p.code == 0) << describe(r);
  EXPECT_EQ(r.ran, 3);
  ASSERT_EQ(r.events("violation").size(), 1u) << describe(r);
  EXPECT_EQ(r.events("violation")[0]["action"], "log");
}

TEST(Modes, OffPassesEverythingThroughSilently) {
  const ClientRun r = run_client({"dlsym", "launch", "fa4_dk_bad"}, {{"TMAGUARD_MODE", "off"}});
  ASSERT_TRUE(r.p.exited && r.p.code == 0) << describe(r);
  EXPECT_EQ(r.ran, 3);
  EXPECT_TRUE(r.log_text.empty()) << describe(r);
  EXPECT_TRUE(r.p.err.empty()) << describe(r);
}

TEST(Modes, RejectModeReportsOnlyDv) {
  const ClientRun r = run_client({"getproc", "ex", "fa4_dv_bad"}, {{"TMAGUARD_MODE", "reject"}});
  ASSERT_EQ(r.events("violation").size(), 1u) << describe(r);
  const json v = r.events("violation")[0];
  EXPECT_EQ(v["rule"], "fa4-dv-not-k-major");
  EXPECT_EQ(v["tensor"], "dV");
  EXPECT_EQ(v["param_index"], 6);  // params: int, Q, K, V, float, dO, dV, dK, int64
  EXPECT_EQ(r.ran, 0);
}

// ---- the record a user reads
TEST(Report, JsonViolationRecordIsComplete) {
  const ClientRun r = run_client({"dlsym", "launch", "fa4_dk_bad"}, {{"TMAGUARD_MODE", "log"}, {"RANK", "5"}});
  ASSERT_EQ(r.events("violation").size(), 1u) << describe(r);
  const json v = r.events("violation")[0];
  for (const char* k : {"event", "rule", "severity", "kernel", "tensor", "param_index", "tensor_map", "expected",
                        "observed", "hint", "action", "pid", "tid", "rank", "time", "provenance"})
    EXPECT_TRUE(v.contains(k)) << k;
  EXPECT_EQ(v["rank"], "5");
  EXPECT_EQ(v["tensor"], "dK");
  EXPECT_EQ(v["param_index"], 7);
  EXPECT_NE(v["kernel"].get<std::string>().find("FlashAttentionBackwardSm100"), std::string::npos);
  EXPECT_EQ(v["tensor_map"]["dims"], json({256, 128, 4, 2}));
  EXPECT_EQ(v["tensor_map"]["strides_bytes"], json({512, 65536, 262144}));
  EXPECT_EQ(v["tensor_map"]["box"], json({64, 128, 1, 1}));
  EXPECT_EQ(v["tensor_map"]["dtype"], "bfloat16");
  EXPECT_EQ(v["tensor_map"]["swizzle"], "128B");
  EXPECT_EQ(v["tensor_map"]["address"], "0x7f0005000000");
  EXPECT_EQ(v["provenance"], "encoded by cuTensorMapEncodeTiled in this process");
  EXPECT_NE(v["hint"].get<std::string>().find("torch.empty_like(k)"), std::string::npos);
}

TEST(Report, TextFormatToStderrWithPidExpansion) {
  const ClientRun r = run_client({"dlsym", "launch", "fa4_dk_bad"}, {{"TMAGUARD_MODE", "log"}, {"TMAGUARD_LOG", ""}},
                           false, false);
  EXPECT_NE(r.p.err.find("tmaguard: violation fa4-dk-not-k-major [error] action=log kernel="), std::string::npos)
      << describe(r);
  EXPECT_NE(r.p.err.find("tmaguard:   dK tensor map: tiled bfloat16 rank 4 dims {256,128,4,2}"), std::string::npos);
  EXPECT_NE(r.p.err.find("tmaguard: SUMMARY: 3 launches seen, 3 checked"), std::string::npos) << describe(r);
}

TEST(Report, LogPathPidExpansion) {
  const std::string pattern = "/tmp/tmaguard_pid_test.%p.log";
  const ProcessResult p = run_process({TG_CLIENT, "dlsym", "launch", "fa4_dk_bad"},
                                      {{"LD_PRELOAD", TG_LIB}, {"LD_LIBRARY_PATH", TG_FAKE_DIR},
                                       {"TMAGUARD_MODE", "log"}, {"TMAGUARD_LOG", pattern}});
  ASSERT_TRUE(p.exited && p.code == 0) << p.err;
  // The child's pid is not known here: find the file by glob, it must carry digits where %p was.
  const ProcessResult ls = run_process(
      {"/bin/sh", "-c", "ls /tmp/tmaguard_pid_test.[0-9]*.log && rm -f /tmp/tmaguard_pid_test.*.log"}, {});
  EXPECT_EQ(ls.code, 0) << ls.out << ls.err;
}

// ---- FA4 signatures and kernels no rule matches
TEST(Fa4, TwoCtaSignature) {
  EXPECT_EQ(run_client({"getproc", "ex", "fa4_2cta_ok"}).events("violation").size(), 0u);
  const ClientRun r = run_client({"getproc", "ex", "fa4_2cta_dk_bad"}, {{"TMAGUARD_MODE", "reject"}});
  ASSERT_EQ(r.events("violation").size(), 1u) << describe(r);
  EXPECT_EQ(r.events("violation")[0]["param_index"], 10);  // int, Q, Qt, K, float, Kt, V, dO, dOt, dV, dK
  EXPECT_EQ(r.ran, 0);
}

TEST(Fa4, PostprocessSignatureHasNothingToCheck) {
  for (const char* sc : {"fa4_postprocess", "fa4_2cta_postprocess"}) {
    const ClientRun r = run_client({"dlsym", "launch", sc});
    EXPECT_TRUE(r.p.exited && r.p.code == 0) << describe(r);
    EXPECT_EQ(r.ran, 1);
    EXPECT_TRUE(r.events("violation").empty() && r.events("warning").empty()) << describe(r);
  }
}

TEST(Fa4, UnexpectedMapCountWarnsOnceAndNeverAborts) {
  const ClientRun r = run_client({"dlsym", "launch", "fa4_odd_count"});
  ASSERT_TRUE(r.p.exited && r.p.code == 0) << describe(r);
  EXPECT_EQ(r.ran, 2);
  ASSERT_EQ(r.events("warning").size(), 1u) << describe(r);
  EXPECT_EQ(r.events("warning")[0]["rule"], "fa4-unexpected-map-count");
}

TEST(Kernels, NoRuleMatchesNoReport) {
  const ClientRun r = run_client({"dlsym", "launch", "unmatched"});
  ASSERT_TRUE(r.p.exited && r.p.code == 0) << describe(r);
  EXPECT_EQ(r.ran, 5);
  EXPECT_TRUE(r.events("violation").empty());
  EXPECT_EQ(r.events("summary")[0]["launches_checked"], 0);
  EXPECT_EQ(r.events("summary")[0]["launches_seen"], 5);
}

TEST(Kernels, HealthyMapsOfOtherKernelsIncludingMnMajor) {
  const ClientRun r = run_client({"getproc", "launch", "other_maps_ok"});
  ASSERT_TRUE(r.p.exited && r.p.code == 0) << describe(r);
  EXPECT_TRUE(r.events("violation").empty()) << describe(r);
  EXPECT_EQ(r.events("summary")[0]["tensor_maps_decoded"], 4);
}

// ---- descriptors filled inline (CuTe DSL): no encode call at all
TEST(Inline, InlineFa4DescriptorsAreCheckedToo) {
  const ClientRun ok = run_client({"getproc", "ex", "fa4_ok", "--inline"});
  EXPECT_TRUE(ok.p.exited && ok.p.code == 0) << describe(ok);
  const ClientRun bad = run_client({"getproc", "ex", "fa4_dk_bad", "--inline", "--cukernel"}, {{"TMAGUARD_MODE", "reject"}});
  ASSERT_EQ(bad.events("violation").size(), 1u) << describe(bad);
  EXPECT_EQ(bad.events("violation")[0]["rule"], "fa4-dk-not-k-major");
  EXPECT_NE(bad.events("violation")[0]["provenance"].get<std::string>().find("filled inline"), std::string::npos);
  EXPECT_EQ(bad.ran, 0);
}

TEST(Inline, DescriptorTheDriverWouldRejectIsAnError) {
  const ClientRun r = run_client({"dlsym", "launch", "inline_bad_descriptor"}, {{"TMAGUARD_MODE", "reject"}});
  ASSERT_EQ(r.events("violation").size(), 1u) << describe(r);
  EXPECT_EQ(r.events("violation")[0]["rule"], "tmap-driver-would-reject");
  EXPECT_EQ(r.events("violation")[0]["tensor"], "param 1");
  EXPECT_EQ(r.ran, 0);
}

// ---- handles and launch forms
TEST(Handles, CuKernelHandlesAndExtraBuffers) {
  for (const char* entry : {"launch", "ex_ptsz"}) {
    const ClientRun r = run_client({"getproc", entry, "fa4_dk_bad", "--cukernel", "--extra"}, {{"TMAGUARD_MODE", "reject"}});
    ASSERT_EQ(r.events("violation").size(), 1u) << describe(r);
    EXPECT_EQ(r.events("violation")[0]["param_index"], 7);
    EXPECT_EQ(r.ran, 0);
    const ClientRun ok = run_client({"getproc", entry, "fa4_ok", "--cukernel", "--extra"});
    EXPECT_TRUE(ok.p.exited && ok.p.code == 0) << describe(ok);
    EXPECT_EQ(ok.ran, 3);
  }
}

TEST(FastPath, DescriptorRewrittenInPlaceIsCaughtAfterCleanLaunches) {
  for (const char* sc : {"fa4_mutated_in_place", "fa4_2cta_mutated_in_place"}) {
    for (const char* entry : {"launch", "ex_ptsz"}) {
      const ClientRun r = run_client({"getproc", entry, sc}, {{"TMAGUARD_MODE", "reject"}});
      EXPECT_EQ(r.failed, 1) << sc << " " << entry << "\n" << describe(r);
      EXPECT_EQ(r.ran, 10) << sc << " " << entry;
      ASSERT_EQ(r.events("violation").size(), 1u) << sc << " " << entry << "\n" << describe(r);
      EXPECT_EQ(r.events("violation")[0]["rule"], "fa4-dk-not-k-major");
      const auto s = r.events("summary");
      ASSERT_EQ(s.size(), 1u);
      EXPECT_EQ(s[0]["launches_seen"], 11);
      EXPECT_EQ(s[0]["launches_checked"], 11);
    }
  }
}

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

// ---- a process that never touches CUDA, and tmaguard's own failures
TEST(Hygiene, ProcessThatNeverTouchesCudaSeesNothing) {
  const std::string log = "/tmp/tmaguard_nocuda.log";
  std::remove(log.c_str());
  const ProcessResult p = run_process({TG_CLIENT, "nocuda"}, {{"LD_PRELOAD", TG_LIB}, {"TMAGUARD_LOG", log},
                                                              {"TMAGUARD_MODE", "bogus"}});
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
  EXPECT_EQ(r.p.err,
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

TEST(Hygiene, MissingDriverSaysSoOnce) {
  const ClientRun r = run_client({"dlsym", "launch", "fa4_ok"}, {{"TMAGUARD_LIBCUDA", "/nonexistent/libcuda.so.1"}});
  ASSERT_TRUE(r.p.exited && r.p.code == 0) << describe(r);
  EXPECT_EQ(r.ran, 3);
  EXPECT_NE(r.p.err.find("tmaguard: cannot work: cannot load the CUDA driver '/nonexistent/libcuda.so.1'"),
            std::string::npos) << r.p.err;
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

TEST(GetProc, SemanticsPassThroughUnchanged) {
  const ClientRun r = run_client({"getproc", "launch", "getproc_semantics"}, {{"TG_EXPECT_WRAPPED", "1"}});
  EXPECT_TRUE(r.p.exited && r.p.code == 0) << describe(r);
  EXPECT_NE(r.p.out.find("SEMANTICS OK"), std::string::npos) << describe(r);
  // The same checks hold against the bare stand-in driver (the semantics are the driver's, not tmaguard's).
  const ProcessResult bare = run_process({TG_CLIENT, "getproc", "launch", "getproc_semantics"},
                                         {{"LD_LIBRARY_PATH", TG_FAKE_DIR}, {"LD_PRELOAD", ""}});
  EXPECT_NE(bare.out.find("SEMANTICS OK"), std::string::npos) << bare.out << bare.err;
}

TEST(Dlsym, RtldNextStaysRelativeToTheCaller) {
  // libtg_next_b's tg_probe_next() does dlsym(RTLD_NEXT, "tg_probe"): the next definition after b is a's (1).
  // A forward that is not a tail call makes glibc see tmaguard as the caller and find b's own (2).
  const ProcessResult bare = run_process({TG_RTLD_NEXT}, {{"LD_PRELOAD", ""}});
  ASSERT_EQ(bare.out, "1\n") << bare.err;
  const ProcessResult p = run_process({TG_RTLD_NEXT}, {{"LD_PRELOAD", TG_LIB}});
  EXPECT_EQ(p.out, "1\n") << p.err;
}

}  // namespace

namespace {

TEST(Inspect, OneRecordPerKernelAndLayoutNothingBlocked) {
  const ClientRun r = run_client({"getproc", "ex", "fa4_dk_bad"}, {{"TMAGUARD_MODE", "inspect"}});
  ASSERT_TRUE(r.p.exited && r.p.code == 0) << describe(r);
  EXPECT_EQ(r.ran, 3);
  const auto ins = r.events("inspect");
  ASSERT_EQ(ins.size(), 1u) << "three launches of one layout give one record\n" << describe(r);
  const json& k = ins[0];
  EXPECT_NE(k["kernel"].get<std::string>().find("FlashAttentionBackwardSm100"), std::string::npos);
  EXPECT_EQ(k["grid"], json({2, 1, 1}));
  EXPECT_EQ(k["block"], json({128, 1, 1}));
  ASSERT_EQ(k["params"].size(), 9u);
  EXPECT_EQ(k["params"][1], json({{"offset", 112}, {"size", 128}}));  // as the H200 reports it
  ASSERT_EQ(k["tensor_maps"].size(), 6u);
  EXPECT_EQ(k["tensor_maps"][5]["param_index"], 7);
  EXPECT_EQ(k["tensor_maps"][5]["tensor_map"]["dims"], json({256, 128, 4, 2}));
  EXPECT_EQ(k["tensor_maps"][0]["provenance"], "encoded by cuTensorMapEncodeTiled in this process");
  ASSERT_EQ(r.events("violation").size(), 1u);
  EXPECT_EQ(r.events("violation")[0]["action"], "inspect");
}

TEST(Inspect, KernelsWithoutMapsAreRecordedToo) {
  const ClientRun r = run_client({"dlsym", "launch", "unmatched"}, {{"TMAGUARD_MODE", "inspect"}});
  const auto ins = r.events("inspect");
  ASSERT_EQ(ins.size(), 1u) << describe(r);
  EXPECT_EQ(ins[0]["kernel"], "plain_elementwise_kernel");
  EXPECT_TRUE(ins[0]["tensor_maps"].empty());
}

}  // namespace

namespace {

std::string write_file(const std::string& name, const std::string& text) {
  const std::string path = "/tmp/tmaguard_rules_" + std::to_string(getpid()) + "_" + name;
  std::ofstream(path) << text;
  return path;
}

const char* kMatmulRule = R"toml([[rule]]
id = "matmul-b-k-major"
kernel_regex = "^matmul_.*_tma$"
map_count = 4
action = "reject"
hint = "pass B K-major (b.contiguous())"
[rule.maps]
A = 0
B = 2
[[rule.check]]
kind = "same_innermost"
a = "B"
b = "A"
)toml";

TEST(Rules, UserRuleWithActionOverride) {
  const std::string path = write_file("matmul.toml", kMatmulRule);
  const ClientRun r = run_client({"getproc", "launch", "other_maps_ok"}, {{"TMAGUARD_MODE", "log"}, {"TMAGUARD_RULES", path}});
  ASSERT_TRUE(r.p.exited) << describe(r);
  EXPECT_EQ(r.p.code, 3) << "the rule's action=reject overrides log mode\n" << describe(r);
  EXPECT_EQ(r.ran, 0);
  ASSERT_EQ(r.events("violation").size(), 1u) << describe(r);
  const json v = r.events("violation")[0];
  EXPECT_EQ(v["rule"], "matmul-b-k-major");
  EXPECT_EQ(v["tensor"], "B");
  EXPECT_EQ(v["action"], "reject");
  EXPECT_EQ(v["hint"], "pass B K-major (b.contiguous())");
  std::remove(path.c_str());
}

TEST(Rules, BrokenFileStopsTheJobBeforeItsFirstLaunch) {
  const std::string path = write_file("broken.toml", "[[rule]]\nid = \"x\"\nkernel = \"k\"\nmap_count = \"4\"\n");
  const ClientRun r = run_client({"dlsym", "launch", "fa4_ok"}, {{"TMAGUARD_RULES", path}});
  ASSERT_TRUE(r.p.exited) << describe(r);
  EXPECT_EQ(r.p.code, 78);
  EXPECT_EQ(r.p.out.find("RESULT"), std::string::npos);
  EXPECT_NE(r.p.err.find("tmaguard: rules error: " + path + ":4: 'map_count' in rule 'x' must be an integer, got a string"),
            std::string::npos) << r.p.err;
  EXPECT_NE(r.p.err.find("tmaguard: stopping the job before its first launch: fix " + path), std::string::npos);
  const ClientRun c = run_client({"dlsym", "launch", "fa4_dk_bad"},
                                 {{"TMAGUARD_RULES", path}, {"TMAGUARD_RULES_ON_ERROR", "continue"}, {"TMAGUARD_MODE", "reject"}});
  EXPECT_EQ(c.ran, 0) << "the built-in rules still guard the job\n" << describe(c);
  EXPECT_NE(c.p.err.find("tmaguard: continuing without " + path), std::string::npos) << c.p.err;
  std::remove(path.c_str());
  const ClientRun missing = run_client({"dlsym", "launch", "fa4_ok"}, {{"TMAGUARD_RULES", "/nonexistent/rules.toml"}});
  EXPECT_EQ(missing.p.code, 78);
  EXPECT_NE(missing.p.err.find("tmaguard: rules error: /nonexistent/rules.toml: cannot read the rules file"), std::string::npos);
}

TEST(Rules, BuiltinPresetCanBeSwitchedOffOrOverridden) {
  const ClientRun off = run_client({"dlsym", "launch", "fa4_dk_bad"}, {{"TMAGUARD_BUILTIN_RULES", "off"}});
  EXPECT_TRUE(off.p.exited && off.p.code == 0) << describe(off);
  EXPECT_TRUE(off.events("violation").empty());
  const std::string path = write_file("fa4.toml", R"([[rule]]
id = "fa4-1cta-dkdv"
kernel = "FlashAttentionBackwardSm100"
map_count = 6
severity = "warning"
[rule.maps]
K = 1
dK = 5
[[rule.check]]
id = "fa4-dk-not-k-major"
kind = "same_innermost"
a = "dK"
b = "K"
)");
  const ClientRun ov = run_client({"dlsym", "launch", "fa4_dk_bad"}, {{"TMAGUARD_RULES", path}});
  EXPECT_TRUE(ov.p.exited && ov.p.code == 0) << "the user's warning-level rule replaced the preset's\n" << describe(ov);
  ASSERT_EQ(ov.events("warning").size(), 1u) << describe(ov);
  EXPECT_EQ(ov.events("warning")[0]["rule"], "fa4-dk-not-k-major");
  std::remove(path.c_str());
}

}  // namespace

namespace {

TEST(Tool, CheckRulesAndReport) {
  const ProcessResult ok = run_process({TG_TOOL, "check-rules", std::string(TG_SOURCE_DIR) + "/rules/fa4_sm100_bwd.toml"}, {});
  EXPECT_EQ(ok.code, 0) << ok.err;
  EXPECT_NE(ok.out.find("fa4_sm100_bwd.toml: 3 rules OK"), std::string::npos);
  const std::string bad = "/tmp/tmaguard_tool_bad.toml";
  std::ofstream(bad) << "[[rule]]\nid = \"x\"\nkernel = \"k\"\nexpect_map_count = [1]\nseverity = \"fatal\"\n";
  const ProcessResult b = run_process({TG_TOOL, "check-rules", bad}, {});
  EXPECT_EQ(b.code, 1);
  EXPECT_EQ(b.err, bad + ":5: severity 'fatal' in rule 'x' is not one of error, warning\n");
  std::remove(bad.c_str());

  const std::string log = "/tmp/tmaguard_tool_report.jsonl";
  std::remove(log.c_str());
  for (const char* sc : {"fa4_dk_bad", "other_maps_ok"})
    run_process({TG_CLIENT, "getproc", "launch", sc},
                {{"LD_PRELOAD", TG_LIB}, {"LD_LIBRARY_PATH", TG_FAKE_DIR}, {"TMAGUARD_MODE", "inspect"},
                 {"TMAGUARD_LOG_FORMAT", "json"}, {"TMAGUARD_LOG", log}, {"RANK", "3"}});
  const ProcessResult r = run_process({TG_TOOL, "report", log}, {});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("2 process summaries: 6 launches seen, 6 checked"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("fa4-dk-not-k-major                      3        1            3"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("matmul_kernel_tma  (4 tensor maps, 1 layout(s))"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("param 7   bfloat16 dims [256,128,4,2] strides [512,65536,262144] box [64,128,1,1] swizzle 128B"),
            std::string::npos) << r.out;
  std::remove(log.c_str());
}

}  // namespace

namespace {

// CUDA graph kernel nodes, every entry point and ABI version, reached by cuGetProcAddress and by dlsym.
class Graph : public ::testing::TestWithParam<std::pair<std::string, std::string>> {};

TEST_P(Graph, KernelNodesAreCheckedLikeLaunches) {
  const auto& [path, entry] = GetParam();
  const ClientRun ok = run_client({path, entry, "fa4_ok"});
  ASSERT_TRUE(ok.p.exited && ok.p.code == 0) << describe(ok);
  EXPECT_EQ(ok.via, 3) << "the node calls must reach the driver entry point of the asked ABI\n" << describe(ok);
  const ClientRun rej = run_client({path, entry, "fa4_dk_bad"}, {{"TMAGUARD_MODE", "reject"}});
  EXPECT_EQ(rej.p.code, 3) << describe(rej);
  EXPECT_EQ(rej.via, 0) << "a rejected node never reaches the driver\n" << describe(rej);
  ASSERT_EQ(rej.events("violation").size(), 1u) << describe(rej);
  EXPECT_EQ(rej.events("violation")[0]["rule"], "fa4-dk-not-k-major");
  const ClientRun ab = run_client({path, entry, "fa4_dv_bad"});
  EXPECT_TRUE(ab.p.signaled && ab.p.signal == SIGABRT) << describe(ab);
}

std::vector<std::pair<std::string, std::string>> graph_cases() {
  std::vector<std::pair<std::string, std::string>> v;
  for (const char* e : {"graph_add_v1", "graph_add", "graph_set_v1", "graph_set", "graph_exec_set_v1", "graph_exec_set",
                        "graph_add_node", "graph_add_node_v2", "graph_node_set", "graph_exec_node_set"})
    for (const char* p : {"getproc", "dlsym"}) v.emplace_back(p, e);
  return v;
}
INSTANTIATE_TEST_SUITE_P(AllGraphEntries, Graph, ::testing::ValuesIn(graph_cases()),
                         [](const auto& info) { return info.param.first + "_" + info.param.second; });

}  // namespace

namespace {

TEST(Explainer, FailedEncodesExplainedSuspiciousOnesWarnedOnceCodesUnchanged) {
  const ClientRun r = run_client({"getproc", "launch", "encode_suspicious"}, {{"TMAGUARD_MODE", "log"}});
  ASSERT_TRUE(r.p.exited && r.p.code == 0) << describe(r);
  EXPECT_EQ(r.p.out, "ENCODE rc=0\nENCODE rc=0\nENCODE rc=0\nENCODE rc=0\nENCODE rc=0\nENCODE rc=0\nENCODE rc=1\nENCODE rc=0\n")
      << "the driver's return codes pass through unchanged";
  std::vector<std::string> warnings;
  for (const auto& e : r.events("encode-warning")) warnings.push_back(e["message"]);
  const std::string p = "cuTensorMapEncodeTiled accepted, but ";
  ASSERT_EQ(warnings.size(), 6u) << "one per kind: the second box warning (boxDim[1]) is not repeated\n" << describe(r);
  EXPECT_EQ(warnings[0], p + "globalAddress is NULL: the driver encodes it, every access through the map faults");
  EXPECT_EQ(warnings[1], p + "globalStrides[0] = 0: dimension 1 is broadcast (all its indices share memory); a TMA store "
                             "through this map writes the same bytes from every tile");
  EXPECT_EQ(warnings[2], p + "globalStrides[0] = 128 < 256 bytes spanned by the dimensions with smaller strides: rows "
                             "overlap, so stores through this map overwrite each other");
  EXPECT_EQ(warnings[3], p + "boxDim[0] = 64 > globalDim[0] = 16: most of every tile is out of bounds (filled, or "
                             "dropped on stores)");
  EXPECT_EQ(warnings[4].rfind(p + "globalAddress 0x", 0), 0u);
  EXPECT_NE(warnings[4].find("is not memory the CUDA driver allocated"), std::string::npos);
  EXPECT_EQ(warnings[5], p + "the map spans [0x7e0000000000, 0x7e0000004000), 12288 bytes past the end of its "
                             "allocation [0x7e0000000000, 0x7e0000001000)");
  const auto rejected = r.events("encode-rejected");
  ASSERT_EQ(rejected.size(), 1u);
  EXPECT_EQ(rejected[0]["message"], "cuTensorMapEncodeTiled returned 1 (CUDA_ERROR_INVALID_VALUE): boxDim[0]=128 x 2 B "
                                    "= 256 B exceeds the 128B swizzle span (128 B)");
}

}  // namespace

namespace {

TEST(Rules, TritonExampleFileCatchesATransposedB) {
  const std::string rules = std::string(TG_SOURCE_DIR) + "/rules/examples/triton_matmul.toml";
  const ClientRun ok = run_client({"dlsym", "launch", "triton_ok"}, {{"TMAGUARD_RULES", rules}});
  EXPECT_TRUE(ok.p.exited && ok.p.code == 0) << describe(ok);
  EXPECT_TRUE(ok.events("violation").empty() && ok.events("warning").empty()) << describe(ok);
  const ClientRun bad = run_client({"dlsym", "launch", "triton_b_transposed"},
                                   {{"TMAGUARD_RULES", rules}, {"TMAGUARD_MODE", "log"}});
  EXPECT_EQ(bad.p.code, 3) << "the example's action = reject wins over log mode\n" << describe(bad);
  EXPECT_EQ(bad.ran, 0);
  ASSERT_EQ(bad.events("violation").size(), 1u) << describe(bad);
  EXPECT_EQ(bad.events("violation")[0]["rule"], "triton-b-k-major");
  EXPECT_EQ(bad.events("violation")[0]["tensor"], "B");
}

TEST(Graph, NodeLaunchingACuKernelThroughKern) {
  const ClientRun r = run_client({"getproc", "graph_add", "fa4_dk_bad", "--cukernel"},
                                 {{"TMAGUARD_MODE", "reject"}, {"TG_NODE_KERN", "1"}});
  EXPECT_EQ(r.via, 0) << describe(r);
  ASSERT_EQ(r.events("violation").size(), 1u) << describe(r);
  const ClientRun ok = run_client({"getproc", "graph_add", "fa4_ok", "--cukernel"}, {{"TG_NODE_KERN", "1"}});
  EXPECT_EQ(ok.via, 3) << describe(ok);
}

}  // namespace
