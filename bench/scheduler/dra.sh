#!/usr/bin/env bash
# Bench for issue 29: real kube-scheduler allocating Dynamic Resource
# Allocation claims, with Tally vs without it, same cluster, same nodes, same
# pods (see bench/scheduler/README.md, "DRA claims (issue 29)").
#
#   bench/scheduler/dra.sh [--nodes 1000] [--pods 1000] [--rounds 3]
#                          [--min-ratio R] [--json FILE] [--keep]
#                          [--variants base,tally[,tally-noext][,floor]]
#
# One local control plane (e2e/cluster/up) WITH kube-controller-manager (its
# resourceclaim-controller creates the claims of a pod's templates), NODES
# kwok nodes without device-plugin resources, each with one ResourceSlice of 8
# H200 of the DRA driver gpu.example.com, which this script plays (it creates
# the slices as the driver's kubelet plugin would publish them). The DeviceClass
# h200.gpu.example.com selects them; the GPUDeviceClass nvidia-h200-dra names
# both (spec.dra). Every measurement has its own namespace under the HNC tree
# root bench-org, whose HIERARCHICAL ResourceQuota plan-quota grants
# requests.deviceclass.resource.kubernetes.io/h200.gpu.example.com = 8 x NODES
# (spec and status, as HNC would write it), so the claim door admits every
# claim after computing its decision (budgets of the namespace and bench-org,
# the pool's gate, free units, one node with room). No Organization exists:
# tally-controller runs with --unorganized-gpu-namespaces=allow, as the DRA
# e2e test does (controller/test/e2e/dra_e2e_test.cpp).
#
# Each round runs two measurements, baseline first:
#   base  tally-controller and tally-extender are not running and no Tally
#         webhook configuration is registered; the scheduler profile `bench`
#         is kube-scheduler's plain default profile.
#   tally tally-controller runs (one replica, leader, its pool auditor,
#         quota controller, binder and usage recorder as shipped) with the
#         shipped tally-resourceclaim-validating, tally-pod-placement-mutating
#         and tally-gpu-pod-validating configurations registered
#         (manifests/webhook/ through manifests/render-webhooks.py:
#         failurePolicy Fail, url clientConfig, the leader's CA injected;
#         --gpu-schedulers bench); tally-extender runs and the profile
#         `bench` carries the extenders entry of
#         manifests/scheduler/kube-scheduler-config.yaml (as run.sh does).
#         The placement door marks every pod gpu.tally.dev/claims, one of
#         the entry's managedResources, so kube-scheduler asks the extender
#         to filter, prioritize and bind each pod: the "with" side costs the
#         claim door (at claim creation), both pod doors (at pod creation),
#         the extender's verbs, both processes' watches (nodes, pods,
#         ResourceSlices, ResourceClaims, ...) and leader work.
# A measurement: a ResourceClaimTemplate (1 device of h200.gpu.example.com)
# in a fresh namespace, then PODS pods using it are created while no scheduler
# profile claims them (schedulerName `bench`, kube-scheduler runs an idle
# profile); kube-controller-manager creates one claim per pod (through the
# claim door on the "with" side) and records it in the pod's status; once
# every pod has its claim, kube-scheduler is restarted with the profile
# `bench` and its DynamicResources plugin allocates the claims. The rate is
# read from kube-scheduler's own counter
# scheduler_schedule_attempts_total{profile="bench",result="scheduled"},
# sampled every 0.2 s: pods/s between 10% and 90% of PODS scheduled (start-up
# and tail excluded), as run.sh. Also reported per measurement: the creation
# phase (first pod create until every pod has its claim: kube-controller-
# manager's client, 20 requests/s by default, paces it), kube-apiserver's CPU
# seconds (utime + stime) per pod in the scheduling window (10%..90%) and in
# the creation phase, every component's CPU seconds in the scheduling window,
# and on the "with" side the claim door's review latency p50/p99 over the
# creation phase from tally-controller's /metrics histogram
# tally_webhook_duration_seconds{webhook="resourceclaims"} (decode, decide,
# encode; buckets 0.1 ms x 2^k, quantiles interpolated within a bucket as
# Prometheus' histogram_quantile does) and the API server's view of the same
# calls (apiserver_admission_webhook_admission_duration_seconds, round trip
# over TLS, its mean), and the door's allowed/refused counts (every claim
# must be allowed). After a measurement the namespace is deleted and waited
# for (pods, claims and their deallocation gone) before the next one.
# Variant tally-noext (diagnostic, not the default): tally's processes and
# claim door exactly as in tally, but the profile `bench` without the
# extenders entry (the baseline's profile) and the pod doors unregistered (no
# pod is marked): how much of the "with" cost is the processes' CPU and
# watches on this machine rather than the extender's verbs.
# Variant floor: tally's processes and all three doors exactly as in tally
# (the pods marked), but the profile's extender entry pointed at
# bench/scheduler/floor_extender.cpp (the same verbs, every node passes,
# equal scores, a plain Binding): what the extender protocol costs the
# scheduler here, so tally/floor is what Tally's decisions cost on top.
# Prints one line per measurement and the ratio with/without (mean of the
# "tally" rates over the mean of the "base" rates); --min-ratio makes the exit
# status fail below R (the CTest smoke uses a loose R). The load average
# (/proc/loadavg) is logged at the start, per measurement and at the end.
#
# Environment: BUILD (build tree with bin/tally-extender and
# bin/tally-controller, default <repo>/build), TALLY_EXTENDER_BIN and
# TALLY_CONTROLLER_BIN (override them), TALLY_BIN_DIR / TALLY_E2E_ROOT (see
# e2e/cluster/up).
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
cluster="$repo/e2e/cluster"
nodes=1000 pods=1000 rounds=3 min_ratio="" json="" keep=0 variants="base,tally"
while (($#)); do
  case "$1" in
    --nodes) nodes="$2"; shift 2 ;;
    --pods) pods="$2"; shift 2 ;;
    --rounds) rounds="$2"; shift 2 ;;
    --min-ratio) min_ratio="$2"; shift 2 ;;
    --json) json="$2"; shift 2 ;;
    --keep) keep=1; shift ;;
    --variants) variants="$2"; shift 2 ;;
    -h|--help) sed -n '2,/^set -uo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done
