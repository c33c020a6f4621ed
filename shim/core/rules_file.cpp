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

#include <algorithm>

#include "rules_model.h"
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

// A user rule with a built-in rule's id replaces it (merge_rules), and with it the built-in check for every kernel:
// only on purpose (replaces_builtin = true), and said.
void judge_builtin_ids(const RuleSet& rules, const std::string& path, RulesResult& res) {
  const std::vector<std::string>& builtin = builtin_rule_ids();
  for (const Rule& r : rules.rules) {
    const bool is_builtin = std::find(builtin.begin(), builtin.end(), r.id) != builtin.end();
    if (is_builtin && r.replaces_builtin)
      res.notices.push_back(fmt::format("{}: rule '{}' replaces the built-in rule of that id (replaces_builtin = true)",
                                        path, r.id));
    else if (is_builtin)
      res.errors.push_back(fmt::format(
          "{}: rule '{}' has the id of a built-in rule and would replace it, switching its check off for every "
          "kernel; give the rule another id, or set replaces_builtin = true to replace the built-in rule on purpose",
          path, r.id));
    else if (r.replaces_builtin)
      res.errors.push_back(fmt::format("{}: rule '{}' sets replaces_builtin = true, but no built-in rule has that id "
                                       "(tmaguard check-rules --builtin lists them)",
                                       path, r.id));
  }
  if (!res.errors.empty()) res.rules = nullptr;
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
  RulesResult res = parse_rules(text, path);
  // A copy of a built-in preset file (rules/fa4_*.toml, as check-rules is run on them) replaces nothing.
  if (res.rules && builtin_rules_text().find(text) == std::string_view::npos) judge_builtin_ids(*res.rules, path, res);
  return res;
}

const std::vector<std::string>& builtin_rule_ids() {
  // Never destroyed: tmaguard's own threads (the device audit's worker) may read it while the process exits.
  static const std::vector<std::string>& ids = *new std::vector<std::string>([] {
    std::vector<std::string> out;
    const RulesResult b = parse_rules(builtin_rules_text(), "built-in rules");
    if (b.rules)
      for (const Rule& r : b.rules->rules) out.push_back(r.id);
    return out;
  }());
  return ids;
}

}  // namespace tmaguard
