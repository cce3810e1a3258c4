#!/usr/bin/env bash
# Extender filter latency before vs after a change, side by side in one run
# (see bench/extender/README.md, "Before and after").
#
#   bench/extender/compare.sh BEFORE_REV [AFTER_REV]
#
# Builds the in-process latency bench (target extender-latency) at BEFORE_REV
# and at AFTER_REV (default: the working tree, uncommitted changes included),
# each in a temporary git worktree and build tree under /tmp (ccache with
# CCACHE_BASEDIR at that worktree and CCACHE_NOHASHDIR=1, so identical sources
# hit the cache whatever the folder), then runs them alternately ROUNDS times
# (before-after, then after-before, ...): `extender-latency --in-process-only
# --verbs VERBS --nodes NODES --iterations ITERATIONS`. Prints each round's
# p50/p99 and, per verb and node count, the medians over the rounds side by
# side with after/before ratios (the median of the per-round ratios too: a
# round's two runs share the machine's state of the moment). The load average
# is printed at the start and the end: on a shared machine only the ratios of
# one run compare.
#
# Environment: ROUNDS (default 5), ITERATIONS (2000), NODES ("500 5000"),
# VERBS (filter), JOBS (build parallelism, default 2), KEEP=1 keeps the
# temporary worktrees and builds. BEFORE_BIN / AFTER_BIN: an extender-latency
# binary already built for that side (the revision then only labels it).
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
(($# >= 1 && $# <= 2)) || { sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'; exit 2; }
before_rev="$1" after_rev="${2:-}"
rounds="${ROUNDS:-5}" iterations="${ITERATIONS:-2000}" nodes="${NODES:-500 5000}" verbs="${VERBS:-filter}"
log() { printf '[compare] %s\n' "$*" >&2; }
work="$(mktemp -d /tmp/tally-compare.XXXXXX)"
cleanup() {
  ((${KEEP:-0})) && { log "kept $work"; return; }
  local side
  for side in before after; do
    [[ -d "$work/$side/src" ]] && git -C "$repo" worktree remove --force "$work/$side/src" 2>/dev/null
  done
  git -C "$repo" worktree prune 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT

# build SIDE REV|"" -> the binary's path on stdout
build() {
  local side="$1" rev="$2" src
  mkdir -p "$work/$side"
  if [[ -n "$rev" ]]; then
    src="$work/$side/src"
    git -C "$repo" worktree add --quiet --detach "$src" "$rev" >&2
  else
    src="$repo" # the working tree as it is
  fi
  log "$side: $(git -C "$src" rev-parse --short HEAD)$([[ -z "$rev" ]] && ! git -C "$src" diff --quiet HEAD && echo ' + uncommitted changes') in $src"
  (
    export CCACHE_BASEDIR="$src" CCACHE_NOHASHDIR=1
    cmake -S "$src" -B "$work/$side/build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
      -DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DTALLY_E2E=OFF >"$work/$side/cmake.log" 2>&1 ||
      { log "$side: cmake failed, see $work/$side/cmake.log"; KEEP=1; exit 1; }
    cmake --build "$work/$side/build" -j"${JOBS:-2}" --target extender-latency >"$work/$side/build.log" 2>&1 ||
      { log "$side: build failed:"; tail -n 20 "$work/$side/build.log" >&2; exit 1; }
  ) || return 1
  find "$work/$side/build" -name extender-latency -type f -perm -u+x | head -1
}

log "$(nproc) CPUs; load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
bin_before="${BEFORE_BIN:-$(build before "$before_rev")}"
bin_after="${AFTER_BIN:-$(build after "$after_rev")}"
[[ -x "$bin_before" && -x "$bin_after" ]] || { log "no extender-latency binary"; exit 1; }
log "built; load average: $(cut -d' ' -f1-3 /proc/loadavg)"

# shellcheck disable=SC2086 # NODES is a list on purpose
run() { # SIDE BINARY ROUND: one line "side round verb nodes p50 p99" per figure
  "$2" --in-process-only --verbs "$verbs" --nodes $nodes --iterations "$iterations" |
    awk -v side="$1" -v round="$3" '/^in-process / {
      for (i = 1; i <= NF; i++) {
        if ($i ~ /^nodes=/) n = substr($i, 7)
        if ($i == "p50=" || $i ~ /^p50=/) p50 = ($i == "p50=") ? $(i + 1) : substr($i, 5)
        if ($i == "p99=" || $i ~ /^p99=/) p99 = ($i == "p99=") ? $(i + 1) : substr($i, 5)
      }
      print side, round, $2, n, p50, p99 }'
}
results="$work/results"
: >"$results"
for ((r = 1; r <= rounds; r++)); do
  if ((r % 2)); then order="before after"; else order="after before"; fi
  for side in $order; do
    if [[ "$side" == before ]]; then bin="$bin_before"; else bin="$bin_after"; fi
    run "$side" "$bin" "$r" | tee -a "$results" | sed 's/^/[compare] round: /' >&2
  done
done
log "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"

python3 - "$results" "$before_rev" "${after_rev:-working tree}" "$rounds" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1]) if l.strip()]
before, after, rounds = sys.argv[2], sys.argv[3], sys.argv[4]
fig = {}
for side, rnd, verb, nodes, p50, p99 in rows:
    fig.setdefault((verb, int(nodes)), {}).setdefault(side, {})[int(rnd)] = (float(p50), float(p99))
if not fig:
    sys.exit("no figures parsed")
print(f"in-process latency, before = {before}, after = {after}, {rounds} alternating rounds; "
      "medians over the rounds in us, after/before ratio of the medians [median of per-round ratios]")
print(f"{'verb':<10} {'nodes':>6} {'before p50':>11} {'after p50':>10} {'ratio':>14} {'before p99':>11} {'after p99':>10} {'ratio':>14}")
for (verb, nodes), sides in sorted(fig.items()):
    b, a = sides.get("before", {}), sides.get("after", {})
    common = sorted(set(b) & set(a))
    if not common:
        continue
    cells = []
    for k in (0, 1):
        mb = statistics.median(b[r][k] for r in common)
        ma = statistics.median(a[r][k] for r in common)
        per = statistics.median(a[r][k] / b[r][k] for r in common)
        spread = [a[r][k] / b[r][k] for r in common]
        cells.append((mb, ma, ma / mb, per, min(spread), max(spread)))
    (b50, a50, r50, q50, lo50, hi50), (b99, a99, r99, q99, lo99, hi99) = cells
    print(f"{verb:<10} {nodes:>6} {b50:>11.1f} {a50:>10.1f} {r50:>6.3f} [{q50:.3f}] {b99:>11.1f} {a99:>10.1f} {r99:>6.3f} [{q99:.3f}]")
    print(f"{'':<10} {'':>6} per-round ratio range: p50 {lo50:.3f}..{hi50:.3f}, p99 {lo99:.3f}..{hi99:.3f}")
PY
