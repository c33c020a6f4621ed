#!/usr/bin/env bash
# The aarch64 (Grace) build's tests on this x86-64 machine, under qemu-user: builds build-aarch64/ (scripts/build.sh
# --arch aarch64), makes sure the kernel runs aarch64 programs (binfmt_misc with qemu-user-static), then runs the
# core's unit tests, the rooms' unit tests and the whole-process tests (every launch path and entry kind against the
# aarch64 stand-in driver, the FA4 rules, abort/reject/log, fork, threads, the fleet records) with 4 KiB pages, and the
# rooms' tests and the launch, FA4, fork and thread tests again with 64 KiB pages (QEMU_PAGESIZE), as Grace kernels
# ship both. Prints "test-aarch64: N checks passed"; where aarch64 programs cannot run here (no binfmt_misc and no
# root to mount it) it says so and skips ("test-aarch64: skipped: ...").
#
# Not run under emulation (named in X86_ONLY): the tests that start this machine's own x86-64 programs with the aarch64
# library preloaded (python3, /bin/true, the tmaguard command's preload check: the loader refuses the library, as it
# would on a real node of the other architecture), and one that counts a process's threads (qemu-user adds its own).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${TMAGUARD_AARCH64_BUILD_DIR:-$root/build-aarch64}
TMAGUARD_BUILD_DIR="$build" "$root/scripts/build.sh" --arch aarch64

# aarch64 programs run through binfmt_misc (a whole-process test execs the aarch64 client, which execs others)
binfmt=/proc/sys/fs/binfmt_misc
if [ ! -e "$binfmt/qemu-aarch64" ] || ! grep -qx enabled "$binfmt/qemu-aarch64" 2>/dev/null; then
  sudo_cmd=""; [ "$(id -u)" -ne 0 ] && sudo_cmd="sudo -n"
  [ -e "$binfmt/register" ] || $sudo_cmd mount -t binfmt_misc binfmt_misc "$binfmt" 2>/dev/null || true
  $sudo_cmd update-binfmts --enable qemu-aarch64 2>/dev/null || true
fi
if ! "$build/tests/core_tests" --gtest_list_tests >/dev/null 2>&1; then
  echo "test-aarch64: skipped: this machine cannot run aarch64 programs (binfmt_misc with qemu-aarch64 not enabled)"
  exit 0
fi

X86_ONLY="CallSite.*:Tensors.APythonJobDeclaresWithTheHelperAndItsShapeBuiltMapIsStopped"
X86_ONLY+=":Tensors.WithoutTmaguardTheHelperIsANoOp:CallSite.PythonLoadedAfterTheFirstFindingIsRead"
X86_ONLY+=":Hygiene.ProcessThatNeverTouchesCudaSeesNothing:Hygiene.TmaguardsThreadsStartWithTheirWorkNotAtLoad"
X86_ONLY+=":FrontDoor.OptionsTakeTheirValueAfterAnEqualsSign:Settings.RelativePathsSurviveAChdirBeforeTheFirstCudaCall"
X86_ONLY+=":Settings.OddModeValuesMeanTheSameToTheCommandAndTheLibrary"
X86_ONLY+=":Fleet.ErrorExitcodeTurnsARecordedErrorIntoTheCommandsStatus"
X86_ONLY+=":Fleet.EveryGuardedProcessWritesOneStartRecordAlsoWithoutCuda"
X86_ONLY+=":Signals.ErrorExitcodeStartsTheJobWithTheCommandsDispositions:FrontDoor.CheckPreloadNamesTheLibrarysCpu"
# With 64 KiB pages as well: the rooms (the facts arena, the memo) and every launch path and entry kind, the FA4
# rules, modes, threads, fork, races, structs, device maps, the fleet records. QEMU_CPU=neoverse-n1 there: qemu-user
# 7.2 with -p 65536 loses track of the loader's data pages, and glibc's SVE memcpy (qemu's default CPU has SVE) then
# faults on them where plain loads do not (a dladdr() name copied; the same program runs with 4 KiB pages, or without
# SVE). Grace has SVE; the emulator's bookkeeping, not the library, is what that CPU choice works around.
PAGES64="AllPathsAllEntries/Paths.*:AllGraphEntries/Graph.*:EveryUpstreamConfiguration/*:Fa4*:Modes.*:Threads.*"
PAGES64+=":Fork.*:Races.*:LargeFlag.*:FastPath.*:Structs.*:DeviceMaps.*:Fleet.*:Counts.*"

# qemu-user 7.2 deadlocks a child forked while another thread is starting a thread, once the child starts one
# (tests/emulation/fork_clone_probe.cpp; native Linux does not; such a process takes no signal but SIGKILL). The test
# that forks 20 times while four threads launch (tmaguard starting its own threads on first use) meets that in the
# emulator, not in the library: it runs natively in the x86-64 suite, and here when the emulator passes the probe.
if timeout -s KILL 20 "$build/tests/fork_clone_probe" >/dev/null 2>&1; then
  EMULATOR_LIMITS=""
else
  EMULATOR_LIMITS=":FailClosed.AChildForkedWhileOtherThreadsLaunchIsGuarded"
  echo "test-aarch64: this emulator deadlocks a child forked while a thread is being started" \
    "(tests/emulation/fork_clone_probe.cpp); not run under it: ${EMULATOR_LIMITS#:}"
fi

