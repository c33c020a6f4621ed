// Real processes with libtmaguard.so preloaded: what a fleet relies on. A start record in every guarded process (one
// that never touches CUDA too), counts that survive SIGTERM and SIGKILL, log paths per host/rank/job, one record
// schema (every JSON line, stderr's too), warnings and suppressions counted, the metrics file, exit codes for CI,
// the config file for injection without an environment.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "client_run.h"

namespace fs = std::filesystem;

namespace {



std::vector<json> records_of(const std::string& text) {
  std::vector<json> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) out.push_back(json::parse(line, nullptr, false));
  return out;
}

std::vector<json> with_event(const std::vector<json>& rs, const std::string& e) {
  std::vector<json> out;
  for (const json& r : rs)
    if (r.is_object() && r.value("event", "") == e) out.push_back(r);
  return out;
}

std::string host_short() {
  char h[256] = {};
  gethostname(h, sizeof h - 1);
  const std::string s = h;
  return s.substr(0, s.find('.'));
}

std::string wrapper() { return std::string(TG_SOURCE_DIR) + "/scripts/tmaguard"; }

// Runs the client preloaded under /bin/sh, waits until it says LAUNCHED, sends it `signal`, and prints STATUS=<$?>.
ProcessResult signalled(const std::string& scenario, const std::string& signal, const std::string& env) {
  const std::string line = "env LD_PRELOAD='" + std::string(TG_LIB) + "' LD_LIBRARY_PATH='" + TG_FAKE_DIR + "' " + env +
                           " '" + TG_CLIENT + "' getproc launch " + scenario + " > \"$OUT\" 2>&1 & p=$!; " +
                           "for i in $(seq 200); do grep -q LAUNCHED \"$OUT\" && break; sleep 0.05; done; " +
                           "sleep 0.2; kill -s " + signal + " $p; wait $p; echo STATUS=$?; cat \"$OUT\"";
  return run_process({"/bin/sh", "-c", line}, {{"OUT", fs::temp_directory_path() / ("tg_sig_" + std::to_string(getpid()))}});
}

// ---- 1. the start record: proof the guard is in the process, also where no CUDA is called
TEST(Fleet, EveryGuardedProcessWritesOneStartRecordAlsoWithoutCuda) {
  const std::string dir = temp_dir("start");
  const ProcessResult p = run_process({wrapper(), "--json", "--log", dir + "/L.%p.jsonl", "--", "true"},
                                      {{"TMAGUARD_LIB", TG_LIB}, {"TMAGUARD_TOOL", TG_TOOL}, {"RANK", "4"},
                                       {"LOCAL_RANK", "0"}, {"SLURM_JOB_ID", "77"}});
  ASSERT_EQ(p.code, 0) << p.err;
  std::vector<std::string> files;
  for (const auto& e : fs::directory_iterator(dir)) files.push_back(e.path().string());
  ASSERT_EQ(files.size(), 1u) << "tmaguard --json --log L.%p.jsonl -- true must leave its file";
  const auto rs = records_of(read_all(files[0]));
  ASSERT_EQ(rs.size(), 1u) << read_all(files[0]);
  const json& s = rs[0];
  EXPECT_EQ(s["event"], "start");
  EXPECT_EQ(s["mode"], "abort");
  EXPECT_EQ(s["log_format"], "json");
  EXPECT_EQ(s["rank"], 4);
  EXPECT_EQ(s["local_rank"], 0);
  EXPECT_EQ(s["job_id"], "77");
  EXPECT_EQ(s["severity_text"], "INFO");
  EXPECT_EQ(s["preload"], TG_LIB);
  EXPECT_NE(s.value("program", "").find("true"), std::string::npos) << s.dump();
  EXPECT_EQ(s["settings"]["TMAGUARD_LOG_FORMAT"]["source"], "environment");
  EXPECT_EQ(s["settings"]["TMAGUARD_MODE"]["source"], "default");
  EXPECT_FALSE(s.value("tmaguard_version", "").empty());
  fs::remove_all(dir);
}