log() { printf '[bench/scheduler/dra] %s\n' "$*" >&2; }
# shellcheck source=../lib.sh
source "$repo/bench/lib.sh"
# shellcheck source=common.sh
source "$here/common.sh"
bench_find_extender scheduler
controller="${TALLY_CONTROLLER_BIN:-${BUILD:-$repo/build}/bin/tally-controller}"
[[ -x "$controller" ]] || { echo "bench/scheduler/dra: $controller not built; skipping" >&2; exit 77; }

driver=gpu.example.com
device_class=h200.gpu.example.com
gpu_class=nvidia-h200-dra
budget_key="requests.deviceclass.resource.kubernetes.io/$device_class"
webhook_cfg=tally-resourceclaim-validating pod_cfg=tally-gpu-pod-validating placement_cfg=tally-pod-placement-mutating
name="bench-dra-$$"
ext_pid="" ctl_pid="" floor_pid=""
cleanup() {
  bench_stop "$ext_pid"
  bench_stop "$ctl_pid"
  bench_stop "$floor_pid"
  if ((keep)); then log "cluster $name kept (e2e/cluster/down --name $name)"; else "$cluster/down" --name "$name" >/dev/null 2>&1; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM
log "load at start: $(cat /proc/loadavg)"

# The cluster as bench_cluster_up starts it, but with kube-controller-manager
# (bench_cluster_up leaves it out): its resourceclaim-controller creates the
# claims, its namespace and garbage-collector controllers remove them.
# Without --keep a watchdog takes the cluster down as soon as this script is
# gone, however it ends.
t0=$SECONDS
owner=$$
((keep)) && owner=""
eval "$(TALLY_E2E_OWNER_PID=$owner TALLY_E2E_CONTROLLER_MANAGER=1 "$cluster/up" --name "$name")" || { log "up failed"; exit 1; }
state="$TALLY_E2E_STATE"
# shellcheck source=/dev/null
source "$state/env"
token="$(cat "$state/pki/admin.token")"
[[ -f "$state/pids/kube-controller-manager.pid" ]] || { log "kube-controller-manager is not running"; exit 1; }
log "cluster up in $((SECONDS - t0))s (kube-controller-manager with the resourceclaim-controller)"

t1=$SECONDS
"$TALLY_E2E_BIN/tally-fixtures" nodes --count "$nodes" --prefix dra- --resource none --wait-ready --timeout 15m \
  >/dev/null || { log "creating nodes failed"; exit 1; }
log "$nodes nodes Ready in $((SECONDS - t1))s"

# The DRA pool: DeviceClass, Tally's class naming it, the budget.
k create namespace tally-system >/dev/null
k apply -f - >/dev/null <<EOF || { log "creating the DeviceClass, the GPUDeviceClass and bench-org failed"; exit 1; }
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: $device_class}
spec:
  selectors:
  - cel: {expression: 'device.driver == "$driver" && device.attributes["$driver"].productName == "H200"'}
---
apiVersion: gpu.tally.dev/v1alpha1
kind: GPUDeviceClass
metadata: {name: $gpu_class}
spec:
  workload: pod
  allocation: passthrough
  memoryMiB: 144384
  maxCount: 8
  dra: {driver: $driver, deviceClassName: $device_class, attributes: {productName: H200}}
---
apiVersion: v1
kind: Namespace
metadata:
  name: bench-org
  labels: {bench-org.tree.hnc.x-k8s.io/depth: "0"}
