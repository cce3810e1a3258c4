# shellcheck shell=bash
# Harness of Tally's e2e scenarios (sourced by e2e/suite/run.sh).
#
# Local path (default): every scenario starts its own control plane
# (e2e/cluster/up --name suite-<scenario>-<pid>), starts tally-extender from the
# build tree on a free loopback port, restarts kube-scheduler with an extender
# entry pointing at it (default-scheduler profile), runs, then stops both and
# checks that nothing of the run is left: the extender pid and every process
# naming the state folder are gone, the folder is removed.
#
# External cluster: TALLY_E2E_KUBECONFIG names a cluster where Tally already
# runs (e2e/kind/run.sh); pods then use TALLY_E2E_SCHEDULER_NAME, nodes and
# namespaces carry the scenario's unique id and are deleted at the end.
# Where Tally runs in that cluster (TALLY_E2E_IN_CLUSTER=1, the kind path) the
# scenarios act on its Deployments instead of local processes: records are
# committed to the ledger ConfigMap its extenders and controller watch
# (TALLY_E2E_LEDGER_CONFIGMAP), the extender is restarted by deleting the
# scheduler's pod, the device binder is the controller leader's. A scenario
# that cannot run there exits 77, which CTest reports as skipped.
#
# Checks print PASS/FAIL lines; any FAIL makes the scenario exit 1.

SUITE_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$SUITE_DIR/../.." && pwd)"
CLUSTER_DIR="$REPO/e2e/cluster"
SKIP_CODE=77

failures=0
torn_down=0
EXT_PID=""
CTL_PID=""
EXT_PORT=""
EXT_URL=""
EXTERNAL=0
LOG_DIR="${TALLY_E2E_LOG_DIR:-}"

say() { echo "[$SCENARIO] $*"; }
pass() { say "PASS: $*"; }
fail() { say "FAIL: $*"; failures=$((failures + 1)); }
check_eq() { # DESCRIPTION EXPECTED ACTUAL
  if [[ "$2" == "$3" ]]; then pass "$1 ($3)"; else fail "$1: expected '$2', got '$3'"; fi
}
check_has() { # DESCRIPTION NEEDLE HAYSTACK
  if [[ "$3" == *"$2"* ]]; then pass "$1"; else fail "$1: '$2' not in '$3'"; fi
}
check_lacks() { # DESCRIPTION NEEDLE HAYSTACK
  if [[ "$3" != *"$2"* ]]; then pass "$1"; else fail "$1: '$2' found in '$3'"; fi
}
check_le() { # DESCRIPTION LIMIT ACTUAL
  if (( $3 <= $2 )); then pass "$1 ($3 <= $2)"; else fail "$1: $3 > $2"; fi
}
fatal() { fail "$*"; suite_finish; }
skip() { say "SKIP: $*"; SKIPPED=1; suite_finish; }

# wait_until SECONDS CMD...: poll CMD every 0.5 s until it succeeds.
wait_until() {
  local deadline=$((SECONDS + $1)); shift
  until "$@"; do
    ((SECONDS < deadline)) || return 1
    sleep 0.5
  done
}
# stays_for SECONDS DESCRIPTION CMD...: CMD holds for the whole window, checked
# every 0.5 s and once more at its end. Not a wait: a window in which nothing
# may change (a late binding, an eviction); PASS, or FAIL at the first check
# that breaks it (status 1).
stays_for() {
  local window="$1" what="$2"; shift 2
  local start now
  start="$(now_ms)"
  while :; do
    now="$(now_ms)"
    if ! "$@"; then
      fail "$what: broken after $(((now - start) / 1000)).$(((now - start) % 1000 / 100)) s of $window s"
      return 1
    fi
    ((now - start < window * 1000)) || break
    sleep 0.5
  done
  pass "$what (held for $window s)"
}
now_ms() { local t="${EPOCHREALTIME//[.,]/}"; echo $((t / 1000)); }

k() { "$BIN/kubectl" --kubeconfig "$KUBECONFIG" "$@"; }
fixtures() { "$BIN/tally-fixtures" "$@" --kubeconfig "$KUBECONFIG"; }

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'
}

# ------------------------------------------------------------ lifecycle

