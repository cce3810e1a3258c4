# shellcheck shell=bash
# Shared by e2e/cluster/up and e2e/cluster/down (sourced, not run).
# A cluster lives in $TALLY_E2E_ROOT/<name> (default /tmp/tally-e2e/<name>):
#   env          ports, paths and binary folder of the running cluster
#   pids/*.pid   one file per process up started
#   logs/*.log   one log per process, plus up.log
#   pki/         CA, serving and client certificates, service-account keys
#   etcd/        etcd data
#   kubeconfig   admin identity (client certificate, system:masters)

E2E_ROOT="${TALLY_E2E_ROOT:-/tmp/tally-e2e}"
# Stop order: the consumers first, etcd last.
COMPONENTS=(watchdog kwok kube-controller-manager kube-scheduler kube-apiserver etcd)
# Every cluster has these; kube-controller-manager is optional
# (TALLY_E2E_CONTROLLER_MANAGER=0, or clusters started before it was added).
REQUIRED_COMPONENTS=(etcd kube-apiserver kube-scheduler kwok)

log() { echo "[cluster ${CLUSTER_NAME:-?}] $*" >&2; }
die() { log "error: $*"; exit 1; }

valid_name() { [[ "$1" =~ ^[a-z0-9][a-z0-9._-]{0,62}$ ]]; }

# lock_cluster NAME: serialize up/down of one cluster (fd 8).
lock_cluster() {
  mkdir -p "$E2E_ROOT"
  exec 8>"$E2E_ROOT/$1.lock"
  flock 8
}

# pid_of STATE COMPONENT: the recorded pid, or nothing.
pid_of() {
  local f="$1/pids/$2.pid"
  [[ -s "$f" ]] && cat "$f"
  return 0
}

# alive STATE PID: the pid runs and is ours. Ours means a child of this shell
# (what up itself started), or a process whose command line names the state
# folder. The first rule is needed: right after `setsid CMD &` the child has not
# exec'd yet and its command line is still up's own, and during each exec
# (bash -> setsid -> CMD) the kernel shows it empty for a moment, so a running
# component of a cluster being started would otherwise read as exited. The
# second rejects reused pids (other processes, not naming the state folder);
# zombies fail both. Builtins only: no fork per check.
alive() {
  local state="$1" pid="$2" stat rest arg cmd=""
  [[ "$pid" =~ ^[1-9][0-9]*$ ]] || return 1
  # /proc/PID/stat: "PID (COMM) STATE PPID ..."; COMM may hold spaces and ')'.
  IFS= read -r stat 2>/dev/null <"/proc/$pid/stat" || return 1
  rest="${stat##*) }"
  [[ "${rest%% *}" != [ZX] ]] || return 1
  rest="${rest#* }"
  [[ "${rest%% *}" == "$$" ]] && return 0
  { while IFS= read -r -d '' arg || [[ -n "$arg" ]]; do cmd+="$arg "; arg=""; done <"/proc/$pid/cmdline"; } 2>/dev/null ||
    return 1
  [[ "$cmd" == *"$state/"* ]]
}

# exit_status STATE PID: set EXITED_HOW to how a child of this shell that has
# ended ended ("status 1", "signal KILL"); empty for a process that still runs
# or is not our child. Not in $(...): only this shell can wait for its children.
# shellcheck disable=SC2034 # EXITED_HOW is read by up
exit_status() {
  local state="$1" pid="$2" stat rest rc=0 err="$1/.wait.err"
  EXITED_HOW=""
  if IFS= read -r stat 2>/dev/null <"/proc/$pid/stat"; then
    rest="${stat##*) }"
    [[ "${rest%% *}" == [ZX] ]] || return 0
  fi
  wait "$pid" 2>"$err" || rc=$?
  if ((rc == 127)) && [[ -s "$err" ]]; then rc=-1; fi # "not a child of this shell"
  rm -f "$err"
  if ((rc > 128)); then
    EXITED_HOW="signal $(kill -l $((rc - 128)) 2>/dev/null || echo $((rc - 128)))"
  elif ((rc >= 0)); then
    EXITED_HOW="status $rc"
  fi
  return 0
}

# stop_pid STATE COMPONENT: TERM, wait up to 15s, then KILL.
stop_pid() {
  local state="$1" comp="$2" pid i
  pid="$(pid_of "$state" "$comp")"
  [[ -n "$pid" ]] || return 0
  # The watchdog ends by exec'ing down: never signal ourselves.
  if [[ "$pid" == "$$" ]]; then
    rm -f "$state/pids/$comp.pid"
    return 0
  fi
  if alive "$state" "$pid"; then
    kill -TERM "$pid" 2>/dev/null || true
    for ((i = 0; i < 150; i++)); do
      alive "$state" "$pid" || break
      sleep 0.1
    done
    if alive "$state" "$pid"; then
      log "$comp (pid $pid) ignored TERM; killing"
      kill -KILL "$pid" 2>/dev/null || true
      for ((i = 0; i < 50; i++)); do
        alive "$state" "$pid" || break
        sleep 0.1
      done
    fi
    if alive "$state" "$pid"; then
      log "$comp (pid $pid) is still running"
      return 1
    fi
    log "stopped $comp (pid $pid)"
  fi
  rm -f "$state/pids/$comp.pid"
}

# stop_all STATE: stop every recorded process of the cluster.
stop_all() {
  local state="$1" comp rc=0
  for comp in "${COMPONENTS[@]}"; do
    stop_pid "$state" "$comp" || rc=1
  done
  return $rc
}

# print_logs STATE [LINES]: tail of every log, for failures.
print_logs() {
  local state="$1" lines="${2:-40}" f
  for f in "$state"/logs/*.log; do
    [[ -f "$f" && "$f" != */up.log ]] || continue
    echo "----- last $lines lines of $f -----" >&2
    tail -n "$lines" "$f" >&2
  done
}