// ---- 2. counts survive the end of a job: SIGTERM's summary, the job's own handler, a periodic one before SIGKILL
TEST(Fleet, SigtermWritesTheFinalSummaryThenTheDefaultActionEndsTheJob) {
  const std::string log = temp_dir("term") + "/t.jsonl";
  const ProcessResult p = signalled("launch_then_wait", "TERM",
                                    "TMAGUARD_MODE=log TMAGUARD_LOG_FORMAT=json TMAGUARD_LOG='" + log + "'");
  EXPECT_NE(p.out.find("STATUS=143"), std::string::npos) << "the job must still die of SIGTERM\n" << p.out;
  const auto sums = with_event(records_of(read_all(log)), "summary");
  ASSERT_EQ(sums.size(), 1u) << read_all(log);
  EXPECT_EQ(sums[0]["final"], true);
  EXPECT_EQ(sums[0]["signal"], "SIGTERM");
  EXPECT_EQ(sums[0]["launches_seen"], 3);
  EXPECT_EQ(sums[0]["violations"]["fa4-dk-not-k-major"], 3);
}

TEST(Fleet, TheJobsOwnSigtermHandlerStillRunsAfterTheSummary) {
  const std::string log = temp_dir("handler") + "/h.jsonl";
  const ProcessResult p = signalled("own_handler_then_wait", "TERM",
                                    "TMAGUARD_MODE=log TMAGUARD_LOG_FORMAT=json TMAGUARD_LOG='" + log + "'");
  EXPECT_NE(p.out.find("JOB HANDLER"), std::string::npos) << p.out;
  EXPECT_NE(p.out.find("STATUS=7"), std::string::npos) << "the job's handler chose its exit status\n" << p.out;
  const auto sums = with_event(records_of(read_all(log)), "summary");
  ASSERT_EQ(sums.size(), 1u) << read_all(log);
  EXPECT_EQ(sums[0]["final"], false) << "the job's handler decides whether the job ends";
  EXPECT_EQ(sums[0]["signal"], "SIGTERM");
  EXPECT_EQ(sums[0]["launches_seen"], 3);
}

TEST(Fleet, ASigkilledJobLosesAtMostOneSummaryInterval) {
  const std::string dir = temp_dir("kill");
  // Killed 2.5 s into the run with a 1 s interval: a periodic summary holds the counts.
  const std::string line = "env LD_PRELOAD='" + std::string(TG_LIB) + "' LD_LIBRARY_PATH='" + TG_FAKE_DIR +
                           "' TMAGUARD_MODE=log TMAGUARD_LOG_FORMAT=json TMAGUARD_SUMMARY_INTERVAL=1 TMAGUARD_METRICS='" +
                           dir + "/m2' TMAGUARD_LOG='" + dir + "/k2.jsonl' '" + TG_CLIENT +
                           "' getproc launch launch_then_wait > /dev/null 2>&1 & p=$!; sleep 2.5; kill -9 $p; wait $p; "
                           "echo STATUS=$?";
  const ProcessResult k = run_process({"/bin/sh", "-c", line}, {});
  EXPECT_NE(k.out.find("STATUS=137"), std::string::npos) << k.out;
  const auto sums = with_event(records_of(read_all(dir + "/k2.jsonl")), "summary");
  ASSERT_GE(sums.size(), 1u) << read_all(dir + "/k2.jsonl");
  EXPECT_EQ(sums.back()["final"], false);
  EXPECT_EQ(sums.back()["launches_seen"], 3);
  // Unchanged counts write nothing more: one periodic summary, not one a second.
  EXPECT_EQ(sums.size(), 1u) << read_all(dir + "/k2.jsonl");
  const std::string metrics = read_all(dir + "/m2/tmaguard-" + host_short() + "-" +
                                       std::to_string(sums.back()["pid"].get<long>()) + ".prom");
  EXPECT_NE(metrics.find("tmaguard_launches_seen_total{"), std::string::npos) << metrics;
  EXPECT_NE(metrics.find("} 1\n"), std::string::npos) << "tmaguard_active is still 1: the job never ended\n" << metrics;
  // tmaguard report names it: it used CUDA and left no final summary.
  const ProcessResult rep = run_process({TG_TOOL, "report", "--json", dir + "/k2.jsonl"}, {});
  const json doc = json::parse(rep.out, nullptr, false);
  ASSERT_TRUE(doc.is_object()) << rep.out << rep.err;
  EXPECT_EQ(doc["processes"]["no_final_summary"].size(), 1u) << rep.out;
  fs::remove_all(dir);
}

