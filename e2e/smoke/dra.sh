#!/usr/bin/env bash
# Dynamic Resource Allocation in the local control plane (CTest
# e2e_dra_control_plane, label e2e):
#   up (own cluster name, with kube-controller-manager) -> resource.k8s.io/v1
#   served -> one kwok node -> a DeviceClass and the node's ResourceSlice (two
#   devices, published as a driver would) -> a pod with a ResourceClaimTemplate
#   asking one device: kube-controller-manager's resourceclaim-controller
#   creates its claim, kube-scheduler's DynamicResources plugin allocates a
#   device and reserves the claim for the pod, which is bound and Running ->
#   a pod asking two devices stays unschedulable while one is taken -> the
#   first pod deleted, its claim goes and the second pod gets both -> down.
# Every check prints PASS or FAIL; the first FAIL ends the script with exit 1
# (each step needs the one before). The cluster is taken down at exit.
#
# Environment: TALLY_E2E_DRA_NAME (cluster name, default dra-<pid>),
# TALLY_E2E_LOG_DIR (where the cluster logs are copied when a check fails).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cluster="$here/../cluster"
name="${TALLY_E2E_DRA_NAME:-dra-$$}"
log_dir="${TALLY_E2E_LOG_DIR:-}"
driver=gpu.example.com
node=dra-node-0
started=$SECONDS
if [[ -n "${TALLY_E2E_KUBECONFIG:-}" ]]; then
  echo "[dra] SKIP: TALLY_E2E_KUBECONFIG is set (external cluster); this test checks e2e/cluster itself"
  exit 77
fi

say() { echo "[dra] $*"; }
pass() { say "PASS: $*"; }
failed=0
fail() {
  say "FAIL: $*"
  failed=1
  exit 1
}
# check_eq DESCRIPTION EXPECTED ACTUAL
check_eq() {
  if [[ "$2" == "$3" ]]; then pass "$1 ($3)"; else fail "$1: expected '$2', got '$3'"; fi
}
# check_has DESCRIPTION NEEDLE HAYSTACK
check_has() {
  if [[ "$3" == *"$2"* ]]; then pass "$1"; else fail "$1: '$2' not in '$3'"; fi
}
# check_match DESCRIPTION REGEX ACTUAL
check_match() {
  if [[ "$3" =~ $2 ]]; then pass "$1 ($3)"; else fail "$1: '$3' does not match /$2/"; fi
}

finish() {
  local rc=$?
  trap - EXIT INT TERM
  ((rc == 0)) || failed=1
  if ((failed)) && [[ -n "$log_dir" ]]; then
    "$cluster/down" --name "$name" --keep-logs "$log_dir/$name" >/dev/null 2>&1 || true
    say "cluster logs kept in $log_dir/$name"
  else
    "$cluster/down" --name "$name" || say "down --name $name failed"
  fi
  if ((failed)); then
    say "failed after $((SECONDS - started))s"
    exit 1
  fi
  say "all checks passed in $((SECONDS - started))s"
  exit 0
}
trap finish EXIT
trap 'say "FAIL: interrupted"; failed=1; exit 130' INT
trap 'say "FAIL: terminated"; failed=1; exit 143' TERM

# wait_for DESCRIPTION SECONDS CMD...: poll CMD until it succeeds; says what it
# waits for, and returns 1 after SECONDS.
wait_for() {
  local what="$1" deadline=$((SECONDS + $2)) t0=$SECONDS
  shift 2
  say "waiting up to $((deadline - SECONDS))s for $what"
  until "$@"; do
    if ((SECONDS >= deadline)); then
      say "gave up after $((SECONDS - t0))s waiting for $what"
      return 1
    fi
    sleep 0.5
  done
}

# ------------------------------------------------------------------ up
t0=$SECONDS
# The watchdog takes the cluster down even if this script is killed outright
# (a CTest timeout). The claim controller runs in kube-controller-manager, so
# it is asked for whatever the caller's environment says.
out="$(TALLY_E2E_OWNER_PID=$$ TALLY_E2E_CONTROLLER_MANAGER=1 "$cluster/up" --name "$name")" ||
  fail "up --name $name failed"
say "up took $((SECONDS - t0))s"
[[ "$(tail -n 1 <<<"$out")" == "export KUBECONFIG="* ]] || fail "last line of up is not an export of KUBECONFIG"
eval "$out"
k() { "$TALLY_E2E_BIN/kubectl" "$@"; }
# get ARGS...: kubectl get's output, empty when it fails (the check then says so).
get() { k get "$@" 2>/dev/null || true; }
state="$TALLY_E2E_STATE"

kcm_pid="$(cat "$state/pids/kube-controller-manager.pid" 2>/dev/null || true)"
kcm_cmd="$(tr '\0' ' ' 2>/dev/null <"/proc/${kcm_pid:-0}/cmdline" || true)"
check_has "kube-controller-manager runs with the resourceclaim-controller" resourceclaim-controller "$kcm_cmd"
check_eq "the API server serves resource.k8s.io/v1" resource.k8s.io/v1 \
  "$(k api-versions 2>/dev/null | grep -x resource.k8s.io/v1 || true)"

