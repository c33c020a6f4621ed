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
X86_ONLY+=":Tensors.WithoutTmaguardTheHelperIsANoOp:Round5.PythonLoadedAfterTheFirstFindingIsRead"
X86_ONLY+=":Hygiene.ProcessThatNeverTouchesCudaSeesNothing:Hygiene.TmaguardsThreadsStartWithTheirWorkNotAtLoad"
X86_ONLY+=":FrontDoor.OptionsTakeTheirValueAfterAnEqualsSign:Round5.RelativePathsSurviveAChdirBeforeTheFirstCudaCall"
X86_ONLY+=":Round5.OddModeValuesMeanTheSameToTheCommandAndTheLibrary"
X86_ONLY+=":Fleet.ErrorExitcodeTurnsARecordedErrorIntoTheCommandsStatus"
X86_ONLY+=":Fleet.EveryGuardedProcessWritesOneStartRecordAlsoWithoutCuda"
X86_ONLY+=":Signals.ErrorExitcodeStartsTheJobWithTheCommandsDispositions:FrontDoor.CheckPreloadNamesTheLibrarysCpu"
# With 64 KiB pages as well: the rooms (the facts memory, the memo) and every launch path and entry kind, the FA4
# rules, modes, threads, fork, races, structs, device maps, the fleet records. QEMU_CPU=neoverse-n1 there: qemu-user
# 7.2 with -p 65536 loses track of the loader's data pages, and glibc's SVE memcpy (qemu's default CPU has SVE) then
# faults on them where plain loads do not (a dladdr() name copied; the same program runs with 4 KiB pages, or without
# SVE). Grace has SVE; the emulator's bookkeeping, not the library, is what that CPU choice works around.
PAGES64="AllPathsAllEntries/Paths.*:AllGraphEntries/Graph.*:EveryUpstreamConfiguration/*:Fa4*:Modes.*:Threads.*"
PAGES64+=":Fork.*:Races.*:LargeFlag.*:FastPath.*:Structs.*:DeviceMaps.*:Fleet.*:Counts.*"

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
run "shim_tests (4 KiB pages)" "$build/tests/shim_tests" --gtest_filter="-$X86_ONLY"
run "shim_tests (64 KiB pages)" env QEMU_CPU=neoverse-n1 QEMU_PAGESIZE=65536 "$build/tests/shim_tests" \
  --gtest_filter="$PAGES64-$X86_ONLY"
echo "test-aarch64: $n checks passed (under qemu-user; not run here: $(tr ':' '\n' <<<"$X86_ONLY" | grep -c .) x86-only tests)"
