# shellcheck shell=bash
# (e) Org B cannot take the idle devices backing org A's active reservation.
# Pool h200: 2 nodes x 4 = 8 units. The ledger holds an active record
# reserving 4 devices for org-a, which uses none of them yet (idle). Org B's 6
# one-GPU pods: 4 bind, 2 stay Pending with the reservation reason. Org A's 4
# pods then all bind (its own reservation is not held against it).
#
# Local path: the record is a file of the extender's ledger folder (no
# controller runs, so no audit holds the pool's gate).
# In the cluster (the kind path): the record goes into the ledger ConfigMap that
# the scheduler's extender and the controller watch, and the controller audits
# the pool: an active reservation without its add-on closes the creation gate.
# So the test runs the runbook's assignment procedure as the people and HNC
# would (pending record -> gate closed while the transaction is in flight ->
# operator-only add-on in billing-plans assigned to org-a -> plan-quota written
# by Tally's quota controller, reported by "HNC" -> Organization status -> record
# committed active -> gate reopens), then the same checks.
if ((EXTERNAL)) && ! in_cluster; then
  skip "the reservation ledger of the extender in this cluster is unknown (not the kind path: TALLY_E2E_IN_CLUSTER unset)"
fi
if in_cluster && [[ -z "${TALLY_E2E_LEDGER_CONFIGMAP:-}" ]]; then
  skip "no ledger ConfigMap that Tally in the cluster reads (TALLY_E2E_LEDGER_CONFIGMAP, set by e2e/kind/run.sh)"
fi
class_h200
nodes h200- 2 --mode vm-passthrough --resource nvidia.com/GH100_H200_SXM_141GB=4
namespace org-a
namespace org-a-proj org-a
namespace org-b
namespace org-b-proj org-b
organization org-a
# In the cluster the quota controller gives every Organization a plan-quota
# (0 for keys no add-on grants), and the audit keeps every plan-quota within
# the pool beside the reservations (the capacity invariant): an Organization
# "B" would meet its own quota before the reservation. There org B's tree is a
# tenant outside any Organization, whose usage only the reservation limits.
if ! in_cluster; then organization org-b; fi

C="$(cls h200)"
ORG_A="$(ns org-a)"
KEY=requests.nvidia.com/GH100_H200_SXM_141GB
# class_status FIELD / class_condition TYPE: what the controller's pool auditor
# published in the class's status.
class_status() { k get gpudeviceclass "$C" -o jsonpath="{.status.$1}" 2>/dev/null; }
class_condition() {
  k get gpudeviceclass "$C" -o jsonpath="{.status.conditions[?(@.type==\"$1\")].status}" 2>/dev/null
}
# json_at KIND NS NAME PYTHON-EXPRESSION-ON-o: one value of an object, '' if absent.
json_at() {
  k get "$1" -n "$2" "$3" -o json 2>/dev/null | python3 -c "
import json, sys
o = json.load(sys.stdin)
try:
    v = $4
except (KeyError, TypeError):
    v = ''
print(v if v is not None else '')" 2>/dev/null
}
plan_hard() { json_at hrq "$ORG_A" plan-quota "o['spec']['hard']['$KEY']"; }
org_status_hard() {
  json_at organization "$ORG_A" "$ORG_A" "o['status']['quotaUsage']['accelerators']['$C']['devices']['hard']"
}

# HNC's part: plan-quota's status.hard follows its spec.hard.
hnc_reports() {
  local hard
  hard="$(k get hrq -n "$ORG_A" plan-quota -o jsonpath='{.spec.hard}')"
  [[ -n "$hard" ]] || hard='{}'
  k patch hrq -n "$ORG_A" plan-quota --subresource=status --type=merge -p "{\"status\":{\"hard\":$hard}}" >/dev/null ||
    fatal "reporting plan-quota's status.hard as HNC"
}

if in_cluster; then
  # kube-dc gives every Organization its HRQ plan-quota; Tally's quota
  # controller only applies its own keys there (and its Organization webhook
  # refuses a grant while the organization's hard quota is unknown).
  k apply -f - >/dev/null <<EOF2 || fatal "creating the HRQ plan-quota of $ORG_A"
