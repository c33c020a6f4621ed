#!/usr/bin/env bash
# Runs every GPU-free test: builds (installing what is missing), then ctest (unit tests, golden vectors from the
# H200, real processes with the library preloaded, export/NEEDED/init checks), then the core unit tests again
# under AddressSanitizer + UBSan.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${TMAGUARD_BUILD_DIR:-$root/build}
"$root/scripts/build.sh"
(cd "$build" && ctest --output-on-failure -j2)
asan="$build-asan"
cmake -S "$root" -B "$asan" -G Ninja -DCMAKE_BUILD_TYPE=Debug -DTMAGUARD_SANITIZE=ON >/dev/null
ninja -C "$asan" core_tests
ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=halt_on_error=1 "$asan/tests/core_tests" --gtest_brief=1
