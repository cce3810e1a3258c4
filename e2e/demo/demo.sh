#!/usr/bin/env bash
# Tally demo on a local control plane (`make demo`, `make demo-down`).
#
#   e2e/demo/demo.sh          bring up the cluster `demo`, GPU pools, the KubeVirt
#                             CR, tenants, a reservation, tally-extender wired
#                             into kube-scheduler and tally-controller with its
#                             webhooks; start a VM through the real VMI webhook
#                             (one held GPUDevice, one device template), play
#                             virt-controller for its launcher pod (pinned by
#                             the launcher pod webhook), schedule a
#                             demo workload; print the capacity report. The
#                             cluster keeps running.
#   e2e/demo/demo.sh down     stop tally-extender, tally-controller and the cluster.
#
# The last two lines printed are
#   export KUBECONFIG=<admin kubeconfig of the demo cluster>
#   export TALLY_EXTENDER_URL=<verbs at $TALLY_EXTENDER_URL/filter, /prioritize, ...>
# so `eval "$(e2e/demo/demo.sh | tail -n 2)"` sets up a shell.
#
# Every step that reads what a controller writes asynchronously waits for the
# condition it prints, at most TALLY_DEMO_WAIT seconds (default 60), and else
# ends the demo naming what it waited for and what it saw last.
#
# Environment: BUILD (build tree with bin/tally-extender, bin/tally-controller
# and bin/tallyctl, default <repo>/build), TALLY_DEMO_PORT (extender port,
# default a free one), TALLY_DEMO_WAIT (seconds per wait, default 60), plus
# those of e2e/cluster/up (TALLY_E2E_ROOT, TALLY_BIN_DIR, ...).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
cluster="$repo/e2e/cluster"
name=demo
root="${TALLY_E2E_ROOT:-/tmp/tally-e2e}"
state="$root/$name"
build="${BUILD:-$repo/build}"
demo_wait="${TALLY_DEMO_WAIT:-60}"
log() { printf '[demo] %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

# await CONDITION CMD...: runs CMD every 0.5 s until it succeeds, at most
# $demo_wait seconds; else the demo ends naming CONDITION and what CMD saw last
# (a CMD may leave that in $seen).
seen=""
await() {
  local what="$1" deadline=$((SECONDS + demo_wait))
  shift
  seen=""
  until "$@"; do
    if ((SECONDS >= deadline)); then
      k get gpudeviceclasses -o wide >&2 || true
      die "timed out after ${demo_wait}s waiting for $what${seen:+ (last seen: ${seen:0:600})}; logs in $state/logs/ (the cluster stays up; $0 down cleans up)"
    fi
    sleep 0.5
  done
}

extender_pidfile="$state/pids/demo-tally-extender.pid"
controller_pidfile="$state/pids/demo-tally-controller.pid"
hnc_pidfile="$state/pids/demo-hnc-standin.pid"

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
  stop_process "$hnc_pidfile" hnc-standin
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

# A pool served by Dynamic Resource Allocation: the DRA driver gpu.example.com
# publishes the node's GPUs as ResourceSlices (the demo plays the driver
# below), pods ask for them with ResourceClaims of the DeviceClass
# h200.gpu.example.com, and Tally's class names both (spec.dra). It sells
# under the DeviceClass's extended resource name, so its budget key is
# requests.deviceclass.resource.kubernetes.io/h200.gpu.example.com.
log "DRA pool: DeviceClass h200.gpu.example.com (driver gpu.example.com) and GPUDeviceClass nvidia-h200-dra"
k apply -f - >/dev/null <<'EOF'
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: h200.gpu.example.com}
spec:
  selectors:
  - cel: {expression: 'device.driver == "gpu.example.com" && device.attributes["gpu.example.com"].productName == "H200"'}
---
apiVersion: gpu.tally.dev/v1alpha1
kind: GPUDeviceClass
metadata: {name: nvidia-h200-dra}
spec: {workload: pod, allocation: passthrough, memoryMiB: 144384, maxCount: 4,
       dra: {driver: gpu.example.com, deviceClassName: h200.gpu.example.com, attributes: {productName: H200}}}
EOF

# KubeVirt passes a host device to a VM only when its KubeVirt CR permits it,
# and Tally's VMI webhook refuses a VM class whose resourceName is not listed:
# one entry per VM class, pciHostDevices for passthrough, mediatedDevices for
# vGPU (externalResourceProvider: NVIDIA's device plugin advertises them). Add
# entries with `kubectl edit kubevirt -n kubevirt kubevirt`. No KubeVirt
# operator runs here: the CR is only read.
log "KubeVirt CR kubevirt/kubevirt: permits the H200 (PCI passthrough) and the A100-10C (mediated vGPU)"
k create namespace kubevirt --dry-run=client -o yaml | k apply -f - >/dev/null
k apply -f - >/dev/null <<'EOF'
apiVersion: kubevirt.io/v1
kind: KubeVirt
metadata: {name: kubevirt, namespace: kubevirt}
spec:
  configuration:
    permittedHostDevices:
      pciHostDevices:
      - {pciVendorSelector: "10DE:2335", resourceName: nvidia.com/GH100_H200_SXM_141GB, externalResourceProvider: true}
      mediatedDevices:
      - {mdevNameSelector: NVIDIA A100-10C, resourceName: nvidia.com/A100-10C, externalResourceProvider: true}
