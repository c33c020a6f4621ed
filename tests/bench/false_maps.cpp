// How often bytes that are not tensor maps are taken for one, and how often they would draw an error-severity
// finding, per class of what real parameters hold (tests/core/window_corpora.h), read the three ways a place where
// maps are only searched for is read: a whole 128-byte parameter, a window inside a structure, device memory.
// Prints counts and rates; asserts nothing (the unit test asserts 0 over fewer windows).
//   false_maps [MILLIONS_PER_CLASS] [THREADS] [CLASS]   (CLASS: only the classes whose name contains it)
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "window_corpora.h"

int main(int argc, char** argv) {
  const long n = static_cast<long>((argc > 1 ? std::atof(argv[1]) : 10) * 1e6);
  const unsigned threads = argc > 2 ? static_cast<unsigned>(std::atoi(argv[2])) : std::thread::hardware_concurrency();
  const unsigned nt = threads ? threads : 1;
  const std::string only = argc > 3 ? argv[3] : "";
  std::random_device seed;
  std::printf("%-30s %13s | %9s %7s | %9s %7s | %9s %7s\n", "class", "windows", "param:map", "error", "struct:map",
              "error", "device:map", "error");
  long total_errors = 0;
  auto row = [&](const char* name, const corpora::Tally& t) {
    std::printf("%-30s %13ld | %9ld %7ld | %9ld %7ld | %9ld %7ld\n", name, t.windows, t.maps[0], t.errors[0],
                t.maps[1], t.errors[1], t.maps[2], t.errors[2]);
    std::fflush(stdout);
    for (long e : t.errors) total_errors += e;
  };
  for (const corpora::Class& c : corpora::classes()) {
    if (std::string(c.name).find(only) == std::string::npos) continue;
    std::vector<corpora::Tally> part(nt);
    std::vector<std::thread> ts;
    for (unsigned i = 0; i < nt; ++i)
      ts.emplace_back([&, i, s = seed()] {
        std::mt19937_64 rng(s);
        corpora::run(c, rng, n / nt + (i < n % nt ? 1 : 0), part[i]);
      });
    for (auto& t : ts) t.join();
    corpora::Tally all;
    for (const auto& p : part) all.merge(p);
    row(c.name, all);
  }
  if (std::string("padding next to real maps").find(only) != std::string::npos) {
    std::vector<corpora::Tally> part(nt);
    std::vector<std::thread> ts;
    const long structs = n / 56 + 1;  // 56 windows per 1 KiB structure
    for (unsigned i = 0; i < nt; ++i)
      ts.emplace_back([&, i, s = seed()] {
        std::mt19937_64 rng(s);
        corpora::around_real_maps(rng, structs / nt + (i < structs % nt ? 1 : 0), part[i]);
      });
    for (auto& t : ts) t.join();
    corpora::Tally all;
    for (const auto& p : part) all.merge(p);
    row("padding next to real maps", all);
  }
  std::printf("error-severity findings from windows that are not maps: %ld\n", total_errors);
  return 0;
}
