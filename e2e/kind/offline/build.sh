#!/usr/bin/env bash
# Builds the offline kind node image and what kind itself needs, without any
# container registry: the pinned Kubernetes binaries (kubelet, kubeadm,
# kube-proxy and the control plane, e2e/cluster/build-binaries.sh), kind
# (go install from the Go module proxy), kind's base layout from the same
# module, Debian's systemd/containerd/runc/CNI plugins, and tiny component
# images made from the pinned binaries (kube-apiserver, kube-controller-manager,
# kube-scheduler, etcd, kube-proxy, pause from Kubernetes' source, kwok) named
# tally.local/NAME:TAG as the kind config (kind-config.offline.yaml) tells
# kubeadm. CoreDNS is not built (the addon is skipped; nothing of Tally's
# resolves names).
#
# Sourced by e2e/kind/run.sh --offline after tally_dockerd_start. Sets
#   TALLY_KIND_BIN          the kind binary
#   TALLY_OFFLINE_BIN       the pinned Kubernetes binaries (kubectl among them)
#   TALLY_OFFLINE_NODE      the node image tag (reused when present; keyed by
#                           versions and the hash of this folder)
#   TALLY_OFFLINE_IMAGES    tags of the images loaded into the node
#   TALLY_OFFLINE_SCHEDULER tally.local/kube-scheduler:K8S_VERSION

offline_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
PAUSE_TAG=3.10