EOF

log "kwok GPU nodes: 3 x 8 H200 (vm-passthrough), 2 x A100 vGPU (vm-vgpu), 2 x 2 V100 (pod-hami)"
fx() { "$BIN/tally-fixtures" "$@" --wait-ready >/dev/null; }
fx nodes --count 3 --prefix gpu-h200- --mode vm-passthrough --resource nvidia.com/GH100_H200_SXM_141GB=8
fx nodes --count 2 --prefix gpu-a100- --mode vm-vgpu --resource nvidia.com/A100-10C=8 \
  --vgpu-type nvidia.com/A100-10C --vgpu-parents 2 --vgpu-total 4 --vgpu-created 0
fx nodes --count 2 --prefix gpu-v100- --mode pod-hami --resource nvidia.com/gpu=20 \
  --inventory '{"parents":[{"id":"0000:3b:00.0","healthy":true,"types":{}},{"id":"0000:3c:00.0","healthy":true,"types":{}}]}'
# The DRA node advertises no device-plugin resource: its driver publishes its
# 4 H200 as one ResourceSlice of pool gpu-dra-0 (generation 1, 1 slice).
log "kwok DRA node gpu-dra-0 and its ResourceSlice (4 H200, as driver gpu.example.com publishes them)"
fx nodes --count 1 --prefix gpu-dra- --resource none
{
  cat <<'EOF'
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: gpu-dra-0-gpu.example.com}
spec:
  driver: gpu.example.com
  nodeName: gpu-dra-0
  pool: {name: gpu-dra-0, generation: 1, resourceSliceCount: 1}
  devices:
EOF
  for i in 0 1 2 3; do
    printf '  - name: gpu-%s\n    attributes:\n      productName: {string: H200}\n    capacity:\n      memory: {value: 141Gi}\n' "$i"
  done
} | k apply -f - >/dev/null

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
      gpu-h200-dra:
        selfService: true
        gpu:
          nvidia-h200-dra: {devices: 1}
---
apiVersion: kube-dc.com/v1
kind: Organization
metadata:
  name: acme
  namespace: acme
  annotations:
    billing.kube-dc.com/addons: '[{"addonId":"gpu-h200-dedicated","quantity":4},{"addonId":"gpu-a100-10c","quantity":4},{"addonId":"gpu-v100-share","quantity":4},{"addonId":"gpu-h200-dra","quantity":2}]'
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
# plan-quota is Tally's to write: tally-controller's quota controller applies
# every organization's add-on grants into its HRQ plan-quota. HNC does not run
# here: a stand-in copies each HRQ's spec.hard into status.hard, as HNC would.
nohup setsid "$here/hnc-standin.sh" "$BIN/kubectl" "$state/kubeconfig" >>"$state/logs/hnc-standin.log" 2>&1 </dev/null &
echo $! >"$hnc_pidfile"

log "reservation ledger ($ledger): gpu-res-demo-1, 4 H200 for acme, committed pending (the runbook's step 4)"
record() { # state activatedAt
  cat >"$ledger/.gpu-res-demo-1.yaml" <<EOF
apiVersion: operations.kube-dc.com/v1alpha1
kind: GPUReservationRecord
metadata:
  id: gpu-res-demo-1
spec:
  organization: acme
  project: acme-research
  profileId: nvidia-h200-passthrough
  devices: 4
  state: $1
  requestedAt: "2026-01-05T09:00:00Z"
  startsAt: "2026-01-10T00:00:00Z"
  endsAt: "2027-01-10T00:00:00Z"
  addonId: gpu-h200-reserved
  billingReference: OPS-DEMO-1
  approvedBy:
    product: product@example.com
    sre: sre@example.com
status:
  activatedAt: "$2"
  evidenceRevision: evidence/ops-demo-1-r1
  reason: dedicated training capacity (demo)
EOF
  # As git-sync publishes a revision: whole, never half written.
  mv "$ledger/.gpu-res-demo-1.yaml" "$ledger/gpu-res-demo-1.yaml"
}
record pending ""

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
ext_ops_port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()')"
url="https://127.0.0.1:$port/tally"
# The verbs over HTTPS, answered only for kube-scheduler's client certificate
# (pki/extender-client.crt, CN tally-extender-client; the scheduler presents it
# through extenders[].tlsConfig); /healthz, /readyz and /metrics on a plain ops port.
ext_tls=(--tls-cert-file "$state/pki/extender.crt" --tls-key-file "$state/pki/extender.key"
  --client-ca-file "$state/pki/ca.crt" --allowed-clients tally-extender-client)
