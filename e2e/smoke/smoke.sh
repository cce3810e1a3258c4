#!/usr/bin/env bash
# Smoke test of the local control plane (CTest label e2e):
#   up (own cluster name) -> up again is a no-op -> 100 kwok GPU nodes ->
#   a pod asking for nvidia.com/gpu is scheduled by kube-scheduler and Running ->
#   a pod asking for more than any node has stays Pending with the scheduler's
#   reason -> the scheduler restarts with an extender config and back ->
#   the platform CRDs accept what Tally writes -> ResourceQuota, garbage
#   collection and namespace deletion work (kube-controller-manager) -> down ->
#   nothing of the cluster is left running -> down again is a no-op.
# Every check prints PASS or FAIL; the script exits non-zero on any FAIL.
#
# Environment: TALLY_E2E_SMOKE_NAME (cluster name, default smoke-<pid>),
# TALLY_E2E_LOG_DIR (where the cluster logs are copied when a check fails).
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cluster="$here/../cluster"
name="${TALLY_E2E_SMOKE_NAME:-smoke-$$}"
log_dir="${TALLY_E2E_LOG_DIR:-}"
failures=0
torn_down=0
if [[ -n "${TALLY_E2E_KUBECONFIG:-}" ]]; then
  echo "[smoke] SKIP: TALLY_E2E_KUBECONFIG is set (external cluster); this test checks e2e/cluster itself"
  exit 77
fi

say() { echo "[smoke] $*"; }
pass() { say "PASS: $*"; }
fail() { say "FAIL: $*"; failures=$((failures + 1)); }
# check DESCRIPTION EXPECTED ACTUAL
check_eq() {
  if [[ "$2" == "$3" ]]; then pass "$1 ($3)"; else fail "$1: expected '$2', got '$3'"; fi
}
# check_has DESCRIPTION NEEDLE HAYSTACK
check_has() {
  if [[ "$3" == *"$2"* ]]; then pass "$1"; else fail "$1: '$2' not in '$3'"; fi
}
fatal() {
  fail "$*"
  finish
}

finish() {
  if ((!torn_down)); then
    if ((failures)) && [[ -n "$log_dir" ]]; then
      "$cluster/down" --name "$name" --keep-logs "$log_dir/$name" || true
      say "cluster logs kept in $log_dir/$name"
    else
      "$cluster/down" --name "$name" || true
    fi
    torn_down=1
  fi
  if ((failures)); then
    say "$failures check(s) failed"
    exit 1
  fi
  say "all checks passed"
  exit 0
}
trap 'fail "interrupted"; finish' INT TERM

# wait_until SECONDS CMD...: poll CMD until it succeeds.
wait_until() {
  local deadline=$((SECONDS + $1)); shift
  until "$@"; do
    ((SECONDS < deadline)) || return 1
    sleep 0.5
  done
}

# ------------------------------------------------------------------ up
t0=$SECONDS
# The watchdog takes the cluster down even if this script is killed outright
# (a CTest timeout); normally the script's own down does it first.
out="$(TALLY_E2E_OWNER_PID=$$ "$cluster/up" --name "$name")" || fatal "up --name $name failed"
say "up took $((SECONDS - t0))s"
last="$(tail -n 1 <<<"$out")"
[[ "$last" == "export KUBECONFIG="* ]] || fatal "last line of up is not an export of KUBECONFIG: '$last'"
eval "$out"
check_eq "kubeconfig written under the cluster state" "$TALLY_E2E_STATE/kubeconfig" "$KUBECONFIG"
[[ -f "$KUBECONFIG" ]] || fatal "kubeconfig $KUBECONFIG missing"
k() { "$TALLY_E2E_BIN/kubectl" "$@"; }
fixtures="$TALLY_E2E_BIN/tally-fixtures"
state="$TALLY_E2E_STATE"

