#!/usr/bin/env bash
# Demo without a GPU: an FA4-shaped backward launch through a stand-in driver, guarded by tmaguard, four times (a
# healthy job; a transposed dK in log, abort and reject mode). Runs from the source tree (scripts/demo.sh, after
# scripts/build.sh) or installed (`tmaguard demo`, which runs PREFIX/share/tmaguard/demo/demo.sh with the job and the
# stand-in driver next to it). Each step's records go to a JSON log, shown as text after the step; the logs stay for
# `tmaguard report` (`--logs DIR` puts them there; the default is a fresh folder under $TMPDIR or /tmp).
# Exits 0 when the healthy job ran clean and the transposed dK was reported, stopped and rejected.
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
if [ "${1:-}" = "--logs" ]; then
  logs=${2:?--logs needs a folder}
  mkdir -p "$logs" || exit 2
else
  logs=$(mktemp -d "${TMPDIR:-/tmp}/tmaguard-demo.XXXXXX") || exit 2
fi
# The stand-in driver is deliberately not called libcuda.so.1 (nothing may take it for the real driver): the job
# loads it by path, and tmaguard guards that driver (TMAGUARD_LIBCUDA, as for any driver outside the library path).
export TG_CLIENT_LIBCUDA="$driver" TMAGUARD_LIBCUDA="$driver"

# One step: the job under `tmaguard MODE`, its records in a JSON log of its own. The job runs in an inner shell whose
# stderr is dropped, so that a job stopped by SIGABRT leaves no shell "Aborted" line; what tmaguard said is in the log.
# Sets `job` (what the job said, in words), `rc`, and the job's counts `ok`, `failed`, `ran`.
step() {
  local n=$1 mode=$2 scenario=$3 out
  rm -f "$logs/step$n".*.jsonl
  out=$(bash -c '"$@"' _ "$tmaguard" --mode "$mode" --json --log "$logs/step$n.%p.jsonl" -- \
        "$client" getproc ex "$scenario" 2>/dev/null)
  rc=$?
  # The job prints RESULT ok=<launches that returned CUDA_SUCCESS> failed=<launches refused> ran=<kernels that ran>
  ok=$(sed -n 's/.*RESULT ok=\([0-9]*\).*/\1/p' <<<"$out")
  failed=$(sed -n 's/.*failed=\([0-9]*\).*/\1/p' <<<"$out")
  ran=$(sed -n 's/.*ran=\([0-9]*\).*/\1/p' <<<"$out")
  if [ "$rc" -eq 134 ]; then job="stopped by SIGABRT (exit status 134) before its kernel ran"
  else job="exit status $rc; ${ok:-?} launches succeeded, ${failed:-?} were refused, ${ran:-?} kernels ran"; fi
  echo "   job:      $job"
  "$tmaguard" report --records "$logs/step$n".*.jsonl | sed -n '/^\[pid/,$p' | sed '/^report by/,$d' |
    sed 's/^\[pid [0-9]* rank -\] /   tmaguard: /; s/^    hint:/             hint:/'
}
records() { cat "$logs/step$1".*.jsonl 2>/dev/null; }

echo "tmaguard demo: FlashAttention-4's backward launch on a stand-in driver (no GPU), four times."
echo
echo "1. A healthy job (dK and dV K-major), abort mode (the default): no finding, the launches are counted."
step 1 abort fa4_ok; ok1=$([ "$rc" -eq 0 ] && [ "${ran:-0}" -gt 0 ] && ! records 1 | grep -q '"event":"violation"' && echo 1)
echo
echo "2. dK allocated seqlen-contiguous (the 'layout of mdK is wrong' bug), log mode: reported once, the kernel runs"
echo "   anyway (its gradients are garbage)."
step 2 log fa4_dk_bad; ok2=$([ "$rc" -eq 0 ] && records 2 | grep -q '"rule":"fa4-dk-not-k-major"' && echo 1)
echo
echo "3. The same launch in abort mode: reported, then the process is stopped before the kernel runs."
step 3 abort fa4_dk_bad; ok3=$([ "$rc" -eq 134 ] && records 3 | grep -q '"rule":"fa4-dk-not-k-major"' && echo 1)
echo
echo "4. The same launch in reject mode: the launch returns CUDA_ERROR_INVALID_VALUE and the kernel never runs."
step 4 reject fa4_dk_bad; ok4=$([ "${ran:-1}" = 0 ] && [ "${failed:-0}" -gt 0 ] && records 4 | grep -q '"action":"reject"' && echo 1)
echo
echo "The logs (JSON lines, one file per process) are in $logs; read them together with"
echo "   $tmaguard report $logs/*.jsonl"
if [ -n "$ok1" ] && [ -n "$ok2" ] && [ -n "$ok3" ] && [ -n "$ok4" ]; then
  echo "demo: PASS: the healthy job ran clean; the transposed dK was reported (log), stopped (abort) and rejected (reject)"
  exit 0
fi
echo "demo: FAIL: steps passed: 1:${ok1:-no} 2:${ok2:-no} 3:${ok3:-no} 4:${ok4:-no}"
exit 1