scheduler_cert=(--cacert "$state/pki/ca.crt" --cert "$state/pki/extender-client.crt" --key "$state/pki/extender-client.key")
log "starting tally-extender on 127.0.0.1:$port (verbs over mutual TLS, ops :$ext_ops_port, log $state/logs/tally-extender.log)"
nohup setsid "$extender" --kubeconfig "$state/kubeconfig" --bind-address 127.0.0.1 --port "$port" --url-prefix /tally \
  "${ext_tls[@]}" --metrics-port "$ext_ops_port" --ledger-dir "$ledger" >>"$state/logs/tally-extender.log" 2>&1 </dev/null &
echo $! >"$extender_pidfile"
wait_ready tally-extender "$ext_ops_port" "$extender_pidfile"
sed "s#__EXTENDER_URL__#$url#" "$here/scheduler-config.yaml" >"$state/demo-scheduler-config.yaml"
"$cluster/up" --name "$name" --restart-scheduler --scheduler-config "$state/demo-scheduler-config.yaml" >/dev/null
log "kube-scheduler restarted with the extender entry ($url)"

# ------------------------------------------------------------- controller
# tally-controller generates its serving certificate (IP SAN 127.0.0.1: the API
# server calls it by URL here, not through a Service), keeps it in a Secret and
# injects its CA into the webhook configurations registered below: the eight of
# manifests/webhook/ in the base, rendered with a url clientConfig and
# otherwise as shipped (manifests/render-webhooks.py).
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'; }
webhook_port="$(free_port)" ops_port="$(free_port)"
webhook_url="https://127.0.0.1:$webhook_port"
k create namespace tally-system >/dev/null
python3 "$repo/manifests/render-webhooks.py" --url "$webhook_url" gpudevices vmis launcher-pods pod-placement \
  gpu-pods organizations gpudeviceclasses resourceclaims >"$state/webhook-configurations.json"
k apply -f "$state/webhook-configurations.json" >/dev/null
log "starting tally-controller (webhooks $webhook_url, ops :$ops_port, log $state/logs/tally-controller.log)"
# It writes with the demo's admin kubeconfig, so the admin is the identity
# whose GPUDevice status changes the GPUDevice webhook lets through.
nohup setsid "$controller" --kubeconfig "$state/kubeconfig" --webhook-bind-address 127.0.0.1 --webhook-port "$webhook_port" \
  --ops-bind-address 127.0.0.1 --ops-port "$ops_port" --cert-dir "$state/controller-certs" \
  --cert-ip-addresses 127.0.0.1 --service-namespace tally-system \
  --webhook-client-ca-file "$state/pki/ca.crt" --webhook-allowed-clients tally-webhook-client \
  --webhook-configurations tally-gpudevice-validating,tally-gpu-pod-validating,tally-organization-validating,tally-gpudeviceclass-validating,tally-resourceclaim-validating \
  --ledger-interval 1s --audit-debounce 500ms \
  --mutating-webhook-configurations tally-vmi-mutating,tally-launcher-pod-mutating,tally-pod-placement-mutating \
  --vmi-placement-wait 5s --vmi-attach-timeout 60s --watch-kubevirt=true \
  --leader-election-namespace tally-system --controller-identity tally-e2e-admin --ledger-dir "$ledger" \
  >>"$state/logs/tally-controller.log" 2>&1 </dev/null &
echo $! >"$controller_pidfile"
wait_ready tally-controller "$ops_port" "$controller_pidfile"
# Only the API server and kube-scheduler speak to the doors: a review or a
# bind from anyone else (no client certificate) is refused before it is read.
forged_review="$(curl -sk -o /dev/null -w '%{http_code}' --max-time 5 -H 'Content-Type: application/json' \
  --data-binary '{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"forged"}}' \
  "$webhook_url/mutate/virtualmachineinstances")"
forged_bind="$(curl -sk -o /dev/null -w '%{http_code}' --max-time 5 -H 'Content-Type: application/json' \
  --data-binary '{"PodName":"x","PodNamespace":"y","PodUID":"z","Node":"n"}' "$url/bind")"
[[ "$forged_review" == 401 && "$forged_bind" == 401 ]] ||
  die "a caller without a client certificate got $forged_review from the VMI webhook and $forged_bind from the extender's bind (want 401 and 401)"
log "a review and a bind without a client certificate: 401 and 401 (webhooks answer the API server, verbs kube-scheduler)"
# The keeper injects the caBundles asynchronously: wait until the API server can verify every webhook.
webhook_configurations=(validatingwebhookconfiguration/tally-gpudevice-validating validatingwebhookconfiguration/tally-gpu-pod-validating
  validatingwebhookconfiguration/tally-organization-validating validatingwebhookconfiguration/tally-gpudeviceclass-validating
  validatingwebhookconfiguration/tally-resourceclaim-validating mutatingwebhookconfiguration/tally-vmi-mutating mutatingwebhookconfiguration/tally-launcher-pod-mutating
  mutatingwebhookconfiguration/tally-pod-placement-mutating)
