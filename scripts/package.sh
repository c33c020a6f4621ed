#!/usr/bin/env bash
# Builds what tmaguard ships, from one release build made in a Debian 11 root (scripts/release-build: glibc 2.31, so
# the binaries load on glibc 2.31 and newer): the Debian package and the Python wheel. Prints their paths.
#   install the package:  sudo apt install ./build-release/tmaguard_*.deb
#   install the wheel:    pip install ./build-release/tmaguard-*.whl
# Needs root (debootstrap, chroot). `scripts/package.sh --host` packages this machine's build instead (no root; the
# binaries then need this machine's glibc, and the wheel's platform tag says so).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
rel=${TMAGUARD_RELEASE_DIR:-$root/build-release}
if [ "${1:-}" = "--host" ]; then
  build=${TMAGUARD_BUILD_DIR:-$root/build}
  "$root/scripts/build.sh" >/dev/null
  (cd "$build" && cpack -G DEB >/dev/null) || { echo "package: cpack failed (see $build/_CPack_Packages)" >&2; exit 1; }
  rm -rf "$build/stage"
  cmake --install "$build" --prefix "$build/stage" >/dev/null
  ls -t "$build"/tmaguard_*.deb | head -1
  "$root/scripts/build-wheel" "$build/stage" "$build"
  exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "package: the release build runs in a Debian 11 root and needs root (debootstrap, chroot);" \
       "scripts/package.sh --host packages this machine's build instead" >&2
  exit 2
fi
"$root/scripts/install-deps.sh"
stage=$("$root/scripts/release-build")
ls "$rel"/tmaguard_*.deb
"$root/scripts/build-wheel" "$stage" "$rel"
