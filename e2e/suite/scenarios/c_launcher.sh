# shellcheck shell=bash
# (c) A launcher pod goes only to its devices' node. VMI vm1 owns GPUDevice
# vm1-gpus (2 H200, Attached on h200-1). The test plays KubeVirt: it creates
# the launcher pod behind a scheduling gate, writes the pod's UID into the
# VMI's status.activePods, then lets the scheduler see it.
# Step 1: h200-1 is made infeasible for kube-scheduler itself (a NoSchedule
# taint the launcher does not tolerate); h200-0 is empty and would fit. The
# launcher must stay Pending with Tally's unresolvable LauncherWrongNode
# reason rather than land on h200-0. (Not a raw pod bound by nodeName taking
# 3 of the 4: 2 of them are held by vm1-gpus, and where Tally's pod doors
# run, the kind path, they refuse that pod NodeInsufficient, as they must.)
# Step 2: the taint goes; the launcher binds to h200-1.
class_h200
nodes h200- 2 --mode vm-passthrough --resource nvidia.com/GH100_H200_SXM_141GB=4
namespace vms
N="$(ns vms)"
# The device exists (held on h200-1) before its VM: Tally's VMI webhook, where
# it runs (the kind path), refuses a VM naming a device that does not exist.
# It is attached once the VMI has a uid.
gpudevice "$N" vm1-gpus "$(cls h200)" 2 Bound "$ID-h200-1"
uid="$(vmi "$N" vm1 nvidia.com/GH100_H200_SXM_141GB 2 '["vm1-gpus"]')"
[[ -n "$uid" ]] || fatal "VMI vm1 has no uid"
gpudevice "$N" vm1-gpus "$(cls h200)" 2 Attached "$ID-h200-1" vm1 "$uid"

k taint node "$ID-h200-1" tally.dev/e2e-closed=:NoSchedule >/dev/null || fatal "tainting h200-1"

POD_GATED=1 POD_OWNER_VMI="vm1 $uid" pod virt-launcher-vm1 "$N" 'nvidia.com/GH100_H200_SXM_141GB: "2"' kind=launcher |
  k apply -f - >/dev/null || fatal "creating the launcher pod"
puid="$(k get pod -n "$N" virt-launcher-vm1 -o jsonpath='{.metadata.uid}')"
status_patch vmi "$N" vm1 "{\"status\":{\"phase\":\"Scheduling\",\"activePods\":{\"$puid\":\"\"}}}"
check_eq "VMI lists the launcher in status.activePods" "$puid" \
  "$(k get vmi -n "$N" vm1 -o jsonpath='{.status.activePods}' | python3 -c 'import json,sys; print(*json.load(sys.stdin).keys())')"
# The extender knows the launcher (the VMI's activePods, its Attached device):
# asked about the free node h200-0 (the one kube-scheduler lets through), it
# pins the launcher to h200-1.
extender_sees "VMI vm1 launched by this pod, its devices on h200-1" "$(k get pod -n "$N" virt-launcher-vm1 -o json)" \
  "$ID-h200-0~pod $N/virt-launcher-vm1 launches VMI vm1 whose GPUs are held on node $ID-h200-1"
ungate "$N" virt-launcher-vm1

wait_until 60 pod_is_unschedulable "$N" virt-launcher-vm1 || true
wait_until 30 has_failed_event "$N" virt-launcher-vm1 || true
stays_for 3 "launcher not placed while its devices' node is closed" pod_unbound "$N" virt-launcher-vm1
msg="$(pod_unsched "$N" virt-launcher-vm1)"
say "launcher: $msg"
if [[ "${TALLY_E2E_IN_CLUSTER:-0}" == 1 ]]; then
  # Tally's launcher webhook runs in the cluster (the kind path): it pinned the
  # pod to the devices' node (matchFields metadata.name) at creation, so
  # kube-scheduler's NodeAffinity already keeps it off h200-0.
  check_has "the launcher webhook pinned the pod to its devices' node" "$ID-h200-1" \
    "$(k get pod -n "$N" virt-launcher-vm1 -o jsonpath='{.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[*].matchFields}')"
  check_has "reason: the other nodes fail the pinned node affinity" "didn't satisfy plugin(s) [NodeAffinity]" "$msg"
else
  check_has "reason: pinned to the devices' node" \
    "pod $N/virt-launcher-vm1 launches VMI vm1 whose GPUs are held on node $ID-h200-1" "$msg"
fi
check_has "the free node h200-0 is refused as unresolvable (no preemption)" "Preemption is not helpful" \
  "$(failed_events "$N" virt-launcher-vm1)"

k taint node "$ID-h200-1" tally.dev/e2e-closed- >/dev/null || fail "removing h200-1's taint"
launcher_bound() { [[ -n "$(pod_node "$N" virt-launcher-vm1)" ]]; }
wait_until 120 launcher_bound || fail "launcher not bound after its node was opened"
check_eq "launcher lands on its devices' node" "$ID-h200-1" "$(pod_node "$N" virt-launcher-vm1)"
status_patch vmi "$N" vm1 "{\"status\":{\"phase\":\"Running\",\"activePods\":{\"$puid\":\"$ID-h200-1\"}}}"
wait_until 60 pod_running_on "$N" virt-launcher-vm1 || fail "launcher did not reach Running"
check_eq "launcher Running" Running "$(pod_phase "$N" virt-launcher-vm1)"