apiVersion: hnc.x-k8s.io/v1alpha2
kind: HierarchicalResourceQuota
metadata: {name: plan-quota, namespace: $ORG_A, labels: {tally.dev/e2e: "$ID"}}
spec: {hard: {}}
EOF2
  R="gpu-res-$ID" # the ledger's id pattern: gpu-res-<ticket>
  ADDON="$ID-reserved"
  in_flight_is() { [[ "$(class_status inFlightTransaction)" == "$1" ]]; }
  gate_is() { [[ "$(class_condition CreationOpen)" == "$1" ]]; }
  # Cleanup (before the generic one): the Organization first, so that it never
  # holds an add-on of a pool that is gone or an add-on billing-plans lacks (an
  # audit finding of every pool); then the pool; then the add-on and the record.
  scenario_cleanup() {
    k delete organizations -A -l "tally.dev/e2e=$ID" --wait=true --timeout=60s >/dev/null 2>&1 || true
    k delete gpudeviceclass "$C" --wait=true --timeout=60s >/dev/null 2>&1 || true
    plans_addon "$ADDON" || true
    ledger_drop "$R"
  }
  plans_addon "$ADDON" "$C" 1 || fatal "adding the reservation add-on $ADDON to kube-dc/billing-plans"
  # 1. A pending record: creation freezes in the pool while it is in flight.
  ledger_record "$R" "$ORG_A" "$C" 4 pending "" "$ADDON"
  wait_until 60 in_flight_is "$R" || say "class status: $(k get gpudeviceclass "$C" -o jsonpath='{.status}')"
  check_eq "the controller reads the pending record from the ledger ConfigMap (transaction in flight)" "$R" \
    "$(class_status inFlightTransaction)"
  check_eq "creation in the pool is closed during the transaction" False "$(class_condition CreationOpen)"
  check_eq "the pool counts the reserved devices" 4 "$(class_status reservedDevices)"
  # 2. The exact operator-only add-on, assigned (the Organization webhook
  #    checks the change).
  #    A replica that has not seen the Organization yet refuses (CacheNotSynced): retried.
  assign() {
    k annotate --overwrite organization -n "$ORG_A" "$ORG_A" \
      "billing.kube-dc.com/addons=[{\"addonId\":\"$ADDON\",\"quantity\":4}]" >"$STATE/assign.out" 2>&1
  }
  wait_until 30 assign || fatal "assigning add-on $ADDON to $ORG_A: $(cat "$STATE/assign.out")"
  # 3. Tally's quota controller writes plan-quota; HNC (played here) reports it.
  plan_is_4() { [[ "$(plan_hard)" == 4 ]]; }
  wait_until 60 plan_is_4 || say "plan-quota: $(k get hrq -n "$ORG_A" plan-quota -o jsonpath='{.spec}' 2>&1)"
  check_eq "the quota controller writes plan-quota for the add-on" 4 "$(plan_hard)"
  hnc_reports
  org_is_4() { [[ "$(org_status_hard)" == 4 ]]; }
  wait_until 60 org_is_4 || true
  check_eq "the Organization's status reports the reserved devices" 4 "$(org_status_hard)"
  check_eq "still closed: the record is pending" False "$(class_condition CreationOpen)"
  # 4. The record committed active: the transaction ends, the gate reopens by itself.
  ledger_record "$R" "$ORG_A" "$C" 4 active "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$ADDON"
  open_again() { in_flight_is "" && gate_is True; }
  wait_until 60 open_again || say "class status: $(k get gpudeviceclass "$C" -o jsonpath='{.status}')"
  check_eq "creation reopens once the record is active" "True" "$(class_condition CreationOpen)"
  check_eq "no transaction in flight" "" "$(class_status inFlightTransaction)"
  check_eq "the invariant holds with the reservation" True "$(class_condition InvariantHolds)"
  check_eq "4 devices reserved" 4 "$(class_status reservedDevices)"
else
  ledger_record gpu-res-e2e-1 "$ORG_A" "$C" 4
fi

B="$(ns org-b-proj)"
A="$(ns org-a-proj)"
b_pod() { pod "b-$1" "$B" "nvidia.com/GH100_H200_SXM_141GB: \"${2:-1}\"" org=b; }
a_pod() { pod "a-$1" "$A" "nvidia.com/GH100_H200_SXM_141GB: \"${2:-1}\"" org=a; }
extender_sees "both nodes, class $C and namespace $B" "$(b_pod 0)" "$ID-h200-0" "$ID-h200-1"
extender_sees "namespace $A" "$(a_pod 0)" "$ID-h200-0" "$ID-h200-1"
# The extender reads the record (the ledger folder every second, or the
# ConfigMap): no filter answer of one pod shows it while all 8 units are free
# (each node's 4 fit before the pool's 4 left run out), but scoring does:
# breaking into an empty node costs a pod more when another organization's
# reservation is idle. So org B's pod asking 2 scores below org A's.
reservation_seen() {
  extender_reach || return 1
  local a b
  a="$(extender_ask prioritize "$(a_pod 0 2)" "$ID-h200-0" | awk '{print $2}')"
  b="$(extender_ask prioritize "$(b_pod 0 2)" "$ID-h200-0" | awk '{print $2}')"
  EXT_ANSWER="org A's pod scores '$a', org B's '$b' on h200-0"
  [[ -n "$a" && -n "$b" ]] && ((b < a))
}
t0=$SECONDS
wait_until 30 reservation_seen || fatal "the extender did not see org A's reservation within 30 s: $EXT_ANSWER"
say "the extender sees org A's idle reservation ($((SECONDS - t0)) s: $EXT_ANSWER)"
for i in $(seq 0 5); do b_pod "$i"; done | k apply -f - >/dev/null || fatal "creating org B's pods"
wait_settled "$B" org=b 6
check_eq "org B gets only the unreserved units" 4 "$(count_bound "$B" org=b)"
p="$(first_pending "$B" org=b)"
msg="$(pod_unsched "$B" "$p")"
say "org B pending pod $p: $msg"
check_has "pending org B pod is Unschedulable" "Unschedulable:" "$msg"
check_has "reason: idle reservation of another organization" \
  "pool $C has 0 unit(s) left after idle reservations of other organizations; pod needs 1" "$msg"

for i in $(seq 0 3); do a_pod "$i"; done | k apply -f - >/dev/null || fatal "creating org A's pods"
wait_settled "$A" org=a 4
check_eq "org A uses its reservation" 4 "$(count_bound "$A" org=a)"
check_eq "org B still has only 4" 4 "$(count_bound "$B" org=b)"
for n in 0 1; do
  used=$(($(k get pods -A -l "tally.dev/e2e=$ID" --field-selector "spec.nodeName=$ID-h200-$n" --no-headers 2>/dev/null | wc -l)))
  check_le "h200-$n not over-committed" 4 "$used"
done
