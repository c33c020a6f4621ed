// tmaguard shim: the process's context and path facts (context.h).
#include "process/context.h"

#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>

namespace tmaguard {

std::string host_name() {
  char host[256] = {};
  return gethostname(host, sizeof host - 1) == 0 ? std::string(host) : std::string();
}

ProcessContext process_context(const Config& cfg) {
  ProcessContext c;
  c.pid = static_cast<long>(getpid());
  c.tid = static_cast<long>(syscall(SYS_gettid));
  c.rank = cfg.rank;
  c.local_rank = cfg.local_rank;
  c.host = host_name();
  c.job_id = cfg.job_id;
  timespec now{};
  clock_gettime(CLOCK_REALTIME, &now);
  c.time = format_time_utc(static_cast<int64_t>(now.tv_sec) * 1000 + now.tv_nsec / 1000000);
  return c;
}

PathContext path_context(const Config& cfg) {
  PathContext p;
  p.pid = static_cast<long>(getpid());
  p.host = host_name();
  p.rank = cfg.rank;
  p.job = cfg.job_id;
  return p;
}

void make_parent_directories(const std::string& path) {
  for (std::size_t at = path.find('/', 1); at != std::string::npos; at = path.find('/', at + 1))
    if (mkdir(path.substr(0, at).c_str(), 0755) != 0 && errno != EEXIST) return;
}

}  // namespace tmaguard
