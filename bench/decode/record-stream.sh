#!/usr/bin/env bash
# Records the pod watch stream the decode benchmark reads: brings up a local
# control plane (e2e/cluster/up), creates kwok GPU nodes and PODS realistic
# pods (runtime/test/testdata/pods.sh), waits until kwok runs them all, then
# records a watch from resourceVersion 0 (every pod as ADDED, then the
# initial-events-end bookmark) as JSON and as protobuf.
#
#   bench/decode/record-stream.sh BUILD_DIR [OUT_DIR]    (env PODS, default 5000)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
build="${1:?build dir with bin/tally-record-watch}"
out="${2:-${HOME}/.cache/tally/bench-decode}"
pods="${PODS:-5000}"
name="bench-decode-$$"
mkdir -p "$out"
trap '"$repo/e2e/cluster/down" --name "$name" >/dev/null 2>&1 || true' EXIT
eval "$(TALLY_E2E_CONTROLLER_MANAGER=0 "$repo/e2e/cluster/up" --name "$name")"
export KUBECTL="$TALLY_E2E_BIN/kubectl"
testdata="$repo/runtime/test/testdata"
"$testdata/fixtures.sh" $(((pods + 79) / 80))
"$KUBECTL" create namespace bench >/dev/null
per=$(((pods + 3) / 4))
for part in 0 1 2 3; do
  n=$((pods - part * per < per ? pods - part * per : per))
  GPU_EVERY="${GPU_EVERY:-40}" "$testdata/pods.sh" bench "$n" "trainer-p$part" | "$KUBECTL" create -f - >/dev/null &
done
wait
for _ in $(seq 1 300); do
  left="$("$KUBECTL" get pods -n bench --field-selector=status.phase!=Running --no-headers 2>/dev/null | wc -l)"
  ((left == 0)) && break
  sleep 2
done
echo "pods not running: $left" >&2
rec="$build/bin/tally-record-watch"
"$rec" --resource pods --namespace bench --wire json --rv 0 --seconds 20 --out "$out/pods_watch.json"
"$rec" --resource pods --namespace bench --wire protobuf --rv 0 --seconds 20 --out "$out/pods_watch.pb"
ls -l "$out"
