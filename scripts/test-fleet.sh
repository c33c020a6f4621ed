#!/usr/bin/env bash
# Fleet test (run by scripts/test.sh): what an operator of many ranks relies on, with the real components they run.
#  1. Two hosts: two UTS and PID namespaces with different host names, the job pid 1 in each, one shared log
#     directory. TMAGUARD_LOG=DIR/%h.%r.%p.jsonl gives each host its own file; %p alone would give both one file (the
#     control run shows it), which is why the documented paths carry %h.
#  2. Prometheus: a guarded job with TMAGUARD_METRICS=DIR. Debian's prometheus-node-exporter serves DIR on 127.0.0.1
#     (textfile collector) and curl scrapes it; promtool check metrics accepts the file; a prometheus server that
#     scrapes that node_exporter answers a query for tmaguard_findings_total through its HTTP API.
# Every server it starts listens on 127.0.0.1 only, is started and stopped here (on every way out), and is found by
# the temporary folder on its command line. What cannot run here (not root, a package missing) is skipped and said.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${TMAGUARD_BUILD_DIR:-$root/build}
passed=0 skipped=""
ok() { passed=$((passed + 1)); echo "test-fleet: ok: $*"; }
fail() { echo "test-fleet: FAIL: $*" >&2; exit 1; }
work=$(mktemp -d /tmp/tmaguard-fleet.XXXXXX)
servers() { pgrep -f -- "$work/" || true; }
stop() {
  local left
  left=$(servers)
  [ -n "$left" ] && kill $left 2>/dev/null
  for _ in $(seq 50); do [ -z "$(servers)" ] && break; sleep 0.1; done
  left=$(servers)
  [ -n "$left" ] && kill -9 $left 2>/dev/null
  rm -rf "$work"
}
trap stop EXIT
trap 'exit 130' INT TERM
client="$build/tests/tg_client"
guarded() {  # the guarded stand-in job: guarded VAR=VALUE... -- SCENARIO
  local envs=()
  while [ "$1" != "--" ]; do envs+=("$1"); shift; done
  shift
  env LD_PRELOAD="$build/libtmaguard.so" LD_LIBRARY_PATH="$build/tests/fake_cuda" TMAGUARD_LOG_FORMAT=json \
    TMAGUARD_MODE=log "${envs[@]}" "$client" getproc launch "$@"
}

# ---- 1. two hosts, one log directory
if [ "$(id -u)" -ne 0 ] || ! unshare --uts --pid --fork --mount-proc true 2>/dev/null; then
  skipped+=" two-hosts (unshare of UTS and PID namespaces needs root)"
else
  on_host() {  # on_host NAME PATTERN: the job as pid 1 on a host of that name
    unshare --uts --pid --fork --mount-proc /bin/sh -c "hostname '$1' && exec env LD_PRELOAD='$build/libtmaguard.so' \
      LD_LIBRARY_PATH='$build/tests/fake_cuda' TMAGUARD_LOG_FORMAT=json TMAGUARD_MODE=log RANK=0 \
      TMAGUARD_LOG='$2' '$client' getproc launch fa4_dk_bad" >/dev/null 2>&1
  }
  mkdir -p "$work/shared"
  on_host nodea "$work/shared/%h.%r.%p.jsonl" && on_host nodeb "$work/shared/%h.%r.%p.jsonl" || fail "the jobs failed"
  files=$(cd "$work/shared" && ls)
  [ "$files" = "$(printf 'nodea.0.1.jsonl\nnodeb.0.1.jsonl')" ] || fail "want nodea.0.1.jsonl and nodeb.0.1.jsonl, got: $files"
  for h in nodea nodeb; do
    [ "$(grep -c '"event":"start"' "$work/shared/$h.0.1.jsonl")" = 1 ] || fail "$h: not one start record"
    grep -q "\"host\":\"$h\"" "$work/shared/$h.0.1.jsonl" || fail "$h's file holds another host's records"
  done
  ok "two hosts, each job pid 1, one directory: %h.%r.%p gave nodea.0.1.jsonl and nodeb.0.1.jsonl, one start record each"
  mkdir -p "$work/pid_only"
  on_host nodea "$work/pid_only/%p.jsonl" && on_host nodeb "$work/pid_only/%p.jsonl"
  [ "$(ls "$work/pid_only")" = 1.jsonl ] && [ "$(grep -c '"event":"start"' "$work/pid_only/1.jsonl")" = 2 ] ||
    fail "the control run: %p alone should have put both hosts into one file"
  ok "control: %p alone put both hosts' records into one file (1.jsonl), as the documented paths avoid"