# ----------------------------------------------------- node and driver
fix_out="$("$TALLY_E2E_BIN/tally-fixtures" nodes --count 1 --prefix dra-node- --resource none \
  --ready=false --wait-ready --timeout 120s 2>&1)" || fail "tally-fixtures nodes: $fix_out"
check_eq "kwok made $node Ready" True \
  "$(get node "$node" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}')"

# The DeviceClass and, as the driver's kubelet plugin would publish it, the
# node's one ResourceSlice of its one pool.
k apply -f - >/dev/null <<EOF || fail "creating the DeviceClass and the ResourceSlice"
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: $driver}
spec:
  selectors:
  - cel: {expression: 'device.driver == "$driver"'}
---
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: $node-$driver}
spec:
  driver: $driver
  nodeName: $node
  pool: {name: $node, generation: 1, resourceSliceCount: 1}
  devices:
  - name: gpu-0
    attributes:
      productName: {string: H200}
    capacity:
      memory: {value: 141Gi}
  - name: gpu-1
    attributes:
      productName: {string: H200}
    capacity:
      memory: {value: 141Gi}
EOF
check_eq "the ResourceSlice keeps its devices, attributes and capacity" "gpu-0 H200 141Gi gpu-1 H200 141Gi " \
  "$(get resourceslice "$node-$driver" -o jsonpath='{range .spec.devices[*]}{.name} {.attributes.productName.string} {.capacity.memory.value} {end}')"

# claim_template NAME REQUEST COUNT; dra_pod NAME CLAIM TEMPLATE
claim_template() {
  cat <<EOF
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: $1, namespace: default}
spec:
  spec:
    devices:
      requests:
      - name: $2
        exactly: {deviceClassName: $driver, allocationMode: ExactCount, count: $3}
EOF
}
dra_pod() {
  cat <<EOF
apiVersion: v1
kind: Pod
metadata: {name: $1, namespace: default}
spec:
  schedulerName: default-scheduler
  resourceClaims:
  - {name: $2, resourceClaimTemplateName: $3}
  containers:
  - name: main
    image: registry.invalid/tally/cuda-sample:1
    resources:
      claims: [{name: $2}]
EOF
}

# ------------------------------------------------- one device, one pod
{ claim_template one-gpu gpu 1; echo ---; dra_pod dra-one gpu one-gpu; } | k apply -f - >/dev/null ||
  fail "creating the ResourceClaimTemplate one-gpu and the pod dra-one"
# The claim controller records the generated claim's name in the pod's status.
claim_of() { get pod "$1" -o jsonpath='{.status.resourceClaimStatuses[?(@.name=="'"$2"'")].resourceClaimName}'; }
has_claim() { [[ -n "$(claim_of "$1" "$2")" ]]; }
wait_for "kube-controller-manager to create dra-one's ResourceClaim (pod status.resourceClaimStatuses)" 60 \
  has_claim dra-one gpu || fail "no ResourceClaim for dra-one (claims: $(get resourceclaims -o name | tr '\n' ' '))"
claim="$(claim_of dra-one gpu)"
check_match "the claim is named <pod>-<claim>-<suffix>" '^dra-one-gpu-[a-z0-9]{5}$' "$claim"
pod_uid="$(get pod dra-one -o jsonpath='{.metadata.uid}')"
check_eq "the claim's annotation resource.kubernetes.io/pod-claim-name" gpu \
  "$(get resourceclaim "$claim" -o jsonpath='{.metadata.annotations.resource\.kubernetes\.io/pod-claim-name}')"
check_eq "the claim is owned by the pod (controller reference)" "Pod dra-one $pod_uid true" \
  "$(get resourceclaim "$claim" -o jsonpath='{.metadata.ownerReferences[0].kind} {.metadata.ownerReferences[0].name} {.metadata.ownerReferences[0].uid} {.metadata.ownerReferences[0].controller}')"
check_has "the claim was written by kube-controller-manager (managedFields)" " kube-controller-manager/Update/ " \
  " $(get resourceclaim "$claim" --show-managed-fields -o jsonpath='{range .metadata.managedFields[*]}{.manager}/{.operation}/{.subresource} {end}')"
check_eq "the claim copies the template's request" "gpu $driver ExactCount 1" \
  "$(get resourceclaim "$claim" -o jsonpath='{.spec.devices.requests[0].name} {.spec.devices.requests[0].exactly.deviceClassName} {.spec.devices.requests[0].exactly.allocationMode} {.spec.devices.requests[0].exactly.count}')"