unbundled() {
  local cfg
  for cfg in "${webhook_configurations[@]}"; do
    [[ -n "$(k get "$cfg" -o jsonpath='{.webhooks[0].clientConfig.caBundle}')" ]] || echo "$cfg"
  done
}
for _ in $(seq 1 60); do
  [[ -z "$(unbundled)" ]] && break
  sleep 0.5
done
[[ -z "$(unbundled)" ]] || die "tally-controller did not inject its CA into $(unbundled | tr '\n' ' '); see $state/logs/tally-controller.log"
log "tally-controller ready; GPUDevice orders, VMIs with Tally devices and GPU pods now pass its webhooks"

# ------------------------------------------------------------ reservation
# The runbook's assignment procedure, with Tally doing the bookkeeping: the
# pending record freezes creation in the H200 pool, the operator assigns the
# reservation add-on, Tally writes plan-quota and the Organization's status,
# the record is committed active, and the gate reopens by itself.
h200=nvidia-h200-passthrough
gate_of() { k get gpudeviceclass "$1" -o jsonpath='{.status.conditions[?(@.type=="CreationOpen")].reason}'; }
hrq_h200() { k get hrq -n acme plan-quota -o jsonpath='{.status.hard.requests\.nvidia\.com/GH100_H200_SXM_141GB}' 2>/dev/null; }
org_h200() { k get organization -n acme acme -o jsonpath="{.status.quotaUsage.accelerators.$h200.devices.hard}"; }
is() { seen="$("$1" "${@:3}")"; [[ "$seen" == "$2" ]]; } # is FUNCTION VALUE ARGS...
dashboard() {
  echo
  echo "=== $1 (kubectl get gpudeviceclasses)"
  k get gpudeviceclasses
}
await "the H200 pool's gate to close for the pending reservation (CreationOpen reason TransactionInFlight)" \
  is gate_of TransactionInFlight "$h200"
{
  dashboard "gpu-res-demo-1 pending: creation frozen in the H200 pool"
  echo "  CreationOpen: $(k get gpudeviceclass $h200 -o jsonpath='{.status.conditions[?(@.type=="CreationOpen")].message}')"
} >&1
log "assigning the operator-only add-on gpu-h200-reserved x4 to acme (Manage add-ons); the Organization webhook admits it for the pending record"
# The Organization webhook decides on tally-controller's snapshot; the closed
# gate shows the auditor saw the pending record in it. Annotating again is a
# no-op, so a refusal is retried and shown if it never passes.
addon_assigned() {
  seen="$(k annotate --overwrite organization -n acme acme \
    'billing.kube-dc.com/addons=[{"addonId":"gpu-h200-dedicated","quantity":4},{"addonId":"gpu-h200-reserved","quantity":4},{"addonId":"gpu-a100-10c","quantity":4},{"addonId":"gpu-v100-share","quantity":4},{"addonId":"gpu-h200-dra","quantity":2}]' 2>&1 >/dev/null)"
}
await "the Organization webhook to admit gpu-h200-reserved x4 for acme (pending record gpu-res-demo-1)" addon_assigned
await "plan-quota of acme to grant 8 H200 (status.hard)" is hrq_h200 8
await "acme's Organization status to show 8 H200 (quotaUsage hard)" is org_h200 8
activated="$(date -u +%Y-%m-%dT%H:%M:%SZ)"
log "HRQ and Organization status show 8 H200 for acme; committing gpu-res-demo-1 active at $activated (billing starts there)"
record active "$activated"
for pool in "$h200" nvidia-a100-10c nvidia-v100-shared nvidia-h200-dra; do
  await "the gate of $pool to open (CreationOpen reason Open)" is gate_of Open "$pool"
