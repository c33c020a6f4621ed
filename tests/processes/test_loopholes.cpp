// Real processes with libtmaguard.so preloaded: loopholes, ways a bad launch could pass or a setting or record be
// mis-read (clean keys outliving their kernel or forged, dK and dV sharing bytes, kernel names one digit off, settings
// and paths that change before the first CUDA call, call sites under a replaced library). Each test names the
// defect it pins; each failed on the tree before its fix.
#include <gtest/gtest.h>
#include <glob.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "client_run.h"
#include "mode_values.h"

namespace fs = std::filesystem;

namespace {



bool has_symbol(const json& stack, const std::string& part) {
  for (const auto& f : stack)
    if (f.value("symbol", "").find(part) != std::string::npos) return true;
  return false;
}

// Findings of this rule, errors (event violation) and warnings alike.
std::vector<json> with_rule(const ClientRun& r, const std::string& rule) {
  std::vector<json> out;
  for (const json& v : r.records)
    if ((v.value("event", "") == "violation" || v.value("event", "") == "warning") && v.value("rule", "") == rule)
      out.push_back(v);
  return out;
}

// ---- 1. clean keys of an unloaded module's kernel never answer for a kernel loaded after it
TEST(CleanKeys, OfAnUnloadedKernelNeverPassAnotherKernel) {
  const ClientRun r = run_client({"getproc", "launch", "unload_clean_keys"}, {{"TMAGUARD_MODE", "reject"}});
  ASSERT_NE(r.p.out.find("UNLOAD_KEYS rounds=300"), std::string::npos) << describe(r);
  EXPECT_NE(r.p.out.find("fa4_ran=0"), std::string::npos) << "a transposed dK ran as a freed kernel's clean launch\n"
                                                           << r.p.out;
  ASSERT_EQ(r.events("summary").size(), 1u) << describe(r);
  EXPECT_EQ(r.events("summary")[0]["violations"]["fa4-dk-not-k-major"], 300) << describe(r);
}

// ---- 8. a launch key crafted to collide with a clean one (ignored words set to force the hash) is judged
TEST(CleanKeys, ForgedLaunchKeysAreJudgedNotPassed) {
  for (const char* scenario : {"forged_old_key", "forged_fixed_key"}) {
    const ClientRun r = run_client({"getproc", "launch", scenario}, {{"TMAGUARD_MODE", "reject"}});
    ASSERT_NE(r.p.out.find("FORGED ran="), std::string::npos) << scenario << "\n" << describe(r);
    EXPECT_NE(r.p.out.find("FORGED ran=0"), std::string::npos) << scenario << ": a forged key passed\n" << r.p.out;
    EXPECT_EQ(r.failed, 3) << scenario << "\n" << describe(r);
    EXPECT_EQ(with_rule(r, "fa4-dk-not-k-major").size(), 1u) << scenario << "\n" << describe(r);
  }
}

// ---- 5. outputs of one launch that share bytes are an error; a packed buffer that interleaves them is not
TEST(Fa4Outputs, DkAndDvSharingBytesAreAnError) {
  for (const char* form : {"", "--cute"}) {
    for (const char* scenario : {"dkdv_same_buffer", "dkdv_overlapping"}) {
      std::vector<std::string> args = {"getproc", "launch", scenario};
      if (*form) args.push_back(form);
      const ClientRun r = run_client(args, {{"TMAGUARD_MODE", "reject"}});
      EXPECT_EQ(r.ran, 0) << scenario << form << "\n" << describe(r);
      const auto v = with_rule(r, "fa4-dkdv-overlap");
      ASSERT_EQ(v.size(), 1u) << scenario << form << "\n" << describe(r);
      EXPECT_EQ(v[0]["severity"], "error");
      EXPECT_NE(v[0].dump().find("address the same bytes"), std::string::npos) << v[0].dump();
    }
    std::vector<std::string> args = {"getproc", "launch", "dkdv_packed"};
    if (*form) args.push_back(form);
    const ClientRun packed = run_client(args, {{"TMAGUARD_MODE", "reject"}});
    EXPECT_EQ(packed.ran, 1) << describe(packed);
    EXPECT_TRUE(packed.events("violation").empty()) << "dK and dV interleaved in one buffer share no byte\n"
                                                    << describe(packed);
  }
}

// ---- 6. a transposed dK is an error whatever else differs from K (padded sequence, batch folded into heads)
TEST(Fa4Outputs, TransposedDkOfAnotherShapeIsAnError) {
  for (const char* scenario : {"dk_transposed_padded", "dk_transposed_folded"}) {
    const ClientRun r = run_client({"getproc", "launch", scenario}, {{"TMAGUARD_MODE", "reject"}});
    EXPECT_EQ(r.ran, 0) << scenario << "\n" << describe(r);
    const auto v = with_rule(r, "fa4-dk-not-k-major");
    ASSERT_EQ(v.size(), 1u) << scenario << "\n" << describe(r);
    EXPECT_TRUE(with_rule(r, "fa4-unrecognized-signature").empty()) << describe(r);
  }
  // A K-major dK of a padded sequence stays a warning: its layout is right, only its shape is not K's.
  const ClientRun ok = run_client({"getproc", "launch", "dk_padded_k_major"}, {{"TMAGUARD_MODE", "reject"}});
  EXPECT_EQ(ok.ran, 1) << describe(ok);
  EXPECT_TRUE(ok.events("violation").empty()) << describe(ok);
  EXPECT_EQ(with_rule(ok, "fa4-dk-shape-mismatch").size(), 1u) << describe(ok);
}

// ---- 4. descriptor 2 replaced by the job's own file within its first second: tmaguard writes nothing into it
TEST(Settings, StderrReplacedBeforeTheFirstCudaCallIsNeverWritten) {
  const std::string dir = temp_dir("stderr");
  const std::string data = dir + "/data.txt";
  const ClientRun r = run_client({"getproc", "launch", "fa4_dk_bad"},
                                 {{"TMAGUARD_MODE", "log"}, {"TMAGUARD_LOG", ""}, {"TG_STDERR_FIRST", "early"},
                                  {"TG_DATA_FILE", data}},
                                 false, false);
  ASSERT_TRUE(r.p.exited) << describe(r);
  EXPECT_EQ(r.ran, 3) << describe(r);
  EXPECT_EQ(read_all(data), "") << "tmaguard wrote into the job's own file";
  fs::remove_all(dir);
}

// ---- 3. relative --rules/--log and TMAGUARD_RULES/TMAGUARD_LOG name files where the job started, not after chdir
TEST(Settings, RelativePathsSurviveAChdirBeforeTheFirstCudaCall) {
  const std::string dir = temp_dir("chdir"), elsewhere = temp_dir("chdir_to");
  std::ofstream(dir + "/team.toml") << "[[rule]]\nid = \"team-rule\"\nkernel = \"no_such_team_kernel\"\n"
                                       "expect_map_count = [1]\n";
  const std::string client = TG_CLIENT, wrapper = std::string(TG_SOURCE_DIR) + "/scripts/tmaguard";
  // The library alone (relative variables), then the command (relative options).
  const std::vector<std::vector<std::string>> jobs = {
      {"/bin/sh", "-c",
       "cd '" + dir + "' && TMAGUARD_RULES=team.toml TMAGUARD_LOG=guard.log exec '" + client +
           "' getproc launch chdir_then_launch"},
      {"/bin/sh", "-c",
       "cd '" + dir + "' && exec '" + wrapper + "' --mode reject --rules team.toml --log guard.log -- '" + client +
           "' getproc launch chdir_then_launch"}};
  for (const auto& argv : jobs) {
    fs::remove(dir + "/guard.log");
    const ProcessResult p = run_process(argv, {{"LD_PRELOAD", argv[2].find(wrapper) == std::string::npos ? TG_LIB : ""},
                                               {"LD_LIBRARY_PATH", TG_FAKE_DIR}, {"TMAGUARD_MODE", "reject"},
                                               {"TMAGUARD_LIB", TG_LIB}, {"TMAGUARD_TOOL", TG_TOOL},
                                               {"TMAGUARD_LOG_FORMAT", "json"}, {"TG_CHDIR_TO", elsewhere}});
    EXPECT_EQ(p.code, 3) << "the bad launch is rejected; the job is not stopped (78)\n" << p.out << p.err;
    EXPECT_NE(p.out.find("ran=0"), std::string::npos) << p.out << p.err;
    const std::string log = read_all(dir + "/guard.log");
    EXPECT_NE(log.find("fa4-dk-not-k-major"), std::string::npos) << "the log is not where the job started\n" << p.err;
    EXPECT_FALSE(fs::exists(elsewhere + "/guard.log"));
  }
  fs::remove_all(dir);
  fs::remove_all(elsewhere);
}

// ---- 2. a library replaced in place or by rename under its call sites: no fault, no name from another file
TEST(CallSite, ALibraryReplacedUnderItsCallSitesNeverFaultsOrIsMisnamed) {
  const std::string dir = temp_dir("replaced");
  const ClientRun r = run_client({"getproc", "launch", "replaced_library"},
                                 {{"TMAGUARD_MODE", "log"}, {"TG_HIDDEN_BIG", TG_HIDDEN_BIG},
                                  {"TG_HIDDEN_SMALL", TG_HIDDEN_SMALL}, {"TG_HIDDEN_TARGET", dir + "/libteam.so"}});
  ASSERT_TRUE(r.p.exited) << "the job died (signal " << r.p.signal << ")\n" << describe(r);
  EXPECT_EQ(r.p.code, 0) << describe(r);
  const auto v = r.events("violation");
  ASSERT_EQ(v.size(), 3u) << describe(r);
  EXPECT_TRUE(has_symbol(v[0]["stack"], "hidden_caller_in_big_build")) << v[0]["stack"].dump(1);
  EXPECT_TRUE(has_symbol(v[1]["stack"], "hidden_caller_in_small_build")) << v[1]["stack"].dump(1);
  EXPECT_FALSE(has_symbol(v[2]["stack"], "hidden_caller_in_big_build"))
      << "a frame of the loaded (short) build was named from the file that replaced it\n" << v[2]["stack"].dump(1);
  fs::remove_all(dir);
}

// ---- 10. Python loaded after the first finding (a C++ host that embeds it later): later findings name its frames
TEST(CallSite, PythonLoadedAfterTheFirstFindingIsRead) {
  glob_t g{};
  ASSERT_EQ(glob("/usr/lib/x86_64-linux-gnu/libpython3.*.so.1.0", 0, nullptr, &g), 0)
      << "no shared libpython (scripts/install-deps.sh installs libpython3-dev)";
  const std::string libpython = g.gl_pathv[0];
  globfree(&g);
  const ClientRun r = run_client({"getproc", "launch", "python_loaded_later"},
                                 {{"TMAGUARD_MODE", "log"}, {"TG_LIBPYTHON", libpython}});
  ASSERT_EQ(r.p.code, 0) << describe(r);
  const auto v = r.events("violation");
  ASSERT_EQ(v.size(), 2u) << describe(r);
  EXPECT_TRUE(v[0]["python_stack"].empty());
  ASSERT_FALSE(v[1]["python_stack"].empty()) << v[1].dump(1);
  EXPECT_EQ(v[1]["python_stack"][0].value("function", ""), "launch_from_embedded_python") << v[1]["python_stack"].dump();
}

// ---- 12. a class one digit off a known one is not judged by that one's rules
TEST(Fa4Outputs, AKernelClassOneDigitOffIsNotJudgedAsTheKnownOne) {
  const ClientRun r = run_client({"getproc", "launch", "sm900_kernel"}, {{"TMAGUARD_MODE", "reject"}});
  EXPECT_EQ(r.ran, 1) << describe(r);
  EXPECT_EQ(with_rule(r, "fa4-unknown-backward-kernel").size(), 1u) << describe(r);
  EXPECT_TRUE(r.events("violation").empty()) << describe(r);
  for (const json& v : r.events("warning"))
    EXPECT_EQ(v.value("rule", ""), "fa4-unknown-backward-kernel") << "judged by another class's rules: " << v.dump();
}

// ---- 9. odd TMAGUARD_MODE values mean to the command what they mean to the library (one parser, one table)
TEST(Settings, OddModeValuesMeanTheSameToTheCommandAndTheLibrary) {
  const std::string wrapper = std::string(TG_SOURCE_DIR) + "/scripts/tmaguard";
  const std::vector<ModeValue> table = read_mode_values(std::string(TG_SOURCE_DIR) + "/tests/data/mode_values.txt");
  ASSERT_GE(table.size(), 10u);
  for (const ModeValue& m : table) {
    const ProcessResult cmd = run_process({wrapper, "--", "true"}, {{"TMAGUARD_MODE", m.value}, {"TMAGUARD_LIB", TG_LIB},
                                                                    {"TMAGUARD_TOOL", TG_TOOL}});
    const ClientRun lib = run_client({"getproc", "launch", "fa4_dk_bad"}, {{"TMAGUARD_MODE", m.value}});
    if (m.expected == "off") {
      EXPECT_EQ(cmd.code, 2) << m.escaped << ": the command let an inherited off through\n" << cmd.err;
      EXPECT_NE(cmd.err.find("TMAGUARD_MODE=off is set"), std::string::npos) << m.escaped << cmd.err;
      EXPECT_EQ(lib.ran, 3) << m.escaped << "\n" << describe(lib);
      EXPECT_TRUE(lib.records.empty()) << m.escaped << "\n" << describe(lib);
    } else if (m.expected == "error") {
      EXPECT_EQ(cmd.code, 78) << m.escaped << "\n" << cmd.err;
      EXPECT_EQ(lib.p.code, 78) << m.escaped << "\n" << describe(lib);
    } else {  // the mode the table names, by what it does to the three transposed-dK launches
      EXPECT_EQ(cmd.code, 0) << m.escaped << "\n" << cmd.err;
      if (m.expected == "log") EXPECT_EQ(lib.ran, 3) << m.escaped << "\n" << describe(lib);
      if (m.expected == "reject") EXPECT_EQ(lib.failed, 3) << m.escaped << "\n" << describe(lib);
      if (m.expected == "abort") EXPECT_TRUE(lib.p.signaled) << m.escaped << "\n" << describe(lib);
      EXPECT_EQ(with_rule(lib, "fa4-dk-not-k-major").size(), 1u) << m.escaped << "\n" << describe(lib);
    }
  }
}

// ---- 7. a user rule with a built-in rule's id: refused unless it says so, and said when it does
TEST(Rules, ReplacingABuiltInRuleMustBeExplicitAndIsSaid) {
  const std::string rule = "[[rule]]\nid = \"fa4-1cta-dkdv\"\nkernel = \"team_kernel\"\nmap_count = 1\n"
                           "[rule.maps]\nA = 0\n[[rule.check]]\nkind = \"rank\"\nmap = \"A\"\nequals = 2\n";
  const std::string silent = write_file("r5_silent.toml", rule);
  const ProcessResult check = run_process({TG_TOOL, "check-rules", silent}, {});
  EXPECT_EQ(check.code, 1) << check.out << check.err;
  EXPECT_NE(check.err.find("rule 'fa4-1cta-dkdv' has the id of a built-in rule"), std::string::npos) << check.err;
  const ClientRun stopped = run_client({"getproc", "launch", "fa4_dk_bad"},
                                       {{"TMAGUARD_MODE", "reject"}, {"TMAGUARD_RULES", silent}});
  EXPECT_EQ(stopped.p.code, 78) << describe(stopped);
  EXPECT_EQ(stopped.ran, -1) << describe(stopped);

  const std::string explicit_ = write_file("r5_explicit.toml", "[[rule]]\nreplaces_builtin = true\n" + rule.substr(9));
  const ProcessResult ok = run_process({TG_TOOL, "check-rules", explicit_}, {});
  EXPECT_EQ(ok.code, 0) << ok.out << ok.err;
  EXPECT_NE(ok.out.find("rule 'fa4-1cta-dkdv' replaces the built-in rule of that id"), std::string::npos) << ok.out;
  const ClientRun said = run_client({"getproc", "launch", "fa4_dk_bad"},
                                    {{"TMAGUARD_MODE", "reject"}, {"TMAGUARD_RULES", explicit_}});
  ASSERT_EQ(said.events("rules-replaced").size(), 1u) << describe(said);
  EXPECT_NE(said.events("rules-replaced")[0].dump().find("fa4-1cta-dkdv"), std::string::npos);
  std::remove(silent.c_str());
  std::remove(explicit_.c_str());
}

// ---- 12. the small ones: inspect takes no --mode; misspelled names are said; /dev/stdout is followed
TEST(Settings, InspectRefusesAModeAndMisspelledNamesAreSaid) {
  const std::string wrapper = std::string(TG_SOURCE_DIR) + "/scripts/tmaguard";
  const ProcessResult p = run_process({wrapper, "inspect", "--mode", "abort", "--", "true"},
                                      {{"TMAGUARD_LIB", TG_LIB}, {"TMAGUARD_TOOL", TG_TOOL}});
  EXPECT_EQ(p.code, 2) << p.err;
  EXPECT_NE(p.err.find("inspect runs in inspect mode: it takes no --mode"), std::string::npos) << p.err;
  for (const char* name : {"TMAGUARD_mode", "TMAGUARDMODE"}) {
    const ClientRun r = run_client({"getproc", "launch", "fa4_ok"}, {{"TMAGUARD_MODE", "log"}, {name, "off"}});
    EXPECT_NE(r.p.err.find(std::string(name) + " is not a tmaguard variable and is ignored (did you mean "
                                                "TMAGUARD_MODE?"),
              std::string::npos)
        << name << "\n" << describe(r);
  }
}

TEST(Settings, LogToDevStdoutGoesToStdout) {
  const ClientRun r = run_client({"getproc", "launch", "fa4_dk_bad"},
                                 {{"TMAGUARD_MODE", "log"}, {"TMAGUARD_LOG", "/dev/stdout"}});
  EXPECT_NE(r.p.out.find("\"event\":\"violation\""), std::string::npos) << describe(r);
  EXPECT_EQ(r.p.err.find("symbolic link"), std::string::npos) << r.p.err;
}

// ---- 11. tmaguard report renders bidi controls escaped, as it does control bytes
TEST(Report, EscapesBidiControls) {
  const std::string log = write_file("r5_bidi.jsonl",
                                     "{\"event\":\"violation\",\"rule\":\"fa4-dk-not-k-major\",\"severity\":\"error\","
                                     "\"kernel\":\"evil\xe2\x80\xaeknil\",\"host\":\"h\xe2\x81\xa6x\",\"pid\":1}\n");
  const ProcessResult p = run_process({TG_TOOL, "report", "--records", log}, {});
  EXPECT_EQ(p.out.find("\xe2\x80\xae"), std::string::npos) << p.out;
  EXPECT_EQ(p.out.find("\xe2\x81\xa6"), std::string::npos) << p.out;
  EXPECT_NE(p.out.find("\\u202e"), std::string::npos) << p.out;
  std::remove(log.c_str());
}

}  // namespace
