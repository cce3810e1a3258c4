#!/usr/bin/env bash
# tally-controller's bench (see bench/controller/README.md).
#
#   bench/controller/run.sh [--nodes 5000] [--orders 1000] [--no-cluster] [--no-vmi] [--keep]
#
# 1. bench_controller at 1,000 and 5,000 nodes: the GPUDevice webhook over
#    HTTPS, the binder's decision loop, the extender's filter on the same
#    snapshot and their agreement (exits non-zero on a disagreement).
# 2. Unless --no-cluster, end to end against a real API server: one local
#    control plane (e2e/cluster/up, no kube-controller-manager), NODES kwok
#    nodes with 8 H200 each (vm-passthrough, class nvidia-h200-passthrough),
#    one tally-controller (--leader-elect=false, its ValidatingWebhookConfiguration
#    pointing at 127.0.0.1 with the caBundle it injects).
#    * stream: once the webhook refuses a count-9 order (the API server calls
#      it), ORDERS GPUDevices of count 1 created by one kubectl create (one
#      request after the other, each reviewed by the webhook over HTTPS, then
#      placed by the binder): time from the first create to the last placement;
#    * backlog: the controller stopped, the webhook configuration deleted,
#      ORDERS more created, the controller started (--webhook-configurations
#      ""): time from its start to ready, and from ready to the last
#      placement; placements/s, also between 10% and 90% of them
#      (tally_controller_binder_placements_total, sampled every 0.2 s); the
#      CPU seconds of tally-controller and kube-apiserver meanwhile;
#    then no node holds more than its 8 units (kubectl, every Bound device).
# 3. Unless --no-cluster or --no-vmi, once that cluster is down, the VM door
#    on a cluster of its own (bench/controller/vmi.sh: 1,000 nodes, the VMI
#    webhook's latency with and without Tally devices, the attach race).
#
# Environment: BUILD (build tree with bench/bench_controller and
# bin/tally-controller, default <repo>/build), TALLY_CONTROLLER_BIN (overrides
# the binary), TALLY_BIN_DIR / TALLY_E2E_ROOT (see e2e/cluster/up).
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
nodes=5000 orders=1000 cluster=1 vmi=1 keep=0
while (($#)); do
  case "$1" in
    --nodes) nodes="$2"; shift 2 ;;
    --orders) orders="$2"; shift 2 ;;
    --no-cluster) cluster=0; shift ;;
    --no-vmi) vmi=0; shift ;;
    --keep) keep=1; shift ;;
    -h|--help) sed -n '2,/^set -uo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done
log() { printf '[bench/controller] %s\n' "$*" >&2; }
build="${BUILD:-$repo/build}"
bench="$build/bench/bench_controller"
[[ -x "$bench" ]] || { log "$bench not built (target bench_controller)"; exit 1; }

echo "== bench_controller (load average: $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) CPUs)"
"$bench" --nodes 1000 5000 --orders "$orders"
rc=$?
((rc == 0)) || log "bench_controller found a disagreement (exit $rc)"
((cluster)) || exit "$rc"

