#!/usr/bin/env bash
# Tally demo on a local control plane (`make demo`, `make demo-down`).
#
#   e2e/demo/demo.sh          bring up the cluster `demo`, GPU pools, tenants,
#                             a reservation and tally-extender wired into
#                             kube-scheduler; schedule a demo workload; print
#                             the capacity report. The cluster keeps running.
#   e2e/demo/demo.sh down     stop tally-extender, tally-controller and the cluster.
#
# The last two lines printed are
#   export KUBECONFIG=<admin kubeconfig of the demo cluster>
#   export TALLY_EXTENDER_URL=<verbs at $TALLY_EXTENDER_URL/filter, /prioritize, ...>
# so `eval "$(e2e/demo/demo.sh | tail -n 2)"` sets up a shell.
#
# Environment: BUILD (build tree with bin/tally-extender and bin/tallyctl,
# default <repo>/build), TALLY_DEMO_PORT (extender port, default a free one),
# plus those of e2e/cluster/up (TALLY_E2E_ROOT, TALLY_BIN_DIR, ...).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
cluster="$repo/e2e/cluster"
name=demo
root="${TALLY_E2E_ROOT:-/tmp/tally-e2e}"
state="$root/$name"
build="${BUILD:-$repo/build}"
log() { printf '[demo] %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

extender_pidfile="$state/pids/demo-tally-extender.pid"
controller_pidfile="$state/pids/demo-tally-controller.pid"

stop_process() { # pidfile binary-name
  [[ -f "$1" ]] || return 0
  local pid
  pid="$(cat "$1")"
  # Only a process that still is ours (its command line names the state folder).
  if [[ -n "$pid" ]] && tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q "$2.*$state/"; then
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -0 "$pid" 2>/dev/null && kill -KILL "$pid" 2>/dev/null || true
    log "stopped $2 (pid $pid)"
  fi
  rm -f "$1"
}
stop_tally() {
  stop_process "$controller_pidfile" tally-controller
  stop_process "$extender_pidfile" tally-extender
}

case "${1:-up}" in
  down)
    stop_tally
    "$cluster/down" --name "$name" >&2
    exit 0
    ;;
  up) ;;
  -h|--help) sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
  *) die "unknown argument '$1' (up or down)" ;;
esac

extender="$build/bin/tally-extender"
controller="$build/bin/tally-controller"
tallyctl="$build/bin/tallyctl"
[[ -x "$extender" ]] || die "$extender not built (make build, or set BUILD=<build tree>)"
[[ -x "$controller" ]] || die "$controller not built (make build, or set BUILD=<build tree>)"
[[ -x "$tallyctl" ]] || die "$tallyctl not built (make build, or set BUILD=<build tree>)"

# ------------------------------------------------------------------ cluster
# A demo that is already up is restarted from scratch: same names, fresh state.
if [[ -d "$state" ]]; then
  log "a demo cluster exists; replacing it"
  stop_tally
  "$cluster/down" --name "$name" >&2
fi
eval "$("$cluster/up" --name "$name")"
BIN="$TALLY_E2E_BIN"
k() { "$BIN/kubectl" "$@"; }
ledger="$state/ledger"
mkdir -p "$ledger"

# -------------------------------------------------------------- GPU pools
log "GPU classes: H200 passthrough, A100 vGPU, V100 shared (HAMi)"
k apply -f - >/dev/null <<'EOF'
apiVersion: gpu.tally.dev/v1alpha1
kind: GPUDeviceClass
metadata: {name: nvidia-h200-passthrough}
spec: {workload: vm, allocation: passthrough, resourceName: nvidia.com/GH100_H200_SXM_141GB, nodeMode: vm-passthrough,
       memoryMiB: 144384, maxCount: 8, pciVendorSelector: "10DE:2335"}
---
apiVersion: gpu.tally.dev/v1alpha1
kind: GPUDeviceClass
metadata: {name: nvidia-a100-10c}
spec: {workload: vm, allocation: vgpu, resourceName: nvidia.com/A100-10C, nodeMode: vm-vgpu, memoryMiB: 10240, maxCount: 4}
---
apiVersion: gpu.tally.dev/v1alpha1
kind: GPUDeviceClass
metadata: {name: nvidia-v100-shared}
spec: {workload: pod, allocation: shared, resourceName: nvidia.com/gpu, nodeMode: pod-hami, memoryMiB: 32768,
       share: {memoryMiB: 8192, corePercent: 25, maxSharesPerDevice: 4}}
