#!/usr/bin/env bash
# Runs every GPU-free test: builds (installing what is missing), then ctest (unit tests, golden vectors from the
# H200, real processes with the library preloaded, export/NEEDED/init checks), then the install test (the install
# target and the .deb, run with the source and build trees renamed away), the release test (what scripts/package.sh
# builds in a Debian 11 root: glibc 2.31 baseline, the .deb apt-installed and the wheel pip-installed in Debian 11
# and here), the Slurm test (docs/reference.md's sbatch/srun example on a real single-node Slurm), the fleet test (two
# hosts' logs in one directory; the metrics through a real node_exporter and prometheus), the aarch64 (Grace) build's
# tests under qemu-user with 4 and 64 KiB pages and its arm64 package (scripts/test-aarch64.sh), then the core's and
# the rooms' unit tests again under AddressSanitizer + UBSan and under ThreadSanitizer, then the libFuzzer targets (rules parser, decoder, launch collection, graph-node
# parameters, encode arithmetic, rule matching, maps that only moved against the full judgement) for a bounded time
# each.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${TMAGUARD_BUILD_DIR:-$root/build}
"$root/scripts/build.sh"
ctest_log=$(mktemp)
(cd "$build" && ctest --output-on-failure -j2 | tee "$ctest_log")
n_ctest=$(sed -n 's/.*tests passed, 0 tests failed out of \([0-9]*\).*/\1/p' "$ctest_log")
rm -f "$ctest_log"
# the installed copies (install target moved to another prefix, the .deb unpacked), trees renamed away
install_log=$(mktemp)
"$root/scripts/test-install.sh" | tee "$install_log"
n_install=$(sed -n 's/^test-install: \([0-9]*\) checks passed.*/\1/p' "$install_log")
rm -f "$install_log"
# what ships: built in a Debian 11 root (glibc 2.31 baseline), the .deb and the wheel installed in Debian 11 and here
release_log=$(mktemp)
"$root/scripts/test-release.sh" | tee "$release_log"
n_release=$(sed -n 's/^test-release: \([0-9]*\) checks passed.*/\1/p' "$release_log")
mv "$release_log" "$release_log.kept"
# the Slurm example of docs/reference.md on a real single-node Slurm started here (skipped, and said, where it cannot start)
slurm_log=$(mktemp)
"$root/scripts/test-slurm.sh" | tee "$slurm_log"
n_slurm=$(sed -n 's/^test-slurm: \([0-9]*\) checks passed.*/\1/p' "$slurm_log")
# the fleet: two hosts' logs in one directory (UTS and PID namespaces), the metrics through a real node_exporter and
# prometheus on 127.0.0.1 (each skipped, and said, where it cannot run)
fleet_log=$(mktemp)
"$root/scripts/test-fleet.sh" | tee "$fleet_log"
n_fleet=$(sed -n 's/^test-fleet: \([0-9]*\) checks passed.*/\1/p' "$fleet_log")
# the aarch64 build under emulation (skipped, and said, where aarch64 programs cannot run)
aarch64_log=$(mktemp)
"$root/scripts/test-aarch64.sh" | tee "$aarch64_log"
n_aarch64=$(sed -n 's/^test-aarch64: \([0-9]*\) checks passed.*/\1/p' "$aarch64_log")
skipped=$(grep -hE '^test-[a-z0-9]+: skipped: ' "$release_log.kept" "$slurm_log" "$fleet_log" "$aarch64_log" 2>/dev/null |
          sed -E 's/^test-([a-z0-9]+): skipped: /\1 (/; s/$/)/' || true)
rm -f "$slurm_log" "$release_log.kept" "$fleet_log" "$aarch64_log"
# the core's and the rooms' unit tests under AddressSanitizer + UBSan, then under ThreadSanitizer (the rooms hold the
# memo, the kernel table, the facts arena and their threads)
sanitized_tests() {  # BUILD_DIR LABEL ENV...: builds and runs core_tests and room_tests, adds their passes to n_san
  local dir=$1 label=$2 t log
  shift 2
  ninja -C "$dir" core_tests room_tests
  for t in core_tests room_tests; do
    log=$(mktemp)
    echo "== $t under $label"
    env TMAGUARD_MODE=log "$@" "$dir/tests/$t" --gtest_brief=1 | tee "$log"
    n_san=$((n_san + $(sed -n 's/.*PASSED  \] \([0-9]*\) test.*/\1/p' "$log")))
    rm -f "$log"
  done
}
n_san=0
asan="$build-asan"
cmake -S "$root" -B "$asan" -G Ninja -DCMAKE_BUILD_TYPE=Debug -DTMAGUARD_SANITIZE=ON -DTMAGUARD_TSAN=OFF >/dev/null
sanitized_tests "$asan" "ASan+UBSan" ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=halt_on_error=1
tsan="$build-tsan"
cmake -S "$root" -B "$tsan" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTMAGUARD_SANITIZE=ON -DTMAGUARD_TSAN=ON \
  >/dev/null
sanitized_tests "$tsan" "TSan" TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 die_after_fork=0"
fuzz="$build-fuzz"
CC=clang CXX=clang++ cmake -S "$root" -B "$fuzz" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTMAGUARD_FUZZ=ON \
  -DTMAGUARD_SANITIZE=ON >/dev/null
fuzzers=(rules decode launch graph_node encode_args match moved)
ninja -C "$fuzz" "${fuzzers[@]/#/fuzz_}"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp -r "$root/tests/fuzz/corpus_rules" "$work/rules"
for t in "${fuzzers[@]}"; do mkdir -p "$work/$t"; done
for t in "${fuzzers[@]}"; do
  echo "== fuzz_$t for ${FUZZ_SECONDS:-20}s"
  (cd "$work" && "$fuzz/fuzz_$t" -max_total_time="${FUZZ_SECONDS:-20}" -timeout=5 -print_final_stats=0 "$work/$t" 2>&1 | tail -1)
  if ls "$work"/crash-* "$work"/timeout-* "$work"/leak-* >/dev/null 2>&1; then
    echo "fuzz_$t found a failing input:"; ls "$work"/crash-* "$work"/timeout-* "$work"/leak-* 2>/dev/null; exit 1
  fi
done
echo "fuzz: no crash, hang or sanitizer report"
# Reaching this line means every step passed (set -e): ctest's tests, the core and room tests under ASan/UBSan and
# TSan, the fuzzers. A suite
# that could not run here (no root for the Debian 11 root or for Slurm) is counted as skipped, with its reason.
n_skipped=$(printf '%s' "$skipped" | grep -c . || true)
echo "tests: $((n_ctest + n_install + n_release + n_slurm + n_fleet + ${n_aarch64:-0} + n_san + ${#fuzzers[@]})) passed, 0 failed, $n_skipped skipped${skipped:+: $(echo "$skipped" | paste -sd ';' | sed 's/;/; /g')}"