controller="${TALLY_CONTROLLER_BIN:-$build/bin/tally-controller}"
[[ -x "$controller" ]] || { log "$controller not built; skipping the end-to-end run"; exit "$rc"; }
# shellcheck source=../lib.sh
source "$repo/bench/lib.sh"
name="bench-ctl-$$"
ctl_pid=""
cleanup() {
  bench_stop "$ctl_pid"
  if ((keep)); then log "cluster $name kept (e2e/cluster/down --name $name)"; else "$repo/e2e/cluster/down" --name "$name" >/dev/null 2>&1; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

bench_cluster_up || exit 1
t1=$SECONDS
"$TALLY_E2E_BIN/tally-fixtures" nodes --count "$nodes" --prefix n- --mode vm-passthrough \
  --resource nvidia.com/GH100_H200_SXM_141GB=8 --wait-ready --timeout 15m --kubeconfig "$state/kubeconfig" >/dev/null ||
  { log "creating nodes failed"; exit 1; }
log "$nodes nodes Ready in $((SECONDS - t1))s"
for ns in tally-system bench-backlog bench-stream; do k create namespace "$ns" >/dev/null || exit 1; done

# orders FILE NAMESPACE: ORDERS GPUDevices of count 1, one YAML stream.
orders_file() {
  local i
  for ((i = 0; i < orders; i++)); do
    printf -- '---\napiVersion: gpu.tally.dev/v1alpha1\nkind: GPUDevice\nmetadata: {name: order-%05d, namespace: %s}\nspec: {class: nvidia-h200-passthrough, count: 1}\n' \
      "$i" "$2"
  done >"$1"
}
placements() {
  curl -s --max-time 2 "http://127.0.0.1:$ops_port/metrics" |
    awk '$1 == "tally_controller_binder_placements_total" || $1 ~ /^tally_controller_binder_placements_total\{/ { s += $2 } END { print s + 0 }'
}
now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", b - a }'; }
# wait_placements N LIMIT: until the binder counted N placements; prints the
# time of the sample that first saw 10% and 90% of them and of the last.
wait_placements() {
  local want="$1" limit="$2" t0=$SECONDS seen t10="" t90=""
  while :; do
    seen="$(placements)"
    [[ -z "$t10" ]] && ((seen >= want / 10)) && t10="$(now)"
    [[ -z "$t90" ]] && ((seen >= want * 9 / 10)) && t90="$(now)"
    ((seen >= want)) && { echo "$t10 $t90 $(now)"; return 0; }
    kill -0 "$ctl_pid" 2>/dev/null || { log "tally-controller exited:"; tail -n 20 "$state/logs/tally-controller.log" >&2; return 1; }
    ((SECONDS - t0 < limit)) || { log "only $seen of $want placements after ${limit}s"; return 1; }
    sleep 0.2
  done
}
bound_in() { # NAMESPACE: Bound devices there
  k get gpudevices -n "$1" -o jsonpath='{range .items[*]}{.status.phase}{"\n"}{end}' | grep -c '^Bound$'
}

# start_controller CONFIGURATIONS: tally-controller on fresh ports (the
# webhook's on $webhook_port when set), waited for until /readyz answers 200
# (caches synced, serving certificate served).
start_controller() {
  webhook_port="${webhook_port:-$(bench_free_port)}"
  ops_port="$(bench_free_port)"
  started="$(now)"
  setsid "$controller" --kubeconfig "$state/kubeconfig" --leader-elect=false --webhook-configurations "$1" \
    --webhook-bind-address 127.0.0.1 --webhook-port "$webhook_port" --ops-bind-address 127.0.0.1 --ops-port "$ops_port" \
    --cert-dir "$state/controller-certs" --cert-ip-addresses 127.0.0.1 --controller-identity tally-e2e-admin \
    --webhook-client-ca-file "$state/pki/ca.crt" --webhook-allowed-clients tally-webhook-client \
    --log-format text --unorganized-gpu-namespaces=allow >>"$state/logs/tally-controller.log" 2>&1 &
  ctl_pid=$!
  until [[ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$ops_port/readyz")" == 200 ]]; do
    kill -0 "$ctl_pid" 2>/dev/null || { log "tally-controller exited:"; tail -n 20 "$state/logs/tally-controller.log" >&2; exit 1; }
    sleep 0.1
  done
  ready="$(now)"
}
# cpu PID: the process's user + system CPU seconds so far.
cpu() { awk -v hz="$(getconf CLK_TCK)" '{ printf "%.2f", ($14 + $15) / hz }' "/proc/$1/stat"; }
rate() { awk -v n="$1" -v a="$2" -v b="$3" 'BEGIN { printf "%.0f", n / (b - a) }'; }

orders_file "$state/stream.yaml" bench-stream
orders_file "$state/backlog.yaml" bench-backlog
webhook_port="$(bench_free_port)"
# The shipped GPUDevice webhook (manifests/webhook/gpudevices.yaml) called by URL.
python3 "$repo/manifests/render-webhooks.py" --url "https://127.0.0.1:$webhook_port" --name tally-bench-controller \
  gpudevices >"$state/webhook-configuration.json" || exit 1
k apply -f "$state/webhook-configuration.json" >/dev/null || exit 1
start_controller tally-bench-controller
log "tally-controller ready $(elapsed "$started" "$ready")s after start"
# The API server calls the webhook once the caBundle is in the configuration:
# wait for a refusal.
too_many() {
  k create -f - 2>&1 <<'EOF' || true
apiVersion: gpu.tally.dev/v1alpha1
kind: GPUDevice
metadata: {name: too-many, namespace: bench-stream}
spec: {class: nvidia-h200-passthrough, count: 9}
EOF
}
until [[ "$(too_many)" == *CountAboveMax* ]]; do
  kill -0 "$ctl_pid" 2>/dev/null || { log "tally-controller exited"; exit 1; }
  sleep 0.5
done
echo "== end to end, $nodes kwok nodes, one tally-controller (load average: $(cut -d' ' -f1-3 /proc/loadavg))"
s0="$(now)"
k create -f "$state/stream.yaml" >/dev/null || { log "creating the stream failed (a refusal?)"; exit 1; }
s1="$(now)"
read -r _ _ slast < <(wait_placements "$orders" 900) || exit 1
echo "stream: $orders orders through the webhook (kubectl create, one by one) created in $(elapsed "$s0" "$s1")s" \
  "($(rate "$orders" "$s0" "$s1")/s), all Bound $(elapsed "$s0" "$slast")s after the first create," \
  "$(elapsed "$s1" "$slast")s after the last"

# The backlog: the binder alone (the webhook configuration deleted, so the API
# server calls none), every order waiting when the controller starts.
bench_stop "$ctl_pid"
ctl_pid=""
k delete validatingwebhookconfiguration tally-bench-controller >/dev/null || exit 1
t1="$(now)"
k create -f "$state/backlog.yaml" >/dev/null || { log "creating the backlog failed"; exit 1; }
log "backlog: $orders GPUDevices created with no controller running in $(elapsed "$t1" "$(now)")s"
unset webhook_port
start_controller ""
api_pid="$(cat "$state/pids/kube-apiserver.pid")"
ctl_cpu0="$(cpu "$ctl_pid")" api_cpu0="$(cpu "$api_pid")"
read -r b10 b90 blast < <(wait_placements "$orders" 900) || exit 1
ctl_cpu1="$(cpu "$ctl_pid")" api_cpu1="$(cpu "$api_pid")"
echo "backlog: $orders orders waiting; ready $(elapsed "$started" "$ready")s after start, all placed" \
  "$(elapsed "$ready" "$blast")s after ready: $(rate "$orders" "$ready" "$blast") placements/s" \
  "(10%-90% of them: $(rate $((orders * 8 / 10)) "$b10" "$b90")/s); CPU meanwhile: tally-controller" \
  "$(elapsed "$ctl_cpu0" "$ctl_cpu1")s, kube-apiserver $(elapsed "$api_cpu0" "$api_cpu1")s"

stream_bound="$(bound_in bench-stream)" backlog_bound="$(bound_in bench-backlog)"
over="$(k get gpudevices -A -o jsonpath='{range .items[*]}{.status.node} {.spec.count}{"\n"}{end}' |
  awk 'NF == 2 { u[$1] += $2 } END { n = 0; for (x in u) if (u[x] > 8) n++; print n }')"
echo "agreement: Bound $stream_bound/$orders (stream), $backlog_bound/$orders (backlog); nodes over 8 units: $over"
[[ "$backlog_bound" == "$orders" && "$stream_bound" == "$orders" && "$over" == 0 ]] || rc=1
((vmi)) || exit "$rc"
# One cluster at a time on this machine: this one goes before the VM door's.
cleanup
trap - EXIT
vmi_args=()
((keep)) && vmi_args=(--keep)
"$here/vmi.sh" "${vmi_args[@]}" || rc=1
exit "$rc"
