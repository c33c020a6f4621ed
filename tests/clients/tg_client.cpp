// Test client: a real process that reaches the (stand-in) driver the way real stacks do and runs one scenario.
// Built twice: tg_client (dlopen only, like Triton/cudart) and tg_client_linked (-lcuda).
//
//   tg_client PATH ENTRY SCENARIO [--cukernel] [--extra] [--inline | --cute]
//   PATH: direct (linked build) | dlsym | getproc | getproc_self | getproc_legacy
//   ENTRY: launch | launch_ptsz | ex | ex_ptsz | coop | coop_ptsz | graph_* (client.cpp)
//   SCENARIO: a row of the scenario tables (scenarios_*.cpp)
// Scenarios print "RESULT ok=N failed=M ran=R via=V"; the exit status is 0 when every launch succeeded, 3 when one
// returned an error, 2 on a usage or setup error.
#include <dirent.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <sched.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include "client.h"
#include "fakecuda.h"

// TG_PRINT_THREADS=1: the process's threads at the end, one line each: "THREAD <name> policy=<n> sigblk=<hex>"; with
// TG_PRINT_THREADS=NAME, first waits (at most 5 s) until a thread of that name exists (a thread names itself once it
// runs).
static void print_threads() {
  const char* want = std::getenv("TG_PRINT_THREADS");
  if (!want) return;
  for (int tries = 0; tries < 500; ++tries) {
    std::string listing;
    bool found = std::string(want) == "1";
    if (DIR* d = opendir("/proc/self/task")) {
      while (dirent* e = readdir(d)) {
        if (e->d_name[0] == '.') continue;
        const std::string task = std::string("/proc/self/task/") + e->d_name;
        std::string name, line, sigblk;
        std::ifstream(task + "/comm") >> name;
        for (std::ifstream status(task + "/status"); std::getline(status, line);)
          if (line.rfind("SigBlk:", 0) == 0) sigblk = line.substr(line.find_first_not_of(" \t", 7));
        found = found || name == want;
        listing += "THREAD " + name + " policy=" + std::to_string(sched_getscheduler(std::atoi(e->d_name))) +
                   " sigblk=" + sigblk + "\n";
      }
      closedir(d);
    }
    if (found || tries == 499) {
      std::fputs(listing.c_str(), stdout);
      return;
    }
    usleep(10 * 1000);
  }
}

// The whole client; main() below, or tg_client_run() in libtg_client.so (a job that calls the scenarios from Python
// through ctypes).
static int tg_client_main(int argc, char** argv) {
  using namespace client;
  if (argc >= 2 && std::string(argv[1]) == "nocuda") {
    std::printf("no CUDA here\n");
    print_threads();
    return 0;
  }
  if (argc < 4) die("usage: tg_client PATH ENTRY SCENARIO [--cukernel] [--extra] [--inline | --cute]");
  g_opt.path = argv[1];
  g_opt.entry = argv[2];
  for (int i = 4; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--cukernel")
      g_opt.cukernel = true;
    else if (a == "--extra")
      g_opt.extra = true;
    else if (a == "--inline")
      g_opt.inline_maps = true;
    else if (a == "--cute")
      g_opt.inline_maps = g_opt.cute_maps = true;
    else
      die("unknown option");
  }
  const Scenario* sc = nullptr;
  for (const auto* table : {&core_scenarios(), &hardening_scenarios(), &fa4_scenarios(), &fa4_forward_scenarios(), &blackwell_scenarios(), &struct_scenarios(),
                            &fail_closed_scenarios(), &device_scenarios(), &evidence_scenarios(),
                            &loophole_scenarios(), &fleet_scenarios(), &tensor_scenarios(), &robustness_scenarios()})
    for (const Scenario& s : *table)
      if (argv[3] == std::string(s.name)) sc = &s;
  if (!sc) die("unknown scenario");
  // TG_STDERR_FIRST: the job replaces descriptor 2 with its own data file (TG_DATA_FILE) before any CUDA call, opened
  // with O_CLOEXEC ("cloexec", as Python opens every file) or without it, 1.2 s into the run ("late") or at once
  // ("early": within the process's first second, as a C job opens its file; a shell redirect looks the same then).
  if (const char* how = std::getenv("TG_STDERR_FIRST")) {
    const char* data = std::getenv("TG_DATA_FILE");
    if (!data) die("TG_STDERR_FIRST needs TG_DATA_FILE");
    const bool cloexec = std::string(how) == "cloexec";
    if (std::string(how) == "late") usleep(1200 * 1000);
    ::close(2);
    if (::open(data, O_WRONLY | O_CREAT | O_TRUNC | (cloexec ? O_CLOEXEC : 0), 0644) != 2)
      die("the data file did not get descriptor 2");
  }
  // The driver: libcuda.so.1 from the library path, or a file TG_CLIENT_LIBCUDA names (the installed demo's
  // stand-in, which is deliberately not called libcuda.so.1).
  const char* driver = std::getenv("TG_CLIENT_LIBCUDA");
  g_lib = dlopen(driver && *driver ? driver : "libcuda.so.1", RTLD_NOW);
  if (!g_lib) die("cannot dlopen the CUDA driver");
  auto init = reinterpret_cast<PFN_cuInit_v2000>(g_opt.path == "direct" ? resolve("cuInit", false, 2000)
                                                                        : dlsym(g_lib, "cuInit"));
  if (!init || init(0) != CUDA_SUCCESS) die("cuInit failed");
  // The tensors of every scenario live in [0x7f0000000000, +1 GiB): "device memory" for the stand-in. The range is
  // held (no access) so that nothing the process maps later (tmaguard's pinned memory, a thread's stack) lands
  // inside it; where something mapped before main already lies there, the stand-in's innermost block answers.
  mmap(reinterpret_cast<void*>(0x7f0000000000ULL), 1ULL << 30, PROT_NONE,
       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED_NOREPLACE, -1, 0);
  reinterpret_cast<decltype(&fakecuda_register_memory)>(fake_api("fakecuda_register_memory"))(0x7f0000000000ULL,
                                                                                              1ULL << 30);
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  const int rc = sc->run();
  print_threads();
  return rc;
}

#ifdef TG_CLIENT_LIBRARY
extern "C" __attribute__((visibility("default"))) int tg_client_run(int argc, char** argv) {
  return tg_client_main(argc, argv);
}
#else
int main(int argc, char** argv) { return tg_client_main(argc, argv); }
#endif