EOF
budget=$((nodes * 8))
k apply -f - >/dev/null <<EOF || { log "creating the HRQ plan-quota failed"; exit 1; }
apiVersion: hnc.x-k8s.io/v1alpha2
kind: HierarchicalResourceQuota
metadata: {name: plan-quota, namespace: bench-org}
spec: {hard: {$budget_key: "$budget"}}
EOF
# HNC does not run here: its status.hard, as HNC would copy it (a status
# lagging its spec closes the pool's gate until it converges).
k patch hrq -n bench-org plan-quota --subresource=status --type=merge \
  -p "{\"status\":{\"hard\":{\"$budget_key\":\"$budget\"}}}" >/dev/null || { log "writing plan-quota's status failed"; exit 1; }

# The driver's part: one ResourceSlice per node, its one pool, 8 devices.
t1=$SECONDS
slices() { # FIRST END
  local i d
  for ((i = $1; i < $2; i++)); do
    printf -- '---\napiVersion: resource.k8s.io/v1\nkind: ResourceSlice\nmetadata: {name: dra-%s-%s}\nspec:\n' "$i" "$driver"
    printf '  driver: %s\n  nodeName: dra-%s\n  pool: {name: dra-%s, generation: 1, resourceSliceCount: 1}\n  devices:\n' \
      "$driver" "$i" "$i"
    for d in 0 1 2 3 4 5 6 7; do
      printf '  - name: gpu-%s\n    attributes:\n      productName: {string: H200}\n    capacity:\n      memory: {value: 141Gi}\n' "$d"
    done
  done
}
chunk=$(((nodes + 3) / 4)) waits=()
for c in 0 1 2 3; do
  lo=$((c * chunk)) hi=$(((c + 1) * chunk))
  ((hi > nodes)) && hi=$nodes
  ((lo < hi)) || continue
  (slices "$lo" "$hi" | k create -f - >/dev/null) &
  waits+=($!)
done
for w in "${waits[@]}"; do wait "$w" || { log "creating ResourceSlices failed"; exit 1; }; done
n_slices="$(k get resourceslices --no-headers 2>/dev/null | wc -l)"
((n_slices == nodes)) || { log "$n_slices ResourceSlices, want $nodes"; exit 1; }
log "$nodes ResourceSlices ($((nodes * 8)) devices of $driver) in $((SECONDS - t1))s; budget $budget_key=$budget in bench-org"

# ----------------------------------------------------------- Tally processes
port="$(bench_free_port)" wh_port="$(bench_free_port)" ops_port="$(bench_free_port)"
# The claim door and both GPU pod doors (the placement door marks every pod
# naming claims gpu.tally.dev/claims, so kube-scheduler asks tally-extender).
python3 "$repo/manifests/render-webhooks.py" --url "https://127.0.0.1:$wh_port" resourceclaims pod-placement gpu-pods \
  >"$state/webhooks.json" || { log "rendering manifests/webhook/{resourceclaims,pod-placement,gpu-pods}.yaml failed"; exit 1; }
grep -q '"failurePolicy": "Fail"' "$state/webhooks.json" || { log "the rendered claim webhook is not failurePolicy Fail"; exit 1; }

ctl_metrics() { curl -s --max-time 5 "http://127.0.0.1:$ops_port/metrics" 2>/dev/null; }
# door_count RESULT: reviews of the claim door answered with RESULT so far.
door_count() {
  ctl_metrics | awk -v r="result=\"$1\"" '/^tally_webhook_requests_total\{/ && /webhook="resourceclaims"/ && index($0, r) { s += $2 }
    END { print s + 0 }'
}
probe_claim() { # COUNT
  cat <<EOF
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: door-probe, namespace: bench-org}
spec:
  devices:
    requests:
    - name: gpu
      exactly: {deviceClassName: $device_class, allocationMode: ExactCount, count: $1}
