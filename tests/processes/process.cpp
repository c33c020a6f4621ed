// Child-process runner for the process tests (fork + execve, output through temporary files, a timeout).
#include "process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

extern char** environ;

namespace {
std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}
}  // namespace

ProcessResult run_process(const std::vector<std::string>& argv, const std::map<std::string, std::string>& env,
                          const ProcessOptions& opt) {
  std::map<std::string, std::string> e;
  for (char** p = environ; *p; ++p) {
    const std::string kv = *p;
    const auto eq = kv.find('=');
    if (eq != std::string::npos) e[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  for (const auto& [k, v] : env) {
    if (v.empty())
      e.erase(k);
    else
      e[k] = v;
  }
  std::vector<std::string> envs;
  for (const auto& [k, v] : e) envs.push_back(k + "=" + v);
  char out_tmpl[] = "/tmp/tg_out_XXXXXX", err_tmpl[] = "/tmp/tg_err_XXXXXX";
  const int out_fd = mkstemp(out_tmpl), err_fd = mkstemp(err_tmpl);
  int gone[2] = {-1, -1};
  if (opt.stderr_reader_gone && pipe(gone) == 0) close(gone[0]);  // nobody will ever read it
  const pid_t pid = fork();
  if (pid == 0) {
    dup2(out_fd, 1);
    dup2(opt.stderr_reader_gone ? gone[1] : err_fd, 2);
    signal(SIGPIPE, SIG_DFL);  // as a job started from a shell has it
    std::vector<char*> a, en;
    for (const auto& s : argv) a.push_back(const_cast<char*>(s.c_str()));
    a.push_back(nullptr);
    for (const auto& s : envs) en.push_back(const_cast<char*>(s.c_str()));
    en.push_back(nullptr);
    if (!opt.cwd.empty() && chdir(opt.cwd.c_str()) != 0) _exit(126);
    execve(a[0], a.data(), en.data());
    _exit(127);
  }
  if (gone[1] >= 0) close(gone[1]);
  ProcessResult r;
  int status = 0;
  const timespec tick{0, 10 * 1000 * 1000};
  for (long waited_ms = 0;; waited_ms += 10) {
    if (waitpid(pid, &status, WNOHANG) == pid) break;
    if (waited_ms >= opt.timeout_s * 1000L) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      r.timed_out = true;
      break;
    }
    nanosleep(&tick, nullptr);
  }
  r.exited = WIFEXITED(status);
  r.code = r.exited ? WEXITSTATUS(status) : -1;
  r.signaled = WIFSIGNALED(status);
  r.signal = r.signaled ? WTERMSIG(status) : 0;
  close(out_fd);
  close(err_fd);
  r.out = slurp(out_tmpl);
  r.err = slurp(err_tmpl);
  unlink(out_tmpl);
  unlink(err_tmpl);
  return r;
}
