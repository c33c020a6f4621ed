// How often bytes that are not tensor maps are taken for one (tests/core/window_corpora.h), over many windows: as a
// whole 128-byte parameter would be read (decode) and inside a structure (plausible_map). Prints counts; asserts
// nothing (the unit test asserts 0 over fewer windows).
//   false_maps [MILLIONS_PER_CORPUS]
#include <cstdio>
#include <cstdlib>
#include <random>

#include "window_corpora.h"

int main(int argc, char** argv) {
  const long n = (argc > 1 ? std::atol(argv[1]) : 10) * 1000000L;
  std::mt19937_64 rng(std::random_device{}());
  struct Row {
    const char* name;
    void (*run)(std::mt19937_64&, long, corpora::Tally&);
    long count;
  } rows[] = {{"random bytes", corpora::random_bytes, n},
              {"struct fields", corpora::struct_fields, n},
              {"zero-filled and zero-padded", corpora::zero_padded, n},
              {"small 32-bit integers", corpora::small_ints, n},
              {"around real maps (1 KiB structs)", corpora::around_real_maps, n / 50}};
  std::printf("%-36s %12s %10s %10s\n", "corpus", "windows", "decoded", "in-struct");
  for (const Row& r : rows) {
    corpora::Tally t;
    r.run(rng, r.count, t);
    std::printf("%-36s %12ld %10ld %10ld\n", r.name, t.windows, t.decoded, t.plausible);
  }
  return 0;
}