declare -A pids
for comp in etcd kube-apiserver kube-scheduler kube-controller-manager kwok watchdog; do
  pids[$comp]="$(cat "$state/pids/$comp.pid" 2>/dev/null)"
  if [[ -n "${pids[$comp]}" ]] && tr "\\0" " " 2>/dev/null <"/proc/${pids[$comp]}/cmdline" | grep -qF "$state/"; then
    pass "$comp runs (pid ${pids[$comp]})"
  else
    fail "$comp is not running (pid '${pids[$comp]}')"
  fi
done

out2="$("$cluster/up" --name "$name")" || fail "second up failed"
check_eq "second up prints the same export line" "$last" "$(tail -n 1 <<<"$out2")"
check_eq "second up keeps the same kube-apiserver" "${pids[kube-apiserver]}" "$(cat "$state/pids/kube-apiserver.pid" 2>/dev/null)"

check_eq "API server answers as the admin identity" "yes" "$(k auth can-i '*' '*' 2>&1)"
check_eq "RBAC denies an unbound service account" "no" \
  "$(k auth can-i list nodes --as=system:serviceaccount:default:nobody 2>/dev/null)"

# --------------------------------------------------------------- nodes
# --ready=false: the nodes start without conditions and kwok's node stage makes them Ready.
fix_out="$("$fixtures" nodes --count 100 --prefix smoke-gpu- --resource nvidia.com/gpu=4 \
  --mode pod-hami --ready=false --wait-ready --timeout 120s 2>&1)"
rc=$?
say "$fix_out"
check_eq "fixtures created 100 nodes" 0 "$rc"
check_eq "100 fixture nodes exist" 100 \
  "$(k get nodes -l tally.dev/fixture-set=smoke-gpu --no-headers 2>/dev/null | wc -l)"
check_eq "every fixture node is Ready" 100 \
  "$(k get nodes -l tally.dev/fixture-set=smoke-gpu -o jsonpath='{range .items[*]}{.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}' | grep -c '^True$')"
check_eq "node allocatable nvidia.com/gpu" 4 \
  "$(k get node smoke-gpu-7 -o jsonpath='{.status.allocatable.nvidia\.com/gpu}')"
check_eq "node workload-mode label" "pod-hami pod-hami" \
  "$(k get node smoke-gpu-7 -o jsonpath='{.metadata.labels.kube-dc\.com/gpu\.workload-mode} {.metadata.labels.kube-dc\.com/gpu\.expected-workload-mode}')"
check_eq "node is kwok-managed" fake "$(k get node smoke-gpu-7 -o jsonpath='{.metadata.annotations.kwok\.x-k8s\.io/node}')"

# ----------------------------------------------------------------- pods
gpu_pod() { # name gpus
  cat <<EOF
apiVersion: v1
kind: Pod
metadata:
  name: $1
  namespace: default
spec:
  containers:
  - name: main
    image: registry.invalid/tally/cuda-sample:1
    resources:
      requests: {nvidia.com/gpu: "$2", cpu: 100m}
      limits: {nvidia.com/gpu: "$2"}
EOF
}
gpu_pod gpu-fits 2 | k apply -f - >/dev/null || fail "creating pod gpu-fits"
gpu_pod gpu-too-big 5 | k apply -f - >/dev/null || fail "creating pod gpu-too-big"

phase_is() { [[ "$(k get pod "$1" -o jsonpath='{.status.phase}' 2>/dev/null)" == "$2" ]]; }
wait_until 90 phase_is gpu-fits Running || true
check_eq "gpu-fits reaches Running" Running "$(k get pod gpu-fits -o jsonpath='{.status.phase}')"
node="$(k get pod gpu-fits -o jsonpath='{.spec.nodeName}')"
check_has "gpu-fits is bound to a fixture node" smoke-gpu- "$node"
check_eq "gpu-fits PodScheduled" True \
  "$(k get pod gpu-fits -o jsonpath='{.status.conditions[?(@.type=="PodScheduled")].status}')"
