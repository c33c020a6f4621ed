#!/usr/bin/env bash
# Configures and builds tmaguard into build/ (or $TMAGUARD_BUILD_DIR).
#   scripts/build.sh           the library, the command, the demo, and the tests with their stand-in driver
#   scripts/build.sh --no-tests  the library, the command and the demo only (what scripts/setup.sh needs)
#   scripts/build.sh --arch aarch64 [--no-tests]
#                                for Grace (aarch64) hosts, cross-compiled here into build-aarch64/ (or
#                                $TMAGUARD_BUILD_DIR) with cmake/aarch64-linux-gnu.cmake; the tests run under qemu-user
#                                (scripts/test-aarch64.sh)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${TMAGUARD_BUILD_DIR:-$root/build}
if [ "${1:-}" = "--arch" ]; then
  [ "${2:-}" = "aarch64" ] || { echo "tmaguard: --arch takes aarch64, not '${2:-}'" >&2; exit 2; }
  shift 2
  "$root/scripts/install-deps.sh" --arch aarch64
  build=${TMAGUARD_BUILD_DIR:-$root/build-aarch64}
  set -- "$@" -DCMAKE_TOOLCHAIN_FILE="$root/cmake/aarch64-linux-gnu.cmake"
fi
if [ "${1:-}" = "--no-tests" ]; then
  shift
  "$root/scripts/install-deps.sh" --build
  set -- -DTMAGUARD_TESTS=OFF -DTMAGUARD_DEMO=ON "$@"
else
  "$root/scripts/install-deps.sh"
  set -- -DTMAGUARD_TESTS=ON "$@"
fi
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@" >/dev/null
ninja -C "$build"
