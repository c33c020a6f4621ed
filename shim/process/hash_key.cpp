// tmaguard shim: the process's secret hash key (hash_key.h).
#include "process/hash_key.h"

#include <sys/auxv.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include <cstring>

namespace tmaguard {

alignas(64) HashKey g_hash_key{};  // constant-initialised (nothing runs at load); two lines of its own, only read

namespace {
uint64_t splitmix(uint64_t& s) {
  uint64_t z = (s += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}
}  // namespace

void draw_hash_key() {
  HashKey k{};
  std::size_t got = 0;
  while (got < sizeof k.k) {
    const ssize_t n = getrandom(reinterpret_cast<char*>(k.k) + got, sizeof k.k - got, GRND_NONBLOCK);
    if (n <= 0) break;
    got += static_cast<std::size_t>(n);
  }
  if (got < sizeof k.k) {  // no getrandom (an old kernel, a seccomp filter): the loader's 16 random bytes and more
    uint64_t seed[2] = {0, 0};
    if (const auto* r = reinterpret_cast<const uint8_t*>(getauxval(AT_RANDOM))) std::memcpy(seed, r, sizeof seed);
    timespec t{};
    clock_gettime(CLOCK_MONOTONIC, &t);
    uint64_t s = seed[0] ^ (seed[1] * 0x2545f4914f6cdd1dULL) ^ static_cast<uint64_t>(t.tv_nsec) ^
                 (static_cast<uint64_t>(t.tv_sec) << 32) ^ (static_cast<uint64_t>(getpid()) << 17);
    for (uint64_t& w : k.k) w ^= splitmix(s);
  }
  g_hash_key = k;
}

}  // namespace tmaguard
