#!/usr/bin/env bash
# Installs what building and testing tmaguard needs, from Debian packages, only where it is missing.
# The CUDA toolkit headers (cuda.h) are needed at build time only; the driver itself is never linked.
set -euo pipefail
pkgs=(g++ cmake ninja-build binutils dpkg-dev libspdlog-dev libfmt-dev nlohmann-json3-dev libgtest-dev libbenchmark-dev
      libtomlplusplus-dev libcli11-dev libpcre2-dev clang libclang-rt-dev)
missing=()
for p in "${pkgs[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
  echo "tmaguard: installing ${missing[*]}"
  sudo_cmd=""; [ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq "${missing[@]}" >/dev/null
fi
cuda_inc="${CUDA_HOME:-/usr/local/cuda}/include/cuda.h"
if [ ! -f "$cuda_inc" ]; then
  echo "tmaguard: CUDA headers not found at $cuda_inc; install the CUDA toolkit or set CUDA_HOME" >&2
  exit 1
fi
