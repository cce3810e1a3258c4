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
#   e2e/kind/run.sh --offline  no registry: a private Docker engine, a node
#                              image and component images built from the pinned
#                              sources and Debian packages (cached outside the
#                              repository), then the same steps; the cluster
#                              and the engine are removed at the end
#
# Needs docker (a running engine), kind, kubectl, and for the suite the
# project's build dependencies (`make deps`) with cmake/ctest. --offline needs
# root, go and the Debian archive (it installs docker.io and debootstrap), and
# builds kind itself.
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
#   TALLY_PREBUILT_BIN     --offline: a folder with tally-extender,
#                          tally-controller and tallyctl compiled on this
#                          (bookworm) host, put into the image instead of
#                          compiling the Dockerfile's build stage
#   TALLY_KIND_KEEP=1      --offline: keep the engine and cluster running
#   TALLY_KIND_CTEST_FLAGS more ctest flags for the suite, split at spaces
#                          (e.g. -V: every scenario's PASS lines, not only a
#                          failed one's)
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
offline="${TALLY_KIND_OFFLINE:-0}"
for arg in "$@"; do
  case "$arg" in
    down) action=down ;;
    --no-tests) run_tests=0 ;;
    --offline) offline=1 ;;
    -h|--help) sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown argument: $arg" ;;
  esac
done

need() { command -v "$1" >/dev/null 2>&1 || die "$1 not found in PATH ($2)"; }

# Offline: a private engine (e2e/image/dockerd.sh), the base and node images
# built here (e2e/image/lib.sh, offline/build.sh), kind from the Go module proxy.
# Everything started is removed on exit; caches stay outside the repository.
if ((offline)); then
  [[ "$action" == up ]] || die "--offline removes its cluster at the end; there is nothing to take down"
  export TALLY_LOG_TAG=kind-e2e
  # shellcheck source=../image/dockerd.sh
  source "$root/e2e/image/dockerd.sh"
  # shellcheck source=../image/lib.sh
  source "$root/e2e/image/lib.sh"
  # shellcheck source=offline/build.sh
  source "$here/offline/build.sh"
  offline_started=$(date +%s)
  offline_cleanup() {
    local rc=$?
    if [[ "${TALLY_KIND_KEEP:-0}" == 1 ]]; then
      log "kept: DOCKER_HOST=$DOCKER_HOST (dockerd pid $TALLY_DOCKERD_PID), kubeconfig $kubeconfig"
      exit "$rc"
    fi
    if [[ -n "${TALLY_KIND_BIN:-}" ]] && "$TALLY_KIND_BIN" get clusters 2>/dev/null | grep -qx "$name"; then
      "$TALLY_KIND_BIN" delete cluster --name "$name" >&2 || true
    fi
    tally_dockerd_stop
    rm -rf "$state"
    log "offline run removed its cluster and engine after $(($(date +%s) - offline_started)) s"
    exit "$rc"
  }
  trap offline_cleanup EXIT
  trap 'exit 130' INT TERM
  tally_dockerd_start tally
  tally_offline_build
  kind() { "$TALLY_KIND_BIN" "$@"; }
  docker() { tally_docker "$@"; }
  node_image="${TALLY_KIND_NODE_IMAGE:-$TALLY_OFFLINE_NODE}"
  # The pinned kubectl (a fresh machine has none).
  export PATH="$PATH:$TALLY_OFFLINE_BIN"
else
  need kind "https://kind.sigs.k8s.io"
fi
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
  for c in deploy/tally-extender deploy/tally-controller; do
    k -n tally-system logs "$c" --all-containers --tail=200 >&2 || true
  done
  k -n tally-system describe pods >&2 || true
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
  config="$here/kind-config.yaml"
  if ((offline)); then
    config="$state/kind-config.yaml"
    sed "s/@ETCD_VERSION@/${ETCD_VERSION}/" "$here/kind-config.offline.yaml" >"$config"
  fi
  kind create cluster --name "$name" --image "$node_image" \
    --config "$config" --kubeconfig "$kubeconfig" --wait 300s
fi
chmod 600 "$kubeconfig"

