# shellcheck shell=bash
# (h) 200 GPU pods race for 100 units: exactly 100 bind and no node is
# over-committed, also across an extender restart mid-run.
# 25 nodes advertise 8 H200 each (kube-scheduler alone would fit all 200), and
# a GPUDevice holds 4 on every node: Tally has 25 x 4 = 100 units.
# Waves: 50 pods; once some are bound the extender is SIGKILLed; 50 more are
# created while it is down (kube-scheduler gets errors and backs off); the
# extender starts again (relists) and the last 100 are created at once.
# In the cluster (the kind path) the extender is the sidecar of the
# tally-scheduler pod: that pod is deleted (kube-scheduler and the extender stop
# together, the Deployment starts a new pod whose extender lists everything
# again before its kube-scheduler starts), and the 50 are created right after
# the deletion, while the pod is being replaced.
if ((EXTERNAL)) && ! in_cluster; then
  skip "restarting the extender needs the local control plane or Tally's Deployments in the cluster (TALLY_E2E_IN_CLUSTER=1)"
fi
class_h200
nodes h200- 25 --mode vm-passthrough --resource nvidia.com/GH100_H200_SXM_141GB=8
namespace holders
namespace race
H="$(ns holders)"
N="$(ns race)"
for i in $(seq 0 24); do gpudevice "$H" "held-$i" "$(cls h200)" 4 Bound "$ID-h200-$i"; done
# A pod asking 5 meets the 4 held units on every node: the extender holds all
# 25 nodes and devices (and the class, and the namespace).
mapfile -t held < <(for i in $(seq 0 24); do echo "$ID-h200-$i~with 4 of 8 nvidia.com/GH100_H200_SXM_141GB free (4 held by GPUDevices); pod needs 5"; done)
extender_sees "the 25 nodes and their 25 GPUDevices" "$(pod p-0 "$N" 'nvidia.com/GH100_H200_SXM_141GB: "5"' race=1)" "${held[@]}"

wave() { # FIRST LAST
  local i
  for ((i = $1; i <= $2; i++)); do pod "p-$i" "$N" 'nvidia.com/GH100_H200_SXM_141GB: "1"' race=1 "wave=$3"; done |
    k create -f - >/dev/null || fail "creating pods $1..$2"
}
t0=$SECONDS
wave 0 49 1
some_bound() { (($(count_bound "$N" race=1) > 0)); }
wait_until 60 some_bound || fail "no pod of the first wave was bound"
if in_cluster; then
  old_pod="$(scheduler_pod)"
  [[ -n "$old_pod" ]] || fatal "no tally-scheduler pod in $TALLY_NS"
  k -n "$TALLY_NS" delete pod "$old_pod" --wait=false >/dev/null || fatal "deleting pod $old_pod"
  at_stop="$(count_bound "$N" race=1)"
  say "tally-scheduler pod $old_pod (kube-scheduler + tally-extender) deleted with $at_stop pod(s) bound"
else
  old_pid="$EXT_PID"
  # SIGKILL while the first wave binds: no graceful shutdown, binds in flight
  # cut off between Tally's assumption and the API server's answer.
  extender_stop KILL
  at_stop="$(count_bound "$N" race=1)"
  say "extender (pid $old_pid) SIGKILLed with $at_stop pod(s) bound"
fi
wave 50 99 2
if ! in_cluster; then
  # kube-scheduler tries the second wave against the stopped extender
  # (ignorable: false): once it has, a window in which it must bind none of it.
  tried() {
    k get pods -n "$N" -l wave=2 -o jsonpath='{range .items[*]}{.status.conditions[?(@.type=="PodScheduled")].status}{"\n"}{end}' 2>/dev/null |
      grep -q '^False$'
  }
  wait_until 30 tried || fail "kube-scheduler did not try the second wave within 30 s (no PodScheduled=False)"
  stays_for 2 "no pod of the second wave bound while the extender is down" bound_is "$N" wave=2 0
fi
if in_cluster; then
  replaced() {
    local p
    p="$(scheduler_pod)"
    [[ -n "$p" && "$p" != "$old_pod" ]] && scheduler_pod_ready "$p"
  }
  t1=$SECONDS
  wait_until 240 replaced || fatal "no new tally-scheduler pod became ready after $old_pod was deleted"
  new_pod="$(scheduler_pod)"
  say "new tally-scheduler pod $new_pod ready (waited $((SECONDS - t1))s after the second wave)"
  check_has "a new extender process (a new pod, restarted by the Deployment)" "yes" \
    "$([[ -n "$new_pod" && "$new_pod" != "$old_pod" ]] && echo yes)"
  check_eq "the new extender has not restarted since it started" 0 \
    "$(k -n "$TALLY_NS" get pod "$new_pod" -o jsonpath='{.status.initContainerStatuses[?(@.name=="tally-extender")].restartCount}')"
else
  extender_start
  check_has "a new extender process" "yes" "$([[ "$EXT_PID" != "$old_pid" ]] && echo yes)"
fi
wave 100 199 3
wait_settled "$N" race=1 200 240
say "settled in $((SECONDS - t0))s"
check_eq "exactly 100 pods bound" 100 "$(count_bound "$N" race=1)"
check_eq "the other 100 are Unschedulable" 100 "$(count_unschedulable "$N" race=1)"
over=0
while IFS='=' read -r node cnt; do
  [[ -n "$node" ]] || continue
  if ((cnt > 4)); then over=$((over + 1)); say "over-committed: $node has $cnt pods on 4 units"; fi
done < <(bound_per_node "$N" race=1)
check_eq "no node over-committed (at most 4 pods per node)" 0 "$over"
check_eq "every node filled" 25 "$(bound_per_node "$N" race=1 | wc -l)"
p="$(first_pending "$N" race=1)"
check_has "pending pods carry Tally's reason" "with 0 of 8 nvidia.com/GH100_H200_SXM_141GB free (4 held by GPUDevices)" \
  "$(pod_unsched "$N" "$p")"
stays_for 5 "still exactly 100 bound" bound_is "$N" race=1 100
if ((!EXTERNAL)); then
  # The restarted extender asks for the server's version before its watches
  # open: that one connection shakes hands in full, the watches' and binds'
  # resume its TLS session (before, the ~10 watches started together with no
  # session to resume: 10 full handshakes; and a connection dropped without a
  # close_notify made OpenSSL retire the session every later one was offered:
  # each now resumes from its own copy).
  metrics="$(curl -s "http://127.0.0.1:$EXT_PORT/metrics")"
  resumed="$(awk '/^tally_extender_api_connections_total\{handshake="resumed"\}/ {print $2}' <<<"$metrics")"
  full="$(awk '/^tally_extender_api_connections_total\{handshake="full"\}/ {print $2}' <<<"$metrics")"
  say "API connections of the restarted extender: ${full:-none} full handshakes, ${resumed:-none} resumed"
  check_has "API connections after the first resume their TLS session" yes \
    "$([[ "${resumed:-0}" -ge 10 && "${full:-0}" -eq 1 ]] && echo yes)"
fi
