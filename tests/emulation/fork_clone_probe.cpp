// Does this machine (or the emulator running this program) let a child forked while another thread is starting a
// thread start a thread of its own? One thread starts and joins short-lived threads without pause while the main
// thread forks 50 times; each child starts and joins one thread and exits 0. Prints "fork-clone ok" and exits 0 when
// all 50 children did; a run that never ends is the answer "no".
//
// qemu-user 7.2 (Debian 12's qemu-user-static) answers "no": its lock around guest thread creation is held across a
// host fork() by the thread that was creating one, so the child's first thread creation waits on it forever. Native
// Linux answers "yes". scripts/test-aarch64.sh asks this before running the tests that fork while the job's threads
// (and tmaguard's, started on first use) are being created.
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <thread>

int main() {
  std::atomic<bool> stop{false};
  std::thread starter([&] {
    while (!stop.load()) std::thread([] {}).join();
  });
  int ok = 0;
  for (int i = 0; i < 50; ++i) {
    const pid_t pid = fork();
    if (pid == 0) {
      std::thread([] {}).join();
      _exit(0);
    }
    int status = 0;
    if (pid > 0 && waitpid(pid, &status, 0) == pid) ok += WIFEXITED(status) && WEXITSTATUS(status) == 0;
  }
  stop = true;
  starter.join();
  std::printf("fork-clone %s: %d of 50 children started a thread\n", ok == 50 ? "ok" : "FAILED", ok);
  return ok == 50 ? 0 : 1;
}