// ---- 3. log paths for a fleet
TEST(Fleet, LogPathsExpandHostRankJobAndMakeTheirDirectories) {
  const std::string dir = temp_dir("paths");
  const ClientRun r = run_client({"getproc", "launch", "fa4_ok"},
                                 {{"TMAGUARD_LOG", dir + "/%j/%h/rank%r.%p.100%%.jsonl"}, {"RANK", "2"},
                                  {"SLURM_JOB_ID", "991"}, {"TORCHELASTIC_RUN_ID", "ignored"}});
  ASSERT_EQ(r.p.code, 0) << describe(r);
  const std::string want_dir = dir + "/991/" + host_short();
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(want_dir)) names.push_back(e.path().filename().string());
  ASSERT_EQ(names.size(), 1u) << want_dir;
  EXPECT_EQ(names[0].rfind("rank2.", 0), 0u) << names[0];
  EXPECT_NE(names[0].find(".100%.jsonl"), std::string::npos) << names[0];
  const auto rs = records_of(read_all(want_dir + "/" + names[0]));
  EXPECT_EQ(with_event(rs, "start").size(), 1u);
  EXPECT_EQ(with_event(rs, "summary").size(), 1u);
  // No rank, no job: x.
  const ClientRun x = run_client({"getproc", "launch", "fa4_ok"}, {{"TMAGUARD_LOG", dir + "/%r-%j.jsonl"}});
  EXPECT_TRUE(fs::exists(dir + "/x-x.jsonl")) << describe(x);
  // An unknown sequence stops the job at start, with one line naming it.
  for (const char* bad : {"/tmp/%q.jsonl", "/tmp/log%"}) {
    const ClientRun b = run_client({"getproc", "launch", "fa4_ok"}, {{"TMAGUARD_LOG", bad}}, false, false);
    EXPECT_EQ(b.p.code, 78) << bad << "\n" << describe(b);
    EXPECT_EQ(std::count(b.p.err.begin(), b.p.err.end(), '\n'), 1) << b.p.err;
    EXPECT_NE(b.p.err.find("TMAGUARD_LOG='" + std::string(bad) + "'"), std::string::npos) << b.p.err;
  }
  const ClientRun m = run_client({"getproc", "launch", "fa4_ok"}, {{"TMAGUARD_METRICS", "/tmp/%z"}}, false, false);
  EXPECT_EQ(m.p.code, 78) << describe(m);
  fs::remove_all(dir);
}

