#!/usr/bin/env bash
# Installs what building, testing and packaging tmaguard needs, from Debian packages, only where it is missing.
# The CUDA toolkit headers (cuda.h) are needed at build time only (checked first); the driver is never linked.
#
#   scripts/install-deps.sh --build    what the library, the command and the demo need (scripts/setup.sh)
#   scripts/install-deps.sh            that, and what the tests and packaging need (scripts/test.sh): GoogleTest,
#                                      Google Benchmark, clang (fuzzers), debootstrap (the Debian 11 release root),
#                                      Slurm and munge (the Slurm test), Prometheus, node_exporter and curl (the fleet
#                                      test), libpython (the embedded-Python call-site test)
#   scripts/install-deps.sh --check    only check: [PASS]/[FAIL] per program, non-zero exit when one is missing
#
# Every program the build, the tests (scripts/test.sh, scripts/test-install.sh, the ctest checks) and packaging
# (scripts/package.sh: cpack's DEB generator runs `file` and dpkg tools) call must be in `programs`; the ctest check
# install_deps_complete fails when a script calls a tool that is not listed here.
set -euo pipefail
build_pkgs=(g++ cmake ninja-build binutils git libspdlog-dev libfmt-dev nlohmann-json3-dev libtomlplusplus-dev
            libcli11-dev libpcre2-dev python3)
test_pkgs=(dpkg-dev file universal-ctags libgtest-dev libbenchmark-dev clang libclang-rt-dev python3-venv python3-setuptools
           python3-wheel debootstrap slurm-wlm munge procps libpython3-dev prometheus prometheus-node-exporter curl
           util-linux)
# program -> the package that provides it
programs=(g++:g++ cmake:cmake cpack:cmake ctest:cmake ninja:ninja-build readelf:binutils nm:binutils objdump:binutils
          strip:binutils dpkg:dpkg dpkg-deb:dpkg dpkg-architecture:dpkg-dev dpkg-shlibdeps:dpkg-dev file:file git:git
          clang:clang clang++:clang python3:python3 debootstrap:debootstrap chroot:coreutils slurmctld:slurm-wlm
          slurmd:slurm-wlm sbatch:slurm-wlm srun:slurm-wlm sinfo:slurm-wlm munged:munge pgrep:procps
          prometheus:prometheus promtool:prometheus prometheus-node-exporter:prometheus-node-exporter curl:curl
          unshare:util-linux)

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

if [ "${1:-}" = "--check" ]; then check; exit $?; fi
cuda_inc="${CUDA_HOME:-/usr/local/cuda}/include/cuda.h"
if [ ! -f "$cuda_inc" ]; then
  echo "tmaguard: CUDA headers not found at $cuda_inc; install the CUDA toolkit (headers are enough) or set CUDA_HOME" >&2
  exit 1
fi
pkgs=("${build_pkgs[@]}")
[ "${1:-}" = "--build" ] || pkgs+=("${test_pkgs[@]}")
missing=()
for p in "${pkgs[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
  echo "tmaguard: installing ${missing[*]}"
  sudo_cmd=""; [ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq "${missing[@]}" >/dev/null
fi
[ "${1:-}" = "--build" ] || { check >/dev/null || { check; exit 1; }; }
