#!/usr/bin/env bash
# Builds what tmaguard ships, from one release build made in a Debian 11 root (scripts/release-build: glibc 2.31, so
# the binaries load on glibc 2.31 and newer): the Debian package and the Python wheel, in build-release/. Says what
# it does and where each file lands.
#   install the package:  sudo apt install ./build-release/tmaguard_0.2.0_amd64.deb   (the ./ matters to apt)
#   install the wheel:    pip install ./build-release/tmaguard-0.2.0-py3-none-manylinux_2_31_x86_64.whl
# Needs root (debootstrap, chroot). `scripts/package.sh --host` packages this machine's build instead (no root), into
# build/host-package/: its binaries need this machine's glibc, and the package's name, its Depends and the wheel's
# platform tag say so.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
rel=${TMAGUARD_RELEASE_DIR:-$root/build-release}
say() { echo "package: $*" >&2; }
if [ "${1:-}" = "--host" ]; then
  build=${TMAGUARD_BUILD_DIR:-$root/build}
  out="$build/host-package"
  glibc=$(getconf GNU_LIBC_VERSION | awk '{print $2}')  # (ldd --version | head -1 dies of SIGPIPE under pipefail)
  say "building this machine's tree in $build (its binaries need glibc $glibc or newer)"
  "$root/scripts/build.sh" --no-tests >/dev/null
  rm -rf "$out" && mkdir -p "$out"
  say "making the Debian package (cpack) in $out"
  (cd "$build" && cpack -G DEB -B "$out" \
     -D CPACK_PACKAGE_FILE_NAME="tmaguard_$(sed -n 's/#define TMAGUARD_VERSION "\(.*\)"/\1/p' \
        "$build/generated/tmaguard_version.h")_glibc${glibc}_$(dpkg --print-architecture)" >/dev/null) ||
    { say "cpack failed (see $out/_CPack_Packages)"; exit 1; }
  rm -rf "$out/_CPack_Packages" "$out/stage"
  cmake --install "$build" --prefix "$out/stage" >/dev/null
  say "making the wheel from the installed tree $out/stage"
  deb=$(ls "$out"/tmaguard_*.deb)
  whl=$("$root/scripts/build-wheel" "$out/stage" "$out")
  say "done; for nodes with glibc $glibc or newer only:"
  echo "$deb"
  echo "$whl"
  exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "package: the release build runs in a Debian 11 root and needs root (debootstrap, chroot);" \
       "scripts/package.sh --host packages this machine's build instead" >&2
  exit 2
fi
"$root/scripts/install-deps.sh"
say "building in a Debian 11 root (glibc 2.31; made once, in $rel/bullseye; the first time takes minutes)"
stage=$("$root/scripts/release-build")
say "the release tree is $stage (copy it anywhere: bin/tmaguard finds everything relative to itself)"
say "making the wheel from it"
whl=$("$root/scripts/build-wheel" --glibc 2.31 "$stage" "$rel")
say "done; for nodes with glibc 2.31 or newer:"
ls "$rel"/tmaguard_*.deb
echo "$whl"