# suite_begin SCENARIO: cluster (own or external) and, on the local path, the
# extender wired into kube-scheduler. Sets K helpers, ID (unique, DNS-safe),
# SCHED (schedulerName for pods), LEDGER (the extender's ledger folder).
suite_begin() {
  SCENARIO="$1"
  ID="${SCENARIO}-$$"
  SKIPPED=0
  trap 'fail "interrupted"; suite_finish' INT TERM
  if [[ -n "${TALLY_BIN_DIR:-}" ]]; then
    BIN="$TALLY_BIN_DIR"
  else
    BIN="$("$CLUSTER_DIR/build-binaries.sh" 2>/dev/null | tail -n 1)"
  fi
  [[ -x "$BIN/kubectl" && -x "$BIN/tally-fixtures" ]] || { echo "cluster binaries missing in '$BIN'"; exit 1; }
  if [[ -n "${TALLY_E2E_KUBECONFIG:-}" ]]; then
    EXTERNAL=1
    export KUBECONFIG="$TALLY_E2E_KUBECONFIG"
    SCHED="${TALLY_E2E_SCHEDULER_NAME:-tally-scheduler}"
    STATE="$(mktemp -d "/tmp/tally-suite-$ID.XXXX")"
    LEDGER="$STATE/ledger"
    mkdir -p "$LEDGER"
    say "using the cluster of $KUBECONFIG, scheduler $SCHED"
    return 0
  fi
  EXTENDER_BIN="${TALLY_EXTENDER_BIN:-}"
  [[ -x "$EXTENDER_BIN" ]] || { echo "TALLY_EXTENDER_BIN ('$EXTENDER_BIN') is not an executable"; exit 1; }
  SCHED=default-scheduler
  CLUSTER="suite-$ID"
  local out t0=$SECONDS
  # No kube-controller-manager: no scenario needs it, and 2 cores are shared.
  out="$(TALLY_E2E_OWNER_PID=$$ TALLY_E2E_CONTROLLER_MANAGER=0 "$CLUSTER_DIR/up" --name "$CLUSTER")" || fatal "up --name $CLUSTER failed"
  eval "$out"
  STATE="$TALLY_E2E_STATE"
  say "cluster $CLUSTER up in $((SECONDS - t0))s ($STATE)"
  LEDGER="$STATE/ledger"
  mkdir -p "$LEDGER"
  EXT_PORT="$(free_port)"
  EXT_URL="http://127.0.0.1:$EXT_PORT/tally"
  extender_start
  sed "s#__EXTENDER_URL__#$EXT_URL#" "$SUITE_DIR/scheduler-config.yaml" >"$STATE/suite-scheduler-config.yaml"
  "$CLUSTER_DIR/up" --name "$CLUSTER" --restart-scheduler --scheduler-config "$STATE/suite-scheduler-config.yaml" \
    >/dev/null || fatal "restarting kube-scheduler with the extender config failed"
  check_has "kube-scheduler runs with the extender entry" "$EXT_URL" "$(cat "$STATE/scheduler-config.yaml")"
}

# extender_start [EXTRA FLAGS...]: tally-extender on EXT_PORT, verbs and
# metrics on loopback only, waits for /readyz (informers synced).
extender_start() {
  [[ -z "$EXT_PID" ]] || fatal "extender_start: extender already running (pid $EXT_PID)"
  "$EXTENDER_BIN" --kubeconfig "$STATE/kubeconfig" --bind-address 127.0.0.1 --port "$EXT_PORT" \
    --url-prefix /tally --metrics-port 0 --ledger-dir "$LEDGER" --ledger-interval 1s \
    --unorganized-gpu-namespaces=allow "$@" \
    >>"$STATE/logs/tally-extender.log" 2>&1 &
  EXT_PID=$!
  echo "$EXT_PID" >"$STATE/pids/suite-tally-extender.pid"
  local t0=$SECONDS
  if ! wait_until 60 extender_ready; then
    tail -n 30 "$STATE/logs/tally-extender.log" | sed "s/^/[$SCENARIO] extender: /"
    fatal "tally-extender did not become ready on 127.0.0.1:$EXT_PORT"
  fi
  say "tally-extender ready (pid $EXT_PID, port $EXT_PORT) in $((SECONDS - t0))s"
}
extender_ready() {
  kill -0 "$EXT_PID" 2>/dev/null || return 1
  [[ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$EXT_PORT/readyz")" == 200 ]]
}
# extender_stop [SIGNAL]: TERM by default; KILL plays a crash (no graceful
# shutdown, binds in flight cut off).
extender_stop() {
  [[ -n "$EXT_PID" ]] || return 0
  kill "-${1:-TERM}" "$EXT_PID" 2>/dev/null || true
  local i
  for ((i = 0; i < 100; i++)); do kill -0 "$EXT_PID" 2>/dev/null || break; sleep 0.1; done
  if kill -0 "$EXT_PID" 2>/dev/null; then
    say "tally-extender ignored TERM for 10 s; killing it"
    kill -KILL "$EXT_PID" 2>/dev/null || true
  fi
  wait "$EXT_PID" 2>/dev/null || true
  EXT_PID=""
}