done
dashboard "gpu-res-demo-1 active: every pool audited, the invariant holds, every gate open" >&1
# The window opens once tally-controller's ledger holds the active record and
# a second has passed since activatedAt.
usage_url="http://127.0.0.1:$ops_port/usage?since=$activated&until=$(date -u -d '+1 hour' +%Y-%m-%dT%H:%M:%SZ)"
# GET /usage reviews the caller's bearer token (TokenReview, then may it get
# /usage): the demo's admin token may.
usage_auth="Authorization: Bearer $(cat "$state/pki/admin.token")"
billing_window() {
  seen="$(curl -sS --max-time 5 -H "$usage_auth" "$usage_url" 2>&1)" || return 1
  windows="$(grep '"window"' <<<"$seen" | grep 'gpu-res-demo-1')"
}
await "the billing window of gpu-res-demo-1 (GET $usage_url)" billing_window
{
  echo "  billing window (GET http://127.0.0.1:$ops_port/usage, the same JSON lines as tallyctl usage):"
  sed 's/^/  /' <<<"$windows"
} >&1

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
# A VM of acme through the real VM door: it holds one GPUDevice ordered
# beforehand (train-gpus, 2 H200) and asks for one more H200 by device
# template. eval-gpu stays held and unattached (a stopped VM's GPU).
# The GPUDevice webhook decides on tally-controller's own snapshot, which sees
# the open gate a moment after kubectl does: an order refused meanwhile is
# applied again (apply is idempotent), its refusal shown if it never passes.
demo_devices='
apiVersion: gpu.tally.dev/v1alpha1
kind: GPUDevice
metadata: {name: train-gpus, namespace: acme-research}
spec: {class: nvidia-h200-passthrough, count: 2}
---
apiVersion: gpu.tally.dev/v1alpha1
kind: GPUDevice
metadata: {name: eval-gpu, namespace: acme-research}
spec: {class: nvidia-h200-passthrough, count: 1}
'
devices_ordered() { seen="$(k apply -f - 2>&1 >/dev/null <<<"$demo_devices")"; }
await "the GPUDevice webhook to admit train-gpus (2 H200) and eval-gpu (1 H200)" devices_ordered
# tally-controller's device binder places both orders (each on one node, bin-packed).
both_bound() {
  seen="$(k get gdev -n acme-research -o jsonpath='{range .items[*]}{.metadata.name}={.status.phase}@{.status.node} {end}')"
  [[ "$seen" == "eval-gpu=Bound@gpu-"*" train-gpus=Bound@gpu-"*" " ]]
}
await "the binder to place train-gpus and eval-gpu (both Bound, each on a node)" both_bound
log "binder placed train-gpus on $(k get gdev -n acme-research train-gpus -o jsonpath='{.status.node}') and eval-gpu on $(k get gdev -n acme-research eval-gpu -o jsonpath='{.status.node}')"
# The VMI's create goes through tally-vmi-mutating: Tally attaches train-gpus,
# creates the template's device, waits for the binder to place the set on one
# node and adds one spec.domain.devices.gpus entry per GPU.
# The webhook decides on its own snapshot too (train-gpus Bound there a moment
# after kubectl sees it): a refused create leaves nothing behind and is tried
# again, as a VM's creator would.
demo_vmi='
apiVersion: kubevirt.io/v1
kind: VirtualMachineInstance
metadata:
  name: train-vm
  namespace: acme-research
  labels: {kubevirt.io/vm: train-vm}
  annotations:
    gpu.tally.dev/devices: train-gpus
    gpu.tally.dev/device-templates: '"'"'[{"class": "nvidia-h200-passthrough", "count": 1}]'"'"'
spec:
  domain:
    devices: {}
'
vmi_created() {
  seen="$(k create -f - 2>&1 >/dev/null <<<"$demo_vmi")" || k get vmi -n acme-research train-vm >/dev/null 2>&1
}
await "the VMI webhook to admit train-vm (train-gpus held, one H200 by device template)" vmi_created
vmi_uid="$(k get vmi -n acme-research train-vm -o jsonpath='{.metadata.uid}')"
gpus="$(k get vmi -n acme-research train-vm -o jsonpath='{range .spec.domain.devices.gpus[*]}{.deviceName}{"\n"}{end}')"
[[ -n "$gpus" ]] || die "the VMI webhook added no gpus entries to train-vm; see $state/logs/tally-controller.log"
log "VMI train-vm admitted: $(wc -l <<<"$gpus") gpus entries, attachment $(k get vmi -n acme-research train-vm -o jsonpath='{.metadata.annotations.gpu\.tally\.dev/attachment}')"
# The leader's binder records the VMI's uid on each device of the set.
attached() {
  k get gdev -n acme-research -o jsonpath='{range .items[?(@.status.attachedTo.name=="train-vm")]}{.metadata.name}{" "}{.status.attachedTo.uid}{" "}{.status.node}{"\n"}{end}'
}
uid_recorded() {
  set_members="$(attached)"
  seen="$(tr '\n' ';' <<<"$set_members")"
  (($(awk -v uid="$vmi_uid" '$2 == uid' <<<"$set_members" | wc -l) == 2))
}
await "the binder to record train-vm's uid $vmi_uid on its two devices" uid_recorded
vm_node="$(awk '{print $3}' <<<"$set_members" | sort -u)"
[[ "$(wc -l <<<"$vm_node")" == 1 ]] || die "train-vm's devices are on several nodes: $set_members"
log "train-vm's devices on $vm_node: $(awk '{print $1}' <<<"$set_members" | tr '\n' ' ')"
# virt-controller's part, as the tests play it: the launcher pod requests one
# GPU per gpus entry (by resource name), is owned by the VMI, and is listed in
# the VMI's status.activePods before it is scheduled (its gate holds it until
# then), then with its node once bound.
launcher_requests="$(sort <<<"$gpus" | uniq -c | awk '{printf "%s%s: \"%s\"", (NR > 1 ? ", " : ""), $2, $1}')"
launcher="virt-launcher-train-vm-$(python3 -c 'import random, string; print("".join(random.choices(string.ascii_lowercase + string.digits, k=5)))')"
# The launcher pod webhook pins the pod to the node of its VMI's devices once
# its snapshot holds the VMI and their attachment (before, it refuses, and the
# creator retries): asked by server dry run until it pins, then created.
pin_path='{.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[*].matchFields[*].values[*]}'
launcher_pinned() {
  seen="$(gpu_pod "$launcher" acme-research "$launcher_requests" gated train-vm "$vmi_uid" |
    k create --dry-run=server -o jsonpath="$pin_path" -f - 2>&1)" && [[ "$seen" == "$vm_node" ]]
}
await "the launcher pod webhook to pin $launcher to $vm_node (server dry run)" launcher_pinned
gpu_pod "$launcher" acme-research "$launcher_requests" gated train-vm "$vmi_uid" | k create -f - >/dev/null
pin="$(k get pod -n acme-research "$launcher" -o jsonpath="$pin_path")"
[[ "$pin" == "$vm_node" ]] || die "the launcher pod webhook pinned $launcher to '$pin' at its create, not to $vm_node"
launcher_uid="$(k get pod -n acme-research "$launcher" -o jsonpath='{.metadata.uid}')"
k patch vmi -n acme-research train-vm --subresource=status --type=merge \
  -p "{\"status\":{\"phase\":\"Scheduling\",\"activePods\":{\"$launcher_uid\":\"\"}}}" >/dev/null
