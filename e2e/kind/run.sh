#!/usr/bin/env bash
# Tally on kind: create a cluster, build and load the image, install the
# platform CRDs, kwok (in-cluster) and Tally (manifests/ through the kind
# overlay), check kwok with a canary node, run the e2e suite against the
# cluster, add sample fake GPU nodes, and print `export KUBECONFIG=<path>` as
# the last line.
#
#   e2e/kind/run.sh            everything above; the cluster is kept
#   e2e/kind/run.sh --no-tests the same without the suite
#   e2e/kind/run.sh down       delete the cluster and its state
#
# Needs docker (a running engine), kind, kubectl, and for the suite the
# project's build dependencies (`make deps`) with cmake/ctest.
#
# Environment:
#   TALLY_KIND_NAME        cluster name (default tally-e2e)
#   TALLY_KIND_NODE_IMAGE  kind node image (default kindest/node:$K8S_VERSION)
#   TALLY_IMAGE            image tag to build and load (default tally:dev; the
#                          manifests reference tally:dev)
#   TALLY_KIND_GPU_NODES   sample fake nodes per GPU mode, created after the
#                          suite for exploring (default 2; 0 = none)
#   TALLY_BUILD_DIR        build tree for the suite (default <repo>/build-kind)
#   KWOK_MANIFEST_BASE     where kwok's release manifests are fetched from
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
# shellcheck source=/dev/null
source "$root/e2e/cluster/versions.env"

name="${TALLY_KIND_NAME:-tally-e2e}"
node_image="${TALLY_KIND_NODE_IMAGE:-kindest/node:${K8S_VERSION}}"
image="${TALLY_IMAGE:-tally:dev}"
gpu_nodes="${TALLY_KIND_GPU_NODES:-2}"
build_dir="${TALLY_BUILD_DIR:-$root/build-kind}"
kwok_base="${KWOK_MANIFEST_BASE:-https://github.com/kubernetes-sigs/kwok/releases/download/${KWOK_VERSION}}"
state="$here/.state/$name"
kubeconfig="$state/kubeconfig"

log() { printf '[kind-e2e] %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

run_tests=1
action=up
for arg in "$@"; do
  case "$arg" in
    down) action=down ;;
    --no-tests) run_tests=0 ;;
    -h|--help) sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown argument: $arg" ;;
  esac
done

need() { command -v "$1" >/dev/null 2>&1 || die "$1 not found in PATH ($2)"; }
need kind "https://kind.sigs.k8s.io"
need kubectl "a client within one minor version of ${K8S_VERSION}"

if [[ "$action" == down ]]; then
  if kind get clusters 2>/dev/null | grep -qx "$name"; then
    kind delete cluster --name "$name"
  fi
  rm -rf "$state"
  log "cluster $name deleted"
  exit 0
fi

need docker "with a running engine"
docker info >/dev/null 2>&1 || die "docker cannot reach an engine"
if (( run_tests )); then
  need cmake "make deps installs it"
  need ctest "make deps installs it"
fi

k() { kubectl --kubeconfig "$kubeconfig" "$@"; }

dump_diagnostics() {
  log "diagnostics:"
  k get nodes -o wide >&2 || true
  k get pods -A -o wide >&2 || true
  k -n tally-system get events --sort-by=.lastTimestamp >&2 || true
  local c
  for c in deploy/tally-extender; do
    k -n tally-system logs "$c" --all-containers --tail=200 >&2 || true
  done
  k -n tally-system logs deploy/tally-scheduler -c kube-scheduler --tail=200 >&2 || true
  k -n tally-system logs deploy/tally-scheduler -c tally-extender --tail=200 >&2 || true
}

mkdir -p "$state"

# 0. The manifests pass the offline checks before anything is built.
"$root/manifests/validate.sh" >&2 || die "manifests/validate.sh failed"

# 1. Cluster (reused when it already exists).
reused=0
if kind get clusters 2>/dev/null | grep -qx "$name"; then
  log "reusing kind cluster $name"
  reused=1
  kind get kubeconfig --name "$name" > "$kubeconfig"
else
  log "creating kind cluster $name ($node_image)"
  kind create cluster --name "$name" --image "$node_image" \
    --config "$here/kind-config.yaml" --kubeconfig "$kubeconfig" --wait 180s
fi
chmod 600 "$kubeconfig"

# 2. Image.
log "building $image"
docker build -t "$image" "$root"
log "loading $image into $name"
kind load docker-image "$image" --name "$name"

# 3. Platform CRDs (KubeVirt, HNC, kube-dc) that Tally reads; same files as the
#    local control plane of e2e/cluster.
crds="$root/e2e/cluster/crds"
[[ -d "$crds" ]] || die "$crds missing: the platform CRDs come from the e2e/cluster part"
log "installing platform CRDs from $crds"
k apply --server-side -f "$crds"
k wait --for=condition=Established crd --all --timeout=120s
# Tally's controller reads billing-plans in the platform namespace kube-dc.
k create namespace kube-dc --dry-run=client -o yaml | k apply -f -