EOF

log "kwok GPU nodes: 3 x 8 H200 (vm-passthrough), 2 x A100 vGPU (vm-vgpu), 2 x 2 V100 (pod-hami)"
fx() { "$BIN/tally-fixtures" "$@" --wait-ready >/dev/null; }
fx nodes --count 3 --prefix gpu-h200- --mode vm-passthrough --resource nvidia.com/GH100_H200_SXM_141GB=8
fx nodes --count 2 --prefix gpu-a100- --mode vm-vgpu --resource nvidia.com/A100-10C=8 \
  --vgpu-type nvidia.com/A100-10C --vgpu-parents 2 --vgpu-total 4 --vgpu-created 0
fx nodes --count 2 --prefix gpu-v100- --mode pod-hami --resource nvidia.com/gpu=20 \
  --inventory '{"parents":[{"id":"0000:3b:00.0","healthy":true,"types":{}},{"id":"0000:3c:00.0","healthy":true,"types":{}}]}'

# ---------------------------------------------------------------- tenants
log "tenants: organizations acme (acme-research) and globex (globex-ml), HNC namespaces, plan-quota budgets"
"$BIN/tally-fixtures" namespaces --tree acme/acme-research --tree globex/globex-ml --tree kube-dc >/dev/null
k apply -f - >/dev/null <<'EOF'
apiVersion: v1
kind: ConfigMap
metadata: {name: billing-plans, namespace: kube-dc}
data:
  plans.yaml: |
    addons:
      gpu-h200-dedicated:
        selfService: true
        gpu:
          nvidia-h200-passthrough: {devices: 1}
      gpu-h200-reserved:
        # operator-only, devices of one profile only: a reservation add-on
        selfService: false
        gpu:
          nvidia-h200-passthrough: {devices: 1}
      gpu-a100-10c:
        selfService: true
        gpu:
          nvidia-a100-10c: {devices: 1}
      gpu-v100-share:
        selfService: true
        gpu:
          nvidia-v100-shared: {shares: 1, memoryMiB: 8192, corePercent: 25}
---
apiVersion: kube-dc.com/v1
kind: Organization
metadata:
  name: acme
  namespace: acme
  annotations:
    billing.kube-dc.com/addons: '[{"addonId":"gpu-h200-dedicated","quantity":4},{"addonId":"gpu-h200-reserved","quantity":4},{"addonId":"gpu-a100-10c","quantity":4},{"addonId":"gpu-v100-share","quantity":4}]'
spec: {displayName: Acme}
---
apiVersion: kube-dc.com/v1
kind: Organization
metadata:
  name: globex
  namespace: globex
  annotations:
    billing.kube-dc.com/addons: '[{"addonId":"gpu-h200-dedicated","quantity":4},{"addonId":"gpu-a100-10c","quantity":4},{"addonId":"gpu-v100-share","quantity":4}]'
spec: {displayName: Globex}
EOF
hrq() { # namespace h200 a100 shares
  local hard="{\"requests.nvidia.com/GH100_H200_SXM_141GB\":\"$2\",\"requests.nvidia.com/A100-10C\":\"$3\",\"requests.nvidia.com/gpu\":\"$4\",\"requests.nvidia.com/gpumem\":\"$(($4 * 8192))\",\"requests.nvidia.com/gpucores\":\"$(($4 * 25))\"}"
  k apply -f - >/dev/null <<EOF
apiVersion: hnc.x-k8s.io/v1alpha2
kind: HierarchicalResourceQuota
metadata: {name: plan-quota, namespace: $1}
spec: {hard: $hard}
EOF
  # HNC's controller is not running here: the demo writes status.hard itself.
  k patch hrq -n "$1" plan-quota --subresource=status --type=merge -p "{\"status\":{\"hard\":$hard}}" >/dev/null
}
hrq acme 8 4 4     # 4 dedicated + 4 reserved H200
hrq globex 4 4 4

log "reservation ledger ($ledger): gpu-res-demo-1, 4 H200 reserved for acme, active"
cat >"$ledger/gpu-res-demo-1.yaml" <<'EOF'
apiVersion: operations.kube-dc.com/v1alpha1
kind: GPUReservationRecord
metadata:
  id: gpu-res-demo-1