# Its gate comes off once tally-extender's snapshot lists the pod in the VMI's
# activePods: asked about another H200 node, its filter then refuses the pod as
# train-vm's launcher (LauncherWrongNode), no longer as a raw GPU pod.
other_node="$(k get nodes -o name | sed 's#^node/##' | grep '^gpu-h200-' | grep -vx "$vm_node" | head -n 1)"
extender_knows_launcher() {
  local args
  args="$(k get pod -n acme-research "$launcher" -o json |
    python3 -c 'import json, sys; print(json.dumps({"Pod": json.load(sys.stdin), "NodeNames": [sys.argv[1]]}))' "$other_node")" ||
    return 1
  seen="$(curl -sS --max-time 5 "${scheduler_cert[@]}" -H 'Content-Type: application/json' --data-binary "$args" "$url/filter" 2>&1)" || return 1
  grep -q 'launches VMI train-vm' <<<"$seen"
}
await "tally-extender to see $launcher in train-vm's status.activePods (its filter refusing it on $other_node as the VM's launcher)" \
  extender_knows_launcher
k patch pod -n acme-research "$launcher" --type=json -p '[{"op":"remove","path":"/spec/schedulingGates"}]' >/dev/null
workload() {
  gpu_pod train-job-0 globex-ml 'nvidia.com/GH100_H200_SXM_141GB: "1"'
  gpu_pod train-job-1 globex-ml 'nvidia.com/GH100_H200_SXM_141GB: "1"'
  gpu_pod train-job-2 globex-ml 'nvidia.com/GH100_H200_SXM_141GB: "2"'
  gpu_pod render-0 globex-ml 'nvidia.com/A100-10C: "2"'
  gpu_pod render-1 acme-research 'nvidia.com/A100-10C: "1"'
  for i in 0 1 2; do gpu_pod "notebook-$i" globex-ml 'nvidia.com/gpu: "1", nvidia.com/gpumem: "8192", nvidia.com/gpucores: "25"'; done
  gpu_pod inference-0 acme-research 'nvidia.com/gpu: "1", nvidia.com/gpumem: "8192", nvidia.com/gpucores: "25"'
}
workload_created() { seen="$(workload | k apply -f - 2>&1 >/dev/null)"; }
# A DRA workload of acme: its pod names a ResourceClaimTemplate, so
# kube-controller-manager creates its claim (through Tally's claim door, which
# checks it against acme's budget of 2 DRA H200 and the pool's free devices);
# the placement door marks the pod gpu.tally.dev/claims, so kube-scheduler
# asks tally-extender where its claim's units are free and tally-extender
# binds it, and kube-scheduler's DRA allocator picks a device of gpu-dra-0.
dra_workload='
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: one-h200, namespace: acme-research}
spec:
  spec:
    devices:
      requests:
      - name: gpu
        exactly: {deviceClassName: h200.gpu.example.com, allocationMode: ExactCount, count: 1}
---
apiVersion: v1
kind: Pod
metadata: {name: dra-train-0, namespace: acme-research}
spec:
  terminationGracePeriodSeconds: 0
  resourceClaims:
  - {name: gpu, resourceClaimTemplateName: one-h200}
  containers:
  - name: main
    image: registry.invalid/tally/demo:1
    resources:
      requests: {cpu: 100m}
      claims:
      - {name: gpu}
'

await "the raw GPU pod webhook to admit the demo workload (train-job-0..2, render-0/1, notebook-0..2, inference-0)" \
  workload_created
