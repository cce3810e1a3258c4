#!/usr/bin/env bash
# The manifests against a real control plane: starts a local one with
# e2e/cluster/up, creates the platform namespace kube-dc, runs
# `validate.sh --scheduler` (server dry run, CEL rules, webhook routing, RBAC,
# and the real kube-scheduler with the scheduler configuration), and stops the
# control plane again, whatever happened.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
name="${TALLY_MANIFESTS_CLUSTER:-manifests-check}"

cleanup() { "$root/e2e/cluster/down" --name "$name" >/dev/null 2>&1 || true; }
trap cleanup EXIT
cleanup
exports="$(TALLY_E2E_OWNER_PID=$$ "$root/e2e/cluster/up" --name "$name")"
eval "$exports"
: "${KUBECONFIG:?e2e/cluster/up printed no KUBECONFIG}"
export KUBECONFIG
# The pinned kubectl of the control plane, also preferred by validate.sh.
kubectl="${TALLY_E2E_BIN:+$TALLY_E2E_BIN/}kubectl"
"$kubectl" create namespace kube-dc --dry-run=client -o yaml | "$kubectl" apply -f - >/dev/null
"$here/validate.sh" --scheduler