# controller_start: tally-controller (TALLY_CONTROLLER_BIN) leading alone
# (--leader-elect=false), so its device binder places GPUDevice orders; no
# webhook configuration is registered (the scenario checks the binder and the
# extender). Waits for /readyz.
controller_start() {
  CONTROLLER_BIN="${TALLY_CONTROLLER_BIN:-}"
  [[ -x "$CONTROLLER_BIN" ]] || fatal "TALLY_CONTROLLER_BIN ('$CONTROLLER_BIN') is not an executable"
  [[ -z "$CTL_PID" ]] || fatal "controller_start: tally-controller already running (pid $CTL_PID)"
  k create namespace tally-system >/dev/null 2>&1 || true
  CTL_OPS_PORT="$(free_port)"
  "$CONTROLLER_BIN" --kubeconfig "$STATE/kubeconfig" --leader-elect=false --webhook-bind-address 127.0.0.1 \
    --webhook-port "$(free_port)" --ops-bind-address 127.0.0.1 --ops-port "$CTL_OPS_PORT" \
    --cert-dir "$STATE/controller-certs" --cert-ip-addresses 127.0.0.1 --webhook-configurations "" \
    --webhook-client-ca-file "$STATE/pki/ca.crt" --webhook-allowed-clients tally-webhook-client \
    --binder-retry-interval 1s --log-format text --unorganized-gpu-namespaces=allow "$@" \
    >>"$STATE/logs/tally-controller.log" 2>&1 &
  CTL_PID=$!
  echo "$CTL_PID" >"$STATE/pids/suite-tally-controller.pid"
  if ! wait_until 60 controller_ready; then
    tail -n 30 "$STATE/logs/tally-controller.log" | sed "s/^/[$SCENARIO] controller: /"
    fatal "tally-controller did not become ready (ops port $CTL_OPS_PORT)"
  fi
  say "tally-controller ready (pid $CTL_PID)"
}
controller_ready() {
  kill -0 "$CTL_PID" 2>/dev/null || return 1
  [[ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$CTL_OPS_PORT/readyz")" == 200 ]]
}
controller_stop() {
  [[ -n "${CTL_PID:-}" ]] || return 0
  kill -TERM "$CTL_PID" 2>/dev/null || true
  local i
  for ((i = 0; i < 100; i++)); do kill -0 "$CTL_PID" 2>/dev/null || break; sleep 0.1; done
  kill -KILL "$CTL_PID" 2>/dev/null || true
  wait "$CTL_PID" 2>/dev/null || true
  CTL_PID=""
}

suite_finish() {
  trap - INT TERM
  if ((!torn_down)); then
    torn_down=1
    if ((EXTERNAL)); then
      forward_stop
      external_cleanup
      rm -rf "$STATE"
    else
      local ext_pid="$EXT_PID"
      controller_stop
      extender_stop
      if ((failures)) && [[ -n "$LOG_DIR" ]]; then
        "$CLUSTER_DIR/down" --name "$CLUSTER" --keep-logs "$LOG_DIR/$CLUSTER" >/dev/null 2>&1 || true
        say "cluster and extender logs kept in $LOG_DIR/$CLUSTER"
      else
        "$CLUSTER_DIR/down" --name "$CLUSTER" >/dev/null 2>&1 || true
      fi
      # Nothing of the run may be left running.
      if [[ -n "$ext_pid" ]] && kill -0 "$ext_pid" 2>/dev/null; then
        fail "tally-extender (pid $ext_pid) still runs after teardown"
      fi
      local left
      left="$(leftover_pids "$STATE/")"
      if [[ -n "$left" ]]; then fail "processes still name $STATE after down: $left"; else pass "no process of the run is left"; fi
      if [[ -e "$STATE" ]]; then fail "state folder $STATE still exists after down"; fi
    fi
  fi
  if ((failures)); then
    say "$failures check(s) failed"
    exit 1
  fi
  if ((SKIPPED)); then exit "$SKIP_CODE"; fi
  say "all checks passed"
  exit 0
}

# leftover_pids TEXT: pids (but this check's own) whose command line contains TEXT.
leftover_pids() {
  python3 - "$1" <<'EOF2'
import os, sys
needle, me = sys.argv[1].encode(), os.getpid()
found = []
for p in os.listdir("/proc"):
    if not p.isdigit() or int(p) == me:
        continue
    try:
        with open(f"/proc/{p}/cmdline", "rb") as f:
            if needle in f.read():
                found.append(p)
    except OSError:
        pass
print(" ".join(found))
EOF2
}

# On an external cluster, delete what the scenario created (by its id label);
# a scenario's own scenario_cleanup (if it defines one) runs first. Nodes are
# waited for: the next scenario's pools must not see them (the binder places
# devices on any node of a pool, not only on the scenario's).
external_cleanup() {
  if declare -F scenario_cleanup >/dev/null; then scenario_cleanup; fi
  k delete pods -A -l "tally.dev/e2e=$ID" --wait=false >/dev/null 2>&1 || true
  k delete gpudevices -A -l "tally.dev/e2e=$ID" --wait=false >/dev/null 2>&1 || true
  k delete virtualmachineinstances -A -l "tally.dev/e2e=$ID" --wait=false >/dev/null 2>&1 || true
  k delete organizations -A -l "tally.dev/e2e=$ID" --wait=false >/dev/null 2>&1 || true
  k delete namespaces -l "tally.dev/e2e=$ID" --wait=false >/dev/null 2>&1 || true
  k delete gpudeviceclasses -l "tally.dev/e2e=$ID" --wait=false >/dev/null 2>&1 || true
  k delete nodes -l "tally.dev/e2e=$ID" --wait=true --timeout=60s >/dev/null 2>&1 || true
}

# needs_local WHAT: a scenario that controls local processes skips on
# external clusters (exit 77: CTest shows it as skipped, never as passed).
needs_local() {
  ((EXTERNAL)) && skip "$1 needs the local control plane (the extender runs in the cluster here)"
  return 0
}
# in_cluster: Tally's Deployments run in the external cluster (the kind path).
in_cluster() { ((EXTERNAL)) && [[ "${TALLY_E2E_IN_CLUSTER:-0}" == 1 ]]; }
TALLY_NS=tally-system

