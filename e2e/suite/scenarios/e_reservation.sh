# shellcheck shell=bash
# (e) Org B cannot take the idle devices backing org A's active reservation.
# Pool h200: 2 nodes x 4 = 8 units. The ledger holds an active record
# reserving 4 devices for org-a, which uses none of them yet (idle). Org B's 6
# one-GPU pods: 4 bind, 2 stay Pending with the reservation reason. Org A's 4
# pods then all bind (its own reservation is not held against it).
needs_local "the ledger folder of the extender"
class_h200
nodes h200- 2 --mode vm-passthrough --resource nvidia.com/GH100_H200_SXM_141GB=4
namespace org-a
namespace org-a-proj org-a
namespace org-b
namespace org-b-proj org-b
organization org-a
organization org-b
ledger_record gpu-res-e2e-1 "$(ns org-a)" "$(cls h200)" 4
settle 3  # the ledger folder is re-read every second

B="$(ns org-b-proj)"
A="$(ns org-a-proj)"
for i in $(seq 0 5); do pod "b-$i" "$B" 'nvidia.com/GH100_H200_SXM_141GB: "1"' org=b; done | k apply -f - >/dev/null ||
  fatal "creating org B's pods"
wait_settled "$B" org=b 6
check_eq "org B gets only the unreserved units" 4 "$(count_bound "$B" org=b)"
p="$(first_pending "$B" org=b)"
msg="$(pod_unsched "$B" "$p")"
say "org B pending pod $p: $msg"
check_has "pending org B pod is Unschedulable" "Unschedulable:" "$msg"
check_has "reason: idle reservation of another organization" \
  "pool $(cls h200) has 0 unit(s) left after idle reservations of other organizations; pod needs 1" "$msg"

for i in $(seq 0 3); do pod "a-$i" "$A" 'nvidia.com/GH100_H200_SXM_141GB: "1"' org=a; done | k apply -f - >/dev/null ||
  fatal "creating org A's pods"
wait_settled "$A" org=a 4
check_eq "org A uses its reservation" 4 "$(count_bound "$A" org=a)"
check_eq "org B still has only 4" 4 "$(count_bound "$B" org=b)"
for n in 0 1; do
  used=$(( $(k get pods -A -l "tally.dev/e2e=$ID" --field-selector "spec.nodeName=$ID-h200-$n" --no-headers 2>/dev/null | wc -l) ))
  check_le "h200-$n not over-committed" 4 "$used"
done