// ---- 4. one schema: every JSON line tmaguard writes, to the log or to stderr, is a record of it
TEST(Fleet, EveryJsonLineIsARecordOfTheSchema) {
  const std::string dir = temp_dir("schema");
  const ClientRun r = run_client({"getproc", "launch", "fa4_dk_bad"},
                                 {{"TMAGUARD_MODE", "log"}, {"TMAGUARD_RULE", "typo"}, {"RANK", "1"},
                                  {"TMAGUARD_LOG", dir + "/plain/../" + "no_such/x/y.jsonl"}});
  ASSERT_EQ(r.p.code, 0) << describe(r);
  std::vector<json> all = records_of(r.err_json);
  for (const json& j : records_of(read_all(dir + "/no_such/x/y.jsonl"))) all.push_back(j);
  ASSERT_GE(all.size(), 4u) << r.err_json;
  bool warned = false;
  for (const json& j : all) {
    ASSERT_TRUE(j.is_object()) << "a line that is not JSON:\n" << r.err_json;
    for (const char* k : {"timestamp", "severity_text", "severity_number", "body", "schema", "pid", "tid", "event"})
      EXPECT_TRUE(j.contains(k)) << k << " missing in " << j.dump();
    EXPECT_EQ(j["schema"], 1);
    EXPECT_EQ(j["rank"], 1) << j.dump();
    EXPECT_EQ(j["timestamp"].get<std::string>().back(), 'Z');
    EXPECT_EQ(j["body"].get<std::string>().find('\n'), std::string::npos);
    const int n = j["severity_number"];
    EXPECT_TRUE(n == 9 || n == 13 || n == 17) << j.dump();
    warned |= j.value("event", "") == "setting-warning" && j["severity_text"] == "WARN";
  }
  EXPECT_TRUE(warned) << "the unknown-variable warning is a WARN record\n" << r.err_json;
  const auto v = with_event(all, "violation");
  ASSERT_EQ(v.size(), 1u);
  EXPECT_EQ(v[0]["severity_number"], 17);
  EXPECT_FALSE(v[0].value("code.function.name", "").empty()) << v[0].dump();
  // The stop line of a bad setting is a record too.
  const ClientRun stop = run_client({"getproc", "launch", "fa4_ok"}, {{"TMAGUARD_MODE", "sometimes"}});
  EXPECT_EQ(stop.p.code, 78);
  const auto lines = records_of(stop.err_json);
  ASSERT_EQ(lines.size(), 1u) << stop.err_json;
  EXPECT_EQ(lines[0]["event"], "stop");
  EXPECT_EQ(lines[0]["severity_text"], "ERROR");
  fs::remove_all(dir);
}

// ---- 5. everything counted: warnings and suppressed findings beside the errors
TEST(Fleet, WarningsAndSuppressedFindingsAreCounted) {
  const ClientRun w = run_client({"getproc", "launch", "dk_padded_k_major"}, {{"TMAGUARD_MODE", "log"}});
  ASSERT_EQ(w.events("summary").size(), 1u) << describe(w);
  EXPECT_EQ(w.events("summary")[0]["warnings"]["fa4-dk-shape-mismatch"], 1) << describe(w);
  EXPECT_TRUE(w.events("summary")[0]["violations"].empty());
  const ClientRun s = run_client({"getproc", "launch", "fa4_dk_bad"},
                                 {{"TMAGUARD_MODE", "reject"},
                                  {"TMAGUARD_SUPPRESS", "fa4-dk-not-k-major@*FlashAttentionBackwardSm100*"}});
  EXPECT_EQ(s.ran, 3) << "a suppressed finding is not acted on\n" << describe(s);
  EXPECT_TRUE(s.events("violation").empty()) << describe(s);
  ASSERT_EQ(s.events("summary").size(), 1u);
  EXPECT_GE(s.events("summary")[0]["suppressed"]["fa4-dk-not-k-major"], 1) << describe(s);
  // A glob that does not match the kernel suppresses nothing.
  const ClientRun other = run_client({"getproc", "launch", "fa4_dk_bad"},
                                     {{"TMAGUARD_MODE", "reject"}, {"TMAGUARD_SUPPRESS", "fa4-dk-not-k-major@gemm*"}});
  EXPECT_EQ(other.ran, 0) << describe(other);
  for (const char* bad : {"fa4-dk-not-k-major@", "Fa4 Dk", "fa4-dk-not-k-major,,x", "no-such-rule"}) {
    const ClientRun b = run_client({"getproc", "launch", "fa4_ok"}, {{"TMAGUARD_SUPPRESS", bad}});
    EXPECT_EQ(b.p.code, 78) << bad << "\n" << describe(b);
    EXPECT_NE(b.p.err.find("TMAGUARD_SUPPRESS"), std::string::npos) << b.p.err;
  }
}

