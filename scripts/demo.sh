#!/usr/bin/env bash
# Demo without a GPU: an FA4-shaped backward launch through the stand-in driver, guarded by scripts/tmaguard.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${TMAGUARD_BUILD_DIR:-$root/build}
export LD_LIBRARY_PATH="$build/tests/fake_cuda${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
client="$build/tests/tg_client"
say() { printf '\n== %s\n' "$*"; }
say "1. K-major dK/dV (healthy job): no report, the summary proves the launches were seen"
"$root/scripts/tmaguard" -- "$client" getproc ex fa4_ok
say "2. dK allocated seqlen-contiguous (the 'layout of mdK is wrong' bug), log mode: reported, kernel runs"
"$root/scripts/tmaguard" --mode log -- "$client" getproc ex fa4_dk_bad
say "3. same launch, default abort mode: reported, then SIGABRT before the kernel runs"
"$root/scripts/tmaguard" -- "$client" getproc ex fa4_dk_bad
rc=$?
echo "(exit status $rc; 134 = SIGABRT)"
say "4. reject mode, JSON lines: the launch returns CUDA_ERROR_INVALID_VALUE, the kernel never runs"
"$root/scripts/tmaguard" --mode reject --json -- "$client" getproc ex fa4_dk_bad
[ "$rc" -eq 134 ]