k apply -f - >/dev/null <<<"$dra_workload"
dra_allocated() {
  seen="$(k get resourceclaims -n acme-research -o jsonpath='{range .items[*]}{.metadata.name}={.status.allocation.devices.results[0].pool}/{.status.allocation.devices.results[0].device} {end}')"
  [[ "$seen" == *"=gpu-dra-0/gpu-"* ]]
}
await "the claim of dra-train-0 (created by kube-controller-manager from one-h200, admitted by the claim door) allocated a device of gpu-dra-0" \
  dra_allocated
dra_claim="${seen%% *}"
log "dra-train-0's claim ${dra_claim%%=*} allocated ${dra_claim#*=}"
dra_marker="$(k get pod -n acme-research dra-train-0 -o jsonpath='{.spec.schedulerName} {.spec.containers[0].resources.requests.gpu\.tally\.dev/claims}')"
[[ "$dra_marker" == "tally-scheduler 1" ]] ||
  die "dra-train-0 was not routed to tally-scheduler and marked gpu.tally.dev/claims by the placement door (got '$dra_marker')"
log "dra-train-0 was placed through tally-extender (schedulerName tally-scheduler, gpu.tally.dev/claims: 1)"
# Created once the others are in the raw GPU pod webhook's snapshot: globex is
# then at its H200 budget of 4 (its plan-quota), so the webhook refuses it with
# Tally's reason. Asked by server dry run until it refuses, then created.
train_job_3() { gpu_pod train-job-3 globex-ml 'nvidia.com/GH100_H200_SXM_141GB: "1"'; }
train_job_3_refused() {
  ! seen="$(train_job_3 | k create --dry-run=server -f - 2>&1 >/dev/null)" && [[ "$seen" == *"plan-quota"*"requests.nvidia.com/GH100_H200_SXM_141GB"* ]]
}
await "the raw GPU pod webhook to refuse train-job-3 at globex's H200 budget (server dry run)" train_job_3_refused
train_job_3_refusal=""
train_job_3 | k create -f - >/dev/null 2>"$state/train-job-3.err" ||
  train_job_3_refusal="$(tr '\n' ' ' <"$state/train-job-3.err")"
[[ -n "$train_job_3_refusal" ]] || die "train-job-3 was admitted after the raw GPU pod webhook refused it at globex's H200 budget"
launcher_bound() {
  seen="$(k get pod -n acme-research "$launcher" -o jsonpath='{.spec.nodeName}')"
  [[ -n "$seen" ]]
}
await "the launcher pod $launcher to be bound to a node" launcher_bound
node="$seen"
[[ "$node" == "$vm_node" ]] || die "the launcher pod $launcher runs on $node, its VM's devices are on $vm_node"
k patch vmi -n acme-research train-vm --subresource=status --type=merge \
  -p "{\"status\":{\"phase\":\"Running\",\"activePods\":{\"$launcher_uid\":\"$node\"}}}" >/dev/null
log "launcher $launcher bound to $node, where train-vm's devices are; train-vm Running"
# Every demo pod bound and Running (kwok runs them), or refused by the
# scheduler with Tally's reason; the table below prints that state.
pods_settled() {
  seen="$(for ns in acme-research globex-ml; do
    k get pods -n "$ns" --no-headers -o custom-columns=P:.metadata.name,N:.spec.nodeName,S:.status.phase,R:'.status.conditions[?(@.type=="PodScheduled")].reason'
  done | awk '!(($2 != "<none>" && $3 == "Running") || ($2 == "<none>" && $4 == "Unschedulable"))' | tr '\n' ';')"
  [[ -z "$seen" ]]
}
await "every demo pod bound and Running, or Unschedulable with the scheduler's reason" pods_settled
# No way around the doors: a pod that names train-vm's node in spec.nodeName
# (the kubelet would run it without asking any scheduler) and one H200 more
# than the node has free is refused by the placement door, naming the node's
# free units and what GPUDevices hold there. The free figure is the door's own
# answer to a pod asking for more than any node serves.
preset_pod() { # units
  cat <<EOF
apiVersion: v1
kind: Pod
metadata: {name: pinned-job, namespace: acme-research}
spec:
  nodeName: $vm_node
  terminationGracePeriodSeconds: 0
  containers:
  - name: main
    image: registry.invalid/tally/demo:1
    resources:
      requests: {nvidia.com/GH100_H200_SXM_141GB: "$1"}
      limits: {nvidia.com/GH100_H200_SXM_141GB: "$1"}
EOF
}
node_free() {
  seen="$(preset_pod 9 | k create --dry-run=server -f - 2>&1 >/dev/null)" && return 1
  [[ "$seen" =~ "names node $vm_node in spec.nodeName, which cannot take it: node(s) with "([0-9]+)" of " ]] &&
    free="${BASH_REMATCH[1]}"
}
await "the placement door to name $vm_node's free H200 units (server dry run of a 9-GPU pod preset on it)" node_free
preset_refusal=""
preset_pod $((free + 1)) | k create -f - >/dev/null 2>"$state/pinned-job.err" ||
  preset_refusal="$(tr '\n' ' ' <"$state/pinned-job.err")"
