#!/usr/bin/env bash
# Records the golden watch frames in this folder from a real API server:
#   eval "$(e2e/cluster/up --name golden)"; runtime/test/testdata/record-golden.sh BUILD_DIR
# Produces pods_watch.{json,pb} (ADDED for existing pods, then live MODIFIED
# and DELETED), pods_list.{json,pb} and lease.{json,pb}.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
build="${1:?build dir}"
ns="${NS:-recorded}"  # namespaces are never deleted here: no namespace controller runs
rec="$build/bin/tally-record-watch"
export KUBECTL="${TALLY_E2E_BIN:?}/kubectl"
"$KUBECTL" create namespace "$ns" --dry-run=client -o yaml | "$KUBECTL" apply -f - >/dev/null
"$here/fixtures.sh" 2
"$here/pods.sh" "$ns" 6 trainer | "$KUBECTL" apply -f - >/dev/null
sleep 3  # scheduled and marked running by kwok
for wire in json pb; do
  w=json; [[ $wire == pb ]] && w=protobuf
  "$rec" --resource pods --namespace "$ns" --wire $w --rv 0 --seconds 4 --out "$here/pods_watch.$wire" &
  sleep 1.5
  "$KUBECTL" -n "$ns" label pod trainer-1 golden-step="$wire" --overwrite >/dev/null
  "$KUBECTL" -n "$ns" delete pod trainer-5 --grace-period=0 --force >/dev/null 2>&1
  wait
  "$here/pods.sh" "$ns" 6 trainer | "$KUBECTL" apply -f - >/dev/null
  sleep 2
  "$rec" --resource pods --namespace "$ns" --wire $w --list --limit 4 --out "$here/pods_list.$wire"
done
cat <<YAML | "$KUBECTL" apply -f - >/dev/null
apiVersion: coordination.k8s.io/v1
kind: Lease
metadata: {name: golden-leader, namespace: "$ns"}
spec: {holderIdentity: controller-7f9c-abcde, leaseDurationSeconds: 15, leaseTransitions: 2,
       acquireTime: "2026-11-30T01:00:00.000000Z", renewTime: "2026-11-30T01:02:03.456789Z"}
YAML
"$rec" --group coordination.k8s.io --resource leases --namespace "$ns" --wire json --rv 0 --seconds 1 --out "$here/lease_watch.json"
"$rec" --group coordination.k8s.io --resource leases --namespace "$ns" --wire protobuf --rv 0 --seconds 1 --out "$here/lease_watch.pb"
ls -l "$here"
