#!/usr/bin/env bash
# Bench 1: real kube-scheduler throughput with Tally's extender vs without it,
# same cluster, same nodes, same pods (see bench/scheduler/README.md).
#
#   bench/scheduler/run.sh [--nodes 5000] [--pods 2000] [--rounds 3]
#                          [--min-ratio R] [--json FILE] [--keep] [--order rotate|fixed]
#                          [--variants base,ext[,ext-json][,ext-noprio][,base-nobatch][,ext-nobind][,ext-weighted][,ext-rt][,ext-batch][,peer][,floor]]
#
# One local control plane (e2e/cluster/up), NODES kwok nodes serving 8 H200
# each (vm-passthrough, class nvidia-h200-passthrough), one tally-extender on
# loopback. Each round runs two measurements, baseline first: PODS one-GPU pods
# are created while no scheduler profile claims them (schedulerName
# `bench`), then kube-scheduler is restarted with a profile `bench`, without
# the extender (baseline) or with the extender entry of
# manifests/scheduler/kube-scheduler-config.yaml (filter, prioritize, preempt,
# bind; nodeCacheCapable). The rate is read from kube-scheduler's own counter
# scheduler_schedule_attempts_total{profile="bench",result="scheduled"},
# sampled every 0.2 s: pods/s between 10% and 90% of PODS scheduled (startup
# and the tail excluded). The pods are deleted between measurements.
# Variant ext-json: ext with tally-extender started with
# --protobuf-watches=false (nodes, pods, namespaces and quotas listed and
# watched as JSON instead of protobuf); only one tally-extender runs at a
# time, restarted on the same port (and waited for until ready) when the next
# variant wants the other format, so the API server serves one set of watches.
# Variant ext-noprio: the ext entry without prioritizeVerb (and its weight):
# filter, preempt and bind only, scoring left to kube-scheduler's own plugins.
# Every measurement also reports kube-apiserver's CPU seconds (utime + stime,
# /proc/PID/stat) between 10% and 90% of the pods scheduled, and per pod.
# Variant base-nobatch: the baseline with kube-scheduler's OpportunisticBatching
# feature gate off (v1.35+ batches identical pods, but never in a profile
# with extenders), so that the ratio to it is the extender's own cost.
# Variant ext-nobind (diagnostic, not the default): the extender entry without
# bindVerb (kube-scheduler binds itself), to split the cost of bind from that
# of filter/prioritize. Variant ext-weighted (diagnostic): ext with
# tally-extender's scheduler autogroup at nice -10 for the measurement (about
# 10x the CPU weight of the other components, as a CPU request several times
# kube-scheduler's would give its pod): how much of the extender's cost is
# waiting for a CPU on the saturated machine. Variant ext-rt (diagnostic, needs
# CAP_SYS_NICE): ext with tally-extender's HTTP threads (tally-http-N) at
# SCHED_FIFO priority 10 for the measurement, so a request wakes its thread at
# once; ext-batch the same threads at SCHED_BATCH (they never preempt on
# wake-up: does waking on the first 4 KB of a request delay the client's
# write of the rest?). Variant peer (diagnostic): the Go peer extender of
# bench/extender/go-peer (encoding/json, net/http, a static cluster: mode and
# free devices per node) as filter and prioritize, without bind or preempt:
# what an extender that does almost nothing costs kube-scheduler over HTTP.
# Variant floor (diagnostic): bench/scheduler/floor_extender.cpp in the ext
# entry's place (filter, prioritize, preempt, bind): tally-extender's HTTP
# server and API client with no model, cache or assumption behind them (every
# candidate passes, no host is scored, bind POSTs at once): what the
# protocol itself costs here, the floor under any extender with these verbs.
# --order rotate (default): every round starts with the first variant and the
# others take turns at each later position; fixed: the order given, every round.
# Prints one line per measurement and the ratio with/without; --min-ratio
# makes the exit status fail below R (used by the CTest smoke with a loose R).
#
# Environment: BUILD (build tree with bin/tally-extender, default <repo>/build),
# TALLY_BENCH_EXTENDER_ARGS (extra tally-extender flags, for diagnostics),
# TALLY_EXTENDER_BIN (overrides it), TALLY_BIN_DIR / TALLY_E2E_ROOT (see
# e2e/cluster/up).
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
cluster="$repo/e2e/cluster"
nodes=5000 pods=2000 rounds=3 min_ratio="" json="" keep=0 variants="base,ext" order=rotate
while (($#)); do
  case "$1" in
    --nodes) nodes="$2"; shift 2 ;;
    --pods) pods="$2"; shift 2 ;;
    --rounds) rounds="$2"; shift 2 ;;
    --order) order="$2"; shift 2 ;;
    --min-ratio) min_ratio="$2"; shift 2 ;;
    --json) json="$2"; shift 2 ;;
    --keep) keep=1; shift ;;
    --variants) variants="$2"; shift 2 ;;
    -h|--help) sed -n '2,/^set -uo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done