EOF
}
probe_pod() {
  cat <<EOF
apiVersion: v1
kind: Pod
metadata: {name: door-probe, namespace: bench-org}
spec:
  schedulerName: bench
  resourceClaims:
  - {name: gpu, resourceClaimName: door-probe}
  containers:
  - {name: main, image: registry.invalid/tally/bench:1}
EOF
}
refusal_checked=0
# start_tally: tally-controller (waited for until ready), the claim door
# registered and answering, tally-extender ready.
start_tally() {
  local t1=$SECONDS
  setsid "$controller" --kubeconfig "$state/kubeconfig" --webhook-bind-address 127.0.0.1 --webhook-port "$wh_port" \
    --ops-bind-address 127.0.0.1 --ops-port "$ops_port" --cert-dir "$state/controller-certs" \
    --cert-ip-addresses 127.0.0.1 --service-namespace tally-system \
    --webhook-client-ca-file "$state/pki/ca.crt" --webhook-allowed-clients tally-webhook-client \
    --webhook-configurations "$webhook_cfg,$pod_cfg" --mutating-webhook-configurations "$placement_cfg" \
    --gpu-schedulers bench --bundle-propagation 1s \
    --leader-election-namespace tally-system --leader-election-identity tally-bench \
    --controller-identity tally-e2e-admin --unorganized-gpu-namespaces=allow --log-format=text \
    >>"$state/logs/tally-controller.log" 2>&1 </dev/null &
  ctl_pid=$!
  bench_start_extender "$extender" "$port" "$state/logs/tally-extender.log"
  local deadline=$((SECONDS + 300))
  until [[ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$ops_port/readyz")" == 200 ]]; do
    kill -0 "$ctl_pid" 2>/dev/null || { log "tally-controller exited:"; tail -n 20 "$state/logs/tally-controller.log" >&2; return 1; }
    ((SECONDS < deadline)) || { log "tally-controller not ready after 300 s"; return 1; }
    sleep 0.2
  done
  k apply -f "$state/webhooks.json" >/dev/null || { log "registering $webhook_cfg failed"; return 1; }
  # The leader injects its CA; then a claim (dry run) must pass the door, which
  # counts it: until then the API server may not call the door yet, or the pool
  # auditor has not opened the gate ("not audited yet").
  local before out
  until [[ -n "$(k get validatingwebhookconfiguration "$webhook_cfg" -o jsonpath='{.webhooks[0].clientConfig.caBundle}' 2>/dev/null)" ]]; do
    ((SECONDS < deadline)) || { log "tally-controller did not inject its CA into $webhook_cfg"; return 1; }
    sleep 0.2
  done
  until before="$(door_count allowed)" && out="$(probe_claim 1 | k create --dry-run=server -f - 2>&1)" &&
    (($(door_count allowed) > before)); do
    ((SECONDS < deadline)) || { log "the claim door never admitted a probe claim: $out"; return 1; }
    sleep 0.5
  done
  if ((!refusal_checked)); then
    # Once: the door decides (9 devices fit no node of 8), it does not just pass.
    out="$(probe_claim 9 | k create --dry-run=server -f - 2>&1)" &&
      { log "the claim door admitted a claim of 9 devices (no node has 9)"; return 1; }
    log "the claim door refuses a claim of 9 devices: ${out//$'\n'/ }"
    refusal_checked=1
  fi
  bench_wait_ready "$ext_pid" "$port" "$state/logs/tally-extender.log" 300 || return 1
  log "tally-controller (claim door registered, failurePolicy Fail) and tally-extender ready in $((SECONDS - t1))s"
}
# The pod doors for the variant: tally-noext's profile has no extender entry
# to ignore the marker with, so there no pod is marked.
pod_doors_off() {
  k delete validatingwebhookconfiguration "$pod_cfg" --ignore-not-found >/dev/null &&
    k delete mutatingwebhookconfiguration "$placement_cfg" --ignore-not-found >/dev/null
}
pod_doors_on() {
  local out deadline=$((SECONDS + 120))
  k apply -f "$state/webhooks.json" >/dev/null || { log "registering the pod doors failed"; return 1; }
  until out="$(probe_pod | k create --dry-run=server -o 'jsonpath={.spec.containers[0].resources.requests.gpu\.tally\.dev/claims}' -f - 2>&1)" &&
    [[ "$out" == 1 ]]; do
    ((SECONDS < deadline)) || { log "the placement door never marked a probe pod: $out"; return 1; }
    sleep 0.5
  done
}
stop_tally() {
  k delete validatingwebhookconfiguration "$webhook_cfg" "$pod_cfg" --ignore-not-found >/dev/null
  k delete mutatingwebhookconfiguration "$placement_cfg" --ignore-not-found >/dev/null
  bench_stop "$ext_pid"; ext_pid=""
  bench_stop "$ctl_pid"; ctl_pid=""
}

# Scheduler configurations, as run.sh's: the same except the extenders block.
config "$state/bench-idle.yaml" idle 0
config "$state/bench-base.yaml" bench 0
config "$state/bench-tally.yaml" bench 1
grep -q "urlPrefix: http://127.0.0.1:$port/tally" "$state/bench-tally.yaml" || { log "extender entry missing"; exit 1; }
if [[ ",$variants," == *",floor,"* ]]; then
  floor_bin="$(dirname "$extender")/floor-extender"
  [[ -x "$floor_bin" ]] || { log "$floor_bin not built (target floor-extender)"; exit 1; }
  floor_port="$(bench_free_port)"
  setsid "$floor_bin" --kubeconfig "$state/kubeconfig" --port "$floor_port" --url-prefix /tally \
    >>"$state/logs/floor-extender.log" 2>&1 </dev/null &
  floor_pid=$!
  for _ in $(seq 50); do curl -s -o /dev/null "http://127.0.0.1:$floor_port/" && break; sleep 0.1; done
  sed "s#urlPrefix: .*#urlPrefix: http://127.0.0.1:$floor_port/tally#" "$state/bench-tally.yaml" >"$state/bench-floor.yaml"
fi
restart() { # CONFIG
  "$cluster/up" --name "$name" --restart-scheduler --scheduler-config "$1" >/dev/null ||
    { log "restarting kube-scheduler with $1 failed"; exit 1; }
}

