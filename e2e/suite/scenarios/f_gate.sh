# shellcheck shell=bash
# (f) A closed pool gate keeps new pods Pending with the unresolvable reason
# while running pods stay untouched. A pod runs in pool h200; then the pool's
# creation gate closes (class status: gateFailureId + condition
# CreationOpen=False, as the controller's audit writes it). A new pod stays
# Pending: every node is FailedAndUnresolvable (kube-scheduler does not even
# try preemption), the message names the pool and the failure id; the running
# pod keeps its node, its UID and its phase.
class_h200
nodes h200- 2 --mode vm-passthrough --resource nvidia.com/GH100_H200_SXM_141GB=4
namespace team
N="$(ns team)"
before="$(pod before "$N" 'nvidia.com/GH100_H200_SXM_141GB: "1"' kind=before)"
after="$(pod after "$N" 'nvidia.com/GH100_H200_SXM_141GB: "1"' kind=after)"
extender_sees "both nodes, class $(cls h200) and namespace $N" "$before" "$ID-h200-0" "$ID-h200-1"
k apply -f - >/dev/null <<<"$before" || fatal "creating pod before"
wait_until 60 pod_running_on "$N" before || fail "pod before did not run while the gate was open"
node_before="$(pod_node "$N" before)"
uid_before="$(k get pod -n "$N" before -o jsonpath='{.metadata.uid}')"

now="$(date -u +%Y-%m-%dT%H:%M:%SZ)"
fid="$(cls h200)-e2e-$$"
status_patch gpudeviceclass "" "$(cls h200)" "{\"status\":{\"gateFailureId\":\"$fid\",\"conditions\":[{\"type\":\"CreationOpen\",\"status\":\"False\",\"reason\":\"AuditFailed\",\"message\":\"e2e: audit finding\",\"lastTransitionTime\":\"$now\"}]}}"
check_eq "class status shows the gate closed" "False $fid" \
  "$(k get gpudeviceclass "$(cls h200)" -o jsonpath='{.status.conditions[?(@.type=="CreationOpen")].status} {.status.gateFailureId}')"
closed="creation in pool $(cls h200) is closed by a failed audit ($fid)"

if [[ "${TALLY_E2E_IN_CLUSTER:-0}" == 1 ]]; then
  # Tally's controller runs in the cluster (the kind path): its GPU pod webhook
  # refuses the new pod at the door, with the same reason. It runs on a server
  # dry run too (sideEffects NoneOnDryRun): wait until it refuses there.
  refused_at_door() { ! out="$(k create --dry-run=server -f - <<<"$after" 2>&1)" && [[ "$out" == *"[GateClosed]"* ]]; }
  wait_until 30 refused_at_door || fatal "the pod webhook did not see the closed gate within 30 s: ${out:-admitted}"
  out=""
  if out="$(k apply -f - <<<"$after" 2>&1)"; then
    fail "pod after was admitted while the gate was closed"
  fi
  say "after: $out"
  check_has "the pod webhook refuses the new pod: GateClosed" "[GateClosed]" "$out"
  check_has "reason: the pool gate is closed, with the failure id" \
    "creation in pool $(cls h200) is closed by a failed audit ($fid)" "$out"
else
  extender_sees "the closed gate of class $(cls h200)" "$after" "$ID-h200-0~$closed" "$ID-h200-1~$closed"
  k apply -f - >/dev/null <<<"$after" || fatal "creating pod after"
  wait_until 60 pod_is_unschedulable "$N" after || true
  wait_until 30 has_failed_event "$N" after || true
  stays_for 3 "new pod stays unbound" pod_unbound "$N" after
  msg="$(pod_unsched "$N" after)"
  say "after: $msg"
  check_has "new pod is Unschedulable" "Unschedulable:" "$msg"
  check_has "reason: the pool gate is closed, with the failure id" \
    "creation in pool $(cls h200) is closed by a failed audit ($fid)" "$msg"
  ev="$(failed_events "$N" after)"
  check_has "unresolvable: kube-scheduler does not look for preemption victims" "Preemption is not helpful" "$ev"
  check_lacks "no node is reported as resolvable" "No preemption victims" "$ev"
fi

# Nothing may evict or replace the running pod while the gate is closed.
untouched() {
  [[ "$(k get pod -n "$N" before -o jsonpath='{.spec.nodeName} {.metadata.uid} {.status.phase} {.metadata.deletionTimestamp}')" == "$node_before $uid_before Running " ]]
}
stays_for 5 "running pod untouched while the gate is closed" untouched
check_eq "running pod keeps its node" "$node_before" "$(pod_node "$N" before)"
check_eq "running pod keeps its UID (not recreated)" "$uid_before" "$(k get pod -n "$N" before -o jsonpath='{.metadata.uid}')"
check_eq "running pod still Running, not being deleted" "Running " \
  "$(k get pod -n "$N" before -o jsonpath='{.status.phase} {.metadata.deletionTimestamp}')"
