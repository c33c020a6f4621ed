// Scenarios of a job in a fleet: one that is stopped by a signal while it runs (a scheduler's SIGTERM, a SIGKILL
// after the grace period), with or without a handler of its own, and one that warns.
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "client.h"

namespace client {
namespace {

// Launches a transposed dK three times, says so, then waits to be stopped (TG_SLEEP_S seconds at most).
int launch_then_wait() {
  const Kernel bad = fa4_kernel(false, true, false, false);
  for (int i = 0; i < 3; ++i) launch(bad);
  std::printf("LAUNCHED\n");
  std::fflush(stdout);
  const char* s = std::getenv("TG_SLEEP_S");
  for (int i = 0; i < (s ? std::atoi(s) : 30) * 10; ++i) usleep(100 * 1000);
  return finish(ran(bad));
}

void job_handler(int sig) {
  const char msg[] = "JOB HANDLER\n";
  (void)!write(1, msg, sizeof msg - 1);
  _exit(sig == SIGTERM ? 7 : 8);
}

// The job's own SIGTERM handler, installed before its first CUDA call (as PyTorch's elastic agent and most training
// scripts do): it must still run, and exit as it chooses.
int own_handler_then_wait() {
  struct sigaction sa {};
  sa.sa_handler = job_handler;
  sigaction(SIGTERM, &sa, nullptr);
  return launch_then_wait();
}

}  // namespace

const std::vector<Scenario>& fleet_scenarios() {
  static const std::vector<Scenario> v = {
      {"launch_then_wait", launch_then_wait},
      {"own_handler_then_wait", own_handler_then_wait},
  };
  return v;
}

}  // namespace client
