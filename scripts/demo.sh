#!/usr/bin/env bash
# Demo without a GPU: an FA4-shaped backward launch through a stand-in driver, guarded by tmaguard. Runs from the
# source tree (scripts/demo.sh, after scripts/build.sh) or installed (`tmaguard demo`, which runs
# PREFIX/share/tmaguard/demo/demo.sh with the job and the stand-in driver next to it). Exits 0 when the bad launch
# was stopped by SIGABRT.
set -uo pipefail
here=$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")" && pwd)
if [ -x "$here/tmaguard-demo-job" ]; then  # installed
  client="$here/tmaguard-demo-job"
  driver="$here/libtmaguard-demo-driver.so"
  tmaguard=${TMAGUARD_BIN:-$(cd "$here/../../.." && pwd)/bin/tmaguard}
else
  root=$(cd "$here/.." && pwd)
  build=${TMAGUARD_BUILD_DIR:-$root/build}
  client="$build/tests/tg_client"
  driver="$build/tests/demo_driver/libtmaguard-demo-driver.so"
  tmaguard=${TMAGUARD_BIN:-$root/scripts/tmaguard}
fi
for f in "$client" "$driver" "$tmaguard"; do
  [ -e "$f" ] || { echo "demo: $f not found (from a source tree, run scripts/build.sh first)" >&2; exit 2; }
done
# The stand-in driver is deliberately not called libcuda.so.1 (nothing may take it for the real driver): the job
# loads it by path, and tmaguard guards that driver (TMAGUARD_LIBCUDA, as for any driver outside the library path).
export TG_CLIENT_LIBCUDA="$driver" TMAGUARD_LIBCUDA="$driver"
say() { printf '\n== %s\n' "$*"; }
say "1. K-major dK/dV (healthy job): no report, the summary proves the launches were seen"
"$tmaguard" -- "$client" getproc ex fa4_ok
say "2. dK allocated seqlen-contiguous (the 'layout of mdK is wrong' bug), log mode: reported, kernel runs"
"$tmaguard" --mode log -- "$client" getproc ex fa4_dk_bad
say "3. same launch, default abort mode: reported, then SIGABRT before the kernel runs"
"$tmaguard" -- "$client" getproc ex fa4_dk_bad
rc=$?
echo "(exit status $rc; 134 = SIGABRT)"
say "4. reject mode, JSON lines: the launch returns CUDA_ERROR_INVALID_VALUE, the kernel never runs"
"$tmaguard" --mode reject --json -- "$client" getproc ex fa4_dk_bad
[ "$rc" -eq 134 ]