reserved_for() { get resourceclaim "$1" -o jsonpath='{range .status.reservedFor[*]}{.resource}/{.name}/{.uid} {end}'; }
is_reserved() { [[ -n "$(reserved_for "$1")" ]]; }
wait_for "kube-scheduler to allocate $claim and reserve it for dra-one" 60 is_reserved "$claim" ||
  fail "$claim not reserved (status: $(get resourceclaim "$claim" -o jsonpath='{.status}'))"
results="$(get resourceclaim "$claim" -o jsonpath='{range .status.allocation.devices.results[*]}{.request} {.driver} {.pool} {.device};{end}')"
check_match "the claim is allocated one device of the node's pool" "^gpu $driver $node gpu-[01];\$" "$results"
device_one="${results##* }"
device_one="${device_one%;}"
check_eq "the claim is reserved for the pod" "pods/dra-one/$pod_uid " "$(reserved_for "$claim")"
check_eq "the allocation's node selector names the node" "$node" \
  "$(get resourceclaim "$claim" -o jsonpath='{.status.allocation.nodeSelector.nodeSelectorTerms[0].matchFields[0].values[*]}')"

phase_is() { [[ "$(get pod "$1" -o jsonpath='{.status.phase}')" == "$2" ]]; }
wait_for "dra-one to be Running" 60 phase_is dra-one Running ||
  fail "dra-one is not Running (status: $(get pod dra-one -o jsonpath='{.status}'))"
check_eq "dra-one is bound to the ResourceSlice's node" "$node" "$(get pod dra-one -o jsonpath='{.spec.nodeName}')"
check_eq "dra-one PodScheduled" True \
  "$(get pod dra-one -o jsonpath='{.status.conditions[?(@.type=="PodScheduled")].status}')"

# --------------------------------- two devices while one is taken: refused
{ claim_template two-gpus gpus 2; echo ---; dra_pod dra-two gpus two-gpus; } | k apply -f - >/dev/null ||
  fail "creating the ResourceClaimTemplate two-gpus and the pod dra-two"
# Decided: marked Unschedulable, or (wrongly) bound; the checks tell which.
decided() {
  [[ "$(get pod dra-two -o jsonpath='{.status.conditions[?(@.type=="PodScheduled")].reason}/{.spec.nodeName}')" != / ]]
}
wait_for "kube-scheduler to decide on dra-two (Unschedulable expected)" 60 decided ||
  fail "kube-scheduler did not decide on dra-two (status: $(get pod dra-two -o jsonpath='{.status}'))"
check_eq "dra-two is not bound while one device is taken" "" "$(get pod dra-two -o jsonpath='{.spec.nodeName}')"
cond="$(get pod dra-two -o jsonpath='{.status.conditions[?(@.type=="PodScheduled")].status} {.status.conditions[?(@.type=="PodScheduled")].reason}: {.status.conditions[?(@.type=="PodScheduled")].message}')"
check_has "dra-two PodScheduled=False Unschedulable" "False Unschedulable:" "$cond"
check_has "the condition names DRA's reason" "cannot allocate all claims" "$cond"
claim_two="$(claim_of dra-two gpus)"
check_match "dra-two's claim was created" '^dra-two-gpus-[a-z0-9]{5}$' "$claim_two"
sleep 3
check_eq "dra-two stays Pending and unbound" "Pending/" "$(get pod dra-two -o jsonpath='{.status.phase}/{.spec.nodeName}')"
check_eq "dra-two's claim stays unallocated" "" "$(get resourceclaim "$claim_two" -o jsonpath='{.status.allocation}')"
check_eq "dra-one keeps $device_one" "$device_one" \
  "$(get resourceclaim "$claim" -o jsonpath='{.status.allocation.devices.results[*].device}')"

# ------------------------------ the device freed: the claim goes, dra-two runs
k delete pod dra-one --wait=true --timeout=60s >/dev/null 2>&1 || fail "deleting dra-one"
claim_gone() { [[ -z "$(get resourceclaim "$claim" --ignore-not-found -o name)" ]]; }
wait_for "dra-one's claim $claim to be deleted after its pod" 60 claim_gone ||
  fail "$claim still exists (status: $(get resourceclaim "$claim" -o jsonpath='{.status}'))"
pass "dra-one's claim is gone with its pod"
wait_for "dra-two to be Running once both devices are free" 90 phase_is dra-two Running ||
  fail "dra-two is not Running (status: $(get pod dra-two -o jsonpath='{.status}'))"
check_eq "dra-two is bound to the node" "$node" "$(get pod dra-two -o jsonpath='{.spec.nodeName}')"
check_eq "dra-two's claim holds both devices" "gpu-0 gpu-1" \
  "$(get resourceclaim "$claim_two" -o jsonpath='{.status.allocation.devices.results[*].device}' | tr ' ' '\n' | sort | tr '\n' ' ' | sed 's/ $//')"
check_eq "dra-two's claim is reserved for it" "pods/dra-two/$(get pod dra-two -o jsonpath='{.metadata.uid}') " \
  "$(reserved_for "$claim_two")"