# scheduler_pod: the tally-scheduler pod (kube-scheduler and its tally-extender
# sidecar) that is not being deleted.
scheduler_pod() {
  k -n "$TALLY_NS" get pods -l app.kubernetes.io/name=tally,app.kubernetes.io/component=scheduler \
    -o jsonpath='{range .items[*]}{.metadata.name} {.metadata.deletionTimestamp}{"\n"}{end}' 2>/dev/null |
    awk 'NF == 1 {print $1; exit}'
}
# scheduler_pod_ready POD: both containers of POD ready (the sidecar's
# readiness is the extender's /readyz: every informer synced).
scheduler_pod_ready() {
  [[ "$(k -n "$TALLY_NS" get pod "$1" -o jsonpath='{.status.initContainerStatuses[?(@.name=="tally-extender")].ready} {.status.containerStatuses[?(@.name=="kube-scheduler")].ready}' 2>/dev/null)" == "true true" ]]
}

# ------------------------------------------------------------ objects

# nodes PREFIX COUNT [tally-fixtures nodes flags...]: kwok GPU nodes labelled
# with the scenario id (pods select them with a nodeSelector, so scenarios
# never see each other's nodes on a shared cluster).
nodes() {
  local prefix="$ID-$1" count="$2"; shift 2
  fixtures nodes --count "$count" --prefix "$prefix" --label "tally.dev/e2e=$ID" --wait-ready --timeout 120s "$@" \
    >/dev/null || fatal "creating nodes $prefix*"
}

# namespace NAME [PARENT]: a namespace with HNC tree labels. NAME is used as
# given (scenario-unique because the cluster is; on an external cluster it is
# prefixed with the id by the caller through ns()).
ns() { if ((EXTERNAL)); then echo "$ID-$1"; else echo "$1"; fi; }
namespace() { # NAME [PARENT]
  local name parent labels
  name="$(ns "$1")"
  labels="    $name.tree.hnc.x-k8s.io/depth: \"0\""
  if [[ -n "${2:-}" ]]; then
    parent="$(ns "$2")"
    labels+=$'\n'"    $parent.tree.hnc.x-k8s.io/depth: \"1\""
  fi
  k apply -f - >/dev/null <<EOF || fatal "creating namespace $name"
apiVersion: v1
kind: Namespace
metadata:
  name: $name
  labels:
    tally.dev/e2e: "$ID"
    hnc.x-k8s.io/included-namespace: "true"
$labels
EOF
}

# Classes of the scenarios. Names carry the id on external clusters.
cls() { if ((EXTERNAL)); then echo "$ID-$1"; else echo "$1"; fi; }
class_h200() {
  k apply -f - >/dev/null <<EOF || fatal "creating class h200"
apiVersion: gpu.tally.dev/v1alpha1
kind: GPUDeviceClass
metadata: {name: $(cls h200), labels: {tally.dev/e2e: "$ID"}}
spec: {workload: vm, allocation: passthrough, resourceName: nvidia.com/GH100_H200_SXM_141GB, nodeMode: vm-passthrough,
       memoryMiB: 144384, maxCount: 8}
EOF
  gate_decided "$(cls h200)"
}
class_a100() {
  k apply -f - >/dev/null <<EOF || fatal "creating class a100"
apiVersion: gpu.tally.dev/v1alpha1
kind: GPUDeviceClass
metadata: {name: $(cls a100), labels: {tally.dev/e2e: "$ID"}}
spec: {workload: vm, allocation: vgpu, resourceName: nvidia.com/A100-10C, nodeMode: vm-vgpu, memoryMiB: 10240, maxCount: 8}
EOF
  gate_decided "$(cls a100)"
}
class_shared() {
  k apply -f - >/dev/null <<EOF || fatal "creating class shared"
apiVersion: gpu.tally.dev/v1alpha1
kind: GPUDeviceClass
metadata: {name: $(cls shared), labels: {tally.dev/e2e: "$ID"}}
spec: {workload: pod, allocation: shared, resourceName: nvidia.com/gpu, nodeMode: pod-hami, memoryMiB: 32768,
       share: {memoryMiB: 8192, corePercent: 25, maxSharesPerDevice: 4}}
EOF
  gate_decided "$(cls shared)"
}

# inventory N: the HAMi inventory annotation of N healthy physical GPUs.
inventory() {
  local i out=""
  for ((i = 0; i < $1; i++)); do out+="${out:+,}{\"id\":\"gpu$i\",\"healthy\":true,\"types\":{}}"; done
  printf '{"parents":[%s]}' "$out"
}

