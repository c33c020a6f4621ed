#!/usr/bin/env bash
# Installs what building, testing and packaging tmaguard needs, from Debian packages, only where it is missing.
# The CUDA toolkit headers (cuda.h) are needed at build time only (checked first); the driver is never linked.
#
#   scripts/install-deps.sh --build    what the library, the command and the demo need (scripts/setup.sh)
#   scripts/install-deps.sh            that, and what the tests and packaging need (scripts/test.sh): GoogleTest,
#                                      Google Benchmark, clang (fuzzers), debootstrap (the Debian 11 release root),
#                                      Slurm and munge (the Slurm test), Prometheus, node_exporter and curl (the fleet
#                                      test), libpython (the embedded-Python call-site test, the Python helper's C
#                                      extension)
#   scripts/install-deps.sh --arch aarch64
#                                      what the aarch64 build and its tests need (scripts/build.sh --arch aarch64,
#                                      scripts/test-aarch64.sh): Debian's cross compiler, the arm64 multiarch packages of
#                                      the dependencies (dpkg --add-architecture arm64), qemu-user-static and binfmt-support
#   scripts/install-deps.sh --check    only check: [PASS]/[FAIL] per program, non-zero exit when one is missing
#
# Every program the build, the tests (scripts/test.sh, scripts/test-install.sh, the ctest checks) and packaging
# (scripts/package.sh: cpack's DEB generator runs `file` and dpkg tools) call must be in `programs`; the ctest check
# install_deps_complete fails when a script calls a tool that is not listed here.
set -euo pipefail
build_pkgs=(g++ cmake ninja-build binutils git libspdlog-dev libfmt-dev nlohmann-json3-dev libtomlplusplus-dev
            libcli11-dev libpcre2-dev python3 libpython3-dev)
test_pkgs=(dpkg-dev file universal-ctags libgtest-dev libbenchmark-dev clang libclang-rt-dev python3-venv python3-setuptools
           python3-wheel debootstrap slurm-wlm munge procps prometheus prometheus-node-exporter curl
           util-linux)
# --arch aarch64: the cross toolchain and emulator (build machine) and the libraries the build links (arm64)
aarch64_pkgs=(g++-aarch64-linux-gnu qemu-user-static binfmt-support libspdlog-dev:arm64 libfmt-dev:arm64
              libgtest-dev:arm64 libbenchmark-dev:arm64 libtomlplusplus-dev:arm64 libpcre2-dev:arm64
              libpython3-dev:arm64)
# program -> the package that provides it
programs=(g++:g++ cmake:cmake cpack:cmake ctest:cmake ninja:ninja-build readelf:binutils nm:binutils objdump:binutils
          strip:binutils dpkg:dpkg dpkg-deb:dpkg dpkg-architecture:dpkg-dev dpkg-shlibdeps:dpkg-dev file:file git:git
          clang:clang clang++:clang python3:python3 debootstrap:debootstrap chroot:coreutils slurmctld:slurm-wlm
          slurmd:slurm-wlm sbatch:slurm-wlm srun:slurm-wlm sinfo:slurm-wlm munged:munge pgrep:procps
          prometheus:prometheus promtool:prometheus prometheus-node-exporter:prometheus-node-exporter curl:curl
          unshare:util-linux aarch64-linux-gnu-g++:g++-aarch64-linux-gnu qemu-aarch64-static:qemu-user-static
          update-binfmts:binfmt-support)

check() {
  local missing=0
  for entry in "${programs[@]}"; do
    local prog=${entry%%:*} pkg=${entry#*:}
    if command -v "$prog" >/dev/null 2>&1; then
      echo "[PASS] $prog"
    else
      echo "[FAIL] $prog not found (Debian package $pkg)"
      missing=1
    fi
  done
  [ "$missing" -eq 0 ] || echo "fix: scripts/install-deps.sh installs them (it needs apt-get and root or sudo)"
  return "$missing"
}

# Whether a package is installed: for this machine's architecture (or arch all), or, with :ARCH, for that one (dpkg -s
# answers "ambiguous" once a package is installed for two architectures).
installed() {
  local want=${1#*:} name=${1%%:*}
  [ "$want" != "$1" ] || want="$(dpkg --print-architecture)|all"
  dpkg-query -W -f='${Architecture} ${db:Status-Status}\n' "$name" 2>/dev/null | grep -Eq "^($want) installed$"
}
if [ "${1:-}" = "--check" ]; then check; exit $?; fi
if [ "${1:-}" = "--arch" ]; then
  [ "${2:-}" = "aarch64" ] || { echo "tmaguard: --arch takes aarch64, not '${2:-}'" >&2; exit 2; }
  sudo_cmd=""; [ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
  missing=()
  for p in "${aarch64_pkgs[@]}"; do installed "$p" || missing+=("$p"); done
  if [ ${#missing[@]} -gt 0 ]; then
    echo "tmaguard: installing ${missing[*]}"
    dpkg --print-foreign-architectures | grep -qx arm64 || $sudo_cmd dpkg --add-architecture arm64
    $sudo_cmd apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq "${missing[@]}" >/dev/null
  fi
  exit 0
fi
cuda_inc="${CUDA_HOME:-/usr/local/cuda}/include/cuda.h"
if [ ! -f "$cuda_inc" ]; then
  echo "tmaguard: CUDA headers not found at $cuda_inc; install the CUDA toolkit (headers are enough) or set CUDA_HOME" >&2
  exit 1
fi
pkgs=("${build_pkgs[@]}")
[ "${1:-}" = "--build" ] || pkgs+=("${test_pkgs[@]}")
missing=()
for p in "${pkgs[@]}"; do installed "$p" || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
  echo "tmaguard: installing ${missing[*]}"
  sudo_cmd=""; [ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq "${missing[@]}" >/dev/null
fi
[ "${1:-}" = "--build" ] || { check >/dev/null || { check; exit 1; }; }