[[ "$preset_refusal" == *"[NodeInsufficient]"*"names node $vm_node"* ]] ||
  die "acme-research/pinned-job (spec.nodeName $vm_node, $((free + 1)) H200 with $free free) was not refused by the placement door: ${preset_refusal:-admitted}"

# ----------------------------------------------------------------- report
snapshot="$state/snapshot.json"
k get nodes,pods,namespaces,gpudeviceclasses,gpudevices,hierarchicalresourcequotas,resourcequotas,virtualmachineinstances,kubevirts,organizations,configmaps,resourceslices,resourceclaims,devicetaintrules \
  -A -o json >"$snapshot"
{
  echo
  echo "=== Pods (schedulerName tally-scheduler: kube-scheduler + tally-extender)"
  k get pods -A -o wide --sort-by=.metadata.namespace | awk 'NR == 1 || /virt-launcher|train|render|notebook|inference|dra-/' |
    awk '{printf "%-15s %-30s %-8s %-12s\n", $1, $2, $4, $8}'
  echo
  echo "Refused globex-ml/train-job-3: $train_job_3_refusal"
  echo "Refused acme-research/pinned-job (spec.nodeName $vm_node): $preset_refusal"
  echo
  echo "=== VM acme-research/train-vm (admitted by tally-vmi-mutating; the demo plays virt-controller)"
  echo "gpus: $(k get vmi -n acme-research train-vm -o jsonpath='{range .spec.domain.devices.gpus[*]}{.name}={.deviceName} {end}')"
  echo "phase $(k get vmi -n acme-research train-vm -o jsonpath='{.status.phase}'), launcher $launcher on $node"
  echo
  echo "=== DRA pool nvidia-h200-dra: ResourceClaims (the claim door admitted them; Tally charges each to its namespace)"
  k get resourceclaims -A -o custom-columns='NAMESPACE:.metadata.namespace,CLAIM:.metadata.name,POOL:.status.allocation.devices.results[0].pool,DEVICE:.status.allocation.devices.results[0].device,POD:.status.reservedFor[0].name'
  echo
  echo "=== Capacity report per pool and node (tallyctl report --snapshot $snapshot --ledger $ledger)"
  "$tallyctl" report --snapshot "$snapshot" --ledger "$ledger" --output table || log "tallyctl report failed"
  echo
  echo "GPUDevices behind HELD (kubectl get gdev -A): train-vm's held device and its template's device, Attached on one node"
  k get gdev -A -o custom-columns='NAMESPACE:.metadata.namespace,DEVICE:.metadata.name,CLASS:.spec.class,COUNT:.spec.count,PHASE:.status.phase,NODE:.status.node,VMI:.status.attachedTo.name,TEMPLATE-OF:.metadata.annotations.gpu\.tally\.dev/template-of'
  cat <<EOF

=== Explore
  kubectl get gpudeviceclasses          # pools (kubectl get gdc -o wide)
  kubectl get gpudevices -A             # held and attached devices
  kubectl get resourceslices; kubectl get resourceclaims -A   # the DRA pool: the driver's devices, the claims Tally charges
  kubectl get nodes -L kube-dc.com/gpu.workload-mode
  kubectl get pods -A -o wide
  kubectl get hrq -A; kubectl get org -A
  curl -s http://127.0.0.1:$ext_ops_port/metrics | grep '^tally_'
  curl -s -H "Authorization: Bearer \$(cat $state/pki/admin.token)" 'http://127.0.0.1:$ops_port/usage?since=$activated&until=2099-01-01T00:00:00Z'   # usage records, billing windows (401 without a token)
  curl -s ${scheduler_cert[*]} -d '{"Pod":{},"NodeNames":[]}' $url/filter   # the verbs answer kube-scheduler's certificate only (401 without)
  $tallyctl audit --ledger-dir $ledger; $tallyctl plan --help; $tallyctl options -n acme-research   # live, against this cluster
  $tallyctl report --snapshot $snapshot --ledger $ledger
  kubectl is $BIN/kubectl; logs: $state/logs/tally-extender.log, $state/logs/tally-controller.log
  kubectl get vmi -n acme-research train-vm -o yaml   # the gpus entries and the gpu.tally.dev/attachment Tally added
  kubectl edit kubevirt -n kubevirt kubevirt         # permittedHostDevices: one entry per VM class
  tally-controller serves the GPUDevice, VMI, launcher pod and raw GPU pod webhooks (try: kubectl apply a GPUDevice
  of count 9, or a VMI with gpu.tally.dev/device-templates: '[{"class":"nvidia-v100-shared","count":1}]', a pod class)
  make demo-down (or $0 down) stops tally-extender, tally-controller and the cluster.

EOF
} >&1
echo "export KUBECONFIG=$state/kubeconfig"
echo "export TALLY_EXTENDER_URL=$url"