check_eq "gpu-fits bound by default-scheduler" default-scheduler \
  "$(k get events --field-selector involvedObject.name=gpu-fits,reason=Scheduled -o jsonpath='{.items[0].reportingComponent}' 2>/dev/null)"

unsched_reason() {
  [[ "$(k get pod gpu-too-big -o jsonpath='{.status.conditions[?(@.type=="PodScheduled")].reason}' 2>/dev/null)" == Unschedulable ]]
}
wait_until 90 unsched_reason || true
cond_msg="$(k get pod gpu-too-big -o jsonpath='{.status.conditions[?(@.type=="PodScheduled")].status} {.status.conditions[?(@.type=="PodScheduled")].reason}: {.status.conditions[?(@.type=="PodScheduled")].message}')"
check_has "gpu-too-big PodScheduled=False Unschedulable" "False Unschedulable:" "$cond_msg"
check_has "gpu-too-big condition names the scheduler's reason" "Insufficient nvidia.com/gpu" "$cond_msg"
ev_has_reason() {
  [[ "$(k get events --field-selector involvedObject.name=gpu-too-big,reason=FailedScheduling -o jsonpath='{.items[*].message}' 2>/dev/null)" == *"Insufficient nvidia.com/gpu"* ]]
}
wait_until 30 ev_has_reason || true
check_has "FailedScheduling event carries the reason" "Insufficient nvidia.com/gpu" \
  "$(k get events --field-selector involvedObject.name=gpu-too-big,reason=FailedScheduling -o jsonpath='{.items[*].message}' 2>/dev/null)"
sleep 2
check_eq "gpu-too-big stays Pending and unbound" "Pending/" \
  "$(k get pod gpu-too-big -o jsonpath='{.status.phase}/{.spec.nodeName}')"

# ------------------------------ restarting the scheduler with an extender
# An extender nobody serves (port 9 on loopback) and that may not be ignored:
# GPU pods then fail with the extender's error, which proves the new config is
# the one running; back on the default config they schedule again.
ext_cfg="$(mktemp)"
cat >"$ext_cfg" <<'EOF'
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection:
  kubeconfig: __KUBECONFIG__
leaderElection:
  leaderElect: false
extenders:
- urlPrefix: http://127.0.0.1:9/tally
  filterVerb: filter
  nodeCacheCapable: true
  ignorable: false
  httpTimeout: 2s
  managedResources:
  - name: nvidia.com/gpu
EOF
old_sched="${pids[kube-scheduler]}"
"$cluster/up" --name "$name" --restart-scheduler --scheduler-config "$ext_cfg" >/dev/null || fail "restart with the extender config"
rm -f "$ext_cfg"
pids[kube-scheduler]="$(cat "$state/pids/kube-scheduler.pid" 2>/dev/null)"
[[ -n "${pids[kube-scheduler]}" && "${pids[kube-scheduler]}" != "$old_sched" ]] &&
  pass "kube-scheduler restarted (pid $old_sched -> ${pids[kube-scheduler]})" ||
  fail "kube-scheduler pid did not change ($old_sched -> '${pids[kube-scheduler]}')"
tr "\\0" " " 2>/dev/null <"/proc/$old_sched/cmdline" | grep -qF "$state/" && fail "old kube-scheduler $old_sched still runs" ||
  pass "old kube-scheduler is gone"
