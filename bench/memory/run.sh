#!/usr/bin/env bash
# Memory of the shipped process: tally-extender's resident set with NODES
# nodes and PODS bound pods in a real API server (see bench/memory/README.md).
#
#   bench/memory/run.sh [--nodes 10000] [--pods 150000] [--gpu-per-node 4]
#                       [--watches proto,json] [--settle 10] [--json FILE]
#                       [--keep | --reuse NAME]
#
# One local control plane (e2e/cluster/up, no kube-controller-manager); NODES
# kwok nodes created Ready by tally-fixtures, half serving 8 H200 in mode
# vm-passthrough, half 8 nvidia.com/gpu in mode pod-hami; PODS pods created by
# bench/memory/loader (tally-bench-pods, client-go, 64 requests in flight
# over 4 connections) round-robin over the nodes in 100 namespaces, bound
# through spec.nodeName; on each node the first GPU_PER_NODE ask for one GPU,
# the rest CPU and memory only. Then, once per watch format (--watches:
# proto = --protobuf-watches=true, the default; json = false), one
# tally-extender is started, waited for until /readyz answers 200 (every
# informer listed and synced), left SETTLE seconds, and its VmRSS and VmHWM
# read from /proc/PID/status. Prints one line per format; exits non-zero
# when a figure could not be taken.
#
# --keep leaves the cluster running when the script ends (its name is printed;
# e2e/cluster/down --name NAME takes it down). --reuse NAME measures again on
# such a cluster, its nodes and pods already created (pass the same --nodes
# and --pods), and keeps it too: another build of tally-extender (see
# TALLY_EXTENDER_BIN) without the 17 minutes of creation.
#
# Environment: BUILD (build tree with bin/tally-extender, default <repo>/build),
# TALLY_EXTENDER_BIN (overrides it), TALLY_BIN_DIR / TALLY_E2E_ROOT (see
# e2e/cluster/up), TALLY_CACHE (default ~/.cache/tally: where the loader is built).
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
nodes=10000 pods=150000 gpu_per_node=4 watches="proto,json" settle=10 json="" keep=0 reuse=""
while (($#)); do
  case "$1" in
    --nodes) nodes="$2"; shift 2 ;;
    --pods) pods="$2"; shift 2 ;;
    --gpu-per-node) gpu_per_node="$2"; shift 2 ;;
    --watches) watches="$2"; shift 2 ;;
    --settle) settle="$2"; shift 2 ;;
    --json) json="$2"; shift 2 ;;
    --keep) keep=1; shift ;;
    --reuse) reuse="$2"; keep=1; shift 2 ;;
    -h|--help) sed -n '2,/^set -uo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done
