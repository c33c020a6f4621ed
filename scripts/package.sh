#!/usr/bin/env bash
# Builds what tmaguard ships, from one release build made in a Debian 11 root (scripts/release-build: glibc 2.31, so
# the binaries load on glibc 2.31 and newer): the Debian package and the Python wheel, in build-release/. Says what
# it does and where each file lands.
#   install the package:  sudo apt install ./build-release/tmaguard_0.2.0_amd64.deb   (the ./ matters to apt)
#   install the wheel:    pip install ./build-release/tmaguard-0.2.0-py3-none-manylinux_2_31_x86_64.whl
# Needs root (debootstrap, chroot). `scripts/package.sh --host` packages this machine's build instead (no root), into
# build/host-package/: its binaries need this machine's glibc, and the package's name, its Depends and the wheel's
# platform tag say so. `scripts/package.sh --arch aarch64` (no root; the release also runs it) cross-builds the
# aarch64 (Grace) release here and packages it beside the x86-64 one: build-release/tmaguard_0.2.0_arm64.deb and
# tmaguard-0.2.0-py3-none-manylinux_2_35_aarch64.whl, for glibc 2.35 and newer (Ubuntu 22.04 and 24.04 aarch64).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
rel=${TMAGUARD_RELEASE_DIR:-$root/build-release}
say() { echo "package: $*" >&2; }
# The aarch64 release: cross-built with cmake/aarch64-linux-gnu.cmake (Debian 12's cross compiler, whose static C++
# runtime is kept to GLIBC_2.35 by shim/arch/glibc_compat.cpp), checked to need glibc 2.35 at most, packaged.
aarch64_release() {
  local build="$rel/aarch64" stage="$rel/stage-aarch64" revision worst
  "$root/scripts/install-deps.sh" --arch aarch64
  revision=$(git -C "$root" describe --always --dirty --abbrev=12 --exclude '*' 2>/dev/null || echo unknown)
  say "cross-building the aarch64 release in $build"
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_TOOLCHAIN_FILE="$root/cmake/aarch64-linux-gnu.cmake" -DTMAGUARD_TESTS=OFF -DTMAGUARD_DEMO=ON \
    -DTMAGUARD_REVISION="$revision" -DTMAGUARD_GLIBC_BASELINE=2.35 >/dev/null
  ninja -C "$build" tmaguard tmaguard-tool tmaguard_speedups tg_client fake_cuda_demo >/dev/null
  rm -rf "$stage" && cmake --install "$build" --prefix "$stage" >/dev/null
  worst=$(find "$stage" -type f -exec sh -c 'head -c 4 "$1" | grep -q ELF && objdump -T "$1"' _ {} \; |
          grep -oE 'GLIBC_[0-9]+\.[0-9]+' | sed 's/GLIBC_//' | sort -t. -k1,1n -k2,2n | tail -1)
  [ "$(printf '%s\n2.35\n' "$worst" | sort -t. -k1,1n -k2,2n | tail -1)" = 2.35 ] ||
    { say "the aarch64 binaries need GLIBC_$worst, more than Ubuntu 22.04's 2.35"; exit 1; }
  say "making the arm64 Debian package and the aarch64 wheel (they need GLIBC_$worst at most)"
  rm -f "$rel"/tmaguard_*_arm64.deb
  (cd "$build" && cpack -G DEB -B "$rel" >/dev/null) || { say "cpack failed (see $rel/_CPack_Packages)"; exit 1; }
  rm -rf "$rel/_CPack_Packages"
  ls "$rel"/tmaguard_*_arm64.deb
  "$root/scripts/build-wheel" --glibc 2.35 "$stage" "$rel"
}
if [ "${1:-}" = "--arch" ]; then
  [ "${2:-}" = "aarch64" ] || { echo "package: --arch takes aarch64, not '${2:-}'" >&2; exit 2; }
  "$root/scripts/install-deps.sh"
  mkdir -p "$rel"
  aarch64_release
  exit 0
fi
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
say "done; for x86-64 nodes with glibc 2.31 or newer:"
ls "$rel"/tmaguard_*_amd64.deb
echo "$whl"
aarch64_release
