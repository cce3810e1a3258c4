#!/usr/bin/env bash
# Extender latency: tally-extender in-process and over HTTP, and the Go peer
# over HTTP with the same requests, at 500 and 5,000 candidate nodes; then the
# cost of publishing a snapshot at 10,000 nodes / 150,000 pods.
# Usage: bench/extender/run.sh [build-dir]   (default: build)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$root/build}
latency=$(find "$build" -name extender-latency -type f -perm -u+x | head -1)
[ -x "$latency" ] || { echo "extender-latency not built in $build" >&2; exit 1; }
iterations=${ITERATIONS:-2000}

cache=${XDG_CACHE_HOME:-$HOME/.cache}/tally
mkdir -p "$cache/bin" "$cache/go-build"
(cd "$root/bench/extender/go-peer" && GOCACHE="$cache/go-build" GOFLAGS=-mod=mod GOPROXY=off \
  go build -o "$cache/bin/go-peer" .)

echo "== tally-extender (in-process = server-side; http = loopback round trip, one keep-alive connection)"
"$latency" --nodes 500 5000 --iterations "$iterations"

echo "== Go peer (encoding/json, simplified filter), same requests over HTTP"
for n in 500 5000; do
  work=$(mktemp -d)
  "$latency" --nodes "$n" --write-peer-cluster "$work/cluster.json"
  port=$((18900 + n % 97))
  "$cache/bin/go-peer" -listen "127.0.0.1:$port" -cluster "$work/cluster.json" 2>/dev/null &
  peer=$!
  for _ in $(seq 50); do curl -s -o /dev/null "http://127.0.0.1:$port/" && break; sleep 0.1; done
  "$latency" --nodes "$n" --iterations "$iterations" --url "http://127.0.0.1:$port"
  kill "$peer"; wait "$peer" 2>/dev/null || true
  rm -rf "$work"
done

echo "== snapshot publication"
"$latency" --publish --publish-nodes 10000 --publish-pods 150000
