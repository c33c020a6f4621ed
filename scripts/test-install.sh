#!/usr/bin/env bash
# Install test (run by scripts/test.sh after the build): the install target into a temporary prefix that is then
# moved elsewhere, and the Debian package unpacked into an empty directory (dpkg-deb -x); the core as a library
# (component core-dev) into another, with the example in tests/consumer built and run against it. Each installed copy must
# then work with the source and build trees renamed away: --version names this build, check-rules accepts its own
# rule files, its demo catches the bad launch, and a job preloaded through its bin/tmaguard is rejected with a log
# whose summary names the version. Also: every ELF file needs only libc, and the package depends on libc6 only.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${TMAGUARD_BUILD_DIR:-$root/build}
work=$(mktemp -d)
passed=0
ok() { passed=$((passed + 1)); }
fail() { echo "test-install: FAIL: $*" >&2; exit 1; }
version=$(sed -n 's/#define TMAGUARD_VERSION "\(.*\)"/\1/p' "$build/generated/tmaguard_version.h")
revision=$(sed -n 's/#define TMAGUARD_REVISION "\(.*\)"/\1/p' "$build/generated/tmaguard_version.h")
[ -n "$version" ] && [ -n "$revision" ] || fail "no version header in $build/generated"

# 1. cmake --install into a prefix, then move the prefix (relocatable); the core as a library (component core-dev)
# into another, moved too, and the example that uses it (tests/consumer) copied out of the source tree
cmake --install "$build" --prefix "$work/staging" >/dev/null
mv "$work/staging" "$work/moved-prefix"
cmake --install "$build" --component core-dev --prefix "$work/core-staging" >/dev/null
mv "$work/core-staging" "$work/core-prefix"
cp -r "$root/tests/consumer" "$work/consumer"
# 2. the Debian package, unpacked
# (made in the test's own folder: build/ never holds a package, so that no .deb built for this machine's glibc can be
# taken for the release's, which has the same name)
(cd "$build" && cpack -G DEB -B "$work/pkg" >/dev/null 2>"$work/cpack.err") || { cat "$work/cpack.err" >&2; fail "cpack -G DEB"; }
deb="$work/pkg/tmaguard_${version}_$(dpkg --print-architecture).deb"
[ -f "$deb" ] || fail "no package at $deb"
dpkg-deb -x "$deb" "$work/deb"
depends=$(dpkg-deb -f "$deb" Depends)
[[ "$depends" =~ ^libc6(\ \(\>=\ [0-9.]+\))?$ ]] || fail "the package depends on '$depends' (want libc6 only)"
ok
for tree in "$work/moved-prefix" "$work/deb/usr"; do
  while IFS= read -r f; do
    if head -c 4 "$f" | grep -q ELF; then
      extra=$(readelf -d "$f" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | grep -v -x -e libc.so.6 -e ld-linux-x86-64.so.2 || true)
      [ -z "$extra" ] || fail "$f needs $extra (want libc only)"
    fi
  done < <(find "$tree" -type f)
done
ok

# 3. the source and build trees out of reach (restored on any exit)
away="$root.away-$$"
build_away=""
restore() {
  [ -d "$away" ] && mv "$away" "$root"
  [ -n "$build_away" ] && [ -d "$build_away" ] && mv "$build_away" "$build"
  rm -rf "$work"
}
trap restore EXIT
trap "exit 130" INT TERM
cd /
if ! mv "$root" "$away" 2>/dev/null; then
  # a source tree that cannot be renamed (a mount point): at least the build tree goes
  echo "test-install: cannot rename $root (a mount point?); renaming only the build tree" >&2
  build_away="$build.away-$$"
  mv "$build" "$build_away"