// ---- 6. the metrics file
TEST(Fleet, MetricsFileIsReplacedAtomicallyAndAReadOnlyDirectoryIsSaidOnce) {
  const std::string dir = temp_dir("metrics");
  const ClientRun r = run_client({"getproc", "launch", "fa4_dk_bad"},
                                 {{"TMAGUARD_MODE", "log"}, {"TMAGUARD_METRICS", dir + "/m"}, {"RANK", "5"}});
  ASSERT_EQ(r.p.code, 0) << describe(r);
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir + "/m")) names.push_back(e.path().filename().string());
  ASSERT_EQ(names.size(), 1u) << "only the .prom file: no temporary file left";
  const std::string pid = std::to_string(r.events("summary")[0]["pid"].get<long>());
  EXPECT_EQ(names[0], "tmaguard-" + host_short() + "-" + pid + ".prom");
  const std::string m = read_all(dir + "/m/" + names[0]);
  const std::string labels = "host=\"" + host_short() + "\",pid=\"" + pid + "\",rank=\"5\",job=\"x\"";
  EXPECT_NE(m.find("tmaguard_active{" + labels + ",version=\""), std::string::npos) << m;
  EXPECT_NE(m.find(",mode=\"log\"} 0\n"), std::string::npos) << "0 in the last write\n" << m;
  EXPECT_NE(m.find("tmaguard_launches_seen_total{" + labels + "} 3\n"), std::string::npos) << m;
  EXPECT_NE(m.find("tmaguard_findings_total{" + labels + ",rule=\"fa4-dk-not-k-major\",severity=\"error\"} 3\n"),
            std::string::npos)
      << m;
  EXPECT_EQ(m.find("kernel="), std::string::npos) << "no unbounded label values\n" << m;
  // A directory it cannot write: said once, counted, and the job is guarded all the same.
  fs::create_directories(dir + "/ro");
  chmod((dir + "/ro").c_str(), 0555);
  const ClientRun ro = run_client({"getproc", "launch", "fa4_dk_bad"},
                                  {{"TMAGUARD_MODE", "reject"}, {"TMAGUARD_METRICS", dir + "/ro"}});
  if (geteuid() != 0) {  // root writes anywhere: the read-only case needs an ordinary user
    EXPECT_EQ(ro.ran, 0) << describe(ro);
    EXPECT_EQ(ro.events("metrics-not-written").size(), 1u) << describe(ro);
    EXPECT_GE(ro.events("summary")[0].value("metrics_writes_failed", 0), 1) << describe(ro);
  }
  // A file where the directory should be: the same, for root too.
  { std::ofstream(dir + "/blocked") << "x"; }
  const ClientRun bl = run_client({"getproc", "launch", "fa4_dk_bad"},
                                  {{"TMAGUARD_MODE", "reject"}, {"TMAGUARD_METRICS", dir + "/blocked"}});
  EXPECT_EQ(bl.ran, 0) << describe(bl);
  EXPECT_EQ(bl.events("metrics-not-written").size(), 1u) << describe(bl);
  ASSERT_EQ(bl.events("summary").size(), 1u) << describe(bl);
  EXPECT_GE(bl.events("summary")[0].value("metrics_writes_failed", 0), 1) << describe(bl);
  chmod((dir + "/ro").c_str(), 0755);
  fs::remove_all(dir);
}