# 2. Image.
if ((offline)); then
  tally_build_image "$root" "$image" "${TALLY_PREBUILT_BIN:-}" || die "building $image failed"
  # The node has no crictl (kind load needs it): containerd's own client.
  log "loading $image into $name"
  docker save "$image" | docker exec -i "$name-control-plane" ctr -n k8s.io images import - >&2
  # The scheduler Deployment names upstream's kube-scheduler image; the node has
  # the same binary as tally.local/kube-scheduler: tag it with that name.
  sched_image="$(k kustomize "$here" | sed -n 's/^[[:space:]]*image:[[:space:]]*\(.*kube-scheduler:.*\)$/\1/p' | head -n 1)"
  [[ -n "$sched_image" ]] || die "no kube-scheduler image in the manifests"
  docker exec "$name-control-plane" ctr -n k8s.io images tag --force "$TALLY_OFFLINE_SCHEDULER" "$sched_image" >&2
else
  log "building $image"
  docker build -t "$image" "$root"
  log "loading $image into $name"
  kind load docker-image "$image" --name "$name"
fi

# 3. Platform CRDs (KubeVirt, HNC, kube-dc) that Tally reads; same files as the
#    local control plane of e2e/cluster.
crds="$root/e2e/cluster/crds"
[[ -d "$crds" ]] || die "$crds missing: the platform CRDs come from the e2e/cluster part"
log "installing platform CRDs from $crds"
k apply --server-side -f "$crds"
k wait --for=condition=Established crd --all --timeout=120s
# Tally reads billing-plans and (kind overlay) its reservation ledger ConfigMap
# in the platform namespace kube-dc.
k create namespace kube-dc --dry-run=client -o yaml | k apply -f -
# The KubeVirt CR that Tally's VMI webhook reads (permitted host devices).
k apply --server-side -f "$here/platform/kubevirt.yaml"

# 4. kwok in the cluster, from its release manifests (needs network access).
#    kwok.yaml: CRDs + controller in kube-system, managing nodes annotated
#    kwok.x-k8s.io/node=fake; stage-fast.yaml: node and pod lifecycle stages.
if ((offline)); then
  # The pinned kwok binary (image tally.local/kwok) with the local control
  # plane's stages, configured from files (no kwok CRDs needed).
  log "installing kwok ${KWOK_VERSION} (offline image)"
  k -n kube-system create configmap kwok-config --dry-run=client -o yaml \
    --from-file="$here/kwok-offline-config.yaml" \
    --from-file="$root/e2e/cluster/kwok/stage-node-ready.yaml" \
    --from-file="$root/e2e/cluster/kwok/stage-pod-running.yaml" \
    --from-file="$root/e2e/cluster/kwok/stage-pod-delete.yaml" | k apply --server-side -f -
  sed "s/@KWOK_VERSION@/${KWOK_VERSION}/" "$here/kwok-offline.yaml" | k apply --server-side -f -
else
  log "installing kwok ${KWOK_VERSION} from ${kwok_base}"
  k apply --server-side -f "${kwok_base}/kwok.yaml"
  k wait --for=condition=Established crd/stages.kwok.x-k8s.io --timeout=120s
  k apply --server-side -f "${kwok_base}/stage-fast.yaml"
  k -n kube-system patch deployment kwok-controller --type=merge \
    -p '{"spec":{"template":{"spec":{"nodeSelector":{"tally.dev/e2e-host":"true"}}}}}'
fi
if ! k -n kube-system rollout status deployment/kwok-controller --timeout=180s; then
  dump_diagnostics
  die "kwok-controller did not become ready"
fi

# DaemonSets of the cluster itself (kube-proxy, kindnet) would get a pod on
# every fake node, which kwok "runs": tests counting pods on a node would see
# them. They stay on real nodes (kwok's nodes carry type=kwok).
for ds in $(k -n kube-system get daemonsets -o name); do
  k -n kube-system patch "$ds" --type=merge -p \
    '{"spec":{"template":{"spec":{"affinity":{"nodeAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":{"nodeSelectorTerms":[{"matchExpressions":[{"key":"type","operator":"NotIn","values":["kwok"]}]}]}}}}}}}' >&2
done