else
  case "$build" in "$root"/*) ;; *) build_away="$build.away-$$"; mv "$build" "$build_away" ;; esac
fi

multiarch=$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || gcc -print-multiarch)
[ -f "$work/deb/usr/lib/$multiarch/libtmaguard.so" ] || fail "the package does not put the library in /usr/lib/$multiarch"
[ -f "$work/moved-prefix/lib/libtmaguard.so" ] || fail "a prefix install does not put the library in PREFIX/lib"
# nothing in either tree can be taken for the CUDA driver
if find "$work/moved-prefix" "$work/deb" -name 'libcuda*' | grep -q .; then fail "a file named libcuda* is installed"; fi
for so in "$work/deb/usr/share/tmaguard/demo/libtmaguard-demo-driver.so"; do
  soname=$(readelf -d "$so" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
  [ "$soname" = "libtmaguard-demo-driver.so" ] || fail "the demo driver's SONAME is '$soname'"
done
ok
for tree in "$work/moved-prefix" "$work/deb/usr"; do
  tg="$tree/bin/tmaguard"
  lib="$tree/lib/libtmaguard.so"
  [ -f "$lib" ] || lib="$tree/lib/$multiarch/libtmaguard.so"
  [ -f "$(dirname "$lib")/tmaguard/python/_speedups.abi3.so" ] ||
    fail "the Python helper's C extension is not beside the library ($(dirname "$lib")/tmaguard/python)"
  out=$("$tg" --version) || fail "$tg --version: $out"
  grep -q "library: $lib: tmaguard $version (git $revision)" <<<"$out" ||
    fail "$tg --version does not name this build's library: $out"
  ok
  "$tg" check-rules "$tree"/share/tmaguard/rules/fa4_*.toml "$tree"/share/tmaguard/rules/examples/*.toml \
    >"$work/check.out" 2>&1 || fail "check-rules on the installed rules: $(cat "$work/check.out")"
  ok
  "$tg" demo >"$work/demo.out" 2>&1 || fail "the installed demo did not stop the bad launch: $(tail -5 "$work/demo.out")"
  grep -q "fa4-dk-not-k-major" "$work/demo.out" || fail "the installed demo reported nothing"
  ok
  # a job preloaded the documented way, reject mode, JSON log with %p
  rm -f "$work"/job.*.jsonl
  set +e
  TG_CLIENT_LIBCUDA="$tree/share/tmaguard/demo/libtmaguard-demo-driver.so" \
    "$tg" --mode reject --json --log "$work/job.%p.jsonl" --libcuda "$tree/share/tmaguard/demo/libtmaguard-demo-driver.so" \
    -- "$tree/share/tmaguard/demo/tmaguard-demo-job" getproc ex fa4_dk_bad >"$work/job.out" 2>&1
  set -e
  log=$(ls "$work"/job.*.jsonl 2>/dev/null | head -1)
  [ -n "$log" ] || fail "the preloaded job wrote no log: $(cat "$work/job.out")"
  grep -q '"action":"reject".*"rule":"fa4-dk-not-k-major"' "$log" || fail "no reject record in $log"
  grep -q "\"tmaguard_revision\":\"$revision\",\"tmaguard_version\":\"$version\"" "$log" ||
    fail "the summary does not name tmaguard $version ($revision): $(tail -1 "$log")"
  grep -q "RESULT ok=0 failed=3 ran=0" "$work/job.out" || fail "the bad launches were not rejected: $(cat "$work/job.out")"
  ok
  "$tg" report "$log" >"$work/report.out" || fail "report: $(cat "$work/report.out")"
  grep -q "logs written by tmaguard $version (git $revision)" "$work/report.out" ||
    fail "the report does not say which tmaguard wrote the log: $(head -2 "$work/report.out")"
  ok
done
# a library ld.so cannot preload here (damaged; built for a newer glibc than this node's): the job must not start
# (ld.so itself would run it unguarded, or fail it with its own message)
cp -r "$work/moved-prefix" "$work/broken"
for damage in short glibc; do
  if [ "$damage" = short ]; then echo "not a library" >"$work/broken/lib/libtmaguard.so"
  else LC_ALL=C sed 's/GLIBC_2\.3\([0-9]\)/GLIBC_2.9\1/g' "$work/moved-prefix/lib/libtmaguard.so" >"$work/broken/lib/libtmaguard.so"; fi
  set +e
  "$work/broken/bin/tmaguard" -- sh -c 'echo the-job-ran' >"$work/broken.out" 2>&1
  rc=$?
  set -e
  [ "$rc" = 2 ] && ! grep -q the-job-ran "$work/broken.out" && grep -q "so the job was not started" "$work/broken.out" ||
    fail "a library that cannot be preloaded ($damage): rc=$rc $(cat "$work/broken.out")"
  [ "$damage" = short ] || grep -q "needs a newer glibc" "$work/broken.out" || fail "no glibc hint: $(cat "$work/broken.out")"
  set +e
  "$work/broken/bin/tmaguard" check-preload >"$work/check.out" 2>&1
  rc=$?
  set -e
  [ "$rc" = 2 ] && grep -q "^tmaguard: cannot preload $work/broken/lib/libtmaguard.so on this node: " "$work/check.out" ||
    fail "check-preload with a library that cannot be preloaded ($damage): rc=$rc $(cat "$work/check.out")"
  ok
done
"$work/moved-prefix/bin/tmaguard" check-preload || fail "check-preload refused a library that loads"
# the core used as any user would: find_package(tmaguard) in a moved prefix, the example builds, links and judges
cmake -S "$work/consumer" -B "$work/consumer-build" -G Ninja -DCMAKE_PREFIX_PATH="$work/core-prefix" \
  >"$work/consumer.out" 2>&1 && ninja -C "$work/consumer-build" >>"$work/consumer.out" 2>&1 ||
  fail "the core's example does not build against the installed core: $(tail -5 "$work/consumer.out")"
"$work/consumer-build/decode_map" >"$work/consumer.out" 2>&1 ||
  fail "the core's example: $(tail -3 "$work/consumer.out")"
ok
ok
echo "test-install: $passed checks passed (install target moved to another prefix, .deb unpacked; source and build trees renamed away)"
