# shellcheck shell=bash
# (a) Whole-GPU and shared pods land only on nodes of the right GPU mode with
# free units. Every node below advertises the resource to kube-scheduler; only
# Tally knows which ones serve it, and how many units:
#   hami-0        pod-hami, nvidia.com/gpu=20, 2 GPUs in its inventory
#                 -> 2 x min(32768/8192, 100/25, 4) = 8 shares
#   hamiwrong-0   vm-passthrough but advertising nvidia.com/gpu=20 (stale plugin)
#   hamimoving-0  pod-hami switching to vm-passthrough (expected mode differs:
#                 it belongs to the vm-passthrough pool only)
#   h200-0        vm-passthrough, 2 whole H200
#   h200wrong-0   pod-hami advertising 8 H200 (stale plugin)
# 10 shared pods (1 share each) and 3 whole-GPU pods: exactly 8 + 2 bind, all on
# the right nodes; the rest stay Pending with Tally's reasons.
class_h200
class_shared
inv="$(inventory 2)"
nodes hami- 1 --mode pod-hami --resource nvidia.com/gpu=20 --inventory "$inv"
nodes hamiwrong- 1 --mode vm-passthrough --resource nvidia.com/gpu=20 --inventory "$inv"
nodes hamimoving- 1 --mode pod-hami --expected-mode vm-passthrough --resource nvidia.com/gpu=20 --inventory "$inv"
nodes h200- 1 --mode vm-passthrough --resource nvidia.com/GH100_H200_SXM_141GB=2
nodes h200wrong- 1 --mode pod-hami --resource nvidia.com/GH100_H200_SXM_141GB=8
namespace team
N="$(ns team)"
shared() { pod "shared-$1" "$N" 'nvidia.com/gpu: "1", nvidia.com/gpumem: "8192", nvidia.com/gpucores: "25"' kind=shared; }
whole() { pod "whole-$1" "$N" 'nvidia.com/GH100_H200_SXM_141GB: "1"' kind=whole; }
# Each kind passes only its right node: the extender holds all five nodes,
# both classes with their gates, and the namespace.
all_but() { local n; for n in hami-0 hamiwrong-0 hamimoving-0 h200-0 h200wrong-0; do [[ $n == "$1" ]] || echo "$ID-$n~"; done; }
mapfile -t others < <(all_but hami-0)
extender_sees "the five nodes, class $(cls shared) and namespace $N" "$(shared 0)" "$ID-hami-0" "${others[@]}"
mapfile -t others < <(all_but h200-0)
extender_sees "the five nodes, class $(cls h200) and namespace $N" "$(whole 0)" "$ID-h200-0" "${others[@]}"

{
  for i in $(seq 0 9); do shared "$i"; done
  for i in 0 1 2; do whole "$i"; done
} | k apply -f - >/dev/null || fatal "creating the pods"

wait_settled "$N" kind=shared 10
wait_settled "$N" kind=whole 3
check_eq "shared pods bound (8 shares served)" 8 "$(count_bound "$N" kind=shared)"
check_eq "shared pods only on the pod-hami node" "$ID-hami-0" "$(nodes_of "$N" kind=shared)"
check_eq "whole-GPU pods bound (2 H200 served)" 2 "$(count_bound "$N" kind=whole)"
check_eq "whole-GPU pods only on the vm-passthrough node" "$ID-h200-0" "$(nodes_of "$N" kind=whole)"
for n in hamiwrong-0 hamimoving-0 h200wrong-0; do
  check_eq "no pod on wrong-mode node $n" 0 "$(k get pods -A --field-selector "spec.nodeName=$ID-$n" --no-headers 2>/dev/null | wc -l)"
done
check_eq "bound shared pods reach Running" 8 \
  "$(k get pods -n "$N" -l kind=shared --field-selector status.phase=Running --no-headers 2>/dev/null | wc -l)"

p="$(first_pending "$N" kind=shared)"
msg="$(pod_unsched "$N" "$p")"
say "pending shared pod $p: $msg"
check_has "pending shared pod is Unschedulable" "Unschedulable:" "$msg"
check_has "reason: the pod-hami node's shares are used up" "with 0 of 8 nvidia.com/gpu free" "$msg"
# The wrong-mode node and the node switching modes (it serves its expected
# mode only) give the same reason; kube-scheduler counts them together.
check_has "reason: the wrong-mode and the mode-switching node serve no shared class" \
  "2 node(s) in GPU mode 'vm-passthrough' serve no GPU class for nvidia.com/gpu" "$msg"
p="$(first_pending "$N" kind=whole)"
msg="$(pod_unsched "$N" "$p")"
say "pending whole-GPU pod $p: $msg"
# h200-0 is full for kube-scheduler too (2 allocatable, 2 used), so only the
# wrong-mode node reaches Tally here.
check_has "reason: the pod-hami node advertising H200 serves none" \
  "in GPU mode 'pod-hami' serve no GPU class for nvidia.com/GH100_H200_SXM_141GB" "$msg"