log() { printf '[bench/scheduler] %s\n' "$*" >&2; }
[[ "$order" == rotate || "$order" == fixed ]] || { log "--order is rotate or fixed, not $order"; exit 2; }
# shellcheck source=../lib.sh
source "$repo/bench/lib.sh"
# shellcheck source=common.sh
source "$here/common.sh"
bench_find_extender scheduler
name="bench-sched-$$"
ext_pid=""
cleanup() {
  bench_stop "$ext_pid"
  bench_stop "${peer_pid:-}"
  bench_stop "${floor_pid:-}"
  if ((keep)); then log "cluster $name kept (e2e/cluster/down --name $name)"; else "$cluster/down" --name "$name" >/dev/null 2>&1; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

bench_cluster_up || exit 1
t1=$SECONDS
"$TALLY_E2E_BIN/tally-fixtures" nodes --count "$nodes" --prefix bench- --mode vm-passthrough \
  --resource nvidia.com/GH100_H200_SXM_141GB=8 --wait-ready --timeout 15m >/dev/null || { log "creating nodes failed"; exit 1; }
log "$nodes nodes Ready in $((SECONDS - t1))s"

port="$(bench_free_port)"
# use_extender proto|json: the one tally-extender on $port watches in that
# format, restarted (and waited for until ready) when it does not.
ext_watch=""
use_extender() {
  [[ "$1" == "$ext_watch" ]] && return 0
  local t1=$SECONDS flag=true
  [[ "$1" == json ]] && flag=false
  bench_stop "$ext_pid"
  # shellcheck disable=SC2086 # TALLY_BENCH_EXTENDER_ARGS is split into flags on purpose
  bench_start_extender "$extender" "$port" "$state/logs/tally-extender.log" --protobuf-watches="$flag" \
    ${TALLY_BENCH_EXTENDER_ARGS:-}
  bench_wait_ready "$ext_pid" "$port" "$state/logs/tally-extender.log" 300 || exit 1
  ext_watch="$1"
  log "tally-extender ($1 watches) ready (caches synced over $nodes nodes) in $((SECONDS - t1))s"
}
use_extender proto

peer_pid=""
if [[ ",$variants," == *",peer,"* ]]; then
  cache=${XDG_CACHE_HOME:-$HOME/.cache}/tally
  mkdir -p "$cache/bin" "$cache/go-build"
  (cd "$repo/bench/extender/go-peer" && GOCACHE="$cache/go-build" GOFLAGS=-mod=mod GOPROXY=off go build -o "$cache/bin/go-peer" .) ||
    { log "building the Go peer failed"; exit 1; }
  k get nodes -o jsonpath='{range .items[*]}{.metadata.name}{"\n"}{end}' | python3 -c '
import json, sys
names = [n for n in sys.stdin.read().split() if n]
print(json.dumps({"mode": "vm-passthrough", "nodes": [{"name": n, "mode": "vm-passthrough",
      "resource": "nvidia.com/GH100_H200_SXM_141GB", "allocatable": 8, "used": 0} for n in names]}))' >"$state/peer-cluster.json"
  peer_port="$(bench_free_port)"
  setsid "$cache/bin/go-peer" -listen "127.0.0.1:$peer_port" -cluster "$state/peer-cluster.json" >>"$state/logs/go-peer.log" 2>&1 &
  peer_pid=$!
  for _ in $(seq 50); do curl -s -o /dev/null "http://127.0.0.1:$peer_port/" && break; sleep 0.1; done
fi

floor_pid=""
if [[ ",$variants," == *",floor,"* ]]; then
  floor_bin="$(dirname "$extender")/floor-extender"
  [[ -x "$floor_bin" ]] || { log "$floor_bin not built (target floor-extender)"; exit 1; }
  floor_port="$(bench_free_port)"
  setsid "$floor_bin" --kubeconfig "$state/kubeconfig" --port "$floor_port" --url-prefix /tally >>"$state/logs/floor-extender.log" 2>&1 &
  floor_pid=$!
  for _ in $(seq 50); do curl -s -o /dev/null "http://127.0.0.1:$floor_port/" && break; sleep 0.1; done
fi

# Scheduler configurations (common.sh): the same except the extenders block.
config "$state/bench-idle.yaml" idle 0
config "$state/bench-base.yaml" bench 0
cp "$state/bench-base.yaml" "$state/bench-base-nobatch.yaml"
config "$state/bench-ext.yaml" bench 1
cp "$state/bench-ext.yaml" "$state/bench-ext-weighted.yaml"
cp "$state/bench-ext.yaml" "$state/bench-ext-rt.yaml"
cp "$state/bench-ext.yaml" "$state/bench-ext-batch.yaml"
cp "$state/bench-ext.yaml" "$state/bench-ext-json.yaml"
grep -v -e '^ *prioritizeVerb:' -e '^ *weight:' "$state/bench-ext.yaml" >"$state/bench-ext-noprio.yaml"
# http_threads_policy ARGS...: chrt ARGS on every tally-http-N thread of tally-extender.
http_threads_policy() {
  local t
  for t in /proc/"$ext_pid"/task/*; do
    [[ "$(cat "$t/comm" 2>/dev/null)" == tally-http-* ]] && chrt "$@" "${t##*/}"
  done
}
grep -v '^ *bindVerb:' "$state/bench-ext.yaml" >"$state/bench-ext-nobind.yaml"
if [[ -n "$peer_pid" ]]; then
  grep -v -e '^ *bindVerb:' -e '^ *preemptVerb:' "$state/bench-ext.yaml" |
    sed "s#urlPrefix: .*#urlPrefix: http://127.0.0.1:$peer_port#" >"$state/bench-peer.yaml"
