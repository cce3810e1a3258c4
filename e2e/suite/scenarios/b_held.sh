# shellcheck shell=bash
# (b) A held device (GPUDevice Bound, its VM stopped: no VMI runs) keeps raw
# pods off its units. Node h200-0 advertises 4 H200; the tenant holds 2 of them.
# kube-scheduler alone would fit 4 one-GPU pods there; with Tally exactly 2
# bind and the third stays Pending saying the units are held.
class_h200
nodes h200- 1 --mode vm-passthrough --resource nvidia.com/GH100_H200_SXM_141GB=4
namespace tenant
N="$(ns tenant)"
gpudevice "$N" parked "$(cls h200)" 2 Bound "$ID-h200-0"
check_eq "GPUDevice parked is Bound on h200-0" "Bound $ID-h200-0" \
  "$(k get gpudevice -n "$N" parked -o jsonpath='{.status.phase} {.status.node}')"
check_eq "kube-scheduler sees 4 H200 allocatable on h200-0" 4 \
  "$(k get node "$ID-h200-0" -o jsonpath='{.status.allocatable.nvidia\.com/GH100_H200_SXM_141GB}')"
# A raw pod fits; one asking 3 meets the 2 held units.
extender_sees "node h200-0, class $(cls h200) and namespace $N" \
  "$(pod raw-0 "$N" 'nvidia.com/GH100_H200_SXM_141GB: "1"' kind=raw)" "$ID-h200-0"
extender_sees "GPUDevice parked holding 2 units" "$(pod raw-3 "$N" 'nvidia.com/GH100_H200_SXM_141GB: "3"' kind=raw)" \
  "$ID-h200-0~with 2 of 4 nvidia.com/GH100_H200_SXM_141GB free (2 held by GPUDevices); pod needs 3"

for i in 0 1 2; do pod "raw-$i" "$N" 'nvidia.com/GH100_H200_SXM_141GB: "1"' kind=raw; done | k apply -f - >/dev/null ||
  fatal "creating the pods"
wait_settled "$N" kind=raw 3
check_eq "raw pods bound next to the held device" 2 "$(count_bound "$N" kind=raw)"
check_eq "they are on h200-0" "$ID-h200-0" "$(nodes_of "$N" kind=raw)"
p="$(first_pending "$N" kind=raw)"
msg="$(pod_unsched "$N" "$p")"
say "pending pod $p: $msg"
check_has "pending raw pod is Unschedulable" "Unschedulable:" "$msg"
check_has "reason: 2 units held by GPUDevices" "with 0 of 4 nvidia.com/GH100_H200_SXM_141GB free (2 held by GPUDevices)" "$msg"
check_eq "the held device is untouched" "Bound $ID-h200-0" \
  "$(k get gpudevice -n "$N" parked -o jsonpath='{.status.phase} {.status.node}')"