# 4. kwok in the cluster, from its release manifests (needs network access).
#    kwok.yaml: CRDs + controller in kube-system, managing nodes annotated
#    kwok.x-k8s.io/node=fake; stage-fast.yaml: node and pod lifecycle stages.
log "installing kwok ${KWOK_VERSION} from ${kwok_base}"
k apply --server-side -f "${kwok_base}/kwok.yaml"
k wait --for=condition=Established crd/stages.kwok.x-k8s.io --timeout=120s
k apply --server-side -f "${kwok_base}/stage-fast.yaml"
k -n kube-system patch deployment kwok-controller --type=merge \
  -p '{"spec":{"template":{"spec":{"nodeSelector":{"tally.dev/e2e-host":"true"}}}}}'
k -n kube-system rollout status deployment/kwok-controller --timeout=180s

# 5. Tally: the base manifests through the kind overlay.
log "applying manifests/ (kind overlay)"
k apply --server-side -k "$here"
k wait --for=condition=Established crd/gpudeviceclasses.gpu.tally.dev crd/gpudevices.gpu.tally.dev --timeout=60s
# A reused cluster keeps pods of the previous tally:dev; the tag did not change.
if (( reused )); then
  k -n tally-system rollout restart deployment -l app.kubernetes.io/name=tally
fi
for d in tally-extender tally-scheduler; do  # tally-controller: not built yet
  if ! k -n tally-system rollout status "deployment/$d" --timeout=300s; then
    dump_diagnostics
    die "deployment $d did not become ready"
  fi
done

# 6. kwok works: a canary fake node (no GPUs) must become Ready, then goes away
#    so the suite starts from the same empty fleet as on the local control plane.
# The inventory JSON is quoted for YAML; inside the here-document it expands.
# shellcheck disable=SC2016
fake_node() { # name mode [gpu-resource quantity [inventory-json]]
  cat <<YAML
---
apiVersion: v1
kind: Node
metadata:
  name: $1
  labels:
    type: kwok
    tally.dev/sample: "true"
    kubernetes.io/hostname: $1
    kubernetes.io/os: linux
    kubernetes.io/arch: amd64
    kube-dc.com/gpu.workload-mode: $2
    kube-dc.com/gpu.expected-workload-mode: $2
  annotations:
    kwok.x-k8s.io/node: fake
    node.alpha.kubernetes.io/ttl: "0"${5:+
    gpu.tally.dev/inventory: '$5'}
status:
  allocatable: {cpu: "64", memory: 512Gi, pods: "110"${3:+, $3: \"$4\"}}
  capacity: {cpu: "64", memory: 512Gi, pods: "110"${3:+, $3: \"$4\"}}
  nodeInfo: {architecture: amd64, operatingSystem: linux}
YAML
}
parents() { # count types-json
  local i out=""
  for ((i = 0; i < $1; i++)); do
    out+="${out:+,}{\"id\":\"0000:$(printf '%02x' $((0x3b + i))):00.0\",\"healthy\":true,\"types\":$2}"
  done
  printf '{"parents":[%s]}' "$out"
}
log "checking that kwok manages fake nodes"
fake_node tally-kwok-canary disabled | k apply -f -
if ! k wait --for=condition=Ready node/tally-kwok-canary --timeout=120s; then
  dump_diagnostics
  die "kwok did not make the canary node Ready"
fi
k delete node tally-kwok-canary --wait=true

# 7. The e2e suite against this cluster. The suite takes the cluster from
#    TALLY_E2E_KUBECONFIG instead of starting a local control plane, creates its
#    own kwok GPU nodes (annotated kwok.x-k8s.io/node=fake), and schedules its
#    pods with the scheduler named below; Tally already runs in the cluster.
rc=0
if (( run_tests )); then
  log "building the e2e suite in $build_dir"
  cmake -S "$root" -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DTALLY_E2E=ON -DTALLY_BENCH=OFF
  cmake --build "$build_dir"
  log "running ctest -L e2e"
  (
    cd "$build_dir"
    TALLY_E2E_KUBECONFIG="$kubeconfig" \
    TALLY_E2E_SCHEDULER_NAME=tally-scheduler \
    TALLY_E2E_IN_CLUSTER=1 \
      ctest -L e2e --output-on-failure
  ) || rc=$?
  if (( rc != 0 )); then
    dump_diagnostics
    log "e2e suite failed (exit $rc); the cluster is kept for inspection"
  fi
fi

# 8. Sample fake GPU nodes to explore with kubectl (after the suite, so they
#    never change the capacity its tests count): per mode TALLY_KIND_GPU_NODES
#    nodes with the device plugin's allocatable, the mode labels and, for vGPU
#    and HAMi, the inventory annotation. Labelled tally.dev/sample=true.
if (( gpu_nodes > 0 )); then
  log "creating $((gpu_nodes * 3)) sample fake GPU nodes"
  {
    for ((i = 0; i < gpu_nodes; i++)); do
      fake_node "tally-kwok-passthrough-$i" vm-passthrough nvidia.com/GH100_H200_SXM_141GB 8
      fake_node "tally-kwok-vgpu-$i" vm-vgpu nvidia.com/A100-10C 8 \
        "$(parents 2 '{"nvidia.com/A100-10C":{"total":4,"created":0,"available":4}}')"
      fake_node "tally-kwok-hami-$i" pod-hami nvidia.com/gpu 20 "$(parents 2 '{}')"
    done
  } | k apply -f -
  k wait --for=condition=Ready node -l tally.dev/sample=true --timeout=120s
fi

log "cluster $name is up; delete it with: $0 down"
echo "export KUBECONFIG=$kubeconfig"
exit "$rc"