fi

# ---- 2. the metrics through node_exporter and prometheus
if ! command -v prometheus-node-exporter >/dev/null || ! command -v prometheus >/dev/null ||
   ! command -v promtool >/dev/null || ! command -v curl >/dev/null; then
  skipped+=" prometheus (prometheus, prometheus-node-exporter or curl not installed)"
else
  metrics="$work/metrics"
  guarded TMAGUARD_METRICS="$metrics" TMAGUARD_LOG="$work/job.jsonl" RANK=3 SLURM_JOB_ID=4242 -- fa4_dk_bad \
    >"$work/job.out" 2>&1 || fail "the guarded job failed: $(cat "$work/job.out")"
  files=$(ls -A "$metrics")
  want="tmaguard-$(hostname | cut -d. -f1)-"
  case "$files" in "$want"*.prom) ;; *) fail "want one $want<pid>.prom and nothing else in $metrics, got: $files" ;; esac
  [ "$(echo "$files" | wc -l)" = 1 ] || fail "more than one file in $metrics: $files"
  prom="$metrics/$files"
  promtool check metrics <"$prom" >"$work/promtool.out" 2>&1 || fail "promtool check metrics: $(cat "$work/promtool.out")"
  ok "one file, $files, written atomically (nothing else in the directory); promtool check metrics accepts it"
  grep -q '^tmaguard_active{.*rank="3",job="4242".*} 0$' "$prom" || fail "tmaguard_active is not 0 at exit: $(cat "$prom")"
  port=$((30000 + RANDOM % 10000))
  prometheus-node-exporter --web.listen-address="127.0.0.1:$port" --collector.disable-defaults --collector.textfile \
    --collector.textfile.directory="$metrics" >"$work/node_exporter.log" 2>&1 &
  scraped=""
  for _ in $(seq 50); do
    scraped=$(curl -fsS "http://127.0.0.1:$port/metrics" 2>/dev/null) && [ -n "$scraped" ] && break
    sleep 0.2
  done
  grep -q 'tmaguard_findings_total{.*rule="fa4-dk-not-k-major",severity="error"} 3' <<<"$scraped" ||
    fail "node_exporter does not serve the job's findings: $(grep tmaguard <<<"$scraped" | head -5)"
  grep -q 'node_textfile_scrape_error 0' <<<"$scraped" || fail "node_exporter could not read the textfile"
  ok "node_exporter's textfile collector on 127.0.0.1:$port serves tmaguard_findings_total 3 for the job"
  pport=$((port + 1))
  cat >"$work/prometheus.yml" <<EOF
global:
  scrape_interval: 1s
scrape_configs:
  - job_name: node
    static_configs:
      - targets: ['127.0.0.1:$port']
EOF
  prometheus --config.file="$work/prometheus.yml" --storage.tsdb.path="$work/tsdb" \
    --web.listen-address="127.0.0.1:$pport" >"$work/prometheus.log" 2>&1 &
  answer=""
  for _ in $(seq 60); do
    answer=$(curl -fsS "http://127.0.0.1:$pport/api/v1/query?query=tmaguard_findings_total" 2>/dev/null) &&
      grep -q '"value":\[[0-9.]*,"3"\]' <<<"$answer" && break
    sleep 0.5
  done
  grep -q '"rule":"fa4-dk-not-k-major"' <<<"$answer" && grep -q '"value":\[[0-9.]*,"3"\]' <<<"$answer" ||
    fail "prometheus did not answer the query: ${answer:-no answer} $(tail -3 "$work/prometheus.log")"
  ok "prometheus scraping that node_exporter answers tmaguard_findings_total = 3 through /api/v1/query"
fi
[ -z "$skipped" ] || echo "test-fleet: skipped:$skipped"
echo "test-fleet: $passed checks passed"