fi
[[ -n "$floor_pid" ]] && sed "s#urlPrefix: .*#urlPrefix: http://127.0.0.1:$floor_port/tally#" "$state/bench-ext.yaml" >"$state/bench-floor.yaml"
grep -q "urlPrefix: http://127.0.0.1:$port/tally" "$state/bench-ext.yaml" || { log "extender entry missing"; exit 1; }
# restart CONFIG [KUBE_SCHEDULER_FLAGS]
restart() {
  # TALLY_BENCH_SCHED_GOGC=N (diagnostic): kube-scheduler's Go GC target, for
  # every variant alike (how much of the extender's cost is kube-scheduler's GC).
  local env=()
  [[ -n "${TALLY_BENCH_SCHED_GOGC:-}" ]] && env=(GOGC="$TALLY_BENCH_SCHED_GOGC")
  env "${env[@]}" TALLY_E2E_SCHEDULER_FLAGS="${2:-}" "$cluster/up" --name "$name" --restart-scheduler --scheduler-config "$1" >/dev/null ||
    { log "restarting kube-scheduler with $1 failed"; exit 1; }
}
# kube-scheduler's OpportunisticBatching counts for the bench profile, "result=count ..."
batching() {
  curl -sk -H "Authorization: Bearer $token" "https://127.0.0.1:$SCHED_PORT/metrics" 2>/dev/null |
    awk '/^scheduler_batch_attempts_total\{/ && /profile="bench"/ {
           match($0, /result="[^"]*"/); r = substr($0, RSTART + 8, RLENGTH - 9); printf "%s=%s ", r, $2; f = 1 }
         END { if (!f) printf "none" }'
}

# tally-extender's server-side seconds per route so far: "route sum count
# handling_sum" per line (request_duration from the header read, handling from
# the whole body read), and per bind phase as routes bind:assume and bind:post.
ext_latency() {
  [[ -n "$ext_pid" ]] || return 0
  curl -s "http://127.0.0.1:$port/metrics" 2>/dev/null |
    awk '/^tally_extender_request_(duration|handling)_seconds_(sum|count)\{/ {
           match($0, /route="[^"]*"/); r = substr($0, RSTART + 7, RLENGTH - 8)
           if ($1 ~ /handling_seconds_sum/) h[r] = $2
           else if ($1 ~ /duration_seconds_sum/) s[r] = $2
           else if ($1 ~ /duration_seconds_count/) c[r] = $2 }
         /^tally_extender_bind_phase_seconds_(sum|count)\{/ {
           match($0, /phase="[^"]*"/); r = "bind:" substr($0, RSTART + 7, RLENGTH - 8)
           if ($1 ~ /_sum/) { s[r] = $2; h[r] = $2 } else c[r] = $2 }
         END { for (r in s) print r, s[r], c[r], h[r] + 0 }'
}
# floor-extender's own sums, in ext_latency's form (its GET /latency).
floor_latency() {
  [[ -n "${floor_pid:-}" ]] || return 0
  curl -s "http://127.0.0.1:$floor_port/latency" 2>/dev/null
}
# ext_latency_used BEFORE AFTER -> "route=mean_us/handling_mean_us(n) ..."
ext_latency_used() {
  python3 - "$1" "$2" <<'PY'
import sys
def read(t):
    return {l.split()[0]: tuple(map(float, l.split()[1:4])) for l in t.splitlines() if len(l.split()) == 4}
a, b = read(sys.argv[1]), read(sys.argv[2])
out = []
for r, (s, c, h) in sorted(b.items()):
    s0, c0, h0 = a.get(r, (0.0, 0.0, 0.0))
    if c - c0 > 0:
        out.append(f"{r}={1e6 * (s - s0) / (c - c0):.0f}/{1e6 * (h - h0) / (c - c0):.0f}us({int(c - c0)})")
print(" ".join(out) or "none")
PY
}