check_eq "the API server was not restarted" "${pids[kube-apiserver]}" "$(cat "$state/pids/kube-apiserver.pid")"
check_has "__KUBECONFIG__ was substituted" "kubeconfig: $state/scheduler.kubeconfig" "$(cat "$state/scheduler-config.yaml")"
gpu_pod gpu-ext 1 | k apply -f - >/dev/null || fail "creating pod gpu-ext"
ext_msg() { k get pod gpu-ext -o jsonpath='{.status.conditions[?(@.type=="PodScheduled")].message}' 2>/dev/null; }
ext_refused() { [[ "$(ext_msg)" == *"127.0.0.1:9/tally/filter"* ]]; }
wait_until 60 ext_refused || true
check_has "the extender is called for a GPU pod" "127.0.0.1:9/tally/filter" "$(ext_msg)"
"$cluster/up" --name "$name" --restart-scheduler >/dev/null || fail "restart with the default config"
wait_until 90 phase_is gpu-ext Running || true
check_eq "back on the default config gpu-ext runs" Running "$(k get pod gpu-ext -o jsonpath='{.status.phase}')"
pids[kube-scheduler]="$(cat "$state/pids/kube-scheduler.pid" 2>/dev/null)"

k delete pod gpu-fits --wait=true --timeout=60s >/dev/null 2>&1 || true
check_eq "a deleted pod is gone (kwok finishes the deletion)" "" "$(k get pod gpu-fits --ignore-not-found -o name 2>/dev/null)"

# ------------------------------------------------- CRDs and namespaces
for crd in virtualmachineinstances.kubevirt.io kubevirts.kubevirt.io \
  hierarchicalresourcequotas.hnc.x-k8s.io organizations.kube-dc.com; do
  check_eq "CRD $crd Established" True \
    "$(k get crd "$crd" -o jsonpath='{.status.conditions[?(@.type=="Established")].status}' 2>/dev/null)"
done
ns_out="$("$fixtures" namespaces --tree smoke-org/smoke-proj 2>&1)" || fail "fixtures namespaces: $ns_out"
check_eq "HNC tree labels on the project namespace" "1 0" \
  "$(k get ns smoke-proj -o jsonpath='{.metadata.labels.smoke-org\.tree\.hnc\.x-k8s\.io/depth} {.metadata.labels.smoke-proj\.tree\.hnc\.x-k8s\.io/depth}')"
k apply -f - >/dev/null <<'EOF' || fail "creating a VMI with a GPU"
apiVersion: kubevirt.io/v1
kind: VirtualMachineInstance
metadata: {name: vm-1, namespace: smoke-proj}
spec:
  domain:
    devices:
      gpus: [{name: gpu1, deviceName: nvidia.com/GH100_H200_SXM_141GB}]
    resources: {requests: {memory: 1Gi}}
EOF
k patch vmi vm-1 -n smoke-proj --subresource=status --type=merge \
  -p '{"status":{"phase":"Running","activePods":{"0b3c0a52-0000-4000-8000-000000000001":"smoke-gpu-3"}}}' >/dev/null ||
  fail "writing VMI status.activePods"
check_eq "VMI keeps gpus[] and status.activePods" "nvidia.com/GH100_H200_SXM_141GB smoke-gpu-3" \
  "$(k get vmi vm-1 -n smoke-proj -o jsonpath='{.spec.domain.devices.gpus[0].deviceName} {.status.activePods.0b3c0a52-0000-4000-8000-000000000001}')"
bad="$(k apply -f - 2>&1 <<'EOF'
apiVersion: kubevirt.io/v1
kind: VirtualMachineInstance
metadata: {name: vm-bad, namespace: smoke-proj}
spec:
  domain:
    devices:
      gpus: [{name: gpu1}]
EOF
)" && fail "a GPU without deviceName was accepted" || check_has "a GPU without deviceName is refused" "deviceName" "$bad"
k apply -f - >/dev/null <<'EOF' || fail "creating an HRQ"
apiVersion: hnc.x-k8s.io/v1alpha2
kind: HierarchicalResourceQuota
metadata: {name: plan-quota, namespace: smoke-org}
spec:
  hard: {requests.nvidia.com/gpu: "8", requests.nvidia.com/gpumem: 16Gi}
EOF
check_eq "HRQ spec.hard kept" 8 "$(k get hrq plan-quota -n smoke-org -o jsonpath='{.spec.hard.requests\.nvidia\.com/gpu}' 2>/dev/null)"

