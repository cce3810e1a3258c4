# shellcheck shell=bash
# (g) An over-capacity pod stays Pending and its FailedScheduling event carries
# Tally's reason. Node a100-0 advertises 8 A100-10C (kube-scheduler fits a
# pod asking 6) but its vGPU inventory has 2 healthy parents with 1 created +
# 1 available slot each: Tally serves 4.
class_a100
nodes a100- 1 --mode vm-vgpu --resource nvidia.com/A100-10C=8 \
  --vgpu-type nvidia.com/A100-10C --vgpu-parents 2 --vgpu-total 4 --vgpu-created 1 --vgpu-available 1
namespace team
N="$(ns team)"
big="$(pod big "$N" 'nvidia.com/A100-10C: "6"' kind=big)"
extender_sees "node a100-0's vGPU inventory, class $(cls a100) and namespace $N" "$big" \
  "$ID-a100-0~with 4 of 4 nvidia.com/A100-10C free (0 held by GPUDevices); pod needs 6"
k apply -f - >/dev/null <<<"$big" || fatal "creating pod big"
wait_until 60 has_failed_event "$N" big || fail "no FailedScheduling event for pod big"
stays_for 3 "over-capacity pod stays unbound" pod_unbound "$N" big
check_eq "over-capacity pod stays Pending" Pending "$(pod_phase "$N" big)"
ev="$(failed_events "$N" big)"
say "FailedScheduling: $(head -n 1 <<<"$ev")"
check_has "event carries Tally's reason with the figures" \
  "with 4 of 4 nvidia.com/A100-10C free (0 held by GPUDevices); pod needs 6" "$ev"
check_lacks "the refusal is Tally's, not kube-scheduler's fit" "Insufficient nvidia.com/A100-10C" "$ev"
pod fits "$N" 'nvidia.com/A100-10C: "4"' kind=fits | k apply -f - >/dev/null || fatal "creating pod fits"
wait_until 60 pod_running_on "$N" fits || fail "a pod asking for the 4 served units did not run"
check_eq "a pod within Tally's 4 units runs on a100-0" "$ID-a100-0" "$(pod_node "$N" fits)"
check_eq "over-capacity pod still unbound" "" "$(pod_node "$N" big)"