create_pods() { # NAMESPACE
  k create namespace "$1" >/dev/null
  local i chunk=$(((pods + 3) / 4)) c waits=()
  for c in 0 1 2 3; do
    (
      for ((i = c * chunk; i < (c + 1) * chunk && i < pods; i++)); do
        cat <<EOF
---
apiVersion: v1
kind: Pod
metadata: {name: p-$i, namespace: $1}
spec:
  schedulerName: bench
  terminationGracePeriodSeconds: 0
  containers:
  - name: main
    image: registry.invalid/tally/bench:1
    resources:
      requests: {cpu: 10m, nvidia.com/GH100_H200_SXM_141GB: "1"}
      limits: {nvidia.com/GH100_H200_SXM_141GB: "1"}
EOF
      done | k create -f - >/dev/null
    ) &
    waits+=($!)
  done
  wait "${waits[@]}"
}

# CPU seconds each component has used so far, "name seconds" per line (utime
# + stime of every thread, from /proc/PID/stat).
cpu_now() {
  local comp pid
  for comp in etcd kube-apiserver kube-scheduler kwok; do
    pid="$(cat "$state/pids/$comp.pid" 2>/dev/null)" || continue
    [[ -r /proc/$pid/stat ]] && echo "$comp $(awk '{print $14 + $15}' "/proc/$pid/stat")"
  done
  # The host's idle time (idle + iowait, both cores): the window is CPU-bound
  # while it stays near 0.
  echo "host-idle $(awk '/^cpu / {print $5 + $6}' /proc/stat)"
  [[ -n "$ext_pid" && -r /proc/$ext_pid/stat ]] && echo "tally-extender $(awk '{print $14 + $15}' "/proc/$ext_pid/stat")"
  # tally-extender's threads by name (tally-http-N, tally-bind, tally-writer,
  # watch-<resource>, ...), numbers dropped: "ext/<name> ticks" per group.
  [[ -n "$ext_pid" && -d /proc/$ext_pid/task ]] && thread_ticks ext "$ext_pid"
  [[ -n "${peer_pid:-}" && -r /proc/$peer_pid/stat ]] && echo "go-peer $(awk '{print $14 + $15}' "/proc/$peer_pid/stat")"
  [[ -n "${floor_pid:-}" && -r /proc/$floor_pid/stat ]] && echo "floor-extender $(awk '{print $14 + $15}' "/proc/$floor_pid/stat")"
  return 0
}
# cpu_used BEFORE AFTER -> "comp=seconds ..." (clock ticks of /proc in seconds)
cpu_used() {
  python3 - "$1" "$2" "$(getconf CLK_TCK)" <<'PY'
import sys
def read(text):
    return {l.split()[0]: float(l.split()[1]) for l in text.splitlines() if l.strip()}
a, b, tck = read(sys.argv[1]), read(sys.argv[2]), float(sys.argv[3])
line = " ".join(f"{k}={(b[k] - a.get(k, 0)) / tck:.2f}" for k in b if not k.startswith("ext/"))
threads = [f"{k[4:]}={(b[k] - a.get(k, 0)) / tck:.2f}" for k in b if k.startswith("ext/") and b[k] > a.get(k, 0)]
print(line + ("; tally-extender threads: " + " ".join(threads) if threads else ""))
PY
}

# The metrics port of the extender a variant's entry calls (none for the baseline).
variant_port() {
  case "$1" in
    base*) ;;
    floor) echo "${floor_port:-}" ;;
    peer) ;;
    *) echo "$port" ;;
  esac
}

# The control plane's CPU (etcd, kube-apiserver, kwok, kube-controller-manager
# and the extenders), in cores over the last 0.5 s.
control_plane_cores() {
  local comp pid t0=0 t1=0 tck
  tck="$(getconf CLK_TCK)"
  local pids=()
  for comp in etcd kube-apiserver kwok kube-controller-manager; do
    pid="$(cat "$state/pids/$comp.pid" 2>/dev/null)" && pids+=("$pid")
  done
  pids+=($ext_pid ${floor_pid:-} ${peer_pid:-})
  for pid in "${pids[@]}"; do [[ -r /proc/$pid/stat ]] && t0=$((t0 + $(api_ticks "$pid"))); done
  sleep 0.5
  for pid in "${pids[@]}"; do [[ -r /proc/$pid/stat ]] && t1=$((t1 + $(api_ticks "$pid"))); done
  awk -v d=$((t1 - t0)) -v tck="$tck" 'BEGIN {printf "%.2f", d / tck / 0.5}'
}
# settle LABEL: waits (at most 30 s) until the control plane has finished
# with what came before the measurement (the last pods' deletion, these pods'
# creation, their watch events): below 0.3 cores twice in a row. Every
# variant starts from the same quiet, instead of from whatever the previous
# measurement left running.
settle() {
  local started=$SECONDS quiet=0 cores
  while ((SECONDS - started < 30)); do
    cores="$(control_plane_cores)"
    if awk -v c="$cores" 'BEGIN {exit !(c < 0.3)}'; then
      ((++quiet >= 2)) && break
    else
      quiet=0
    fi
  done
  log "$1: control plane settled in $((SECONDS - started))s (last ${cores} cores)"
}