# pod NAME NS RESOURCES [key=value labels...]: a pod document (stdout) that
# requests RESOURCES (e.g. 'nvidia.com/gpu: "1"') equally as requests and
# limits, selects the scenario's nodes and uses the scenario's scheduler.
# Environment: POD_OWNER_VMI="name uid" adds a VMI owner reference and the
# launcher label; POD_GATED=1 adds a scheduling gate.
pod() {
  local name="$1" namespace="$2" res="$3"; shift 3
  local labels="    tally.dev/e2e: \"$ID\""
  local kv
  for kv in "$@"; do labels+=$'\n'"    ${kv%%=*}: \"${kv#*=}\""; done
  local owner="" gates=""
  if [[ -n "${POD_OWNER_VMI:-}" ]]; then
    labels+=$'\n'"    kubevirt.io: virt-launcher"
    owner="  ownerReferences:
  - {apiVersion: kubevirt.io/v1, kind: VirtualMachineInstance, name: ${POD_OWNER_VMI% *}, uid: ${POD_OWNER_VMI#* }, controller: true}"
  fi
  [[ -z "${POD_GATED:-}" ]] || gates="  schedulingGates: [{name: tally.dev/e2e-hold}]"
  cat <<EOF
---
apiVersion: v1
kind: Pod
metadata:
  name: $name
  namespace: $namespace
  labels:
$labels
$owner
spec:
  schedulerName: $SCHED
  nodeSelector: {tally.dev/e2e: "$ID"}
$gates
  terminationGracePeriodSeconds: 0
  containers:
  - name: main
    image: registry.invalid/tally/e2e:1
    resources:
      requests: {cpu: 10m, $res}
      limits: {$res}
EOF
}

# ------------------------------------------------------------ observations

pod_node() { k get pod -n "$1" "$2" -o jsonpath='{.spec.nodeName}' 2>/dev/null; }
pod_phase() { k get pod -n "$1" "$2" -o jsonpath='{.status.phase}' 2>/dev/null; }
pod_running_on() { # NS NAME -> succeeds once Running
  [[ "$(pod_phase "$1" "$2")" == Running ]]
}
# PodScheduled=False condition "reason: message" of a pod.
pod_unsched() {
  k get pod -n "$1" "$2" \
    -o jsonpath='{.status.conditions[?(@.type=="PodScheduled")].reason}: {.status.conditions[?(@.type=="PodScheduled")].message}' 2>/dev/null
}
pod_is_unschedulable() { [[ "$(pod_unsched "$1" "$2")" == Unschedulable:* ]]; }
# All FailedScheduling event messages of a pod.
failed_events() {
  k get events -n "$1" --field-selector "involvedObject.name=$2,reason=FailedScheduling" \
    -o jsonpath='{range .items[*]}{.message}{"\n"}{end}' 2>/dev/null
}
has_failed_event() { [[ -n "$(failed_events "$1" "$2")" ]]; }
# "node=count" lines of bound pods with label SELECTOR in NS.
bound_per_node() {
  k get pods -n "$1" -l "$2" -o jsonpath='{range .items[*]}{.spec.nodeName}{"\n"}{end}' 2>/dev/null |
    sed '/^$/d' | sort | uniq -c | awk '{print $2"="$1}'
}
count_bound() {
  k get pods -n "$1" -l "$2" -o jsonpath='{range .items[*]}{.spec.nodeName}{"\n"}{end}' 2>/dev/null | sed '/^$/d' | wc -l
}
count_pods() { k get pods -n "$1" -l "$2" --no-headers 2>/dev/null | wc -l; }

# ------------------------------------------------------------ the extender's view

# Objects just written reach the extender through its watches a little later.
# Before a scenario relies on them, it asks the extender's own verbs, as
# kube-scheduler does, about the pod it is about to create (not created: a
# verb only reads the extender's snapshot) and waits for the answer those
# objects make.
#
# extender_reach: sets VERB_URL to the extender's verbs (.../tally). Local
# path: the extender of this run. In the cluster (the kind path): the sidecar
# of the tally-scheduler pod serves them on that pod's loopback only, which
# kubectl port-forward reaches (it dials the pod's loopback); one forward per
# pod, replaced with the pod. Another external cluster: TALLY_E2E_EXTENDER_URL.
# Called in the current shell (not in $(...)): it keeps the forward.
VERB_URL=""
FWD_PID=""
FWD_POD=""
extender_reach() {
  if ((!EXTERNAL)); then VERB_URL="$EXT_URL"; return 0; fi
  if [[ -n "${TALLY_E2E_EXTENDER_URL:-}" ]]; then VERB_URL="$TALLY_E2E_EXTENDER_URL"; return 0; fi
  in_cluster || return 1
  local pod
  pod="$(scheduler_pod)"
  [[ -n "$pod" ]] || return 1
  if [[ "$pod" != "$FWD_POD" ]] || ! kill -0 "$FWD_PID" 2>/dev/null; then
    forward_stop
    local port
    port="$(free_port)"
    "$BIN/kubectl" --kubeconfig "$KUBECONFIG" -n "$TALLY_NS" port-forward --address 127.0.0.1 "pod/$pod" "$port:8888" \
      >>"$STATE/port-forward.log" 2>&1 &
    FWD_PID=$!
    FWD_POD="$pod"
    VERB_URL="http://127.0.0.1:$port/tally"
    wait_until 15 forward_up "$port" || { forward_stop; return 1; }
  fi
}
forward_up() {
  kill -0 "$FWD_PID" 2>/dev/null &&
    [[ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$1/readyz")" == 200 ]]
}
forward_stop() {
  [[ -n "$FWD_PID" ]] || return 0
  kill "$FWD_PID" 2>/dev/null || true
  wait "$FWD_PID" 2>/dev/null || true
  FWD_PID=""
  FWD_POD=""
}

# extender_ask VERB POD-DOC NODE...: the extender's answer (VERB filter or
# prioritize) for POD-DOC (one pod, YAML or JSON) on NODE..., one line per node:
# filter "NODE pass" / "NODE refused|unresolvable MESSAGE" / "NODE missing",
# or "error MESSAGE" (not ready); prioritize "NODE SCORE". Needs VERB_URL.
extender_ask() {
  local verb="$1" doc="$2"; shift 2
  python3 -c '
import json, sys, urllib.request
import yaml
url, verb, nodes = sys.argv[1], sys.argv[2], sys.argv[3:]
pod = next(d for d in yaml.safe_load_all(sys.stdin) if d)
body = json.dumps({"Pod": pod, "Nodes": None, "NodeNames": nodes}).encode()
req = urllib.request.Request(url, data=body, headers={"Content-Type": "application/json"})
with urllib.request.urlopen(req, timeout=5) as r:
    res = json.load(r)
if verb == "prioritize":
    scores = {h["Host"]: h["Score"] for h in res or []}
    for n in nodes:
        print(n, scores.get(n, 0))  # a score of 0 may be left out
    sys.exit(0)
if res.get("Error"):
    print("error", res["Error"])
    sys.exit(0)
passed = set(res.get("NodeNames") or [])
failed = res.get("FailedNodes") or {}
unresolvable = res.get("FailedAndUnresolvableNodes") or {}
for n in nodes:
    if n in passed:
        print(n, "pass")
    elif n in failed:
        print(n, "refused", failed[n])
    elif n in unresolvable:
        print(n, "unresolvable", unresolvable[n])
    else:
        print(n, "missing")
' "$VERB_URL/$verb" "$verb" "$@" <<<"$doc"
}

# verdicts_are POD-DOC SPEC...: the extender's filter answers POD-DOC as SPECs
# say: "NODE" passes; "NODE~TEXT" is refused with a message holding TEXT
# ("NODE~": for any reason). A node the extender has not cached yet matches
# no SPEC. The answer is kept in EXT_ANSWER.
EXT_ANSWER=""
verdicts_are() {
  local doc="$1"; shift
  local spec nodes=()
  for spec in "$@"; do nodes+=("${spec%%~*}"); done
  extender_reach || { EXT_ANSWER="(the extender's verbs are not reachable)"; return 1; }
  EXT_ANSWER="$(extender_ask filter "$doc" "${nodes[@]}" 2>&1)" || return 1
  local node line
  for spec in "$@"; do
    node="${spec%%~*}"
    line="$(awk -v n="$node" '$1 == n {print; exit}' <<<"$EXT_ANSWER")"
    if [[ "$spec" != *~* ]]; then
      [[ "$line" == "$node pass" ]] || return 1
      continue
    fi
    [[ "$line" == "$node refused "* || "$line" == "$node unresolvable "* ]] || return 1
    [[ "$line" != *"is not in tally-extender's cache yet"* && "$line" == *"${spec#*~}"* ]] || return 1
  done
}

# extender_sees WHAT POD-DOC SPEC...: wait (30 s) for verdicts_are: the
# extender has seen WHAT, the objects just written that those answers need.
extender_sees() {
  local what="$1" doc="$2"; shift 2
  if ((EXTERNAL)) && ! in_cluster && [[ -z "${TALLY_E2E_EXTENDER_URL:-}" ]]; then
    skip "waiting for the extender to see $what needs its verbs: TALLY_E2E_EXTENDER_URL on this cluster"
  fi
  local t0=$SECONDS
  if ! wait_until 30 verdicts_are "$doc" "$@"; then
    sed "s/^/[$SCENARIO] extender: /" <<<"$EXT_ANSWER"
    fatal "the extender did not see $what within 30 s (its filter answer above; expected: $*)"
  fi
  say "the extender sees $what ($((SECONDS - t0)) s)"
}

# status_patch KIND NS|"" NAME JSON: write a status as the platform would.
# Where Tally's controller runs in the cluster (TALLY_E2E_IN_CLUSTER=1, the kind
# path), its GPUDevice webhook lets only the controller's account write device
# statuses: the test, playing the binder, patches them with a token of that
# account (which may patch gpudevices/status and nothing more there, so not
# through kubectl patch, which reads the object first).
controller_status_patch() { # NS NAME JSON
  if [[ ! -s "$STATE/controller.token" ]]; then
    k -n tally-system create token tally-controller --duration=1h >"$STATE/controller.token" ||
      fatal "no token for the tally-controller account"
    k config view --raw --minify -o jsonpath='{.clusters[0].cluster.certificate-authority-data}' |
      base64 -d >"$STATE/cluster-ca.crt" || fatal "no cluster CA in $KUBECONFIG"
  fi
  local server
  server="$(k config view --minify -o jsonpath='{.clusters[0].cluster.server}')"
  curl -fsS --cacert "$STATE/cluster-ca.crt" -X PATCH -H "Authorization: Bearer $(cat "$STATE/controller.token")" \
    -H 'Content-Type: application/merge-patch+json' --data "$3" \
    "$server/apis/gpu.tally.dev/v1alpha1/namespaces/$1/gpudevices/$2/status" >/dev/null
}
status_patch() {
  local kind="$1" namespace="$2" name="$3" json="$4"
  local nsflag=()
  [[ -z "$namespace" ]] || nsflag=(-n "$namespace")
  if [[ "$kind" == gpudevice && "${TALLY_E2E_IN_CLUSTER:-0}" == 1 ]]; then
    controller_status_patch "$namespace" "$name" "$json" || fatal "writing the status of $kind $name as tally-controller"
    return 0
  fi
  k patch "$kind" "${nsflag[@]}" "$name" --subresource=status --type=merge -p "$json" >/dev/null ||
    fatal "writing the status of $kind $name"
}
# gate_decided CLASS: the pool's creation gate is decided, as every door
# requires (a pool no auditor decided is closed, "not audited yet"). Where
# tally-controller runs in the cluster, its pool auditor decides it: wait for
# that. Where no controller runs, the scenario plays the auditor's part and
# publishes the gate of a clean pool (CreationOpen=True).
gate_decided() {
  if [[ "${TALLY_E2E_IN_CLUSTER:-0}" == 1 ]]; then
    wait_until 60 gate_published "$1" || fatal "the pool auditor never decided class $1"
    return 0
  fi
  status_patch gpudeviceclass "" "$1" "{\"status\":{\"conditions\":[{\"type\":\"CreationOpen\",\"status\":\"True\",\"reason\":\"AuditClean\",\"message\":\"audit clean\",\"lastTransitionTime\":\"$(date -u +%Y-%m-%dT%H:%M:%SZ)\"}]}}"
}
gate_published() {
  [[ -n "$(k get gpudeviceclass "$1" -o jsonpath='{.status.conditions[?(@.type=="CreationOpen")].status}' 2>/dev/null)" ]]
}
count_unschedulable() {
  k get pods -n "$1" -l "$2" \
    -o jsonpath='{range .items[*]}{.status.conditions[?(@.type=="PodScheduled")].reason}{"\n"}{end}' 2>/dev/null |
    grep -c '^Unschedulable$'
}
# settled NS SELECTOR TOTAL: every pod is either bound or reported unschedulable.
settled() { (($(count_bound "$1" "$2") + $(count_unschedulable "$1" "$2") == $3)); }
# wait_settled NS SELECTOR TOTAL [SECONDS]: wait for settled, then watch 3 s
# more in which no pod may bind: a late (over-committing) binding shows.
wait_settled() {
  if ! wait_until "${4:-120}" settled "$1" "$2" "$3"; then
    say "pods $2 did not settle: $(count_bound "$1" "$2") bound, $(count_unschedulable "$1" "$2") unschedulable of $3"
    return 0
  fi
  local bound
  bound="$(count_bound "$1" "$2")"
  stays_for 3 "no pod $2 binds late ($bound bound)" bound_is "$1" "$2" "$bound"
}
bound_is() { (($(count_bound "$1" "$2") == $3)); } # NS SELECTOR COUNT
pod_unbound() { [[ -z "$(pod_node "$1" "$2")" ]]; } # NS NAME
# nodes_of NS SELECTOR: the distinct nodes the pods are bound to.
nodes_of() {
  k get pods -n "$1" -l "$2" -o jsonpath='{range .items[*]}{.spec.nodeName}{"\n"}{end}' 2>/dev/null | sed '/^$/d' | sort -u | tr '\n' ' ' | sed 's/ $//'
}
# first_pending NS SELECTOR: name of one pod that is not bound.
first_pending() {
  k get pods -n "$1" -l "$2" -o jsonpath='{range .items[*]}{.metadata.name} {.spec.nodeName}{"\n"}{end}' 2>/dev/null |
    awk 'NF == 1 {print $1; exit}'
}

# gpudevice NS NAME CLASS COUNT PHASE NODE [VMI-NAME VMI-UID]: a held device
# order, its status written as Tally's binder would.
gpudevice() {
  local namespace="$1" name="$2" class="$3" count="$4" phase="$5" node="$6"
  k apply -f - >/dev/null <<EOF2 || fatal "creating GPUDevice $name"
apiVersion: gpu.tally.dev/v1alpha1
kind: GPUDevice
metadata: {name: $name, namespace: $namespace, labels: {tally.dev/e2e: "$ID"}}
spec: {class: $class, count: $count}
EOF2
  local st="{\"phase\":\"$phase\",\"node\":\"$node\""
  [[ -z "${7:-}" ]] || st+=",\"attachedTo\":{\"namespace\":\"$namespace\",\"name\":\"$7\",\"uid\":\"$8\"}"
  status_patch gpudevice "$namespace" "$name" "{\"status\":$st}}"
}

# vmi NS NAME DEVICE-NAME COUNT [DEVICES-ANNOTATION]: a VirtualMachineInstance
# with COUNT gpus[] entries; prints its uid.
vmi() {
  local namespace="$1" name="$2" dev="$3" count="$4" i gpus=""
  for ((i = 0; i < count; i++)); do gpus+="${gpus:+, }{name: gpu$i, deviceName: $dev}"; done
  k apply -f - >/dev/null <<EOF2 || fatal "creating VMI $name"
apiVersion: kubevirt.io/v1
kind: VirtualMachineInstance
metadata:
  name: $name
  namespace: $namespace
  labels: {tally.dev/e2e: "$ID", kubevirt.io/vm: $name}
  annotations: {gpu.tally.dev/devices: '${5:-[]}'}
spec:
  domain:
    devices:
      gpus: [$gpus]
EOF2
  k get vmi -n "$namespace" "$name" -o jsonpath='{.metadata.uid}'
}
ungate() { # NS POD
  k patch pod -n "$1" "$2" --type=json -p '[{"op":"remove","path":"/spec/schedulingGates"}]' >/dev/null ||
    fatal "removing the scheduling gate of $2"
}

# organization NAME: an Organization (kube-dc.com/v1) in its own namespace
# (created by the caller with namespace NAME).
organization() {
  local name
  name="$(ns "$1")"
  k apply -f - >/dev/null <<EOF2 || fatal "creating Organization $name"
apiVersion: kube-dc.com/v1
kind: Organization
metadata: {name: $name, namespace: $name, labels: {tally.dev/e2e: "$ID"}}
spec: {displayName: $name}
EOF2
}

# ledger_commit ID TEXT: commit one record file, as people commit to the
# ledger's Git repository. Local path: the file ID.yaml of the extender's
# ledger folder, written whole and renamed in (as git-sync swaps revisions).
# External cluster: the key ID.yaml of the ledger ConfigMap that the in-cluster
# extenders and controller watch (TALLY_E2E_LEDGER_CONFIGMAP=namespace/name).
ledger_commit() {
  if ((EXTERNAL)); then
    local cm="${TALLY_E2E_LEDGER_CONFIGMAP:-}"
    [[ -n "$cm" ]] || fatal "no ledger ConfigMap of the cluster (TALLY_E2E_LEDGER_CONFIGMAP) to commit record $1 to"
    python3 -c 'import json, sys; print(json.dumps({"data": {sys.argv[1] + ".yaml": sys.stdin.read()}}))' "$1" \
      <<<"$2" >"$STATE/ledger-commit.json"
    k -n "${cm%%/*}" patch configmap "${cm#*/}" --type=merge --patch-file "$STATE/ledger-commit.json" >/dev/null ||
      fatal "committing record $1 to the ledger ConfigMap $cm"
  else
    printf '%s\n' "$2" >"$LEDGER/.$1.tmp" && mv "$LEDGER/.$1.tmp" "$LEDGER/$1.yaml" || fatal "writing record $1"
  fi
}
# ledger_drop ID: remove record ID from the ledger ConfigMap (cleanup of an
# external cluster, once its pool is gone: a record that vanishes is an audit
# finding of its own pool).
ledger_drop() {
  local cm="${TALLY_E2E_LEDGER_CONFIGMAP:-}"
  [[ -n "$cm" ]] || return 0
  k -n "${cm%%/*}" patch configmap "${cm#*/}" --type=json -p "[{\"op\":\"remove\",\"path\":\"/data/$1.yaml\"}]" \
    >/dev/null 2>&1 || true
}

# ledger_record ID ORG CLASS DEVICES [STATE [ACTIVATED-AT [ADDON]]]: a
# GPUReservationRecord (the format of examples/ledger/) committed with
# ledger_commit; by default active since 2026-01-10 under gpu-h200-reserved
# (an empty ACTIVATED-AT for a pending record).
ledger_record() {
  local state="${5:-active}" activated="${6-2026-01-10T00:00:00Z}" addon="${7:-gpu-h200-reserved}"
  ledger_commit "$1" "$(
    cat <<EOF2
apiVersion: operations.kube-dc.com/v1alpha1
kind: GPUReservationRecord
metadata:
  id: $1
spec:
  organization: $2
  profileId: $3
  devices: $4
  state: $state
  requestedAt: "2026-01-05T09:00:00Z"
  startsAt: "2026-01-10T00:00:00Z"
  endsAt: "2036-01-10T00:00:00Z"
  addonId: $addon
  billingReference: OPS-E2E-$1
  approvedBy:
    product: product@example.com
    sre: sre@example.com
status:
  activatedAt: "$activated"
  releasedAt: ""
  evidenceRevision: evidence/e2e-$1
  reason: e2e reservation
EOF2
  )"
}

# plans_addon ID PROFILE DEVICES | plans_addon ID: an operator-only
# reservation add-on granting DEVICES of PROFILE per unit, merged into
# plans.yaml of kube-dc/billing-plans (created when missing); without PROFILE
# the add-on is removed again. Fails (status 1) when it cannot.
plans_addon() {
  k -n kube-dc get configmap billing-plans -o json >"$STATE/billing-plans.in.json" 2>/dev/null ||
    : >"$STATE/billing-plans.in.json"
  python3 - "$STATE/billing-plans.in.json" "$@" >"$STATE/billing-plans.json" <<'EOF2' ||
import json, sys
import yaml
with open(sys.argv.pop(1)) as f:
    text = f.read().strip()
cm = json.loads(text) if text else {"apiVersion": "v1", "kind": "ConfigMap",
                                    "metadata": {"name": "billing-plans", "namespace": "kube-dc"}}
plans = yaml.safe_load((cm.get("data") or {}).get("plans.yaml") or "") or {}
addons = plans.setdefault("addons", {}) or {}
plans["addons"] = addons
if len(sys.argv) > 2:
    addons[sys.argv[1]] = {"selfService": False, "gpu": {sys.argv[2]: {"devices": int(sys.argv[3])}}}
else:
    addons.pop(sys.argv[1], None)
cm.setdefault("data", {})["plans.yaml"] = yaml.safe_dump(plans, sort_keys=True)
for k in ("resourceVersion", "uid", "creationTimestamp", "managedFields"):
    cm["metadata"].pop(k, None)
print(json.dumps(cm))
EOF2
    return 1
  k apply -f "$STATE/billing-plans.json" >/dev/null
}
