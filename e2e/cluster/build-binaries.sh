#!/usr/bin/env bash
# Builds the pinned control plane (etcd, kube-apiserver, kube-scheduler,
# kube-controller-manager, kubectl, kwok) from their Go modules, fetched by the
# go command through one wrapper module (tools/controlplane), into a cache
# outside the repository, keyed by version, plus Tally's test fixtures tool
# (tools/fixtures, rebuilt when its source changes).
# Reuses what is already there. Prints the bin directory on its last line.
# Concurrent runs wait for each other (flock on the cache).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=versions.env
source "$here/versions.env"
cache="${TALLY_CACHE:-$HOME/.cache/tally}"
bin="$cache/bin/$CONTROL_PLANE_MODULE"
wrapper="$cache/src/$CONTROL_PLANE_MODULE"
mkdir -p "$bin"
# One build at a time per cache: a second caller waits, then finds the binaries.
exec 9>"$cache/.build.lock"
flock 9
export CGO_ENABLED=0 GOFLAGS=-mod=mod GOTOOLCHAIN=local

log() { echo "[build-binaries] $*" >&2; }

# One go build for every missing binary, through one wrapper module: the module
# graph is resolved once (-mod=mod may add requirements, which would otherwise
# change between builds and invalidate compiled packages) and every package the
# binaries share (client-go, apiserver, etcd's client and server, grpc, ...)
# compiles once. Measured cold on 2 cores: three modules built side by side
# compiled k8s.io/* of kwok's own versions and a second etcd and grpc.
build_control_plane() {
  local work="$wrapper"
  mkdir -p "$work"
  cp "$here/tools/controlplane/main.go" "$work/main.go"
  if [[ ! -f "$work/go.mod" ]]; then
    # The release's own go.mod (it lists the staging modules), fetched by the go
    # command like any module (GOPROXY as configured); its JSON names the file in
    # the module cache (GoMod). The build below needs the module anyway.
    local json gomod
    if ! json="$(cd "$work" && go mod download -json "k8s.io/kubernetes@${K8S_VERSION}")"; then
      log "go mod download k8s.io/kubernetes@${K8S_VERSION} failed: $json"
      return 1
    fi
    gomod="$(sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",\{0,1\}$/\1/p' <<<"$json")"
    [[ -n "$gomod" && -f "$gomod" ]] || { log "go mod download -json named no GoMod file: $json"; return 1; }
    cp "$gomod" "$work/upstream.mod" || return 1
    "$here/tools/controlplane/gen-go-mod.sh" "$K8S_VERSION" "$work/upstream.mod" "$work/go.mod.tmp" \
      "$ETCD_VERSION" "$KWOK_VERSION" || return 1
    mv "$work/go.mod.tmp" "$work/go.mod"
  fi
  local minor="${K8S_VERSION#v1.}"; minor="${minor%%.*}"
  # -X of a package a binary does not link is ignored, so one set serves all.
  local ld="-s -w -X sigs.k8s.io/kwok/pkg/consts.Version=${KWOK_VERSION}" pkg
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ld+=" -X $pkg.gitVersion=${K8S_VERSION} -X $pkg.gitMajor=1 -X $pkg.gitMinor=${minor} -X $pkg.gitTreeState=clean"
  done
  (($#)) || return 0
  local out="$bin/.new" pkgs=() cmd
  for cmd in "$@"; do
    case "$cmd" in
      etcd) pkgs+=(go.etcd.io/etcd/server/v3) ;; # go names it "server" (the /v3 is a major version)
      kwok) pkgs+=(sigs.k8s.io/kwok/cmd/kwok) ;;
      *) pkgs+=("k8s.io/kubernetes/cmd/$cmd") ;;
    esac
  done
  log "building $* (Kubernetes ${K8S_VERSION}, etcd ${ETCD_VERSION}, kwok ${KWOK_VERSION})"
  rm -rf "$out"
  mkdir -p "$out"
  (cd "$work" && go build -trimpath -ldflags "$ld" -o "$out/" "${pkgs[@]}") || return 1
  [[ ! -e "$out/server" ]] || mv "$out/server" "$out/etcd"
  for cmd in "$@"; do
    [[ -x "$out/$cmd" ]] || { log "go build wrote no $cmd into $out"; return 1; }
    mv "$out/$cmd" "$bin/$cmd"
  done
  rmdir "$out"
}

# The fixtures tool is keyed by the hash of its source and the wrapper module's versions.
# It is compiled as a package of the control plane's wrapper module: client-go and
# every dependency then resolve to the versions kube-apiserver was built with,
# so nothing new is downloaded and the compiled packages are reused.
build_fixtures() {
  local src="$here/tools/fixtures" sum
  sum="$(cat "$src/go.mod" "$src"/*.go | sha256sum | cut -c1-16)-${CONTROL_PLANE_MODULE}"
  if [[ -x "$bin/tally-fixtures" && "$(cat "$bin/.tally-fixtures.sum" 2>/dev/null)" == "$sum" ]]; then
    return 0
  fi
  local work="$wrapper"
  [[ -f "$work/go.mod" ]] || build_control_plane # writes the wrapper's go.mod
  rm -rf "$work/fixtures"
  mkdir -p "$work/fixtures"
  cp "$src"/*.go "$work/fixtures/"
  log "building tally-fixtures (client-go of ${K8S_VERSION})"
  (cd "$work" && go build -trimpath -ldflags "-s -w" -o "$bin/tally-fixtures.tmp" ./fixtures)
  mv "$bin/tally-fixtures.tmp" "$bin/tally-fixtures"
  echo "$sum" > "$bin/.tally-fixtures.sum"
}

# TALLY_BINARIES=tools builds only what tests need against an external cluster
# (kubectl, tally-fixtures); it is the default when TALLY_E2E_KUBECONFIG is set
# (the kind path). e2e/cluster/up always asks for all; node adds kubelet,
# kubeadm and kube-proxy for the offline kind node image.
what="${TALLY_BINARIES:-$([[ -n "${TALLY_E2E_KUBECONFIG:-}" ]] && echo tools || echo all)}"
case "$what" in
  all) wanted=(etcd kube-apiserver kube-scheduler kube-controller-manager kubectl kwok) ;;
  tools) wanted=(kubectl) ;;
  # The offline kind node (e2e/kind/offline): the node's own binaries and the
  # control plane's component images.
  node) wanted=(etcd kube-apiserver kube-scheduler kube-controller-manager kubectl kwok kubelet kubeadm kube-proxy) ;;
  *) log "TALLY_BINARIES must be all, tools or node, not '$what'"; exit 2 ;;
esac
start=$(date +%s)
missing=()
for b in "${wanted[@]}"; do [[ -x "$bin/$b" ]] || missing+=("$b"); done
if ((${#missing[@]})); then
  log "missing: ${missing[*]} (cache: $bin)"
  build_control_plane "${missing[@]}" || { log "building ${missing[*]} failed (see above)"; exit 1; }
  log "built in $(( $(date +%s) - start ))s"
else
  log "all binaries ($what) cached in $bin"
fi
build_fixtures
echo "$bin"