# measure LABEL CONFIG NAMESPACE -> prints "rate first_to_last_rate seconds"
measure() {
  local label="$1" cfg="$2" ns="$3"
  restart "$state/bench-idle.yaml"
  create_pods "$ns"
  local created
  created="$(k get pods -n "$ns" --no-headers 2>/dev/null | wc -l)"
  ((created == pods)) || log "$label: only $created of $pods pods created"
  settle "$label"
  local lo=$((pods / 10)) hi=$((pods * 9 / 10)) t_lo="" t_hi="" t_first="" t_last="" n now start stalled=0 last_n=""
  local api_pid api_lo="" api_hi="" c_lo=0 c_hi=0
  api_pid="$(cat "$state/pids/kube-apiserver.pid")"
  start="$(date +%s.%N)"
  local flags=""
  # kube-scheduler (v1.35+) batches identical pods (OpportunisticBatching: the
  # next pod tries the node the last one's scores ranked next, no full
  # filter and score) but turns that off in any profile with an extender.
  # base-nobatch is the baseline with it off too: the extender's own cost.
  [[ "$label" == base-nobatch ]] && flags="--feature-gates=OpportunisticBatching=false"
  # When kube-scheduler binds every pod before its restart returns (a small run
  # on a loaded machine), the first sample already sees them all: the whole
  # run is then timed from the restart, start-up included.
  local t_restart posts_before ebinds_before sources_before conns_before
  posts_before="$(binding_posts)"
  ebinds_before="$(extender_binds "$(variant_port "$label")")"
  sources_before="$(extender_prioritize_sources "$(variant_port "$label")")"
  conns_before="$(extender_api_connections "$port")"
  t_restart="$(date +%s.%N)"
  restart "$cfg" "$flags"
  local cpu_before lat_before floor_before
  cpu_before="$(cpu_now)"
  lat_before="$(ext_latency)"
  floor_before="$(floor_latency)"
  while :; do
    n="$(scheduled)"
    now="$(date +%s.%N)"
    [[ -n "$t_first" || "$n" -lt 1 ]] || t_first="$now"
    if [[ -z "$t_lo" && "$n" -ge "$lo" ]]; then
      t_lo="$now"; c_lo="$n"; api_lo="$(api_ticks "$api_pid")"
      # TALLY_BENCH_PPROF=DIR: a 5 s CPU profile of kube-scheduler from here (go tool pprof).
      if [[ -n "${TALLY_BENCH_PPROF:-}" ]]; then
        mkdir -p "$TALLY_BENCH_PPROF"
        curl -sk -H "Authorization: Bearer $token" -o "$TALLY_BENCH_PPROF/$ns.pprof" \
          "https://127.0.0.1:$SCHED_PORT/debug/pprof/profile?seconds=5" &
      fi
      # TALLY_BENCH_PERF=DIR: 5 s of perf samples (DWARF call graphs) of tally-extender from here.
      if [[ -n "${TALLY_BENCH_PERF:-}" && -n "$ext_pid" ]]; then
        mkdir -p "$TALLY_BENCH_PERF"
        perf record -q -F ${TALLY_BENCH_PERF_HZ:-499} --call-graph dwarf,16384 -p "$ext_pid" -o "$TALLY_BENCH_PERF/$ns.perf.data" -- sleep 5 \
          >/dev/null 2>&1 &
      fi
      # TALLY_BENCH_PERF_ALL=DIR: 5 s of flat perf samples of every process
      # (perf report --sort comm,dso: where the machine's CPU goes).
      if [[ -n "${TALLY_BENCH_PERF_ALL:-}" ]]; then
        mkdir -p "$TALLY_BENCH_PERF_ALL"
        perf record -q -a -F ${TALLY_BENCH_PERF_HZ:-499} -o "$TALLY_BENCH_PERF_ALL/$ns.perf.data" -- sleep 5 >/dev/null 2>&1 &
      fi
    fi
    if [[ -z "$t_hi" && "$n" -ge "$hi" ]]; then t_hi="$now"; c_hi="$n"; api_hi="$(api_ticks "$api_pid")"; fi
    if [[ "$n" -ge "$pods" ]]; then t_last="$now"; break; fi
    # A bind that kube-scheduler timed out but that did happen is counted as an
    # error, not as scheduled: when the counter has not moved for 2 s, count the
    # bound pods themselves. (Only then: listing thousands of pods every 2 s cost
    # kubectl and the API server ~0.2 cores, taken from what is measured.)
    if [[ "$n" == "${last_n:-}" ]]; then ((++stalled)); else stalled=0; last_n="$n"; fi
    if ((stalled > 0 && stalled % 10 == 0)) && (($(k get pods -n "$ns" -o jsonpath='{range .items[*]}{.spec.nodeName}{"\n"}{end}' | sed '/^$/d' | wc -l) >= pods)); then
      t_last="$now"; [[ -n "$t_hi" ]] || { t_hi="$now"; c_hi="$n"; api_hi="$(api_ticks "$api_pid")"; }; break
    fi
    if (($(date +%s) - ${start%.*} > 600)); then log "$label: only $n of $pods scheduled after 600 s"; break; fi
    sleep 0.2
  done
  log "$label: CPU seconds while scheduling: $(cpu_used "$cpu_before" "$(cpu_now)"); batching: $(batching)"
  log "$label: kube-scheduler per pod: $(cycle_means); tally-extender server-side mean from header/from body: $(ext_latency_used "$lat_before" "$(ext_latency)"); floor-extender: $(ext_latency_used "$floor_before" "$(floor_latency)")"
  # Binding POSTs the API server answered for this measurement, by code, and
  # the extender's bind outcomes: a bind retry storm shows as more POSTs than
  # pods, 409s and late binds.
  local posts errors ebinds
  posts="$(counts_used "$posts_before" "$(binding_posts)")"
  errors="$(sched_errors)"
  ebinds="$(counts_used "$ebinds_before" "$(extender_binds "$(variant_port "$label")")")"
  log "$label: Binding POSTs by code: $posts; kube-scheduler attempts ended in error: $errors; extender binds: $ebinds"
  local sources
  sources="$(counts_used "$sources_before" "$(extender_prioritize_sources "$(variant_port "$label")")")"
  [[ "$sources" == none ]] || log "$label: tally-extender prioritize answers by source: $sources"
  # tally-extender's connections to the API server (every variant: it watches in all).
  log "$label: tally-extender opened API connections by TLS handshake: $(counts_used "$conns_before" "$(extender_api_connections "$port")")"
  local bound placed
  placed="$(k get pods -n "$ns" -o jsonpath='{range .items[*]}{.spec.nodeName}{"\n"}{end}' | sed '/^$/d')"
  bound="$(grep -c . <<<"$placed")"
  ((bound == pods)) || log "$label: $bound of $pods pods bound"
  # How packed the placements are (binpack with Tally's prioritize, kube-scheduler's own spreading without).
  log "$label: pods placed on $(sort -u <<<"$placed" | grep -c .) nodes"
  python3 - "$label" "$lo" "$hi" "$t_lo" "$t_hi" "$t_first" "$t_last" "$pods" "$bound" "$c_lo" "$c_hi" "${api_lo:-0}" "${api_hi:-0}" "$(getconf CLK_TCK)" "$t_restart" "$posts" "$errors" <<'EOF'
import sys
label, lo, hi, t_lo, t_hi, t_first, t_last, pods, bound, c_lo, c_hi, api_lo, api_hi, tck, t_restart, posts, errors = sys.argv[1:]
codes = {k: int(v) for k, v in (kv.split("=") for kv in posts.split() if "=" in kv)}
lo, hi, pods, bound = int(lo), int(hi), int(pods), int(bound)
# kube-apiserver's CPU seconds between the samples at 10% and 90% scheduled,
# and per pod scheduled between them (the counts when sampled, not lo/hi).
api = (int(api_hi) - int(api_lo)) / float(tck)
between = int(c_hi) - int(c_lo)
api_ms = 1000 * api / between if between > 0 else 0.0
span = float(t_last) - float(t_first) if t_first and t_last else 0.0
if t_last and span <= 0:
    span = float(t_last) - float(t_restart)
whole = (pods - 1) / span if span > 0 else 0.0
# The progress is sampled every 0.2 s: when a small run binds its 10%..90%
# between two samples the window has no width, and the whole run's rate is
# the only measurement there is (it was reported as 0 pods/s).
rate = (hi - lo) / (float(t_hi) - float(t_lo)) if t_lo and t_hi and float(t_hi) > float(t_lo) else whole
# Columns 8-11: Binding POSTs (every code), of them 409, kube-scheduler
# errors, and 1 when that is a bind retry storm: more Binding POSTs than 1.05
# per pod, or 409s over 1 % of the pods.
posts_sent, conflicts = sum(codes.values()), codes.get('409', 0)
storm = int(posts_sent * 100 > pods * 105 or conflicts * 100 > pods)
print(f"{label} {rate:.1f} {whole:.1f} {span:.2f} {bound} {api:.2f} {api_ms:.3f} {posts_sent} {conflicts} {int(float(errors))} {storm}")
EOF
  k delete namespace "$ns" --wait=false >/dev/null
  # No namespace controller runs: delete the pods themselves (kwok removes them).
  k delete pods -n "$ns" --all --wait=false >/dev/null 2>&1
  local left
  for _ in $(seq 1 300); do
    left="$(k get pods -n "$ns" --no-headers 2>/dev/null | wc -l)"
    ((left == 0)) && break
    sleep 0.5
  done
}