# 5. Tally: the base manifests through the kind overlay. What the platform
#    provides first: the standalone extender's serving pair and the CA of the
#    scheduler's client certificate (Secret tally-extender-tls), and the CA
#    ConfigMap the controller's Deployment mounts (tally-webhook-client-ca).
pki="$state/pki"
if [[ ! -f "$pki/ca.crt" ]]; then
  mkdir -p "$pki"
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 30 \
    -keyout "$pki/ca.key" -out "$pki/ca.crt" -subj "/CN=tally-kind-ca" \
    -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" 2>/dev/null
  openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout "$pki/extender.key" \
    -out "$pki/extender.csr" -subj "/CN=tally-extender" 2>/dev/null
  printf '%s\n' "basicConstraints=CA:FALSE" "extendedKeyUsage=serverAuth" \
    "subjectAltName=DNS:tally-extender.tally-system.svc,DNS:tally-extender.tally-system.svc.cluster.local" >"$pki/extender.ext"
  openssl x509 -req -in "$pki/extender.csr" -CA "$pki/ca.crt" -CAkey "$pki/ca.key" -CAcreateserial -days 30 \
    -sha256 -extfile "$pki/extender.ext" -out "$pki/extender.crt" 2>/dev/null
fi
k create namespace tally-system --dry-run=client -o yaml | k apply -f - >/dev/null
k -n tally-system create secret generic tally-extender-tls --from-file=tls.crt="$pki/extender.crt" \
  --from-file=tls.key="$pki/extender.key" --from-file=ca.crt="$pki/ca.crt" --dry-run=client -o yaml | k apply -f - >/dev/null
k -n tally-system create configmap tally-webhook-client-ca --from-file=ca.crt="$pki/ca.crt" --dry-run=client -o yaml |
  k apply -f - >/dev/null
log "applying manifests/ (kind overlay)"
k apply --server-side -k "$here"
k wait --for=condition=Established crd/gpudeviceclasses.gpu.tally.dev crd/gpudevices.gpu.tally.dev --timeout=60s
# A reused cluster keeps pods of the previous tally:dev; the tag did not change.
if (( reused )); then
  k -n tally-system rollout restart deployment -l app.kubernetes.io/name=tally
fi
for d in tally-extender tally-scheduler tally-controller; do
  if ! k -n tally-system rollout status "deployment/$d" --timeout=300s; then
    dump_diagnostics
    die "deployment $d did not become ready"
  fi
done
# Every Tally Deployment Available, and the leader injected its CA into every
# webhook configuration of the base (none ships a caBundle).
k -n tally-system wait --for=condition=Available deployment -l app.kubernetes.io/name=tally --timeout=120s
ca_ok=0
for ((i = 0; i < 60; i++)); do
  missing="$(k get validatingwebhookconfigurations,mutatingwebhookconfigurations -l app.kubernetes.io/name=tally \
    -o jsonpath='{range .items[*]}{range .webhooks[*]}{.name}{"="}{.clientConfig.caBundle}{"\n"}{end}{end}' | awk -F= '$2 == "" {print $1}')"
  if [[ -z "$missing" ]]; then ca_ok=1; break; fi
  sleep 2
done
if ((!ca_ok)); then
  dump_diagnostics
  die "webhooks without an injected caBundle: $missing"
fi
log "Tally is running: extender, scheduler and controller Available; webhook CAs injected"

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
  # An existing build tree (TALLY_BUILD_DIR=build after `make build`) is only
  # brought up to date, not reconfigured.
  if [[ ! -f "$build_dir/CMakeCache.txt" ]]; then
    cmake -S "$root" -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
      -DTALLY_E2E=ON -DTALLY_BENCH=OFF
  fi
  cmake --build "$build_dir" --target tally-extender tally-controller tallyctl
  # The tests that take the cluster from TALLY_E2E_KUBECONFIG: the suite's
  # scenarios (e2e_smoke and the other e2e tests check or start local control
  # planes; e2e_smoke skips itself with exit 77 when handed a cluster).
  suite_tests='^e2e_(cluster_binaries|suite_)'
  log "running ctest -L e2e -R '$suite_tests'"
  (
    cd "$build_dir"
    TALLY_E2E_KUBECONFIG="$kubeconfig" \
    TALLY_E2E_SCHEDULER_NAME=tally-scheduler \
    TALLY_E2E_IN_CLUSTER=1 \
    TALLY_E2E_LEDGER_CONFIGMAP=kube-dc/gpu-reservation-ledger \
      ctest -L e2e -R "$suite_tests" --output-on-failure ${TALLY_KIND_CTEST_FLAGS:-}
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