// ---- 7. exit codes for CI
TEST(Fleet, ReportFailsOnFindingsAndSummarizesAsJson) {
  const std::string dir = temp_dir("ci");
  for (const char* rank : {"0", "1"}) {
    run_process({TG_CLIENT, "getproc", "launch", std::string(rank) == "1" ? "fa4_dk_bad" : "dk_padded_k_major"},
                {{"LD_PRELOAD", TG_LIB}, {"LD_LIBRARY_PATH", TG_FAKE_DIR}, {"TMAGUARD_MODE", "log"},
                 {"TMAGUARD_LOG_FORMAT", "json"}, {"TMAGUARD_LOG", dir + "/r%r.jsonl"}, {"RANK", rank}});
  }
  const ProcessResult plain = run_process({TG_TOOL, "report", dir}, {});
  EXPECT_EQ(plain.code, 0) << "no --fail-on: the report alone never fails\n" << plain.out << plain.err;
  const ProcessResult err = run_process({TG_TOOL, "report", "--fail-on", "error", dir}, {});
  EXPECT_EQ(err.code, 1) << err.out;
  const ProcessResult warn_only = run_process({TG_TOOL, "report", "--fail-on", "error", dir + "/r0.jsonl"}, {});
  EXPECT_EQ(warn_only.code, 0) << warn_only.out;
  const ProcessResult warn = run_process({TG_TOOL, "report", "--fail-on", "warning", dir + "/r0.jsonl"}, {});
  EXPECT_EQ(warn.code, 1) << warn.out;
  const ProcessResult j = run_process({TG_TOOL, "report", "--json", dir}, {});
  const json doc = json::parse(j.out, nullptr, false);
  ASSERT_TRUE(doc.is_object()) << j.out;
  EXPECT_EQ(doc["files"].size(), 2u);
  EXPECT_EQ(doc["by_rule"]["fa4-dk-not-k-major"]["severity"], "error");
  EXPECT_EQ(doc["by_rule"]["fa4-dk-not-k-major"]["occurrences"], 3);
  EXPECT_EQ(doc["by_rule"]["fa4-dk-shape-mismatch"]["severity"], "warning");
  EXPECT_EQ(doc["by_severity"]["error"]["reports"], 1);
  EXPECT_EQ(doc["by_rank"]["1"], 1);
  EXPECT_EQ(doc["by_rank"]["0"], 1);
  EXPECT_EQ(doc["processes"]["started"], 2);
  EXPECT_EQ(doc["processes"]["final_summaries"], 2);
  EXPECT_TRUE(doc["processes"]["no_final_summary"].empty());
  EXPECT_EQ(doc["lines_skipped"], 0);
  const ProcessResult bad = run_process({TG_TOOL, "report", "--fail-on", "sometimes", dir}, {});
  EXPECT_NE(bad.code, 0);
  fs::remove_all(dir);
}

TEST(Fleet, ErrorExitcodeTurnsARecordedErrorIntoTheCommandsStatus) {
  const std::map<std::string, std::string> env = {{"TMAGUARD_LIB", TG_LIB}, {"TMAGUARD_TOOL", TG_TOOL},
                                                  {"LD_LIBRARY_PATH", TG_FAKE_DIR}, {"TMAGUARD_LOG", "/dev/null"}};
  const ProcessResult bad =
      run_process({wrapper(), "--mode", "log", "--error-exitcode", "9", "--", TG_CLIENT, "getproc", "launch", "fa4_dk_bad"},
                  env);
  EXPECT_EQ(bad.code, 9) << bad.out << bad.err;
  EXPECT_NE(bad.out.find("ran=3"), std::string::npos) << "log mode: the job ran\n" << bad.out;
  const ProcessResult ok =
      run_process({wrapper(), "--mode", "log", "--error-exitcode", "9", "--", TG_CLIENT, "getproc", "launch", "fa4_ok"}, env);
  EXPECT_EQ(ok.code, 0) << ok.err;
  const ProcessResult rejected = run_process(
      {wrapper(), "--mode", "reject", "--error-exitcode", "9", "--", TG_CLIENT, "getproc", "launch", "fa4_dk_bad"}, env);
  EXPECT_EQ(rejected.code, 3) << "the job's own non-zero status is kept\n" << rejected.err;
  const ProcessResult usage = run_process({wrapper(), "--error-exitcode", "0", "--", "true"}, env);
  EXPECT_EQ(usage.code, 2) << usage.err;
  // A signal to the command reaches the job (forwarded), and the job's status is the command's.
  const std::string line = "'" + wrapper() + "' --mode log --error-exitcode 9 -- '" + TG_CLIENT +
                           "' getproc launch launch_then_wait > \"$OUT\" 2>&1 & p=$!; "
                           "for i in $(seq 200); do grep -q LAUNCHED \"$OUT\" && break; sleep 0.05; done; "
                           "kill -TERM $p; wait $p; echo STATUS=$?";
  auto e2 = env;
  e2["OUT"] = (fs::temp_directory_path() / ("tg_ee_" + std::to_string(getpid()))).string();
  const ProcessResult fwd = run_process({"/bin/sh", "-c", line}, e2, {20, false});
  EXPECT_NE(fwd.out.find("STATUS=143"), std::string::npos) << fwd.out << fwd.err;
}

