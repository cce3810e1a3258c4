# shellcheck shell=bash
# (b) An order placed by Tally's own binder: a GPUDevice of 3 with no status
# is created; tally-controller's device binder places it (Bound, on the only
# node with 3 free units, with its finalizer and condition); the extender then
# keeps raw pods off those units: of three one-GPU pods kube-scheduler alone
# would all fit on the node, exactly one binds. Deleting the device releases
# its units: the binder records it, the finalizer goes, a new pod binds there.
# Local path: tally-controller started here, leading alone. In the cluster
# (the kind path): the binder of the tally-controller Deployment's leader, and
# the order goes through its GPUDevice webhook.
if ((EXTERNAL)) && ! in_cluster; then
  skip "the device binder needs the local control plane or Tally's controller in the cluster (TALLY_E2E_IN_CLUSTER=1)"
fi
class_h200
nodes h200- 1 --mode vm-passthrough --resource nvidia.com/GH100_H200_SXM_141GB=4
namespace tenant
N="$(ns tenant)"
if in_cluster; then
  leader="$(k -n "$TALLY_NS" get lease tally-controller -o jsonpath='{.spec.holderIdentity}' 2>/dev/null)"
  [[ -n "$leader" ]] || fatal "no tally-controller replica holds the Lease $TALLY_NS/tally-controller"
  say "the binder is the leader's: $leader"
else
  controller_start
fi
k apply -f - >/dev/null <<EOF2 || fatal "creating GPUDevice held"
apiVersion: gpu.tally.dev/v1alpha1
kind: GPUDevice
metadata: {name: held, namespace: $N, labels: {tally.dev/e2e: "$ID"}}
spec: {class: $(cls h200), count: 3}
EOF2
t0=$SECONDS
device_bound() { [[ "$(k get gpudevice -n "$N" held -o jsonpath='{.status.phase}')" == Bound ]]; }
wait_until 30 device_bound || fatal "the binder did not place GPUDevice held within 30 s"
say "GPUDevice held Bound within $((SECONDS - t0)) s"
check_eq "placed on the node" "$ID-h200-0" "$(k get gpudevice -n "$N" held -o jsonpath='{.status.node}')"
check_eq "with the binder's finalizer" "gpu.tally.dev/release" \
  "$(k get gpudevice -n "$N" held -o jsonpath='{.metadata.finalizers[0]}')"
check_eq "condition Bound=True, reason Placed" "True Placed" \
  "$(k get gpudevice -n "$N" held -o jsonpath='{.status.conditions[?(@.type=="Bound")].status} {.status.conditions[?(@.type=="Bound")].reason}')"
extender_sees "node h200-0, class $(cls h200) and namespace $N" \
  "$(pod raw-0 "$N" 'nvidia.com/GH100_H200_SXM_141GB: "1"' kind=raw)" "$ID-h200-0"
extender_sees "GPUDevice held bound with 3 units" "$(pod raw-3 "$N" 'nvidia.com/GH100_H200_SXM_141GB: "2"' kind=raw)" \
  "$ID-h200-0~with 1 of 4 nvidia.com/GH100_H200_SXM_141GB free (3 held by GPUDevices); pod needs 2"

for i in 0 1 2; do pod "raw-$i" "$N" 'nvidia.com/GH100_H200_SXM_141GB: "1"' kind=raw; done | k apply -f - >/dev/null ||
  fatal "creating the pods"
wait_settled "$N" kind=raw 3
check_eq "one raw pod bound next to the held device" 1 "$(count_bound "$N" kind=raw)"
p="$(first_pending "$N" kind=raw)"
msg="$(pod_unsched "$N" "$p")"
say "pending pod $p: $msg"
check_has "reason: 3 units held by GPUDevices" "with 0 of 4 nvidia.com/GH100_H200_SXM_141GB free (3 held by GPUDevices)" "$msg"

k delete gpudevice -n "$N" held --timeout=30s >/dev/null || fail "deleting GPUDevice held did not finish (finalizer kept)"
check_has "the release is recorded as an Event" "Released" \
  "$(k get events -n "$N" --field-selector involvedObject.name=held -o jsonpath='{.items[*].reason}')"
# kube-scheduler retries the two waiting pods only on its own cluster events
# (a GPUDevice is not one of them), so a new pod shows the units are back.
pod raw-late "$N" 'nvidia.com/GH100_H200_SXM_141GB: "1"' kind=late | k apply -f - >/dev/null || fatal "creating raw-late"
late_bound() { [[ -n "$(pod_node "$N" raw-late)" ]]; }
wait_until 30 late_bound || fail "a pod created after the release was not bound: the released units did not come back"
check_eq "a pod created after the release binds on the node" "$ID-h200-0" "$(pod_node "$N" raw-late)"