spec:
  organization: acme
  project: acme-research
  profileId: nvidia-h200-passthrough
  devices: 4
  state: active
  requestedAt: "2026-01-05T09:00:00Z"
  startsAt: "2026-01-10T00:00:00Z"
  endsAt: "2027-01-10T00:00:00Z"
  addonId: gpu-h200-reserved
  billingReference: OPS-DEMO-1
  approvedBy:
    product: product@example.com
    sre: sre@example.com
status:
  activatedAt: "2026-01-10T00:00:00Z"
  evidenceRevision: evidence/ops-demo-1-r1
  reason: dedicated training capacity (demo)
EOF

# Waits for NAME's /readyz on 127.0.0.1:PORT while the process in PIDFILE lives;
# a process that died or never got ready ends the demo with its log's tail.
wait_ready() { # name port pidfile
  for _ in $(seq 1 120); do
    [[ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$2/readyz")" == 200 ]] && return 0
    kill -0 "$(cat "$3")" 2>/dev/null || break
    sleep 0.5
  done
  tail -n 20 "$state/logs/$1.log" >&2 || true
  die "$1 did not become ready (the cluster stays up; $0 down cleans up)"
}

# --------------------------------------------------------------- extender
port="${TALLY_DEMO_PORT:-$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()')}"
url="http://127.0.0.1:$port/tally"
log "starting tally-extender on 127.0.0.1:$port (log $state/logs/tally-extender.log)"
nohup setsid "$extender" --kubeconfig "$state/kubeconfig" --bind-address 127.0.0.1 --port "$port" --url-prefix /tally \
  --metrics-port 0 --ledger-dir "$ledger" >>"$state/logs/tally-extender.log" 2>&1 </dev/null &
echo $! >"$extender_pidfile"
wait_ready tally-extender "$port" "$extender_pidfile"
sed "s#__EXTENDER_URL__#$url#" "$here/scheduler-config.yaml" >"$state/demo-scheduler-config.yaml"
"$cluster/up" --name "$name" --restart-scheduler --scheduler-config "$state/demo-scheduler-config.yaml" >/dev/null
log "kube-scheduler restarted with the extender entry ($url)"

# ------------------------------------------------------------- controller
# tally-controller generates its serving certificate (IP SAN 127.0.0.1: the API
# server calls it by URL here, not through a Service), keeps it in a Secret and
# injects its CA into the GPUDevice webhook configuration registered below.
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'; }
webhook_port="$(free_port)" ops_port="$(free_port)"
k create namespace tally-system >/dev/null
k apply -f - >/dev/null <<EOF
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata: {name: tally-gpudevice-validating}
webhooks:
- name: gpudevices.gpu.tally.dev
  clientConfig: {url: "https://127.0.0.1:$webhook_port/validate/gpudevices"}
  rules:
  - apiGroups: [gpu.tally.dev]
    apiVersions: [v1alpha1]
    operations: [CREATE, UPDATE, DELETE]
    resources: [gpudevices, gpudevices/status]
    scope: Namespaced
  failurePolicy: Fail
  sideEffects: NoneOnDryRun
  timeoutSeconds: 10
  admissionReviewVersions: [v1]
EOF
log "starting tally-controller (webhooks https://127.0.0.1:$webhook_port, ops :$ops_port, log $state/logs/tally-controller.log)"
# The demo's admin plays the VMI door below (it attaches a device), so it is the controller identity.
nohup setsid "$controller" --kubeconfig "$state/kubeconfig" --webhook-bind-address 127.0.0.1 --webhook-port "$webhook_port" \
  --ops-bind-address 127.0.0.1 --ops-port "$ops_port" --cert-dir "$state/controller-certs" \
  --cert-ip-addresses 127.0.0.1 --service-namespace tally-system \
  --webhook-configurations tally-gpudevice-validating --leader-election-namespace tally-system \
  --controller-identity tally-e2e-admin --ledger-dir "$ledger" \
  >>"$state/logs/tally-controller.log" 2>&1 </dev/null &
echo $! >"$controller_pidfile"
wait_ready tally-controller "$ops_port" "$controller_pidfile"
# The keeper injects the caBundle asynchronously: wait until the API server can verify the webhook.
for _ in $(seq 1 60); do
  [[ -n "$(k get validatingwebhookconfiguration tally-gpudevice-validating -o jsonpath='{.webhooks[0].clientConfig.caBundle}')" ]] && break
  sleep 0.5
