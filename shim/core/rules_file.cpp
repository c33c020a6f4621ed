// tmaguard core: reading a rules file from disk (the library at start and check-rules share this).
//
// Only a regular file of bounded size is read: TMAGUARD_RULES=/dev/zero would grow without end, a FIFO with no
// writer would block the job's first CUDA call forever, and a directory reads as zero rules.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>
#include <cerrno>
#include <cstring>

#include "tmaguard/rules.h"

namespace tmaguard {
namespace {

const char* file_kind(mode_t m) {
  if (S_ISDIR(m)) return "a directory";
  if (S_ISCHR(m)) return "a character device";
  if (S_ISBLK(m)) return "a block device";
  if (S_ISFIFO(m)) return "a FIFO";
  if (S_ISSOCK(m)) return "a socket";
  return "not a file";
}

struct Fd {
  int fd;
  ~Fd() {
    if (fd >= 0) close(fd);
  }
};

}  // namespace

RulesResult load_rules_file(const std::string& path) {
  auto fail = [&](const std::string& why) { return RulesResult{nullptr, {path + ": " + why}}; };
  // O_NONBLOCK: opening a FIFO must not wait for a writer (it is refused below anyway).
  const Fd f{open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY)};
  if (f.fd < 0) return fail(fmt::format("cannot read the rules file ({})", std::strerror(errno)));
  struct stat st {};
  if (fstat(f.fd, &st) != 0) return fail(fmt::format("cannot read the rules file ({})", std::strerror(errno)));
  if (!S_ISREG(st.st_mode)) return fail(fmt::format("not a regular file ({})", file_kind(st.st_mode)));
  if (static_cast<uint64_t>(st.st_size) > kMaxRulesFileBytes)
    return fail(
        fmt::format("{} bytes, more than a rules file may hold ({} MiB)", st.st_size, kMaxRulesFileBytes >> 20));
  std::string text(static_cast<std::size_t>(st.st_size), '\0');
  std::size_t got = 0;
  while (got < text.size()) {
    const ssize_t n = read(f.fd, text.data() + got, text.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return fail(fmt::format("cannot read the rules file ({})", std::strerror(errno)));
    if (n == 0) break;  // it shrank while being read: parse what is there
    got += static_cast<std::size_t>(n);
  }
  text.resize(got);
  return parse_rules(text, path);
}

}  // namespace tmaguard
