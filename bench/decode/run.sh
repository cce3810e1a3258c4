#!/usr/bin/env bash
# Decode benchmark, side by side in one run: Tally's decoders vs client-go's
# watch decoder on the same recorded bytes, the protobuf pod decoders on the
# shipped wire reader vs on CodedInputStream (issue 28), then the informer
# cache at scale.
#   bench/decode/run.sh BUILD_DIR [DATA_DIR]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
build="$(cd "${1:?build dir}" && pwd)"  # absolute: the Go build below runs from go/
data="${2:-${HOME}/.cache/tally/bench-decode}"
[[ -s "$data/pods_watch.json" && -s "$data/pods_watch.pb" ]] || "$here/record-stream.sh" "$build" "$data"
(cd "$here/go" && go build -o "$build/bin/clientgo-decode" .)
# Best of at least REPEAT runs per side and format, and of more until
# MIN_SECONDS of decoding has passed (Tally's runs take milliseconds).
repeat="${REPEAT:-5}"
min_seconds="${MIN_SECONDS:-1}"
tally="$("$build/bin/tally-decode-bench" --json "$data/pods_watch.json" --protobuf "$data/pods_watch.pb" --repeat "$repeat" --min-seconds "$min_seconds" --readers)"
gocli="$("$build/bin/clientgo-decode" -json "$data/pods_watch.json" -protobuf "$data/pods_watch.pb" -repeat "$repeat" -min-seconds "$min_seconds")"
echo "$tally"
echo "$gocli"
field() { grep "^$1 *$2 " <<<"$3" | sed -E "s/.* $4=([0-9.]+).*/\1/"; }
for wire in json protobuf; do
  t="$(field tally "$wire" "$tally" seconds)"
  g="$(field client-go "$wire" "$gocli" seconds)"
  echo "ratio $wire: client-go/tally = $(awk -v g="$g" -v t="$t" 'BEGIN { printf "%.1fx", g / t }')"
done
gj="$(field client-go json "$gocli" seconds)"
tp="$(field tally protobuf "$tally" seconds)"
echo "ratio best: client-go json / tally protobuf = $(awk -v g="$gj" -v t="$tp" 'BEGIN { printf "%.1fx", g / t }')"
"$build/bin/tally-informer-bench" --template "$data/pods_watch.pb"
