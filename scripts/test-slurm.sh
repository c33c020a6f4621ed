#!/usr/bin/env bash
# Slurm test (run by scripts/test.sh): the Slurm example of docs/reference.md, run for real. A single-node Slurm (Debian's
# slurm-wlm with munge) is started on this machine with a private configuration (its own ports, state, socket and
# logs in a temporary folder) and stopped afterwards. tmaguard is installed into a prefix (cmake --install), and an
# sbatch script made of its lines runs `srun` of a stand-in job on 2 ranks in log mode, rank 1 launching a transposed
# dK: each rank writes its own log (%h.%r.%p under the job's directory, %j) carrying its rank (from SLURM_PROCID) and
# its metrics file; `tmaguard report --fail-on error` over the directory names rank 1 and fails the job; the Epilog
# rolls the logs up. If Slurm cannot start here (not root, no package, a daemon that will
# not come up), the test says so and is skipped, never faked.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${TMAGUARD_BUILD_DIR:-$root/build}
skip() { echo "test-slurm: skipped: $*"; echo "test-slurm: 0 checks passed (skipped)"; exit 0; }  # stop() runs
fail() { echo "test-slurm: FAIL: $*" >&2; [ -n "${work:-}" ] && tail -n 20 "$work"/log/*.log >&2; exit 1; }
[ "$(id -u)" -eq 0 ] || skip "needs root (slurmd and munged run as root here)"
for p in slurmctld slurmd sbatch srun munged; do command -v "$p" >/dev/null || skip "$p not installed"; done
work=$(mktemp -d /tmp/tmaguard-slurm.XXXXXX)
# Every daemon this test starts names $work on its command line (its configuration, socket or key): on every way out
# (pass, fail, skip, interrupt) each is stopped, and waited for, by that name (a daemon that never wrote its pid
# file is found too), SIGKILL after 10 s.
daemons() { pgrep -f -- "$work/" || true; }
stop() {
  local left
  left=$(daemons)
  [ -n "$left" ] && kill $left 2>/dev/null
  for _ in $(seq 100); do [ -z "$(daemons)" ] && break; sleep 0.1; done
  left=$(daemons)
  [ -n "$left" ] && kill -9 $left 2>/dev/null
  rm -rf "$work"
}
trap stop EXIT
trap 'exit 130' INT TERM
mkdir -p "$work/state" "$work/spool" "$work/log" "$work/jobs"
dd if=/dev/urandom of="$work/munge.key" bs=1024 count=1 2>/dev/null && chmod 600 "$work/munge.key"
munged -f --socket="$work/munge.sock" --key-file="$work/munge.key" --log-file="$work/log/munged.log" \
  --pid-file="$work/munged.pid" --seed-file="$work/munged.seed" || skip "munged does not start here"
host=$(hostname)
port=$((20000 + RANDOM % 20000))
cat >"$work/slurm.conf" <<EOF
ClusterName=tmaguardtest
SlurmctldHost=$host
SlurmUser=root
SlurmdUser=root
SlurmctldPort=$port
SlurmdPort=$((port + 1))
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$work/munge.sock
StateSaveLocation=$work/state
SlurmdSpoolDir=$work/spool
SlurmctldPidFile=$work/slurmctld.pid
SlurmdPidFile=$work/slurmd.pid
SlurmctldLogFile=$work/log/slurmctld.log
SlurmdLogFile=$work/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
ReturnToService=2
NodeName=$host CPUs=$(nproc) State=UNKNOWN
PartitionName=test Nodes=ALL Default=YES MaxTime=10 State=UP
Epilog=$work/epilog.sh
EOF
export SLURM_CONF="$work/slurm.conf"
slurmctld -f "$SLURM_CONF" || skip "slurmctld does not start here"
slurmd -f "$SLURM_CONF" || skip "slurmd does not start here"
up=0
for _ in $(seq 30); do
  if sinfo -h -o '%t' 2>/dev/null | grep -qE '^(idle|mix|alloc)'; then up=1; break; fi
  sleep 1
done
[ "$up" -eq 1 ] || skip "the node did not come up ($(sinfo 2>&1 | tail -1))"
passed=0
ok() { passed=$((passed + 1)); echo "test-slurm: ok: $*"; }

# tmaguard installed into a prefix, as on a shared filesystem
prefix="$work/opt/tmaguard"
cmake --install "$build" --prefix "$prefix" >/dev/null || fail "cmake --install"
demo="$prefix/share/tmaguard/demo"
# the stand-in job: every rank launches FA4's backward; rank 1 with a transposed dK
cat >"$work/job.sh" <<EOF
#!/bin/bash
export TG_CLIENT_LIBCUDA=$demo/libtmaguard-demo-driver.so TMAGUARD_LIBCUDA=$demo/libtmaguard-demo-driver.so
[ "\$SLURM_PROCID" = 1 ] && exec $demo/tmaguard-demo-job getproc ex fa4_dk_bad
exec $demo/tmaguard-demo-job getproc ex fa4_ok
EOF
chmod +x "$work/job.sh"
# The Epilog (root, on the node, after the job): the roll-up of the job's logs, for the fleet's own collection. A
# failing Epilog drains the node in Slurm, so it records the verdict (report --fail-on error) and exits 0; the job's
# own last step fails the job.
cat >"$work/epilog.sh" <<EOF
#!/bin/bash
d=$work/jobs/\$SLURM_JOB_ID
[ -d "\$d" ] || exit 0
$prefix/bin/tmaguard report --json --fail-on error "\$d" >"\$d/rollup.json" 2>"\$d/rollup.err"
echo \$? >"\$d/rollup.status"
exit 0
EOF
chmod +x "$work/epilog.sh"
# the sbatch script: docs/reference.md's lines, with its placeholders filled in: log mode, per-rank paths named by
# host, rank and pid under the job's directory (made by tmaguard), metrics beside them, and a last step that fails the
# job when a rank recorded an error
cat >"$work/train.sbatch" <<EOF
#!/bin/bash
#SBATCH -n 2
srun --export=ALL,LD_PRELOAD=$prefix/lib/libtmaguard.so,TMAGUARD_MODE=log,TMAGUARD_LOG_FORMAT=json,TMAGUARD_LOG=$work/jobs/%j/%h.%r.%p.jsonl,TMAGUARD_METRICS=$work/jobs/%j/metrics \\
     $work/job.sh
$prefix/bin/tmaguard report --fail-on error $work/jobs/\$SLURM_JOB_ID
EOF
(cd "$work" && timeout 120 sbatch --wait -o "$work/out.%j" "$work/train.sbatch" >"$work/sbatch.out" 2>&1)
status=$?
job=$(sed -n 's/^Submitted batch job \([0-9]*\).*/\1/p' "$work/sbatch.out")
[ -n "$job" ] || fail "sbatch: $(cat "$work/sbatch.out")"
ok "sbatch ran job $job on the single-node Slurm"
[ "$status" -ne 0 ] || fail "the job's last step (tmaguard report --fail-on error) did not fail the job"
ok "the job failed (sbatch --wait exit $status): rank 1 recorded an error and report --fail-on error said so"
short=$(hostname | cut -d. -f1)
logs=("$work/jobs/$job"/*.jsonl)
[ "${#logs[@]}" -eq 2 ] && [ -f "${logs[0]}" ] || fail "want one log per rank, got: ${logs[*]}"
declare -A bad
for l in "${logs[@]}"; do
  name=$(basename "$l")
  rank=$(grep -o '"rank":[0-9]*' "$l" | head -1 | sed 's/.*://')
  [ -n "$rank" ] || fail "a log without a rank (SLURM_PROCID not read): $l"
  [[ "$name" == "$short.$rank."*.jsonl ]] || fail "log $name is not named HOST.RANK.PID.jsonl ($short.$rank.*)"
  grep -q "\"job_id\":\"$job\"" "$l" || fail "$name: records without the job id"
  # the job's start record (job.sh, the bash script that execs it, writes one of its own under the same pid)
  [ "$(grep '"event":"start"' "$l" | grep -c '"program":"[^"]*tmaguard-demo-job"')" = 1 ] ||
    fail "$name: not one start record of the job"
  grep -q '"event":"summary","final":true' "$l" || fail "$name: no final summary"
  bad[$rank]=$(grep -c '"event":"violation"' "$l")
done
[ "${bad[0]:-x}" = 0 ] && [ "${bad[1]:-x}" = 1 ] || fail "violations by rank: 0 -> ${bad[0]:-none}, 1 -> ${bad[1]:-none}"
ok "one log per rank named $short.RANK.PID.jsonl (%h.%r.%p), each with its start record, job id and final summary; rank 1 alone reported the transposed dK"
grep -q '"local_rank":1' "${logs[@]}" || fail "no local_rank from SLURM_LOCALID"
metrics=("$work/jobs/$job/metrics"/tmaguard-"$short"-*.prom)
[ "${#metrics[@]}" -eq 2 ] && [ -f "${metrics[0]}" ] || fail "want one metrics file per rank, got: ${metrics[*]}"
grep -q "tmaguard_findings_total{.*rank=\"1\",job=\"$job\",rule=\"fa4-dk-not-k-major\",severity=\"error\"} 3" "${metrics[@]}" ||
  fail "no metrics of rank 1's finding: $(cat "${metrics[@]}")"
ok "one metrics file per rank in the job's directory, labelled with rank and job"
out=$(cat "$work/out.$job")
grep -qE "^fa4-dk-not-k-major +1 $host +1 " <<<"$out" || fail "tmaguard report does not name rank 1 on $host: $out"
ok "tmaguard report over the job's directory names rule fa4-dk-not-k-major, rank 1, host $host"
for _ in $(seq 50); do [ -f "$work/jobs/$job/rollup.status" ] && break; sleep 0.2; done
[ "$(cat "$work/jobs/$job/rollup.status" 2>/dev/null)" = 1 ] || fail "the Epilog's report --fail-on error did not find the error"
grep -q '"1": 1' "$work/jobs/$job/rollup.json" || fail "the Epilog's roll-up has no finding of rank 1: $(head -c 600 "$work/jobs/$job/rollup.json")"
ok "the Epilog rolled the job's logs up (report --json --fail-on error: exit 1, by_rank 1)"
echo "test-slurm: $passed checks passed (a real single-node Slurm: sbatch + srun -n 2 with per-rank paths, metrics and an Epilog)"