# Histogram series, "le count" per line plus "sum S" and "count N": the claim
# door's on tally-controller (door_hist) and the API server's calls to it
# (api_hist).
door_hist() {
  ctl_metrics | awk '/^tally_webhook_duration_seconds_/ && /webhook="resourceclaims"/ {
      if ($1 ~ /_bucket\{/) { match($1, /le="[^"]*"/); print substr($1, RSTART + 4, RLENGTH - 5), $2 }
      else if ($1 ~ /_sum/) print "sum", $2; else if ($1 ~ /_count/) print "count", $2 }'
}
api_hist() {
  curl -sk --max-time 10 -H "Authorization: Bearer $token" "https://127.0.0.1:$API_PORT/metrics" 2>/dev/null |
    awk '/^apiserver_admission_webhook_admission_duration_seconds_/ && /name="resourceclaims.validate.gpu.tally.dev"/ && /operation="CREATE"/ {
      if ($1 ~ /_bucket\{/) { match($1, /le="[^"]*"/); b[substr($1, RSTART + 4, RLENGTH - 5)] += $2 }
      else if ($1 ~ /_sum/) s += $2; else if ($1 ~ /_count/) c += $2 }
      END { for (l in b) print l, b[l]; print "sum", s + 0; print "count", c + 0 }'
}
# hist_used BEFORE AFTER -> "count mean_ms p50_ms p99_ms" of the observations between them
hist_used() {
  python3 - "$1" "$2" <<'PY'
import sys
def read(text):
    out = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 2:
            out[parts[0]] = float(parts[1])
    return out
a, b = read(sys.argv[1]), read(sys.argv[2])
count = b.get("count", 0) - a.get("count", 0)
total = b.get("sum", 0) - a.get("sum", 0)
bounds = sorted((float(k), v - a.get(k, 0)) for k, v in b.items() if k not in ("sum", "count"))
def quantile(q):
    # histogram_quantile: linear within the bucket the rank falls in.
    if count <= 0 or not bounds:
        return float("nan")
    rank, lower, below = q * count, 0.0, 0.0
    for upper, cum in bounds:
        if cum >= rank:
            if upper == float("inf"):
                return lower
            width = cum - below
            return lower + (upper - lower) * ((rank - below) / width if width > 0 else 1.0)
        lower, below = upper, cum
    return lower
print(f"{int(count)} {1000 * total / count if count > 0 else float('nan'):.3f} {1000 * quantile(0.5):.3f} {1000 * quantile(0.99):.3f}")
PY
}

# CPU seconds each component has used so far (utime + stime in clock ticks).
cpu_now() {
  local comp pid
  for comp in etcd kube-apiserver kube-scheduler kube-controller-manager kwok; do
    pid="$(cat "$state/pids/$comp.pid" 2>/dev/null)" || continue
    [[ -r /proc/$pid/stat ]] && echo "$comp $(awk '{print $14 + $15}' "/proc/$pid/stat")"
  done
  [[ -n "$ctl_pid" && -r /proc/$ctl_pid/stat ]] && echo "tally-controller $(awk '{print $14 + $15}' "/proc/$ctl_pid/stat")"
  [[ -n "$ext_pid" && -r /proc/$ext_pid/stat ]] && echo "tally-extender $(awk '{print $14 + $15}' "/proc/$ext_pid/stat")"
  # tally-controller's threads by name, numbers dropped (ctl-pool-aud,
  # tally-writer, tally-webhook, watch-<resource>, ...): "ctl/<name> ticks".
  [[ -n "$ctl_pid" && -d /proc/$ctl_pid/task ]] && thread_ticks ctl "$ctl_pid"
  return 0
}
cpu_used() { # BEFORE AFTER -> "comp=seconds ..."
  python3 - "$1" "$2" "$(getconf CLK_TCK)" <<'PY'
import sys
def read(text):
    return {l.split()[0]: float(l.split()[1]) for l in text.splitlines() if l.strip()}
a, b, tck = read(sys.argv[1]), read(sys.argv[2]), float(sys.argv[3])
line = " ".join(f"{k}={(b[k] - a.get(k, 0)) / tck:.2f}" for k in b if not k.startswith("ctl/"))
threads = [f"{k[4:]}={(b[k] - a.get(k, 0)) / tck:.2f}" for k in b if k.startswith("ctl/") and b[k] > a.get(k, 0)]
print(line + ("; tally-controller threads: " + " ".join(threads) if threads else ""))
PY
}

create_pods() { # NAMESPACE
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
  resourceClaims:
  - {name: gpu, resourceClaimTemplateName: one-gpu}
  containers:
  - name: main
    image: registry.invalid/tally/bench:1
    resources:
      requests: {cpu: 10m}
      claims: [{name: gpu}]
EOF
      done | k create -f - >/dev/null
    ) &
    waits+=($!)
  done
  wait "${waits[@]}"
}
# Pods of NAMESPACE whose status names their claim (kube-controller-manager
# created it), and the claims of NAMESPACE allocated so far.
pods_with_claim() {
  k get pods -n "$1" -o jsonpath='{range .items[*]}{.status.resourceClaimStatuses[0].resourceClaimName}{"\n"}{end}' 2>/dev/null |
    grep -c .
}
claims_allocated() {
  k get resourceclaims -n "$1" -o jsonpath='{range .items[*]}{.status.allocation.devices.results[0].device}{"\n"}{end}' 2>/dev/null |
    grep -c .
}

# measure LABEL NAMESPACE -> prints "label rate whole span bound api_s api_ms create_s create_api_ms door_n door_mean door_p50 door_p99 api_wh_n api_wh_mean allowed refused allocated load"
measure() {
  local label="$1" ns="$2"
  restart "$state/bench-idle.yaml"
  k apply -f - >/dev/null <<EOF || { log "$label: creating $ns and its ResourceClaimTemplate failed"; return 1; }
apiVersion: v1
kind: Namespace
metadata:
  name: $ns
  labels: {$ns.tree.hnc.x-k8s.io/depth: "0", bench-org.tree.hnc.x-k8s.io/depth: "1"}
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: one-gpu, namespace: $ns}
spec:
  spec:
    devices:
      requests:
      - name: gpu
        exactly: {deviceClassName: $device_class, allocationMode: ExactCount, count: 1}
EOF
  local api_pid c_start c_end door_before="" door_after="" apih_before apih_after allowed0=0 refused0=0
  api_pid="$(cat "$state/pids/kube-apiserver.pid")"
  if [[ -n "$ctl_pid" ]]; then door_before="$(door_hist)"; allowed0="$(door_count allowed)"; refused0="$(door_count refused)"; fi
  apih_before="$(api_hist)"
  # Creation phase: the pods, then kube-controller-manager's claims.
  local t_c0 t_c1 with_claim=0 created cpu_c0
  cpu_c0="$(cpu_now)"
  t_c0="$(date +%s.%N)"
  c_start="$(api_ticks "$api_pid")"
  create_pods "$ns"
  created="$(k get pods -n "$ns" --no-headers 2>/dev/null | wc -l)"
  ((created == pods)) || log "$label: only $created of $pods pods created"
  local deadline=$((SECONDS + 900))
  while :; do
    with_claim="$(pods_with_claim "$ns")"
    ((with_claim >= created)) && break
    ((SECONDS < deadline)) || { log "$label: only $with_claim of $created pods got their claim after 900 s"; break; }
    sleep 0.5
  done
  t_c1="$(date +%s.%N)"
  c_end="$(api_ticks "$api_pid")"
  apih_after="$(api_hist)"
  local door="nan nan nan nan" allowed=0 refused=0
  if [[ -n "$ctl_pid" ]]; then
    door_after="$(door_hist)"
    door="$(hist_used "$door_before" "$door_after")"
    allowed=$(($(door_count allowed) - allowed0)) refused=$(($(door_count refused) - refused0))
  fi
  local apiwh
  apiwh="$(hist_used "$apih_before" "$apih_after")"
  log "$label: CPU seconds while creating: $(cpu_used "$cpu_c0" "$(cpu_now)")"
  log "$label: $with_claim claims created in $(python3 -c "print(f'{$t_c1 - $t_c0:.1f}')")s; claim door (tally-controller) n p50 p99 ms: $(awk '{print $1, $3, $4}' <<<"$door"), allowed $allowed refused $refused; API server's calls to it n mean ms: $(awk '{print $1, $2}' <<<"$apiwh")"

  # Scheduling phase, as run.sh's measure.
  local lo=$((pods / 10)) hi=$((pods * 9 / 10)) t_lo="" t_hi="" t_first="" t_last="" n now start stalled=0 last_n=""
  local api_lo="" api_hi="" cnt_lo=0 cnt_hi=0 t_restart cpu_before
  local cfg="$state/bench-base.yaml"
  [[ "$label" == tally ]] && cfg="$state/bench-tally.yaml"
  [[ "$label" == floor ]] && cfg="$state/bench-floor.yaml"
  t_restart="$(date +%s.%N)"
  restart "$cfg"
  start="$(date +%s)"
  cpu_before="$(cpu_now)"
  while :; do
    n="$(scheduled)"
    now="$(date +%s.%N)"
    [[ -n "$t_first" || "$n" -lt 1 ]] || t_first="$now"
    if [[ -z "$t_lo" && "$n" -ge "$lo" ]]; then t_lo="$now"; cnt_lo="$n"; api_lo="$(api_ticks "$api_pid")"; fi
    if [[ -z "$t_hi" && "$n" -ge "$hi" ]]; then t_hi="$now"; cnt_hi="$n"; api_hi="$(api_ticks "$api_pid")"; fi
    if [[ "$n" -ge "$pods" ]]; then t_last="$now"; break; fi
    # As run.sh: a bind kube-scheduler timed out that did happen is no
    # "scheduled"; when the counter stalls for 2 s, count the bound pods.
    if [[ "$n" == "${last_n:-}" ]]; then ((++stalled)); else stalled=0; last_n="$n"; fi
    if ((stalled > 0 && stalled % 10 == 0)) && (($(k get pods -n "$ns" -o jsonpath='{range .items[*]}{.spec.nodeName}{"\n"}{end}' | sed '/^$/d' | wc -l) >= pods)); then
      t_last="$now"; [[ -n "$t_hi" ]] || { t_hi="$now"; cnt_hi="$n"; api_hi="$(api_ticks "$api_pid")"; }; break
    fi
    if (($(date +%s) - start > 600)); then log "$label: only $n of $pods scheduled after 600 s"; break; fi
    sleep 0.2
  done
  log "$label: CPU seconds while scheduling: $(cpu_used "$cpu_before" "$(cpu_now)")"
  log "$label: kube-scheduler per pod: $(cycle_means)"
  local placed bound allocated load
  placed="$(k get pods -n "$ns" -o jsonpath='{range .items[*]}{.spec.nodeName}{"\n"}{end}' | sed '/^$/d')"
  bound="$(grep -c . <<<"$placed")"
  ((bound == pods)) || log "$label: $bound of $pods pods bound"
  allocated="$(claims_allocated "$ns")"
  ((allocated == pods)) || log "$label: $allocated of $pods claims allocated"
  log "$label: pods placed on $(sort -u <<<"$placed" | grep -c .) nodes"
  load="$(cut -d' ' -f1 /proc/loadavg)"
  python3 - "$label" "$lo" "$hi" "$t_lo" "$t_hi" "$t_first" "$t_last" "$pods" "$bound" "$cnt_lo" "$cnt_hi" "${api_lo:-0}" "${api_hi:-0}" \
    "$(getconf CLK_TCK)" "$t_restart" "$t_c0" "$t_c1" "$c_start" "$c_end" "$door" "$apiwh" "$allowed" "$refused" "$allocated" "$load" <<'EOF'
import sys
(label, lo, hi, t_lo, t_hi, t_first, t_last, pods, bound, c_lo, c_hi, api_lo, api_hi, tck, t_restart,
 t_c0, t_c1, c_start, c_end, door, apiwh, allowed, refused, allocated, load) = sys.argv[1:]
lo, hi, pods, bound, tck = int(lo), int(hi), int(pods), int(bound), float(tck)
api = (int(api_hi) - int(api_lo)) / tck
between = int(c_hi) - int(c_lo)
api_ms = 1000 * api / between if between > 0 else 0.0
span = float(t_last) - float(t_first) if t_first and t_last else 0.0
if t_last and span <= 0:
    span = float(t_last) - float(t_restart)
whole = (pods - 1) / span if span > 0 else 0.0
rate = (hi - lo) / (float(t_hi) - float(t_lo)) if t_lo and t_hi and float(t_hi) > float(t_lo) else whole
create_s = float(t_c1) - float(t_c0)
create_api_ms = 1000 * (int(c_end) - int(c_start)) / tck / pods
d = door.split()
w = apiwh.split()
print(f"{label} {rate:.1f} {whole:.1f} {span:.2f} {bound} {api:.2f} {api_ms:.3f} {create_s:.1f} {create_api_ms:.3f} "
      f"{d[0]} {d[1]} {d[2]} {d[3]} {w[0]} {w[1]} {allowed} {refused} {allocated} {load}")
EOF
  # The namespace controller deletes the pods (kwok removes them) and the
  # claims once kube-controller-manager has released them: wait for all of
  # it, so the next measurement starts on a quiet cluster with every device free.
  k delete namespace "$ns" --wait=false >/dev/null
  local t_d=$SECONDS
  until ! k get namespace "$ns" >/dev/null 2>&1; do
    ((SECONDS - t_d < 900)) || { log "$label: namespace $ns still there after 900 s"; break; }
    sleep 1
  done
  log "$label: namespace $ns gone in $((SECONDS - t_d))s"
}

