#!/usr/bin/env bash
# `make bench`: runs every benchmark of bench/ side by side with its peer or
# baseline and prints the figures bench/README.md reports. Each part's own
# README says how it measures.
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
build="${BUILD:-$repo/build}"
run() { echo; echo "=== $1"; shift; "$@"; }

if [[ -x "$build/bench/bench_model" ]]; then
  run "model: index update, fit queries, filter pass, memory (10,000 nodes / 150,000 pods)" \
    "$build/bench/bench_model" --benchmark_min_time=0.2
fi
if [[ -x "$build/bench/bench_dra" ]]; then
  run "model: DRA pools beside a device-plugin pool (1,000 nodes, 10,000 ResourceSlices, 50,000 ResourceClaims)" \
    "$build/bench/bench_dra"
fi
if [[ -x "$build/tests/differential_test" ]]; then
  run "every door agrees: 100,000 door questions on random clusters and events (tests/differential)" \
    env TALLY_DIFFERENTIAL_CASES=100000 "$build/tests/differential_test" --gtest_brief=1
fi
for part in decode extender scheduler memory controller; do
  if [[ -x "$repo/bench/$part/run.sh" ]]; then
    run "$part" env BUILD="$build" "$repo/bench/$part/run.sh"
  fi
done