// ---- 8. a config file for injection without an environment
TEST(Fleet, ConfigFileHoldsTheSettingsAndAVariableBeatsIt) {
  const std::string dir = temp_dir("config");
  const std::string cfg = dir + "/tmaguard.toml";
  std::ofstream(cfg) << "mode = \"log\"\nlog = \"" << dir << "/%h.%r.jsonl\"\nlog_format = \"json\"\n"
                     << "suppress = [\"fa4-dk-shape-mismatch\"]\nsummary_interval = 0\n";
  const ProcessResult p = run_process({TG_CLIENT, "getproc", "launch", "fa4_dk_bad"},
                                      {{"LD_PRELOAD", TG_LIB}, {"LD_LIBRARY_PATH", TG_FAKE_DIR}, {"TMAGUARD_CONFIG", cfg},
                                       {"RANK", "0"}, {"TMAGUARD_MODE", ""}, {"TMAGUARD_LOG", ""},
                                       {"TMAGUARD_LOG_FORMAT", ""}});
  EXPECT_EQ(p.code, 0) << "log mode from the file\n" << p.out << p.err;
  const auto rs = records_of(read_all(dir + "/" + host_short() + ".0.jsonl"));
  const auto start = with_event(rs, "start");
  ASSERT_EQ(start.size(), 1u) << p.err;
  EXPECT_EQ(start[0]["mode"], "log");
  EXPECT_EQ(start[0]["settings"]["TMAGUARD_MODE"]["source"], "config file " + cfg);
  EXPECT_EQ(start[0]["settings"]["TMAGUARD_SUPPRESS"]["value"], "fa4-dk-shape-mismatch");
  EXPECT_EQ(with_event(rs, "violation").size(), 1u);
  // A variable beats the file.
  const ProcessResult v = run_process({TG_CLIENT, "getproc", "launch", "fa4_dk_bad"},
                                      {{"LD_PRELOAD", TG_LIB}, {"LD_LIBRARY_PATH", TG_FAKE_DIR}, {"TMAGUARD_CONFIG", cfg},
                                       {"TMAGUARD_MODE", "reject"}, {"TMAGUARD_LOG", ""}});
  EXPECT_EQ(v.code, 3) << v.out << v.err;
  // A bad file stops the job like a bad variable, with one line naming the file.
  for (const std::string& text : {std::string("mode = \"sometimes\"\n"), std::string("colour = \"blue\"\n"),
                                  std::string("mode = [\n")}) {
    std::ofstream(cfg) << text;
    const ProcessResult b = run_process({TG_CLIENT, "getproc", "launch", "fa4_ok"},
                                        {{"LD_PRELOAD", TG_LIB}, {"LD_LIBRARY_PATH", TG_FAKE_DIR},
                                         {"TMAGUARD_CONFIG", cfg}, {"TMAGUARD_MODE", ""}, {"TMAGUARD_LOG_FORMAT", ""}});
    EXPECT_EQ(b.code, 78) << text << b.err;
    EXPECT_NE(b.err.find(cfg), std::string::npos) << b.err;
    EXPECT_EQ(std::count(b.err.begin(), b.err.end(), '\n'), 1) << b.err;
  }
  // A named file that does not exist is an error too (the default one may be absent).
  const ProcessResult missing = run_process({TG_CLIENT, "getproc", "launch", "fa4_ok"},
                                            {{"LD_PRELOAD", TG_LIB}, {"LD_LIBRARY_PATH", TG_FAKE_DIR},
                                             {"TMAGUARD_CONFIG", dir + "/absent.toml"}});
  EXPECT_EQ(missing.code, 78) << missing.err;
  fs::remove_all(dir);
}

}  // namespace