results=()
for ((r = 1; r <= rounds; r++)); do
  for mode in ${variants//,/ }; do
    case "$mode" in
      base) stop_tally ;;
      tally|floor) { [[ -n "$ctl_pid" ]] || start_tally; } && pod_doors_on || exit 1 ;;
      tally-noext) { [[ -n "$ctl_pid" ]] || start_tally; } && pod_doors_off || exit 1 ;;
      *) log "unknown variant $mode"; exit 2 ;;
    esac
    measure "$mode" "bench-$mode-$r" >"$state/result" || exit 1
    line="$(cat "$state/result")"
    [[ -n "$line" ]] || { log "round $r $mode: no result"; exit 1; }
    results+=("$line")
    read -r _ rate whole span bound api api_ms create_s create_api_ms door_n _ door_p50 door_p99 _ api_wh_mean _ _ _ load <<<"$line"
    log "round $r $mode: $rate pods/s (10%..90%), $whole pods/s first..last over ${span}s, $bound/$pods bound; kube-apiserver $api CPU s between 10% and 90% ($api_ms ms per pod); creation ${create_s}s, kube-apiserver $create_api_ms ms per pod; door reviews $door_n p50 $door_p50 p99 $door_p99 ms, API server's mean $api_wh_mean ms; load $load"
  done
