#!/usr/bin/env bash
# Configures and builds tmaguard into build/ (or $TMAGUARD_BUILD_DIR).
#   scripts/build.sh           the library, the command, the demo, and the tests with their stand-in driver
#   scripts/build.sh --no-tests  the library, the command and the demo only (what scripts/setup.sh needs)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${TMAGUARD_BUILD_DIR:-$root/build}
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
