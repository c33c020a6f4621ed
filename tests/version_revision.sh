#!/usr/bin/env bash
# The revision a build records (cmake/version.cmake): its own checkout's, and "unknown" for sources unpacked inside
# another git repository (a tarball extracted into a monorepo must not record the monorepo's commit).
# Usage: tests/version_revision.sh SOURCE_ROOT
set -eu
src=$(cd "${1:?source root}" && pwd)
d=$(mktemp -d); trap 'rm -rf "$d"' EXIT
git init -q "$d/outer"; mkdir -p "$d/outer/vendor/tmaguard/cmake"
cp "$src/cmake/version.cmake" "$d/outer/vendor/tmaguard/cmake/"
git -C "$d/outer" -c user.email=t@t -c user.name=t commit -q --allow-empty -m outer
cmake -DSRC="$d/outer/vendor/tmaguard" -DOUT="$d/inner.h" -DVERSION=0 -P "$src/cmake/version.cmake"
grep -q '#define TMAGUARD_REVISION "unknown"' "$d/inner.h" ||
  { echo "[FAIL] sources inside another repository recorded: $(grep REVISION "$d/inner.h")"; exit 1; }
git init -q "$d/own"; cp -r "$d/outer/vendor/tmaguard/cmake" "$d/own/"
git -C "$d/own" add -A; git -C "$d/own" -c user.email=t@t -c user.name=t commit -q -m own
want=$(git -C "$d/own" rev-parse --short=12 HEAD)
cmake -DSRC="$d/own" -DOUT="$d/own.h" -DVERSION=0 -P "$src/cmake/version.cmake"
grep -q "#define TMAGUARD_REVISION \"$want\"" "$d/own.h" ||
  { echo "[FAIL] its own checkout at $want recorded: $(grep REVISION "$d/own.h")"; exit 1; }
echo "[PASS] a build records its own checkout's revision ($want), and unknown inside another repository"