done
stop_tally
restart "$state/bench-idle.yaml"
log "load at end: $(cat /proc/loadavg)"

printf '%s\n' "${results[@]}" >"$state/results"
python3 - "$nodes" "$pods" "$rounds" "${min_ratio:-0}" "$json" "$state/results" <<'EOF'
import json, math, statistics, sys
nodes, pods, rounds, min_ratio, out = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]), sys.argv[5]
keys = ["label", "rate", "whole", "span", "bound", "api_s", "api_ms", "create_s", "create_api_ms", "door_n", "door_mean_ms",
        "door_p50_ms", "door_p99_ms", "apiwh_n", "apiwh_mean_ms", "allowed", "refused", "allocated", "load"]
rows = []
for line in open(sys.argv[6]).read().splitlines():
    if line.strip():
        v = line.split()
        rows.append({k: (v[i] if k == "label" else float(v[i])) for i, k in enumerate(keys)})
def of(label, key):
    return [r[key] for r in rows if r["label"] == label]
def mean(xs):
    xs = [x for x in xs if not math.isnan(x)]
    return statistics.mean(xs) if xs else float("nan")
def fmt(xs, p=1):
    return " ".join(f"{x:.{p}f}" for x in xs)
base, tally = of("base", "rate"), of("tally", "rate")
mb, mt = mean(base), mean(tally)
ratio = mt / mb if mb > 0 else 0.0
ok = all(int(r["bound"]) == pods and int(r["allocated"]) == pods for r in rows)
door_ok = all(int(r["allowed"]) >= pods and int(r["refused"]) == 0 for r in rows if r["label"] != "base")
print(f"kube-scheduler + DynamicResources, {nodes} kwok nodes x 8 DRA devices, {pods} one-claim pods per run, {rounds} round(s)")
print(f"  without Tally: {fmt(base)} pods/s (mean {mb:.1f})")
print(f"  with Tally (claim door + extender entry): {fmt(tally)} pods/s (mean {mt:.1f})")
noext = of("tally-noext", "rate")
floor = of("floor", "rate")
if floor:
    mf = mean(floor)
    print(f"  Tally's processes and doors, profile with floor-extender: {fmt(floor)} pods/s (mean {mf:.1f}); "
          f"with Tally / floor: {(mt / mf if mf else 0):.3f}; floor / without: {(mf / mb if mb else 0):.3f}")