done
log "tally-controller ready; GPUDevice orders now pass its webhook"

# --------------------------------------------------------------- workload
log "demo workload"
gpu_pod() { # name namespace resources [scheduling gate] [owner VMI name uid]
  local gates="" owner="" labels=""
  [[ -z "${4:-}" ]] || gates="  schedulingGates: [{name: demo.tally.dev/wait-for-kubevirt}]"
  if [[ -n "${5:-}" ]]; then
    owner="  ownerReferences: [{apiVersion: kubevirt.io/v1, kind: VirtualMachineInstance, name: $5, uid: $6, controller: true}]"
    labels="  labels: {kubevirt.io: virt-launcher, kubevirt.io/vm: $5}"
  fi
  cat <<EOF
---
apiVersion: v1
kind: Pod
metadata:
  name: $1
  namespace: $2
$labels
$owner
spec:
  schedulerName: tally-scheduler
$gates
  terminationGracePeriodSeconds: 0
  containers:
  - name: main
    image: registry.invalid/tally/demo:1
    resources:
      requests: {cpu: 100m, $3}
      limits: {$3}
EOF
}
# A VM of acme with 2 attached H200 and a held (stopped-VM) H200, both placed by the binder.
k apply -f - >/dev/null <<'EOF'
apiVersion: kubevirt.io/v1
kind: VirtualMachineInstance
metadata:
  name: train-vm
  namespace: acme-research
  labels: {kubevirt.io/vm: train-vm}
  annotations: {gpu.tally.dev/devices: '["train-gpus"]'}
spec:
  domain:
    devices:
      gpus: [{name: gpu0, deviceName: nvidia.com/GH100_H200_SXM_141GB}, {name: gpu1, deviceName: nvidia.com/GH100_H200_SXM_141GB}]
---
apiVersion: gpu.tally.dev/v1alpha1
kind: GPUDevice
metadata: {name: train-gpus, namespace: acme-research}
spec: {class: nvidia-h200-passthrough, count: 2}
---
apiVersion: gpu.tally.dev/v1alpha1
kind: GPUDevice
metadata: {name: eval-gpu, namespace: acme-research}
spec: {class: nvidia-h200-passthrough, count: 1}
EOF
vmi_uid="$(k get vmi -n acme-research train-vm -o jsonpath='{.metadata.uid}')"
# tally-controller's device binder places both orders (each on one node, bin-packed).
for _ in $(seq 1 60); do
  phases="$(k get gdev -n acme-research -o jsonpath='{.items[*].status.phase}')"
  [[ "$phases" == "Bound Bound" ]] && break
  sleep 0.5
done
[[ "$phases" == "Bound Bound" ]] || die "the binder did not place the demo's GPUDevices (phases: '$phases'); see $state/logs/tally-controller.log"
train_node="$(k get gdev -n acme-research train-gpus -o jsonpath='{.status.node}')"
log "binder placed train-gpus on $train_node and eval-gpu on $(k get gdev -n acme-research eval-gpu -o jsonpath='{.status.node}')"
# The VMI door (attaching a set to a VMI) is not built yet: the demo plays it
# and attaches train-gpus where the binder put it (as the controller identity).
k patch gdev -n acme-research train-gpus --subresource=status --type=merge \
  -p "{\"status\":{\"phase\":\"Attached\",\"node\":\"$train_node\",\"attachedTo\":{\"namespace\":\"acme-research\",\"name\":\"train-vm\",\"uid\":\"$vmi_uid\"}}}" >/dev/null
# The launcher, as KubeVirt creates it; the demo plays virt-controller and lists it in status.activePods.
gpu_pod virt-launcher-train-vm acme-research 'nvidia.com/GH100_H200_SXM_141GB: "2"' gated train-vm "$vmi_uid" | k apply -f - >/dev/null
launcher_uid="$(k get pod -n acme-research virt-launcher-train-vm -o jsonpath='{.metadata.uid}')"
k patch vmi -n acme-research train-vm --subresource=status --type=merge \
  -p "{\"status\":{\"phase\":\"Scheduling\",\"activePods\":{\"$launcher_uid\":\"\"}}}" >/dev/null
