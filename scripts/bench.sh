#!/usr/bin/env bash
# CPU benchmarks against the stand-in driver (no GPU needed): what tmaguard adds to a launch and to an encode
# (same process, straight vs. through the wrapper), the pure core's decode/hash/rule, each step of a launch's path
# on the library's own rooms (lookup, byte compare, memo hit, key, moved maps, full judgement), resident-memory growth
# over 10 million distinct encodes, how often non-map bytes are taken for a map, and the launch probe (what reading,
# comparing or hashing a launch's maps costs behind cache traffic; PROBE_BUILDS="a.so b.so": other builds of the
# library measured beside this one in the same process), memory per known kernel and a kernel's first launch over
# 100,000 kernels, `tmaguard report` over 1 GiB of fleet logs, and (BENCH_AB_OLD=old/libtmaguard.so) the stand-in A/B
# of two builds. Prints numbers; asserts nothing.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${TMAGUARD_BUILD_DIR:-$root/build}
[ -x "$build/tests/bench_hot_path" ] || "$root/scripts/build.sh"
export LD_LIBRARY_PATH="$build/tests/fake_cuda${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
echo "== hot paths (ns per call; *_direct = stand-in driver alone, *_tmaguard = through tmaguard)"
LD_PRELOAD="$build/libtmaguard.so" TMAGUARD_MODE=abort "$build/tests/bench_hot_path" \
  --benchmark_repetitions="${BENCH_REPS:-5}" --benchmark_report_aggregates_only=true "$@"
echo "== each step of a launch's path through tmaguard (tests/bench/fast_path_steps.cpp: lookup, byte compare, memo hit,"
echo "   launch key, key hit, maps that only moved, full judgement), on the library's rooms in one process"
TMAGUARD_MODE=log "$build/tests/fast_path_steps" --benchmark_repetitions="${BENCH_REPS:-5}" \
  --benchmark_report_aggregates_only=true 2>/dev/null
echo "== launch probe: the stand-in behind ${PROBE_KIB:-1024} KiB of cache traffic per launch (a real driver's part);"
echo "   added_ns: step + launch less the plain launch, per launch (tests/bench/probe_steps.h); via_tmaguard: the wrapper"
LD_PRELOAD="$build/libtmaguard.so" TMAGUARD_MODE=abort GLIBC_TUNABLES=glibc.rtld.optional_static_tls=65536 \
  "$build/tests/bench_hot_path" --probe "${PROBE_KIB:-1024}" "${PROBE_BATCHES:-60}" ${PROBE_BUILDS:-}
echo "== windows that are not tensor maps, taken for one (decoded: as a 128-byte parameter; in-struct: inside a structure)"
"$build/tests/false_maps" "${FALSE_MAP_MILLIONS:-10}"
echo "== resident memory over ${ENCODES:-10000000} distinct encodes through tmaguard"
LD_PRELOAD="$build/libtmaguard.so" "$build/tests/encode_memory" "${ENCODES:-10000000}"
echo "== the same without tmaguard"
"$build/tests/encode_memory" "${ENCODES:-10000000}"
echo "== what a page the process never used costs here (tests/bench/page_cost: why kernels' facts have pages of their own)"
"$build/tests/page_cost"
echo "== distinct kernels: memory per known kernel and a kernel's first launch, through tmaguard (${KERNELS:-100000} kernels)"
LD_PRELOAD="$build/libtmaguard.so" "$build/tests/kernel_memory" "${KERNELS:-100000}" 2>/dev/null
echo "== the same without tmaguard"
"$build/tests/kernel_memory" "${KERNELS:-100000}"
echo "== tmaguard report over ${REPORT_MIB:-1024} MiB of JSON-lines logs (256 ranks), made from one real run's records"
seed_dir=$(mktemp -d)
trap 'rm -rf "$seed_dir"' EXIT
driver="$build/tests/demo_driver/libtmaguard-demo-driver.so"
TG_CLIENT_LIBCUDA="$driver" TMAGUARD_LIBCUDA="$driver" "$root/scripts/tmaguard" --mode log --json \
  --log "$seed_dir/seed.jsonl" -- "$build/tests/tg_client" getproc ex fa4_dk_bad >/dev/null 2>&1
python3 "$root/tests/bench/report_scale.py" "$build/tmaguard-tool" "$seed_dir/seed.jsonl" "${REPORT_MIB:-1024}"
echo "== stand-in A/B: this build against the library in \$BENCH_AB_OLD (scripts/probe-ab), when set"
if [ -n "${BENCH_AB_OLD:-}" ]; then "$root/scripts/probe-ab" "$BENCH_AB_OLD" --kib 0 --processes 6 --batches 100; fi
