#!/usr/bin/env bash
# Builds the extender's libFuzzer target with clang in build-fuzz/ and fuzzes
# the request parser for ${FUZZ_SECONDS:-60} seconds (new inputs go to a
# scratch corpus; crashes are written to build-fuzz/).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${FUZZ_BUILD:-$root/build-fuzz}
CC=clang CXX=clang++ cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DTALLY_FUZZ=ON -DTALLY_E2E=OFF -DTALLY_BENCH=OFF >/dev/null
cmake --build "$build" -j "${JOBS:-2}" --target extender_request_fuzz
scratch=$(mktemp -d)
cp "$root"/extender/fuzz/corpus/* "$scratch"/
cd "$build"
fuzzer=$(find . -name extender_request_fuzz -type f -perm -u+x | head -1)
"$fuzzer" -max_total_time="${FUZZ_SECONDS:-60}" -max_len=65536 "$scratch"
