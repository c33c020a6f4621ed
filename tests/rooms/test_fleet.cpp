// The report room's fleet view without a process: the metrics file a node exporter's textfile collector reads.
#include <gtest/gtest.h>
#include <dirent.h>
#include <stdlib.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "process/settings.h"
#include "report/reporter.h"

namespace tmaguard {
namespace {

std::vector<std::string> files_in(const std::string& dir) {
  std::vector<std::string> names;
  if (DIR* d = opendir(dir.c_str())) {
    while (const dirent* e = readdir(d))
      if (e->d_name[0] != '.') names.emplace_back(e->d_name);
    closedir(d);
  }
  return names;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// The value of the sample of `family` (its first line) in a metrics text; -1 when it has none.
long long sample(const std::string& text, const std::string& family) {
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    if (line.rfind(family + "{", 0) == 0) return std::stoll(line.substr(line.rfind(' ') + 1));
  return -1;
}

TEST(MetricsFile, TheMetricsFileIsTheSummaryWithTheProcesssLabelsAndItsLastSaysItEnded) {
  char dir_template[] = "/tmp/tg_room_metrics_XXXXXX";
  ASSERT_NE(mkdtemp(dir_template), nullptr);
  const std::string dir = dir_template;
  Config cfg = settings().config;
  cfg.metrics_dir = dir;
  cfg.rank = "3";
  cfg.job_id = "77";
  const uint64_t failures = metrics_write_failures();
  write_metrics_file(cfg, true);
  const std::vector<std::string> files = files_in(dir);
  ASSERT_EQ(files.size(), 1u) << "one file, nothing left from writing it";
  const std::string name = files[0];
  EXPECT_EQ(name.rfind("tmaguard-", 0), 0u);
  EXPECT_NE(name.find("-" + std::to_string(getpid()) + ".prom"), std::string::npos) << name;
  const std::string text = read_file(dir + "/" + name);
  EXPECT_NE(text.find("rank=\"3\",job=\"77\""), std::string::npos) << text;
  EXPECT_EQ(sample(text, "tmaguard_active"), 1) << text;
  EXPECT_EQ(sample(text, "tmaguard_launches_seen_total"), static_cast<long long>(current_summary().launches_seen));
  write_metrics_file(cfg, false);
  EXPECT_EQ(files_in(dir), files) << "the same file, replaced";
  EXPECT_EQ(sample(read_file(dir + "/" + name), "tmaguard_active"), 0);
  EXPECT_EQ(metrics_write_failures(), failures);
  unlink((dir + "/" + name).c_str());
  rmdir(dir.c_str());
}

TEST(MetricsFile, AMetricsDirectoryThatCannotBeWrittenIsCountedAndTheJobGoesOn) {
  Config cfg = settings().config;
  cfg.metrics_dir = "/proc/tg_room_no_such_directory";
  const uint64_t failures = metrics_write_failures();
  write_metrics_file(cfg, true);
  write_metrics_file(cfg, true);
  EXPECT_EQ(metrics_write_failures(), failures + 2);
}

}  // namespace
}  // namespace tmaguard