# ------------------------------------- kube-controller-manager's share
# ResourceQuota: the quota controller fills status, then admission enforces it.
k create namespace smoke-quota >/dev/null || fail "creating namespace smoke-quota"
k apply -f - >/dev/null <<'EOF' || fail "creating a ResourceQuota"
apiVersion: v1
kind: ResourceQuota
metadata: {name: project-quota, namespace: smoke-quota}
spec:
  hard: {requests.nvidia.com/gpu: "1"}
EOF
rq_synced() { [[ "$(k get resourcequota project-quota -n smoke-quota -o jsonpath='{.status.hard.requests\.nvidia\.com/gpu}' 2>/dev/null)" == 1 ]]; }
wait_until 60 rq_synced || true
check_eq "ResourceQuota status filled by the quota controller" 1 \
  "$(k get resourcequota project-quota -n smoke-quota -o jsonpath='{.status.hard.requests\.nvidia\.com/gpu}' 2>/dev/null)"
quota_out="$(gpu_pod gpu-over-quota 2 | sed 's/namespace: default/namespace: smoke-quota/' | k apply -f - 2>&1)" &&
  fail "a pod over the ResourceQuota was admitted" ||
  check_has "a pod over the ResourceQuota is refused" "exceeded quota" "$quota_out"
# Garbage collection: a dependent goes with its owner.
k create configmap gc-owner -n smoke-quota >/dev/null || fail "creating gc-owner"
owner_uid="$(k get configmap gc-owner -n smoke-quota -o jsonpath='{.metadata.uid}')"
k apply -f - >/dev/null <<EOF || fail "creating gc-dependent"
apiVersion: v1
kind: ConfigMap
metadata:
  name: gc-dependent
  namespace: smoke-quota
  ownerReferences: [{apiVersion: v1, kind: ConfigMap, name: gc-owner, uid: "$owner_uid"}]
EOF
k delete configmap gc-owner -n smoke-quota >/dev/null || fail "deleting gc-owner"
gc_done() { [[ -z "$(k get configmap gc-dependent -n smoke-quota --ignore-not-found -o name 2>/dev/null)" ]]; }
wait_until 60 gc_done || true
check_eq "the garbage collector deleted the dependent" "" "$(k get configmap gc-dependent -n smoke-quota --ignore-not-found -o name 2>/dev/null)"
# Namespace deletion finishes (content, custom resources included, removed).
k delete namespace smoke-proj --wait=false >/dev/null || fail "deleting namespace smoke-proj"
ns_gone() { [[ -z "$(k get namespace smoke-proj --ignore-not-found -o name 2>/dev/null)" ]]; }
wait_until 90 ns_gone || true
check_eq "a deleted namespace (with a VMI in it) is gone" "" "$(k get namespace smoke-proj --ignore-not-found -o name 2>/dev/null)"

# ----------------------------------------------------------------- down
t1=$SECONDS
if ((failures)) && [[ -n "$log_dir" ]]; then
  "$cluster/down" --name "$name" --keep-logs "$log_dir/$name"
else
  "$cluster/down" --name "$name"
fi
rc=$?
torn_down=1
check_eq "down exits 0" 0 "$rc"
say "down took $((SECONDS - t1))s"
for comp in etcd kube-apiserver kube-scheduler kube-controller-manager kwok watchdog; do
  pid="${pids[$comp]}"
  if [[ -n "$pid" ]] && tr "\\0" " " 2>/dev/null <"/proc/$pid/cmdline" | grep -qF "$state/"; then
    fail "$comp (pid $pid) still running after down"
  else
    pass "$comp (pid $pid) gone"
  fi
done
left="$(pgrep -f -- "$state/" || true)"
check_eq "no process mentions the cluster state folder" "" "$left"
[[ -e "$state" ]] && fail "state folder $state still exists" || pass "state folder removed"
"$cluster/down" --name "$name" >/dev/null 2>&1
check_eq "down without a cluster is harmless" 0 "$?"
finish