n=0
run() {  # LABEL PROGRAM ARGS...: runs a gtest program, adds its passes to n (set -e stops on a failure)
  local label=$1 log
  shift
  log=$(mktemp)
  echo "== aarch64 $label"
  "$@" --gtest_brief=1 2>&1 | tee "$log" | grep -E '^\[  (PASSED|FAILED)|FAILED TEST' || true
  grep -q '^\[  PASSED  \]' "$log" && ! grep -q 'FAILED' "$log" || { cat "$log"; rm -f "$log"; exit 1; }
  n=$((n + $(sed -n 's/.*PASSED  \] \([0-9]*\) test.*/\1/p' "$log")))
  rm -f "$log"
}
run "core_tests (4 KiB pages)" "$build/tests/core_tests"
run "room_tests (4 KiB pages)" env TG_EXPECT_PAGE_SIZE=4096 "$build/tests/room_tests"
run "room_tests (64 KiB pages)" env QEMU_CPU=neoverse-n1 QEMU_PAGESIZE=65536 TG_EXPECT_PAGE_SIZE=65536 \
  "$build/tests/room_tests"
run "process_tests (4 KiB pages)" "$build/tests/process_tests" --gtest_filter="-$X86_ONLY$EMULATOR_LIMITS"
run "process_tests (64 KiB pages)" env QEMU_CPU=neoverse-n1 QEMU_PAGESIZE=65536 "$build/tests/process_tests" \
  --gtest_filter="$PAGES64-$X86_ONLY$EMULATOR_LIMITS"

# What ships for Grace: the arm64 .deb and the aarch64 wheel (scripts/package.sh --arch aarch64), with the release
# test's checks: what the binaries need (glibc 2.35 at most: Ubuntu 22.04; libc alone), the library's exported names,
# and the installed package guarding an aarch64 job under emulation: its demo job's transposed dK stopped.
pkg=$("$root/scripts/package.sh" --arch aarch64)
deb=$(grep '_arm64\.deb$' <<<"$pkg") whl=$(grep 'aarch64\.whl$' <<<"$pkg")
[ -f "$deb" ] && [ -f "$whl" ] || { echo "test-aarch64: FAIL: package.sh --arch aarch64 made no .deb or wheel: $pkg"; exit 1; }
check() { n=$((n + 1)); echo "test-aarch64: ok: $*"; }
fail() { echo "test-aarch64: FAIL: $*" >&2; exit 1; }
[ "$(dpkg-deb -f "$deb" Architecture)" = arm64 ] || fail "$deb is not an arm64 package"
[ "$(dpkg-deb -f "$deb" Depends)" = "libc6 (>= 2.35)" ] || fail "$deb depends on '$(dpkg-deb -f "$deb" Depends)'"
[[ "$(basename "$whl")" =~ -py3-none-manylinux_2_(3[0-5]|[12][0-9])_aarch64\.whl$ ]] || fail "the wheel's tag: $whl"
check "$(basename "$deb") (arm64, libc6 (>= 2.35)) and $(basename "$whl")"
x=$(mktemp -d)
trap 'rm -rf "$x"' EXIT
dpkg-deb -x "$deb" "$x"
lib="$x/usr/lib/aarch64-linux-gnu/libtmaguard.so" demo="$x/usr/share/tmaguard/demo"
while IFS= read -r f; do
  head -c 4 "$f" | grep -q ELF || continue
  v=$(objdump -T "$f" | { grep -oE 'GLIBC_[0-9]+\.[0-9]+' || true; } | sed 's/GLIBC_//' | sort -t. -k1,1n -k2,2n | tail -1)
  [ -z "$v" ] || [ "$(printf '%s\n2.35\n' "$v" | sort -t. -k1,1n -k2,2n | tail -1)" = 2.35 ] || fail "$f needs GLIBC_$v"
  extra=$(readelf -d "$f" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | grep -vE '^(libc\.so\.6|ld-linux-aarch64\.so\.1)$' || true)
  [ -z "$extra" ] || fail "$f needs $extra"
done < <(find "$x" -type f)
check "every binary of the arm64 package needs GLIBC_2.35 at most and libc alone"
# the packaged (stripped) library's exported names; the rest of the hygiene check on the same build unstripped
exports=$("$root/scripts/check_exports.sh" "$lib" "$root/shim/driver/entry_points.def" || true)
grep -q '^\[PASS\] exports are exactly' <<<"$exports" || fail "the packaged library's exports: $exports"
"$root/scripts/check_exports.sh" "$root/build-release/aarch64/libtmaguard.so" "$root/shim/driver/entry_points.def" \
  >/dev/null || fail "the aarch64 release library: $("$root/scripts/check_exports.sh" \
                      "$root/build-release/aarch64/libtmaguard.so" "$root/shim/driver/entry_points.def")"
check "the packaged library exports the declared entry points alone, runs nothing at load, forwards dlsym by a tail jump"
set +e
out=$(TG_CLIENT_LIBCUDA="$demo/libtmaguard-demo-driver.so" TMAGUARD_LIBCUDA="$demo/libtmaguard-demo-driver.so" \
      TMAGUARD_MODE=abort LD_PRELOAD="$lib" "$demo/tmaguard-demo-job" dlsym launch fa4_dk_bad 2>&1)
rc=$?
set -e
[ "$rc" -eq 134 ] && grep -q "fa4-dk-not-k-major" <<<"$out" || fail "the installed arm64 package did not stop the aarch64 job's transposed dK (rc=$rc): $out"
check "the installed arm64 package stopped an aarch64 job's transposed dK under emulation (SIGABRT, fa4-dk-not-k-major)"
echo "test-aarch64: $n checks passed (under qemu-user; not run here: the x86-only tests, $(tr ':' '\n' <<<"$X86_ONLY" | grep -c .) names or groups$([ -z "$EMULATOR_LIMITS" ] || echo ", and the emulator-limited ${EMULATOR_LIMITS#:}"))"
