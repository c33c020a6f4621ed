// tmaguard shim: what the static C++ runtime would otherwise need from a newer glibc than the one tmaguard ships for.
// GCC 12's libstdc++.a, built on glibc 2.36, calls arc4random (GLIBC_2.36) in std::random_device, which the library
// and the tool link in without using it; Grace nodes run Ubuntu 22.04 (glibc 2.35). A hidden definition here takes
// that reference at link time, so the binaries need GLIBC_2.35 at most (release-build's Debian 11 root needs none of
// this: its libstdc++ predates arc4random). Hidden: the job's own arc4random is never replaced.
#include <sys/random.h>

#include <cstddef>
#include <cstdint>

extern "C" __attribute__((visibility("hidden"))) uint32_t arc4random() {
  uint32_t v = 0;
  std::size_t got = 0;
  while (got < sizeof v) {  // the kernel's entropy; a process that cannot have it gets a counter-free constant mix
    const ssize_t n = getrandom(reinterpret_cast<char*>(&v) + got, sizeof v - got, 0);
    if (n <= 0) break;
    got += static_cast<std::size_t>(n);
  }
  return v;
}