results=()
# Rounds start with the first variant (the baseline); with --order rotate (the
# default) the others take turns at each position, round by round, so that none
# is always measured right after the baseline (a drift of the host's speed
# within a round then falls on each alike).
read -r -a listed <<<"${variants//,/ }"
round_order() { # ROUND -> the variants in the order measured
  local r="$1" n=$((${#listed[@]} - 1)) k out=("${listed[0]}")
  for ((k = 0; k < n; k++)); do
    if [[ "$order" == rotate ]]; then out+=("${listed[1 + (k + r - 1) % n]}"); else out+=("${listed[1 + k]}"); fi
  done
  echo "${out[*]}"
}
for ((r = 1; r <= rounds; r++)); do
  log "round $r order: $(round_order "$r")"
  for mode in $(round_order "$r"); do
    if [[ "$mode" == ext-json ]]; then use_extender json; else use_extender proto; fi
    [[ "$mode" == ext-weighted ]] && echo -10 >"/proc/$ext_pid/autogroup"
    [[ "$mode" == ext-rt ]] && http_threads_policy -f -p 10
    [[ "$mode" == ext-batch ]] && http_threads_policy -b -p 0
    measure "$mode" "$state/bench-$mode.yaml" "bench-$mode-$r" >"$state/result"
    [[ "$mode" == ext-weighted ]] && echo 0 >"/proc/$ext_pid/autogroup"
    [[ "$mode" == ext-rt || "$mode" == ext-batch ]] && http_threads_policy -o -p 0
    line="$(cat "$state/result")"
    [[ -n "$line" ]] || { log "round $r $mode: no result"; exit 1; }
    results+=("$line")
    read -r _ rate whole span bound api api_ms posts c409 errs stormed <<<"$line"
    storm=""
    if ((${stormed:-0})); then storm=" STORM"; fi
    log "round $r $mode: $rate pods/s (10%..90%), $whole pods/s first..last over ${span}s, $bound/$pods bound; kube-apiserver $api CPU s between 10% and 90% ($api_ms ms per pod); $posts Binding POSTs, $c409 409s, $errs scheduler errors$storm"
  done
done
restart "$state/bench-idle.yaml"

printf '%s\n' "${results[@]}" >"$state/results"
python3 - "$nodes" "$pods" "$rounds" "${min_ratio:-0}" "$json" "$state/results" <<'EOF'
import json, statistics, sys
nodes, pods, rounds, min_ratio, out = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]), sys.argv[5]
rows = [l.split() for l in open(sys.argv[6]).read().splitlines() if l.strip()]
base = [float(r[1]) for r in rows if r[0] == "base"]
nobatch = [float(r[1]) for r in rows if r[0] == "base-nobatch"]
ext = [float(r[1]) for r in rows if r[0] == "ext"]
nobind = [float(r[1]) for r in rows if r[0] == "ext-nobind"]
weighted = [float(r[1]) for r in rows if r[0] == "ext-weighted"]
realtime = [float(r[1]) for r in rows if r[0] == "ext-rt"]
batch = [float(r[1]) for r in rows if r[0] == "ext-batch"]
peer = [float(r[1]) for r in rows if r[0] == "peer"]
floor = [float(r[1]) for r in rows if r[0] == "floor"]
ext_json = [float(r[1]) for r in rows if r[0] == "ext-json"]
noprio = [float(r[1]) for r in rows if r[0] == "ext-noprio"]
# kube-apiserver CPU ms per pod scheduled (10%..90%), per variant in run order
api_ms = {}
for r in rows:
    if len(r) > 6:
        api_ms.setdefault(r[0], []).append(float(r[6]))
bound_ok = all(int(r[4]) == pods for r in rows)
mb = statistics.mean(base) if base else 0.0
me = statistics.mean(ext) if ext else 0.0
ratio = me / mb if mb > 0 else 0.0
print(f"kube-scheduler, {nodes} kwok nodes, {pods} one-GPU pods per run, {rounds} round(s)")
print(f"  without extender: {' '.join(f'{x:.1f}' for x in base)} pods/s (mean {mb:.1f})")
if nobatch:
    mnb = statistics.mean(nobatch)
    print(f"  without extender, OpportunisticBatching off: {' '.join(f'{x:.1f}' for x in nobatch)} pods/s (mean {mnb:.1f})")
print(f"  with tally-extender: {' '.join(f'{x:.1f}' for x in ext)} pods/s (mean {me:.1f})")
if nobatch and ext:
    print(f"  with tally-extender / without, both unbatched: {me / mnb:.3f}")
def show(title, xs, against=None):
    """One variant's rates, their mean and its ratio to the baseline's mean;
    against = (label, mean) also prints that mean over this one's."""
    m = statistics.mean(xs)
    print(f"  {title}: {' '.join(f'{x:.1f}' for x in xs)} pods/s (mean {m:.1f}, ratio {(m / mb if mb else 0):.3f})")
    if against and against[1]:
        print(f"  {against[0]}: {against[1] / m:.3f}")
    return m
for label, xs, against in (
        ("with tally-extender, no bindVerb", nobind, None),
        ("with tally-extender at nice -10", weighted, None),
        ("with tally-extender's HTTP threads SCHED_FIFO", realtime, None),
        ("with tally-extender's HTTP threads SCHED_BATCH", batch, None),
        ("with the Go peer extender (filter+prioritize, no bind)", peer,
         ("tally no-bind / Go peer", statistics.mean(nobind) if nobind else 0)),
        ("with floor-extender (the verbs, no model)", floor, ("tally-extender / floor-extender (mean over mean)", me)),
        ("with tally-extender, JSON watches", ext_json, ("protobuf / JSON watches", me))):
    if xs:
        show(label, xs, against)
if ext and floor and len(ext) == len(floor):
    # The same round's pair: the host's speed drifts between rounds far more
    # than within one.
    paired = [e / f for e, f in zip(ext, floor)]
    spread = statistics.stdev(paired) / len(paired) ** 0.5 if len(paired) > 1 else 0.0
    print(f"  tally-extender / floor-extender per round: {' '.join(f'{x:.3f}' for x in paired)} "
          f"(median {statistics.median(paired):.3f}, mean {statistics.mean(paired):.3f} ± {spread:.3f} standard error)")
if noprio:
    mn = show("with tally-extender, no prioritizeVerb", noprio)
    if me:
        print(f"  no prioritizeVerb / full: {mn / me:.3f}")
for v, ms in api_ms.items():
    print(f"  kube-apiserver CPU per pod, {v}: {' '.join(f'{x:.2f}' for x in ms)} ms (mean {statistics.mean(ms):.2f})")
if "ext" in api_ms and "ext-json" in api_ms:
    print(f"  kube-apiserver CPU per pod, protobuf / JSON watches: {statistics.mean(api_ms['ext']) / statistics.mean(api_ms['ext-json']):.3f}")
# Bind retry storms (issue 30): Binding POSTs per pod, 409s, measurements over
# 1.05 POSTs per pod or 1 % 409s, per variant.
for v in dict.fromkeys(r[0] for r in rows):
    rs = [r for r in rows if r[0] == v and len(r) > 10]
    if not rs:
        continue
    posts = [int(r[7]) for r in rs]
    c409 = [int(r[8]) for r in rs]
    errs = [int(r[9]) for r in rs]
    storms = sum(int(r[10]) for r in rs)
    print(f"  {v}: Binding POSTs per pod {' '.join(f'{p / pods:.3f}' for p in posts)} (max {max(posts) / pods:.3f}); "
          f"409s {sum(c409)} (max {100 * max(c409) / pods:.2f} % of pods); scheduler errors {sum(errs)}; "
          f"storms {storms} of {len(rs)}")
print(f"  ratio with/without: {ratio:.3f} (goal >= 0.9)")
print(f"  every pod bound in every run: {'yes' if bound_ok else 'NO'}")
if out:
    json.dump({"nodes": nodes, "pods": pods, "rounds": rounds, "base": base, "baseNoBatch": nobatch, "ext": ext, "extNoBind": nobind, "extWeighted": weighted, "extRt": realtime, "peer": peer, "floor": floor, "extJson": ext_json, "extNoPrio": noprio, "apiserverCpuMsPerPod": api_ms, "ratio": ratio,
               "allBound": bound_ok}, open(out, "w"), indent=1)
sys.exit(0 if bound_ok and ratio >= min_ratio else 1)
EOF
