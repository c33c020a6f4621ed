// The command as a new user meets it: each subcommand answers --help with its own text and runs nothing, a usage
// error is two lines (what is wrong, where help is), and `--opt=value` is taken like `--opt value`.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "client_run.h"

namespace fs = std::filesystem;

namespace {

const std::string kWrapper = std::string(TG_SOURCE_DIR) + "/scripts/tmaguard";

ProcessResult wrapper(const std::vector<std::string>& args, const std::string& cwd = "") {
  std::vector<std::string> argv{kWrapper};
  argv.insert(argv.end(), args.begin(), args.end());
  ProcessOptions opt;
  if (!cwd.empty()) opt.cwd = cwd;
  return run_process(argv, {{"TMAGUARD_LIB", TG_LIB}, {"TMAGUARD_TOOL", TG_TOOL}}, opt);
}

std::size_t lines(const std::string& s) { return static_cast<std::size_t>(std::count(s.begin(), s.end(), '\n')); }

}  // namespace

TEST(FrontDoor, EverySubcommandHasItsOwnHelpAndRunsNothing) {
  const std::string dir = temp_dir("front_door");
  for (const char* sub : {"demo", "check-preload", "inspect"}) {
    for (const char* flag : {"--help", "-h"}) {
      const ProcessResult p = wrapper({sub, flag}, dir);
      EXPECT_EQ(p.code, 0) << sub << " " << flag << "\n" << p.err;
      EXPECT_EQ(p.out.rfind(std::string("tmaguard ") + sub, 0), 0u) << sub << ": " << p.out;
      EXPECT_LT(lines(p.out), 8u) << sub << ": the whole help instead of the subcommand's\n" << p.out;
      EXPECT_TRUE(p.err.empty()) << sub << ": " << p.err;
    }
  }
  EXPECT_NE(wrapper({"inspect", "--help"}).out.find("./tmaguard-inspect.<pid>.jsonl"), std::string::npos);
  EXPECT_TRUE(fs::is_empty(dir)) << "a subcommand's --help ran it (files left in " << dir << ")";
  fs::remove_all(dir);
}

TEST(FrontDoor, AUsageErrorIsTwoLinesNotTheWholeHelp) {
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"--bogus", "--", "true"}, {"--mode", "log"}, {"check-preload", "extra"}}) {
    const ProcessResult p = wrapper(args);
    EXPECT_EQ(p.code, 2) << args[0] << "\n" << p.err;
    EXPECT_EQ(lines(p.err), 2u) << args[0] << "\n" << p.err;
    EXPECT_NE(p.err.find("'tmaguard --help' lists the options"), std::string::npos) << p.err;
    EXPECT_TRUE(p.out.empty()) << p.out;
  }
}

TEST(FrontDoor, OptionsTakeTheirValueAfterAnEqualsSign) {
  const std::string dir = temp_dir("front_door_eq");
  const ProcessResult p = wrapper({"--mode=log", "--json", "--log=" + dir + "/L.%p.jsonl", "--", "true"});
  EXPECT_EQ(p.code, 0) << p.err;
  std::size_t files = 0;
  for (const auto& e : fs::directory_iterator(dir)) files += e.path().filename().string().rfind("L.", 0) == 0;
  EXPECT_EQ(files, 1u) << "the start record of the guarded `true` is missing";
  fs::remove_all(dir);
}

TEST(FrontDoor, TheReadmesLineWithoutAGpuGuardsAJob) {
  // The two lines of README.md's "Guard a job" that run without a GPU, run as they are written, from the source tree.
  std::ifstream in(std::string(TG_SOURCE_DIR) + "/README.md");
  std::string line, d_line, run_line;
  while (std::getline(in, line)) {
    if (line.rfind("D=$PWD/build/", 0) == 0) d_line = line;
    if (line.rfind("TG_CLIENT_LIBCUDA=$D ", 0) == 0) run_line = line;
  }
  ASSERT_FALSE(d_line.empty() || run_line.empty()) << "README.md lost its no-GPU example";
  if (!fs::exists(std::string(TG_SOURCE_DIR) + "/build/tests/tg_client"))
    GTEST_SKIP() << "the README's line runs in a build made in build/ (scripts/setup.sh); this build is elsewhere";
  ProcessOptions opt;
  opt.cwd = TG_SOURCE_DIR;
  const ProcessResult p = run_process({"/bin/bash", "-c", d_line + "\n" + run_line}, {}, opt);
  EXPECT_EQ(p.code, 0) << p.err;
  EXPECT_NE(p.err.find("tmaguard: violation fa4-dk-not-k-major [error] action=log"), std::string::npos) << p.err;
}

// A library of the other CPU (an x86-64 .so on a Grace node, an aarch64 one here): the loader's own line says only that
// it cannot open it; check-preload says which CPU the library is for and which package this node needs.
TEST(FrontDoor, CheckPreloadNamesTheLibrarysCpu) {
  const std::string dir = temp_dir("other_cpu");
  const std::string lib = dir + "/libtmaguard.so";
  fs::copy_file(TG_LIB, lib);
#if defined(__x86_64__)
  const bool here_x86 = true;
#else
  const bool here_x86 = false;
#endif
  {
    std::fstream f(lib, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(18);
    const unsigned char machine[2] = {static_cast<unsigned char>(here_x86 ? 183 : 62), 0};  // e_machine
    f.write(reinterpret_cast<const char*>(machine), 2);
  }
  const ProcessResult p =
      run_process({kWrapper, "check-preload"}, {{"TMAGUARD_LIB", lib}, {"TMAGUARD_TOOL", TG_TOOL}}, ProcessOptions{});
  EXPECT_EQ(p.code, 2) << p.err;
  const std::string want = here_x86 ? "is built for aarch64 and this node is x86_64: install tmaguard's x86_64 package"
                                    : "is built for x86_64 and this node is aarch64: install tmaguard's aarch64 package";
  EXPECT_NE(p.err.find(want), std::string::npos) << p.err;
  EXPECT_EQ(lines(p.err), 1u) << p.err;
  fs::remove_all(dir);
}