tally_offline_build() {
  local root; root="$(cd "$offline_dir/../../.." && pwd)"
  # shellcheck source=/dev/null
  source "$root/e2e/cluster/versions.env"
  local cache; cache="$(tally_cache_dir)"
  local key; key="$(find "$offline_dir" "$root/e2e/cluster/versions.env" -type f | LC_ALL=C sort | xargs cat | sha256sum | cut -c1-12)"
  TALLY_OFFLINE_NODE="tally.local/kind-node:${K8S_VERSION}-${key}"
  TALLY_OFFLINE_SCHEDULER="tally.local/kube-scheduler:${K8S_VERSION}"
  TALLY_OFFLINE_KWOK="tally.local/kwok:${KWOK_VERSION}"

  # kind, from the Go module proxy (cached by version).
  local kind_dir="$cache/bin/kind-${KIND_VERSION}"
  TALLY_KIND_BIN="$kind_dir/kind"
  if [[ ! -x "$TALLY_KIND_BIN" ]]; then
    tally_log "go install sigs.k8s.io/kind@${KIND_VERSION}"
    GOBIN="$kind_dir" GOTOOLCHAIN=local GOFLAGS=-mod=mod go install "sigs.k8s.io/kind@${KIND_VERSION}"
  fi
  local bin; bin="$(TALLY_BINARIES=node "$root/e2e/cluster/build-binaries.sh" | tail -n 1)"
  TALLY_OFFLINE_BIN="$bin"
  if tally_docker image inspect "$TALLY_OFFLINE_NODE" >/dev/null 2>&1; then
    tally_log "node image $TALLY_OFFLINE_NODE cached"
    return 0
  fi
  local start; start=$(date +%s)
  local kind_mod k8s_mod
  kind_mod="$(cd "$cache" && GOFLAGS=-mod=mod go mod download -json "sigs.k8s.io/kind@${KIND_VERSION}" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')"
  k8s_mod="$(cd "$cache" && GOFLAGS=-mod=mod go mod download -json "k8s.io/kubernetes@${K8S_VERSION}" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')"
  [[ -d "$kind_mod/images/base/files" ]] || { tally_log "kind module has no images/base/files ($kind_mod)"; return 1; }
  [[ -f "$k8s_mod/build/pause/linux/pause.c" ]] || { tally_log "kubernetes module has no build/pause/linux/pause.c"; return 1; }

  # The Debian base images the component and node images start FROM, made
  # without a registry (e2e/image/lib.sh). Nothing else may have made them yet:
  # on a cold cache the kind run is the first user of this engine.
  tally_base_images bookworm || { tally_log "no Debian base images for the node image"; return 1; }

  local ctx; ctx="$(mktemp -d /tmp/tally-kind-node.XXXXXX)"
  # shellcheck disable=SC2064
  trap "rm -rf '$ctx'" RETURN

  # Component images: one folder per image, FROM scratch unless it needs tools.
  local comp="$ctx/components"
  mkdir -p "$comp"
  component() { # name tag binary [base]
    local d="$comp/$1"
    mkdir -p "$d"
    cp "$3" "$d/$(basename "$3")"
    if [[ -n "${4:-}" ]]; then
      printf 'FROM %s\n%s\nCOPY %s /usr/local/bin/\n' "$4" "${5:-}" "$(basename "$3")" >"$d/Dockerfile"
    else
      printf 'FROM scratch\nENV PATH=/usr/local/bin:/usr/bin:/bin\nCOPY %s /usr/local/bin/\n' "$(basename "$3")" >"$d/Dockerfile"
    fi
    tally_docker build -q -t "tally.local/$1:$2" "$d" >/dev/null
    TALLY_OFFLINE_IMAGES+=("tally.local/$1:$2")
  }
  TALLY_OFFLINE_IMAGES=()
  component kube-apiserver "$K8S_VERSION" "$bin/kube-apiserver"
  component kube-controller-manager "$K8S_VERSION" "$bin/kube-controller-manager"
  component kube-scheduler "$K8S_VERSION" "$bin/kube-scheduler"
  component etcd "$ETCD_VERSION" "$bin/etcd"
  component kwok "$KWOK_VERSION" "$bin/kwok"
  # kube-proxy runs iptables and conntrack.
  component kube-proxy "$K8S_VERSION" "$bin/kube-proxy" "debian:bookworm-slim" \
    'RUN apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends iptables conntrack && rm -rf /var/lib/apt/lists/*'
  # pause from Kubernetes' source, static.
  mkdir -p "$comp/pause"
  cp "$k8s_mod/build/pause/linux/pause.c" "$comp/pause/"
  printf 'FROM debian:bookworm AS build\nRUN apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends gcc libc6-dev\nCOPY pause.c /\nRUN gcc -Os -static -DVERSION=v%s -o /pause /pause.c && strip /pause\nFROM scratch\nCOPY --from=build /pause /pause\nUSER 65535:65535\nENTRYPOINT ["/pause"]\n' "$PAUSE_TAG" >"$comp/pause/Dockerfile"
  tally_docker build -q -t "tally.local/pause:$PAUSE_TAG" "$comp/pause" >/dev/null
  TALLY_OFFLINE_IMAGES+=("tally.local/pause:$PAUSE_TAG")

  # The node image's context.
  mkdir -p "$ctx/kind-base" "$ctx/bin" "$ctx/images" "$ctx/node"
  cp -r "$kind_mod/images/base/files/." "$ctx/kind-base/"
  chmod -R u+w "$ctx/kind-base"
  rm -f "$ctx/kind-base/etc/containerd/config.toml"
  cp "$bin/kubelet" "$bin/kubeadm" "$bin/kubectl" "$ctx/bin/"
  cp -r "$offline_dir/node/." "$ctx/node/"
  mkdir -p "$ctx/node/etc/containerd" "$ctx/node/kind"
  # containerd inside the node: restrict_oom_score_adj only where a process
  # cannot lower its oom_score_adj (without CAP_SYS_RESOURCE in the bounding
  # set, as in some sandboxes); the node inherits this host's bounding set.
  local restrict=false
  if ! (echo -999 >/proc/self/oom_score_adj) 2>/dev/null; then
    restrict=true
    tally_log "oom_score_adj cannot be lowered here: containerd in the node gets restrict_oom_score_adj = true"
    # and systemd could not apply kind's OOMScoreAdjust=-999 to containerd.
    sed -i '/^OOMScoreAdjust=/d' "$ctx/kind-base/etc/systemd/system/containerd.service"
  fi
  sed -e "s|@PAUSE_IMAGE@|tally.local/pause:$PAUSE_TAG|" -e "s|@RESTRICT_OOM@|$restrict|" \
    "$offline_dir/containerd-config.toml.in" >"$ctx/node/etc/containerd/config.toml"
  echo "$K8S_VERSION" >"$ctx/node/kind/version"
  tally_docker save "${TALLY_OFFLINE_IMAGES[@]}" -o "$ctx/images/components.tar"
  tally_log "building node image $TALLY_OFFLINE_NODE"
  tally_docker build -q -t "$TALLY_OFFLINE_NODE" -f "$offline_dir/node.Dockerfile" "$ctx" >/dev/null
  tally_log "node image built in $(($(date +%s) - start)) s"
}