sleep 1
k patch pod -n acme-research virt-launcher-train-vm --type=json -p '[{"op":"remove","path":"/spec/schedulingGates"}]' >/dev/null
{
  gpu_pod train-job-0 globex-ml 'nvidia.com/GH100_H200_SXM_141GB: "1"'
  gpu_pod train-job-1 globex-ml 'nvidia.com/GH100_H200_SXM_141GB: "1"'
  gpu_pod train-job-2 globex-ml 'nvidia.com/GH100_H200_SXM_141GB: "2"'
  gpu_pod render-0 globex-ml 'nvidia.com/A100-10C: "2"'
  gpu_pod render-1 acme-research 'nvidia.com/A100-10C: "1"'
  for i in 0 1 2; do gpu_pod "notebook-$i" globex-ml 'nvidia.com/gpu: "1", nvidia.com/gpumem: "8192", nvidia.com/gpucores: "25"'; done
  gpu_pod inference-0 acme-research 'nvidia.com/gpu: "1", nvidia.com/gpumem: "8192", nvidia.com/gpucores: "25"'
} | k apply -f - >/dev/null
# Bound once the others are: globex is then at its H200 budget of 4 (its
# plan-quota), so this one waits with Tally's reason.
sleep 2
gpu_pod train-job-3 globex-ml 'nvidia.com/GH100_H200_SXM_141GB: "1"' | k apply -f - >/dev/null
for _ in $(seq 1 60); do
  node="$(k get pod -n acme-research virt-launcher-train-vm -o jsonpath='{.spec.nodeName}')"
  [[ -z "$node" ]] || break
  sleep 0.5
done
[[ -z "$node" ]] || k patch vmi -n acme-research train-vm --subresource=status --type=merge \
  -p "{\"status\":{\"phase\":\"Running\",\"activePods\":{\"$launcher_uid\":\"$node\"}}}" >/dev/null
# Let every pod be bound or refused.
for _ in $(seq 1 60); do
  waiting="$(k get pods -A --no-headers -o custom-columns=N:.spec.nodeName,R:'.status.conditions[?(@.type=="PodScheduled")].reason' |
    awk '$1 == "<none>" && $2 != "Unschedulable"' | wc -l)"
  ((waiting == 0)) && break
  sleep 0.5
done

# ----------------------------------------------------------------- report
snapshot="$state/snapshot.json"
k get nodes,pods,namespaces,gpudeviceclasses,gpudevices,hierarchicalresourcequotas,resourcequotas,virtualmachineinstances,organizations,configmaps \
  -A -o json >"$snapshot"
{
  echo
  echo "=== Pods (schedulerName tally-scheduler: kube-scheduler + tally-extender)"
  k get pods -A -o wide --sort-by=.metadata.namespace | awk 'NR == 1 || /virt-launcher|train|render|notebook|inference/' |
    awk '{printf "%-15s %-24s %-8s %-12s\n", $1, $2, $4, $8}'
  echo
  for p in globex-ml/train-job-3; do
    echo "Pending $p: $(k get pod -n "${p%/*}" "${p#*/}" -o jsonpath='{.status.conditions[?(@.type=="PodScheduled")].message}')"
  done
  echo
  echo "=== Capacity report per pool and node (tallyctl report --snapshot $snapshot --ledger $ledger)"
  "$tallyctl" report --snapshot "$snapshot" --ledger "$ledger" --output table || log "tallyctl report failed"
  cat <<EOF

=== Explore
  kubectl get gpudeviceclasses          # pools (kubectl get gdc -o wide)
  kubectl get gpudevices -A             # held and attached devices
  kubectl get nodes -L kube-dc.com/gpu.workload-mode
  kubectl get pods -A -o wide
  kubectl describe pod -n globex-ml train-job-3      # FailedScheduling with Tally's reason
  kubectl get hrq -A; kubectl get org -A
  curl -s http://127.0.0.1:$port/metrics | grep '^tally_'
  $tallyctl report --snapshot $snapshot --ledger $ledger
  kubectl is $BIN/kubectl; logs: $state/logs/tally-extender.log, $state/logs/tally-controller.log
  tally-controller serves the GPUDevice webhook (try: kubectl apply a GPUDevice of count 9)
  make demo-down (or $0 down) stops tally-extender, tally-controller and the cluster.

EOF
} >&1
echo "export KUBECONFIG=$state/kubeconfig"
echo "export TALLY_EXTENDER_URL=$url"
