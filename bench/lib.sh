# Shared by the bench scripts that run a local control plane (scheduler/,
# memory/): sourced, not run. The caller sets `repo`, `name` (the cluster's
# name) and defines `log`.
#
#   bench_find_extender PART   sets extender ($TALLY_EXTENDER_BIN, else
#                              $BUILD/bin/tally-extender); exits 77 (skip) if absent
#   bench_cluster_up           e2e/cluster/up without kube-controller-manager,
#                              torn down when the caller exits (watchdog);
#                              sets state, token and k() (kubectl); then
#                              creates the GPUDeviceClass nvidia-h200-passthrough
#                              (8 H200 per node in mode vm-passthrough)
#   bench_free_port            a free loopback port
#   bench_start_extender BIN PORT LOG ARGS...
#                              starts BIN in its own session on 127.0.0.1:PORT
#                              (prefix /tally, no metrics port); sets ext_pid
#   bench_wait_ready PID PORT LOG [SECONDS]
#                              waits for http://127.0.0.1:PORT/readyz = 200
#   bench_stop PID             SIGTERM and wait
#   bench_proc_status PID KEY  a /proc/PID/status line's value in kB (VmRSS, VmHWM)

bench_find_extender() { # PART
  extender="${TALLY_EXTENDER_BIN:-${BUILD:-$repo/build}/bin/tally-extender}"
  [[ -x "$extender" ]] || { echo "bench/$1: $extender not built; skipping" >&2; exit 77; }
}

bench_cluster_up() {
  local t0=$SECONDS
  eval "$(TALLY_E2E_OWNER_PID=$$ TALLY_E2E_CONTROLLER_MANAGER=0 "$repo/e2e/cluster/up" --name "$name")" ||
    { log "up failed"; return 1; }
  state="$TALLY_E2E_STATE"
  # shellcheck source=/dev/null
  source "$state/env"
  token="$(cat "$state/pki/admin.token")"
  log "cluster up in $((SECONDS - t0))s"
  k apply -f - >/dev/null <<'EOF'
apiVersion: gpu.tally.dev/v1alpha1
kind: GPUDeviceClass
metadata: {name: nvidia-h200-passthrough}
spec: {workload: vm, allocation: passthrough, resourceName: nvidia.com/GH100_H200_SXM_141GB, nodeMode: vm-passthrough,
       memoryMiB: 144384, maxCount: 8}
EOF
  # The doors close a pool no auditor has decided ("not audited yet"): with no
  # tally-controller here, the bench publishes the gate of the clean pool as
  # its pool auditor would.
  k patch gpudeviceclass nvidia-h200-passthrough --subresource=status --type=merge -p \
    "{\"status\":{\"conditions\":[{\"type\":\"CreationOpen\",\"status\":\"True\",\"reason\":\"AuditClean\",\"message\":\"audit clean\",\"lastTransitionTime\":\"$(date -u +%Y-%m-%dT%H:%M:%SZ)\"}]}}" \
    >/dev/null || { log "publishing the gate of nvidia-h200-passthrough failed"; return 1; }
}

k() { "$TALLY_E2E_BIN/kubectl" "$@"; }

bench_free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'
}

bench_start_extender() { # BIN PORT LOG ARGS...
  local bin="$1" port="$2" out="$3"
  shift 3
  setsid "$bin" --kubeconfig "$state/kubeconfig" --bind-address 127.0.0.1 --port "$port" --url-prefix /tally \
    --metrics-port 0 --unorganized-gpu-namespaces=allow "$@" >>"$out" 2>&1 &
  ext_pid=$!
}

bench_wait_ready() { # PID PORT LOG [SECONDS]
  local pid="$1" port="$2" out="$3" limit="${4:-300}" t0=$SECONDS
  until [[ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/readyz")" == 200 ]]; do
    kill -0 "$pid" 2>/dev/null || { log "$(basename "$out" .log) exited:"; tail -n 20 "$out" >&2; return 1; }
    ((SECONDS - t0 < limit)) || { log "$(basename "$out" .log) not ready after $limit s"; return 1; }
    sleep 0.2
  done
}

bench_stop() { # PID
  [[ -n "$1" ]] || return 0
  kill -TERM "$1" 2>/dev/null
  wait "$1" 2>/dev/null
  return 0
}

bench_proc_status() { # PID KEY
  awk -v key="$2:" '$1 == key { print $2 }' "/proc/$1/status"
}
