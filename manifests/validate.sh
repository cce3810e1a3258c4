#!/usr/bin/env bash
# Checks Tally's manifests, the kind overlay and the Dockerfile without a cluster:
# YAML parses, every kustomization resource exists, `kubectl kustomize` renders
# (when a kubectl is found), CRD schemas look structural and carry every SPEC
# field, the scheduler configuration has the extender entry, workloads, RBAC and
# webhooks are consistent. Exits non-zero on any problem.
#
#   manifests/validate.sh            offline checks
#   manifests/validate.sh --server   also `kubectl apply --dry-run=server` against
#                                    $KUBECONFIG (an API server that has the
#                                    platform CRDs, e.g. e2e/cluster/up)
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
server=0
for arg in "$@"; do
  case "$arg" in
    --server) server=1 ;;
    *) echo "usage: $0 [--server]" >&2; exit 2 ;;
  esac
done

command -v python3 >/dev/null || { echo "validate.sh: python3 is required" >&2; exit 2; }
python3 -c 'import yaml' 2>/dev/null || { echo "validate.sh: python3-yaml is required (apt-get install python3-yaml)" >&2; exit 2; }

# Prefer the pinned kubectl built for the local control plane, then PATH.
kubectl=""
for candidate in "${TALLY_CACHE:-$HOME/.cache/tally}"/bin/*/kubectl; do
  [[ -x "$candidate" ]] && kubectl="$candidate"
done
[[ -n "$kubectl" ]] || kubectl="$(command -v kubectl || true)"

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
rendered="" rendered_kind="" rc=0
if [[ -n "$kubectl" ]]; then
  echo "kustomize: $kubectl ($("$kubectl" version --client 2>/dev/null | head -1))"
  if "$kubectl" kustomize "$here" > "$tmp/base.yaml" 2> "$tmp/err"; then
    rendered="$tmp/base.yaml"
    echo "kustomize manifests/: $(grep -c '^kind:' "$rendered") objects"
  else
    echo "FAIL kustomize manifests/: $(cat "$tmp/err")"; rc=1
  fi
  if "$kubectl" kustomize "$root/e2e/kind" > "$tmp/kind.yaml" 2> "$tmp/err"; then
    rendered_kind="$tmp/kind.yaml"
    echo "kustomize e2e/kind/: $(grep -c '^kind:' "$rendered_kind") objects"
  else
    echo "FAIL kustomize e2e/kind/: $(cat "$tmp/err")"; rc=1
  fi
else
  echo "kustomize: no kubectl found; checking the kustomization trees directly"
fi

python3 "$here/validate.py" "$root" "$rendered" "$rendered_kind" || rc=1

if (( server )); then
  [[ -n "$kubectl" ]] || { echo "FAIL --server: no kubectl"; exit 1; }
  # The base binds a Role in the platform namespace kube-dc: it must exist.
  "$kubectl" get namespace kube-dc >/dev/null 2>&1 ||
    echo "note: namespace kube-dc is missing; the kube-dc RoleBinding will be refused"
  if "$kubectl" apply --dry-run=server -k "$here" > "$tmp/server" 2>&1; then
    echo "server dry-run: $(wc -l < "$tmp/server") objects accepted"
  else
    echo "FAIL server dry-run:"; cat "$tmp/server"; rc=1
  fi
fi

if (( rc == 0 )); then echo "validate.sh: OK"; else echo "validate.sh: FAILED"; fi
exit "$rc"
