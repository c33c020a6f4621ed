// Real processes with libtmaguard.so preloaded: every reported finding says where in the job its launch came from
// (TMAGUARD_STACK): the launching thread's native frames, named, and its Python frames, read from the interpreter
// without the GIL (ctypes releases it around the call, as PyTorch's op bindings do).
#include <gtest/gtest.h>

#include <dirent.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include "client_run.h"

namespace {

// The line of the Python job that launches: the one marked LAUNCH (read from the file, never hard-coded).
int launch_line() {
  std::ifstream in(TG_CALLSITE_JOB);
  int n = 0;
  for (std::string line; std::getline(in, line);) {
    ++n;
    if (line.find("# LAUNCH") != std::string::npos) return n;
  }
  return -1;
}

ClientRun run_python_job(const std::string& where, std::map<std::string, std::string> env = {}, bool json = true) {
  return run_preloaded({TG_PYTHON, TG_CALLSITE_JOB, TG_CLIENT_LIB, "fa4_dk_bad", where}, std::move(env), json);
}

bool has_symbol(const json& stack, const std::string& part) {
  for (const auto& f : stack)
    if (f.value("symbol", "").find(part) != std::string::npos) return true;
  return false;
}

// A C++ job: its violation names the job's own function (client::launch, found in the program's symbol table: the
// test client exports none of its functions), with the module, its build id and the offset addr2line takes.
TEST(CallSite, ACppJobsRecordNamesItsOwnFunction) {
  const ClientRun r = run_client({"getproc", "ex", "fa4_dk_bad"}, {{"TMAGUARD_MODE", "log"}});
  ASSERT_EQ(r.events("violation").size(), 1u) << describe(r);
  const json v = r.events("violation")[0];
  ASSERT_TRUE(v.contains("stack") && v["stack"].is_array() && !v["stack"].empty()) << v.dump();
  EXPECT_TRUE(has_symbol(v["stack"], "client::launch(")) << v["stack"].dump(1);
  const json& top = v["stack"][0];
  EXPECT_NE(top.value("module", "").find("tg_client"), std::string::npos) << top.dump();
  EXPECT_FALSE(top.value("build_id", "").empty()) << top.dump();
  EXPECT_EQ(top.value("offset", "").rfind("0x", 0), 0u) << top.dump();
  for (const auto& f : v["stack"]) EXPECT_EQ(f.value("module", "").find("libtmaguard"), std::string::npos) << f.dump();
  // No interpreter in this process: said, not guessed.
  EXPECT_TRUE(v["python_stack"].empty());
  EXPECT_EQ(v.value("python_note", ""), "no Python interpreter in this process");
}

// Every CPython this machine has: the system's, and any under ~/.pyenv/versions (a machine with pyenv has several).
std::vector<std::string> interpreters() {
  std::vector<std::string> out = {TG_PYTHON};
  const char* home = std::getenv("HOME");
  const std::string base = std::string(home ? home : "/root") + "/.pyenv/versions";
  if (DIR* d = opendir(base.c_str())) {
    while (const dirent* e = readdir(d)) {
      const std::string python = base + "/" + e->d_name + "/bin/python3";
      if (std::string(e->d_name).rfind("3.", 0) == 0 && access(python.c_str(), X_OK) == 0) out.push_back(python);
    }
    closedir(d);
  }
  return out;
}

// The version a Python prints for itself ("3.10"), or "".
std::string version_of(const std::string& python) {
  const ProcessResult p = run_process({python, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"}, {});
  return p.code == 0 ? p.out.substr(0, p.out.find('\n')) : "";
}

// Every CPython from 3.9 to 3.13 this machine has, from its main thread and a second thread: the record names the
// job's file, the launching function and the line marked LAUNCH; an older one says it is not read, and guesses
// nothing.
TEST(CallSite, EveryCPythonVersionIsReadOrSaysSo) {
  const int line = launch_line();
  int read = 0;
  std::string seen;
  for (const std::string& python : interpreters()) {
    const std::string version = version_of(python);
    if (version.empty()) continue;
    const int minor = std::atoi(version.c_str() + version.find('.') + 1);
    const bool supported = version.rfind("3.", 0) == 0 && minor >= 9 && minor <= 13;
    for (const char* where : {"main", "thread"}) {
      const ClientRun r = run_preloaded({python, TG_CALLSITE_JOB, TG_CLIENT_LIB, "fa4_dk_bad", where},
                                        {{"TMAGUARD_MODE", "log"}});
      ASSERT_EQ(r.events("violation").size(), 1u) << python << " " << where << "\n" << describe(r);
      const json v = r.events("violation")[0];
      const json py = v.value("python_stack", json::array());
      if (!supported) {
        EXPECT_TRUE(py.empty()) << python << " " << v.dump();
        EXPECT_NE(v.value("python_note", "").find("3.9 to 3.13 only"), std::string::npos) << python << " " << v.dump();
        continue;
      }
      ASSERT_FALSE(py.empty()) << python << " " << where << " " << v.dump();
      EXPECT_EQ(py[0].value("function", ""), "launch_from_python") << python << " " << py.dump();
      EXPECT_EQ(py[0].value("line", 0), line) << python << " " << py.dump();
      if (std::string(where) == "thread") {
        EXPECT_NE(py[1].value("function", "").find("<lambda>"), std::string::npos) << python << " " << py.dump();
        EXPECT_GT(py[1].value("line", 0), 0) << python << " " << py.dump();
      }
    }
    if (supported) ++read;
    seen += " " + version;
  }
  EXPECT_GE(read, 1);
  std::printf("CPython versions checked:%s\n", seen.c_str());
}

// A Python job launching through ctypes from its main thread, then from a second Python thread: the record names the
// job's file, the launching function and the line marked LAUNCH, innermost first, then its callers.
TEST(CallSite, APythonJobsRecordNamesItsFileAndLineFromAnyThread) {
  const int line = launch_line();
  ASSERT_GT(line, 0);
  for (const char* where : {"main", "thread"}) {
    const ClientRun r = run_python_job(where, {{"TMAGUARD_MODE", "log"}});
    ASSERT_EQ(r.events("violation").size(), 1u) << where << "\n" << describe(r);
    const json v = r.events("violation")[0];
    const json& py = v["python_stack"];
    ASSERT_TRUE(py.is_array() && py.size() >= 2) << where << " " << r.events("violation")[0].dump();
    EXPECT_NE(py[0].value("file", "").find("callsite_job.py"), std::string::npos) << py.dump(1);
    EXPECT_EQ(py[0].value("function", ""), "launch_from_python") << py.dump(1);
    EXPECT_EQ(py[0].value("line", 0), line) << py.dump(1);
    if (std::string(where) == "thread") {
      EXPECT_NE(py[1].value("function", "").find("<lambda>"), std::string::npos) << py.dump(1);
      EXPECT_NE(py.back().value("file", "").find("threading.py"), std::string::npos) << py.dump(1);
    } else {
      EXPECT_EQ(py[1].value("function", ""), "main") << py.dump(1);
    }
    // The native frames go through ctypes (libffi) into the job's library.
    EXPECT_TRUE(has_symbol(v["stack"], "client::launch(")) << describe(r);
  }
}

// Abort mode: the record that precedes the abort carries both stacks; text records show the top frames.
TEST(CallSite, AbortAndTextRecordsCarryTheCallSite) {
  const ClientRun ab = run_python_job("main", {{"TMAGUARD_MODE", "abort"}});
  EXPECT_TRUE(ab.p.signaled && ab.p.signal == SIGABRT) << describe(ab);
  ASSERT_EQ(ab.events("violation").size(), 1u) << describe(ab);
  const json v = ab.events("violation")[0];
  EXPECT_EQ(v["python_stack"][0].value("line", 0), launch_line()) << describe(ab);
  const ClientRun text = run_python_job("main", {{"TMAGUARD_MODE", "log"}}, false);
  EXPECT_NE(text.log_text.find("callsite_job.py:" + std::to_string(launch_line()) + " in launch_from_python"),
            std::string::npos)
      << text.log_text;
  EXPECT_NE(text.log_text.find("client::launch("), std::string::npos) << text.log_text;
}

// TMAGUARD_STACK chooses what is taken: off takes nothing, native and python one each.
TEST(CallSite, TheStackSettingChoosesWhatIsTaken) {
  for (const std::string mode : {"off", "native", "python", "all"}) {
    const ClientRun r = run_python_job("main", {{"TMAGUARD_MODE", "log"}, {"TMAGUARD_STACK", mode}});
    ASSERT_EQ(r.events("violation").size(), 1u) << mode << "\n" << describe(r);
    const json v = r.events("violation")[0];
    EXPECT_EQ(v.contains("stack"), mode == "native" || mode == "all") << mode << " " << v.dump();
    EXPECT_EQ(v.contains("python_stack"), mode == "python" || mode == "all") << mode << " " << v.dump();
  }
  const ClientRun bad = run_python_job("main", {{"TMAGUARD_STACK", "deep"}});
  EXPECT_TRUE(bad.p.exited && bad.p.code == 78) << describe(bad);
  EXPECT_NE(bad.p.err.find("TMAGUARD_STACK='deep' is not one of all, native, python, off"), std::string::npos)
      << bad.p.err;
}

// tmaguard report groups findings by call site: the Python frame a person would open first.
TEST(CallSite, TheReportGroupsFindingsByCallSite) {
  const std::string log = "/tmp/tmaguard_callsite_" + std::to_string(getpid()) + ".jsonl";
  std::remove(log.c_str());
  for (const char* where : {"main", "thread"})
    run_preloaded({TG_PYTHON, TG_CALLSITE_JOB, TG_CLIENT_LIB, "fa4_dk_bad", where},
                  {{"TMAGUARD_MODE", "log"}, {"TMAGUARD_LOG", log}});
  run_client({"getproc", "ex", "fa4_dk_bad"}, {{"TMAGUARD_MODE", "log"}, {"TMAGUARD_LOG", log}});
  const ProcessResult rep = run_process({TG_TOOL, "report", log}, {});
  std::remove(log.c_str());
  EXPECT_EQ(rep.code, 0) << rep.out << rep.err;
  EXPECT_NE(rep.out.find("by call site"), std::string::npos) << rep.out;
  EXPECT_NE(rep.out.find("callsite_job.py:" + std::to_string(launch_line()) + " launch_from_python"),
            std::string::npos)
      << rep.out;
  EXPECT_NE(rep.out.find("client::launch("), std::string::npos) << rep.out;  // the C++ job: its native frame
}

}  // namespace
