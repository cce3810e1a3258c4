# shellcheck shell=bash
# (d) A pod that names a VMI in its owner reference (and carries the launcher
# label) but is not in the VMI's status.activePods proves nothing: it is raw
# usage and cannot borrow the VMI's devices.
#   h200-0: 4 H200, 2 held by another tenant's stopped-VM device (Tally: 2 free).
#   h200-1: 4 H200, all held by GPUDevice vm1-gpus (Attached to VMI vm1, whose
#   activePods lists only its real launcher).
# fake-4 (asks 4) fits both nodes for kube-scheduler but must stay Pending;
# fake-2 (asks 2) lands on h200-0 and is charged there: a raw pod asking 1
# then finds h200-0 full by Tally (kube-scheduler still sees 2 free).
# In the cluster (the kind path) Tally's launcher webhook pins every GPU pod
# owned by a VMI to the node of that VMI's devices when it is created (a pin
# only narrows where a pod may run): both fakes are pinned to h200-1 and must
# stay Pending there as raw usage (kube-scheduler alone would put either on
# h200-1's 4 free devices); h200-0 keeps its 2 free units for a raw pod.
class_h200
nodes h200- 2 --mode vm-passthrough --resource nvidia.com/GH100_H200_SXM_141GB=4
namespace vms
namespace other
N="$(ns vms)"
gpudevice "$(ns other)" parked "$(cls h200)" 2 Bound "$ID-h200-0"
# The device exists (held on h200-1) before its VM: Tally's VMI webhook, where
# it runs (the kind path), refuses a VM naming a device that does not exist.
# It is attached once the VMI has a uid.
gpudevice "$N" vm1-gpus "$(cls h200)" 4 Bound "$ID-h200-1"
uid="$(vmi "$N" vm1 nvidia.com/GH100_H200_SXM_141GB 4 '["vm1-gpus"]')"
[[ -n "$uid" ]] || fatal "VMI vm1 has no uid"
gpudevice "$N" vm1-gpus "$(cls h200)" 4 Attached "$ID-h200-1" vm1 "$uid"
# The real launcher is some other pod (its UID only; it is not the subject).
status_patch vmi "$N" vm1 "{\"status\":{\"phase\":\"Running\",\"activePods\":{\"00000000-0000-4000-8000-00000000e2e0\":\"$ID-h200-1\"}}}"
fake4="$(POD_OWNER_VMI="vm1 $uid" pod fake-4 "$N" 'nvidia.com/GH100_H200_SXM_141GB: "4"' kind=fake)"
extender_sees "both held devices and VMI vm1" "$fake4" \
  "$ID-h200-0~(2 held by GPUDevices); pod needs 4" "$ID-h200-1~(4 held by GPUDevices); pod needs 4"

k apply -f - >/dev/null <<<"$fake4" || fatal "creating fake-4"
wait_until 60 pod_is_unschedulable "$N" fake-4 || true
stays_for 2 "fake-4 is not placed on the VMI's devices" pod_unbound "$N" fake-4
msg="$(pod_unsched "$N" fake-4)"
say "fake-4: $msg"
check_has "reason: the VMI's units are held, the fake launcher needs all 4" \
  "with 0 of 4 nvidia.com/GH100_H200_SXM_141GB free (4 held by GPUDevices); pod needs 4" "$msg"
check_lacks "fake-4 is not treated as a launcher" "launches VMI" "$msg"

pinned_to() { # POD: the node names of the pod's required node affinity (matchFields)
  k get pod -n "$N" "$1" \
    -o jsonpath='{.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[*].matchFields[*].values[*]}'
}
if in_cluster; then
  check_eq "the launcher webhook pinned fake-4 to vm1's devices' node" "$ID-h200-1" "$(pinned_to fake-4)"
fi

POD_OWNER_VMI="vm1 $uid" pod fake-2 "$N" 'nvidia.com/GH100_H200_SXM_141GB: "2"' kind=fake | k apply -f - >/dev/null ||
  fatal "creating fake-2"
if in_cluster; then
  check_eq "the launcher webhook pinned fake-2 to vm1's devices' node" "$ID-h200-1" "$(pinned_to fake-2)"
  wait_until 60 pod_is_unschedulable "$N" fake-2 || true
  stays_for 2 "fake-2 is not placed on the VMI's devices" pod_unbound "$N" fake-2
  msg="$(pod_unsched "$N" fake-2)"
  say "fake-2: $msg"
  check_has "reason: fake-2 is raw usage, the VMI's 4 units are held" \
    "with 0 of 4 nvidia.com/GH100_H200_SXM_141GB free (4 held by GPUDevices); pod needs 2" "$msg"
  check_lacks "fake-2 is not treated as a launcher" "launches VMI" "$msg"
  # The Pending fakes hold nothing: h200-0 still serves its 2 free units.
  pod raw-2 "$N" 'nvidia.com/GH100_H200_SXM_141GB: "2"' kind=raw | k apply -f - >/dev/null || fatal "creating raw-2"
  raw2_bound() { [[ -n "$(pod_node "$N" raw-2)" ]]; }
  wait_until 60 raw2_bound || fail "raw-2 was not bound"
  check_eq "raw-2 takes the 2 free units of h200-0" "$ID-h200-0" "$(pod_node "$N" raw-2)"
else
  fake2_bound() { [[ -n "$(pod_node "$N" fake-2)" ]]; }
  wait_until 60 fake2_bound || fail "fake-2 was not bound"
  check_eq "fake-2 goes to the free node, not the VMI's" "$ID-h200-0" "$(pod_node "$N" fake-2)"
  raw1="$(pod raw-1 "$N" 'nvidia.com/GH100_H200_SXM_141GB: "1"' kind=raw)"
  extender_sees "fake-2 bound on h200-0" "$raw1" \
    "$ID-h200-0~with 0 of 4 nvidia.com/GH100_H200_SXM_141GB free (2 held by GPUDevices); pod needs 1"
  k apply -f - >/dev/null <<<"$raw1" || fatal "creating raw-1"
  wait_until 60 pod_is_unschedulable "$N" raw-1 || true
  stays_for 2 "raw-1 finds no room" pod_unbound "$N" raw-1
  msg="$(pod_unsched "$N" raw-1)"
  say "raw-1: $msg"
  check_has "fake-2 is charged as raw usage on h200-0" \
    "with 0 of 4 nvidia.com/GH100_H200_SXM_141GB free (2 held by GPUDevices); pod needs 1" "$msg"
fi