if noext:
    mn = mean(noext)
    print(f"  Tally's processes and door, profile without the extender entry: {fmt(noext)} pods/s (mean {mn:.1f}, ratio {(mn / mb if mb else 0):.3f})")
for label in ("base", "tally", "tally-noext", "floor"):
    if not of(label, "rate"):
        continue
    print(f"  kube-apiserver CPU per pod scheduled, {label}: {fmt(of(label, 'api_ms'), 2)} ms (mean {mean(of(label, 'api_ms')):.2f})")
for label in ("base", "tally", "tally-noext", "floor"):
    if not of(label, "rate"):
        continue
    print(f"  creation phase (pods + claims), {label}: {fmt(of(label, 'create_s'))} s; kube-apiserver {fmt(of(label, 'create_api_ms'), 2)} ms CPU per pod")
print(f"  claim door review (tally-controller) p50: {fmt(of('tally', 'door_p50_ms'), 3)} ms, p99: {fmt(of('tally', 'door_p99_ms'), 3)} ms, mean {fmt(of('tally', 'door_mean_ms'), 3)} ms")
print(f"  API server's call to the door (round trip) mean: {fmt(of('tally', 'apiwh_mean_ms'), 2)} ms")
print(f"  door decisions: allowed {fmt(of('tally', 'allowed'), 0)}, refused {fmt(of('tally', 'refused'), 0)}")
print(f"  load average (1 min) after each measurement: {fmt([r['load'] for r in rows], 2)}")
print(f"  ratio with/without: {ratio:.3f} (goal >= 0.95)")
print(f"  every pod bound and every claim allocated in every run: {'yes' if ok else 'NO'}; the door admitted every claim: {'yes' if door_ok else 'NO'}")
if out:
    json.dump({"nodes": nodes, "pods": pods, "rounds": rounds, "base": base, "tally": tally, "ratio": ratio,
               "tallyNoExt": noext, "floor": floor, "measurements": rows, "allBound": ok, "doorAdmittedAll": door_ok}, open(out, "w"), indent=1)
sys.exit(0 if ok and door_ok and ratio >= min_ratio else 1)
EOF
