#!/usr/bin/env bash
# tally-controller's VM door end to end (see bench/controller/README.md, "VM door").
#
#   bench/controller/vmi.sh [--nodes 1000] [--vmis 300] [--rounds 10] [--keep]
#
# One local control plane (e2e/cluster/up, no kube-controller-manager), NODES
# kwok nodes with 8 H200 each (vm-passthrough, class nvidia-h200-passthrough),
# the KubeVirt CR permitting the class's resource name, one tally-controller
# (--leader-elect=false: it is the leader, its binder places) serving the
# GPUDevice validating and the VMI mutating webhook, both configurations
# pointing at 127.0.0.1 with the caBundle it injects (the VMI one with the
# matchConditions that send only VMIs with Tally annotations). Then
# build/bench/bench_vmi:
#  1. latency: VMIS VMIs with a device template of 1..4 GPUs (1 in 4 also a
#     held device), each followed by a VMI without Tally annotations, created
#     one after the other; client wall time of each, and the webhook's review
#     and placement-wait histograms from /metrics before and after;
#  2. race: ROUNDS rounds of 20 VMIs (10 threads) for one held GPUDevice;
#     exactly one admitted per round, attach conflicts per second.
#
# Environment: BUILD (build tree with bench/bench_vmi and bin/tally-controller,
# default <repo>/build), TALLY_CONTROLLER_BIN (overrides the binary),
# TALLY_BIN_DIR / TALLY_E2E_ROOT (see e2e/cluster/up).
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
nodes=1000 vmis=300 rounds=10 keep=0
while (($#)); do
  case "$1" in
    --nodes) nodes="$2"; shift 2 ;;
    --vmis) vmis="$2"; shift 2 ;;
    --rounds) rounds="$2"; shift 2 ;;
    --keep) keep=1; shift ;;
    -h|--help) sed -n '2,/^set -uo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done
log() { printf '[bench/controller/vmi] %s\n' "$*" >&2; }
build="${BUILD:-$repo/build}"
bench="$build/bench/bench_vmi"
controller="${TALLY_CONTROLLER_BIN:-$build/bin/tally-controller}"
[[ -x "$bench" ]] || { log "$bench not built (target bench_vmi)"; exit 1; }
[[ -x "$controller" ]] || { log "$controller not built"; exit 1; }
# shellcheck source=../lib.sh
source "$repo/bench/lib.sh"
name="bench-vmi-$$"
ctl_pid=""
cleanup() {
  bench_stop "$ctl_pid"
  if ((keep)); then log "cluster $name kept (e2e/cluster/down --name $name)"; else "$repo/e2e/cluster/down" --name "$name" >/dev/null 2>&1; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM
loadavg() { cut -d' ' -f1-3 /proc/loadavg; }

bench_cluster_up || exit 1
t1=$SECONDS
"$TALLY_E2E_BIN/tally-fixtures" nodes --count "$nodes" --prefix n- --mode vm-passthrough \
  --resource nvidia.com/GH100_H200_SXM_141GB=8 --wait-ready --timeout 15m --kubeconfig "$state/kubeconfig" >/dev/null ||
  { log "creating nodes failed"; exit 1; }
log "$nodes nodes Ready in $((SECONDS - t1))s"
for ns in tally-system kubevirt bench-vmi bench-race; do k create namespace "$ns" >/dev/null || exit 1; done

webhook_port="$(bench_free_port)" ops_port="$(bench_free_port)"
k apply -f - >/dev/null <<EOF || exit 1
apiVersion: kubevirt.io/v1
kind: KubeVirt
metadata: {name: kubevirt, namespace: kubevirt}
spec:
  configuration:
    permittedHostDevices:
      pciHostDevices:
      - {pciVendorSelector: "10DE:2335", resourceName: nvidia.com/GH100_H200_SXM_141GB, externalResourceProvider: true}
EOF
# The shipped GPUDevice and VMI webhooks (manifests/webhook/), called by URL.
python3 "$repo/manifests/render-webhooks.py" --url "https://127.0.0.1:$webhook_port" --name tally-bench-vmi-devices \
  gpudevices >"$state/webhook-devices.json" || exit 1
python3 "$repo/manifests/render-webhooks.py" --url "https://127.0.0.1:$webhook_port" --name tally-bench-vmi-vmis \
  vmis >"$state/webhook-vmis.json" || exit 1
k apply -f "$state/webhook-devices.json" -f "$state/webhook-vmis.json" >/dev/null || exit 1

started=$SECONDS
setsid "$controller" --kubeconfig "$state/kubeconfig" --leader-elect=false \
  --webhook-configurations tally-bench-vmi-devices --mutating-webhook-configurations tally-bench-vmi-vmis \
  --webhook-bind-address 127.0.0.1 --webhook-port "$webhook_port" --ops-bind-address 127.0.0.1 --ops-port "$ops_port" \
  --cert-dir "$state/controller-certs" --cert-ip-addresses 127.0.0.1 --controller-identity tally-e2e-admin \
  --webhook-client-ca-file "$state/pki/ca.crt" --webhook-allowed-clients tally-webhook-client \
  --log-format text --unorganized-gpu-namespaces=allow >>"$state/logs/tally-controller.log" 2>&1 &
ctl_pid=$!
alive() { kill -0 "$ctl_pid" 2>/dev/null || { log "tally-controller exited:"; tail -n 20 "$state/logs/tally-controller.log" >&2; exit 1; }; }
until [[ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$ops_port/readyz")" == 200 ]]; do alive; sleep 0.1; done
log "tally-controller ready $((SECONDS - started))s after start"
# The API server calls the VMI webhook once the caBundle is in: a VMI naming a
# device that does not exist is refused.
probe() {
  k create -f - 2>&1 <<'EOF' || true
apiVersion: kubevirt.io/v1
kind: VirtualMachineInstance
metadata: {name: probe, namespace: bench-vmi, annotations: {gpu.tally.dev/devices: nothing}}
spec: {domain: {devices: {disks: []}, resources: {requests: {memory: 1Gi}}}}
EOF
}
until [[ "$(probe)" == *DeviceUnknown* ]]; do alive; ((SECONDS - started < 120)) || { log "the VMI webhook is never called"; exit 1; }; sleep 0.5; done
# And the GPUDevice webhook's caBundle (a held device's create goes through it).
until [[ -n "$(k get validatingwebhookconfiguration tally-bench-vmi-devices -o jsonpath='{.webhooks[0].clientConfig.caBundle}')" ]]; do
  alive; sleep 0.5
done

echo "== VM door, $nodes kwok nodes, one tally-controller (load average before: $(loadavg), $(nproc) CPUs)"
"$bench" --kubeconfig "$state/kubeconfig" --metrics-url "http://127.0.0.1:$ops_port/metrics" --nodes "$nodes" \
  --vmis "$vmis" --rounds "$rounds"
rc=$?
echo "== load average after: $(loadavg)"
alive
exit "$rc"