log() { printf '[bench/memory] %s\n' "$*" >&2; }
# shellcheck source=../lib.sh
source "$repo/bench/lib.sh"
bench_find_extender memory
name="${reuse:-bench-mem-$$}"
ext_pid=""
cleanup() {
  bench_stop "$ext_pid"
  if ((keep)); then log "cluster $name kept (e2e/cluster/down --name $name)"; else "$repo/e2e/cluster/down" --name "$name" >/dev/null 2>&1; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# The loader is compiled as a package of the control plane's wrapper module
# (as e2e/cluster/build-binaries.sh compiles tally-fixtures): client-go and its
# dependencies resolve to what is already in the module cache, nothing is
# fetched (GOPROXY=off).
cache="${TALLY_CACHE:-$HOME/.cache/tally}"
# shellcheck source=../../e2e/cluster/versions.env
source "$repo/e2e/cluster/versions.env"
wrapper="$cache/src/$CONTROL_PLANE_MODULE"
loader="$cache/bin/tally-bench-pods"
build_loader() {
  [[ -f "$wrapper/go.mod" ]] || { log "$wrapper/go.mod missing: run e2e/cluster/build-binaries.sh first"; return 1; }
  exec 9>"$cache/.build.lock"
  flock 9
  rm -rf "$wrapper/tally-bench-pods"
  mkdir -p "$wrapper/tally-bench-pods"
  cp "$here"/loader/*.go "$wrapper/tally-bench-pods/"
  (cd "$wrapper" && CGO_ENABLED=0 GOFLAGS=-mod=mod GOTOOLCHAIN=local GOPROXY=off \
    go build -trimpath -ldflags "-s -w" -o "$loader.tmp" ./tally-bench-pods) && mv "$loader.tmp" "$loader"
  local rc=$?
  flock -u 9
  return $rc
}
create_objects() {
  build_loader || { log "building the pod loader failed"; return 1; }
  t1=$(date +%s.%N)
  half=$((nodes / 2))
  "$TALLY_E2E_BIN/tally-fixtures" nodes --count "$half" --prefix mem-h200- --mode vm-passthrough \
    --resource nvidia.com/GH100_H200_SXM_141GB=8 --timeout 30m --qps 20000 --burst 20000 >/dev/null &
  f1=$!
  "$TALLY_E2E_BIN/tally-fixtures" nodes --count "$((nodes - half))" --prefix mem-gpu- --mode pod-hami \
    --resource nvidia.com/gpu=8 --timeout 30m --qps 20000 --burst 20000 >/dev/null &
  f2=$!
  wait "$f1" && wait "$f2" || { log "creating nodes failed"; return 1; }
  t2=$(date +%s.%N)
  nodes_s=$(python3 -c "print(f'{$t2 - $t1:.1f}')")
  log "$nodes nodes created in ${nodes_s}s"

  # Half the pods on each node flavour, each flavour's GPU pods asking for its resource.
  loaded="$state/loader.out"
  : >"$loaded"
  "$loader" --kubeconfig "$state/kubeconfig" --pods "$((pods / 2))" --node-prefix mem-h200- --namespaces 100 \
    --gpu-per-node "$gpu_per_node" --resource nvidia.com/GH100_H200_SXM_141GB --parallel 32 --clients 2 --name-prefix h200 \
    >>"$loaded" &
  l1=$!
  "$loader" --kubeconfig "$state/kubeconfig" --pods "$((pods - pods / 2))" --node-prefix mem-gpu- --namespaces 100 \
    --gpu-per-node "$gpu_per_node" --resource nvidia.com/gpu --parallel 32 --clients 2 --name-prefix gpu \
    >>"$loaded" &
  l2=$!
  wait "$l1" && wait "$l2" || { log "creating pods failed"; return 1; }
  t3=$(date +%s.%N)
  pods_s=$(python3 -c "print(f'{$t3 - $t2:.1f}')")
  pods_rate=$(python3 -c "print(f'{$pods / ($t3 - $t2):.0f}')")
  sed 's/^/[bench\/memory] /' "$loaded" >&2
  log "$pods pods created in ${pods_s}s ($pods_rate pods/s)"
}

bench_cluster_up || exit 1
if [[ -n "$reuse" ]]; then
  nodes_s=0 pods_s=0
  log "measuring on cluster $name as it is (its nodes and pods were created by an earlier --keep run)"
else
  if ((keep)); then
    # The watchdog would take the cluster down when this script exits.
    kill "$(cat "$state/pids/watchdog.pid")" 2>/dev/null && rm -f "$state/pids/watchdog.pid"
  fi
  create_objects || exit 1
fi
api_pid="$(cat "$state/pids/kube-apiserver.pid")"
results=()
for w in ${watches//,/ }; do
  case "$w" in
    proto) flag=true ;;
    json) flag=false ;;
    *) log "unknown watch format $w (proto or json)"; exit 2 ;;
  esac
  port="$(bench_free_port)"
  out="$state/logs/tally-extender-$w.log"
  t1=$(date +%s.%N)
  bench_start_extender "$extender" "$port" "$out" --protobuf-watches="$flag" --log-level debug
  bench_wait_ready "$ext_pid" "$port" "$out" 900 || exit 1
  t2=$(date +%s.%N)
  ready_s=$(python3 -c "print(f'{$t2 - $t1:.1f}')")
  # What the informers were answered in (the runtime logs each list's content type at debug level).
  listed="$(grep -o '"msg":"informer listing","resource":"pods","contentType":"[^"]*' "$out" | head -1 | sed 's/.*"contentType":"//')"
  # Every pod created is in its cache (listing 150,000 pods with kubectl would
  # take more memory than the extender).
  held="$(grep -o '"msg":"cache synced","kind":"Pod","objects":[0-9]*' "$out" | tail -1 | sed 's/.*://')"
  ((${held:-0} >= pods)) || { log "$w: tally-extender synced ${held:-no} pods of $pods"; exit 1; }
  sleep "$settle"
  rss="$(bench_proc_status "$ext_pid" VmRSS)" hwm="$(bench_proc_status "$ext_pid" VmHWM)"
  api_rss="$(bench_proc_status "$api_pid" VmRSS)"
  anon="$(bench_proc_status "$ext_pid" RssAnon)" file="$(bench_proc_status "$ext_pid" RssFile)"
  [[ "$rss" =~ ^[0-9]+$ && "$hwm" =~ ^[0-9]+$ ]] || { log "$w: no VmRSS/VmHWM for pid $ext_pid"; exit 1; }
  line="$w $rss $hwm $ready_s ${listed:-unknown} $api_rss $held"
  results+=("$line")
  log "$w watches ($held pods listed as ${listed:-unknown}): ready in ${ready_s}s; VmRSS $((rss / 1024)) MiB, VmHWM $((hwm / 1024)) MiB, of the resident RssAnon $((${anon:-0} / 1024)) MiB, RssFile $((${file:-0} / 1024)) MiB (kube-apiserver VmRSS $((api_rss / 1024)) MiB)"
  bench_stop "$ext_pid"
  ext_pid=""
done

python3 - "$nodes" "$pods" "$gpu_per_node" "$nodes_s" "$pods_s" "$json" "${results[@]}" <<'PY'
import json, sys
nodes, pods, gpn = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
nodes_s, pods_s, out = float(sys.argv[4]), float(sys.argv[5]), sys.argv[6]
rows = []
for r in sys.argv[7:]:
    w, rss, hwm, ready, listed, api, held = r.split()
    rows.append({"watches": w, "vmRssKiB": int(rss), "vmHwmKiB": int(hwm), "readySeconds": float(ready),
                 "podsListedAs": listed, "podsHeld": int(held), "apiserverRssKiB": int(api)})
created = (f"nodes created in {nodes_s:.1f} s, pods in {pods_s:.1f} s ({pods / pods_s:.0f} pods/s)" if pods_s > 0
           else "a cluster an earlier run created")
print(f"tally-extender memory, {nodes} nodes, {pods} bound pods ({gpn} GPU pods per node); {created}")
for r in rows:
    print(f"  {r['watches']:5} watches: VmRSS {r['vmRssKiB'] / 1024:.1f} MiB ({r['vmRssKiB'] * 1024 / 1e6:.0f} MB), "
          f"VmHWM {r['vmHwmKiB'] / 1024:.1f} MiB ({r['vmHwmKiB'] * 1024 / 1e6:.0f} MB), ready in {r['readySeconds']:.1f} s "
          f"(pods listed as {r['podsListedAs']}; kube-apiserver VmRSS {r['apiserverRssKiB'] / 1024:.0f} MiB) (goal <= 300 MB)")
if out:
    json.dump({"nodes": nodes, "pods": pods, "gpuPodsPerNode": gpn, "nodesSeconds": nodes_s, "podsSeconds": pods_s,
               "extender": rows}, open(out, "w"), indent=1)
PY
