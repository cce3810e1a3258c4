#!/usr/bin/env bash
# Runs the real kube-scheduler with manifests/scheduler/kube-scheduler-config.yaml
# under the tally-scheduler ServiceAccount (the RBAC of the manifests) against
# $KUBECONFIG, with a recording stand-in extender on a free loopback port instead
# of 127.0.0.1:8888, and checks the wiring:
#   * the scheduler takes the lease tally-system/tally-scheduler with its RBAC;
#   * a GPU pod is sent to <prefix>/filter with node names only (nodeCacheCapable),
#     to /prioritize when two nodes fit (the extender's choice wins), and is bound
#     through /bind;
#   * a pod without GPU resources never reaches the extender;
#   * a HAMi pod asking for nvidia.com/gpumem and gpucores, which no node
#     advertises, is still scheduled (ignoredByScheduler: true).
# Needs a kube-scheduler binary (TALLY_KUBE_SCHEDULER, else the pinned one under
# ~/.cache/tally/bin/*/), Tally's namespace, CRDs and RBAC installed (validate.sh
# --server does that), and the namespace tally-validate. It creates two nodes
# and a few pods named tally-validate-*, and removes them.
# Functions below run through trap and wait_until, which shellcheck cannot see.
# shellcheck disable=SC2317
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
: "${KUBECONFIG:?KUBECONFIG must point at the cluster}"

kubectl=""
for candidate in "${TALLY_CACHE:-$HOME/.cache/tally}"/bin/*/kubectl; do
  [[ -x "$candidate" ]] && kubectl="$candidate"
done
[[ -n "$kubectl" ]] || kubectl="$(command -v kubectl)"
scheduler="${TALLY_KUBE_SCHEDULER:-}"
if [[ -z "$scheduler" ]]; then
  for candidate in "${TALLY_CACHE:-$HOME/.cache/tally}"/bin/*/kube-scheduler; do
    [[ -x "$candidate" ]] && scheduler="$candidate"
  done
fi
[[ -x "$scheduler" ]] || { echo "check-scheduler: no kube-scheduler binary (set TALLY_KUBE_SCHEDULER)" >&2; exit 2; }
k() { "$kubectl" "$@"; }

ns=tally-validate
n1=tally-validate-node-1
n2=tally-validate-node-2
work="$(mktemp -d)"
pids=()
rc=0
cleanup() {
  local pid
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  k -n "$ns" delete pod -l tally.dev/validate=scheduler --grace-period=0 --force >/dev/null 2>&1 || true
  k delete node "$n1" "$n2" --ignore-not-found >/dev/null 2>&1 || true
  k -n tally-system delete lease tally-scheduler --ignore-not-found >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "FAIL check-scheduler: $*"; rc=1; }
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

k get namespace "$ns" >/dev/null 2>&1 || k create namespace "$ns" >/dev/null
if k -n tally-system get lease tally-scheduler >/dev/null 2>&1; then
  echo "check-scheduler: the lease tally-system/tally-scheduler is held; is a tally-scheduler running here?" >&2
  exit 2
fi

# The scheduler's identity: a token of the tally-scheduler ServiceAccount.
token="$(k -n tally-system create token tally-scheduler --duration=30m)"
server="$(k config view --minify --raw -o jsonpath='{.clusters[0].cluster.server}')"
k config view --minify --raw -o jsonpath='{.clusters[0].cluster.certificate-authority-data}' | base64 -d > "$work/ca.crt"
cat > "$work/kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "$server", certificate-authority: "$work/ca.crt"}}]
users: [{name: tally-scheduler, user: {token: "$token"}}]
contexts: [{name: c, context: {cluster: c, user: tally-scheduler}}]
current-context: c
EOF

# Stand-in extender: records each call, passes every node, prefers node 2 and
# binds through the API with the caller's kubeconfig.
port="$(free_port)"
cat > "$work/extender.py" <<'PY'
import json, subprocess, sys, http.server
port, log, kubectl, prefer = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
class Handler(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        verb = self.path.rsplit("/", 1)[-1]
        pod = (body.get("Pod") or {}).get("metadata", {}).get("name") or body.get("PodName")
        with open(log, "a") as f:
            f.write(json.dumps({"path": self.path, "pod": pod, "names": body.get("NodeNames"),
                                "fullNodes": body.get("Nodes") is not None}) + "\n")
        if verb == "filter":
            out = {"NodeNames": body.get("NodeNames") or [], "FailedNodes": {}, "FailedAndUnresolvableNodes": {}, "Error": ""}
        elif verb == "prioritize":
            out = [{"Host": n, "Score": 10 if n == prefer else 0} for n in body.get("NodeNames") or []]
        elif verb == "bind":
            binding = {"apiVersion": "v1", "kind": "Binding",
                       "metadata": {"name": body["PodName"], "namespace": body["PodNamespace"]},
                       "target": {"apiVersion": "v1", "kind": "Node", "name": body["Node"]}}
            r = subprocess.run([kubectl, "create", "-f", "-"], input=json.dumps(binding), text=True, capture_output=True)
            out = {"Error": "" if r.returncode == 0 else r.stderr.strip()}
        else:
            self.send_response(404); self.end_headers(); return
        data = json.dumps(out).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
    def log_message(self, *args):
        pass
http.server.HTTPServer(("127.0.0.1", port), Handler).serve_forever()
PY
: > "$work/calls.log"
python3 "$work/extender.py" "$port" "$work/calls.log" "$kubectl" "$n2" > "$work/extender.out" 2>&1 &
pids+=($!)

sed "s#http://127.0.0.1:8888/tally#http://127.0.0.1:$port/tally#" "$here/scheduler/kube-scheduler-config.yaml" > "$work/config.yaml"
printf 'clientConnection:\n  kubeconfig: %s\n' "$work/kubeconfig" >> "$work/config.yaml"
"$scheduler" --config="$work/config.yaml" --bind-address=127.0.0.1 --secure-port="$(free_port)" \
  --cert-dir="$work/certs" --v=2 > "$work/scheduler.log" 2>&1 &
pids+=($!)

wait_until() { # seconds command...
  local deadline=$((SECONDS + $1)); shift
  until "$@" >/dev/null 2>&1; do
    (( SECONDS < deadline )) || return 1
    sleep 1
  done
}
holder() { [[ -n "$(k -n tally-system get lease tally-scheduler -o jsonpath='{.spec.holderIdentity}')" ]]; }
wait_until 60 holder || fail "no leader lease tally-system/tally-scheduler (RBAC of the tally-scheduler account?)"
grep -i "forbidden" "$work/scheduler.log" | head -3 | sed 's/^/  scheduler: /' || true
grep -qi "forbidden" "$work/scheduler.log" && fail "the scheduler was refused by RBAC"

for n in "$n1" "$n2"; do
  k apply -f - >/dev/null <<EOF
apiVersion: v1
kind: Node
metadata: {name: $n, labels: {kubernetes.io/hostname: $n, tally.dev/validate: scheduler}}
status:
  allocatable: {cpu: "8", memory: 32Gi, pods: "110", nvidia.com/gpu: "4"}
  capacity: {cpu: "8", memory: 32Gi, pods: "110", nvidia.com/gpu: "4"}
  conditions: [{type: Ready, status: "True", reason: KubeletReady, message: ok,
                lastHeartbeatTime: "2026-01-01T00:00:00Z", lastTransitionTime: "2026-01-01T00:00:00Z"}]
EOF
  # Admission taints new nodes not-ready until a node controller clears it.
  k patch node "$n" --type=json -p '[{"op":"remove","path":"/spec/taints"}]' >/dev/null 2>&1 || true
done

pod() { # name limits-json
  k apply -f - >/dev/null <<EOF
apiVersion: v1
kind: Pod
metadata: {name: $1, namespace: $ns, labels: {tally.dev/validate: scheduler}}
spec:
  schedulerName: tally-scheduler
  tolerations: [{operator: Exists}]
  containers: [{name: c, image: none, resources: {limits: $2}}]
EOF
}
bound() { [[ -n "$(k -n "$ns" get pod "$1" -o jsonpath='{.spec.nodeName}')" ]]; }
node_of() { k -n "$ns" get pod "$1" -o jsonpath='{.spec.nodeName}'; }
calls() { python3 - "$work/calls.log" "$@" <<'PY'
import json, sys
log, pod, verb = sys.argv[1], sys.argv[2], sys.argv[3]
print(sum(1 for l in open(log) if (c := json.loads(l))["pod"] == pod and c["path"].endswith("/" + verb)))
PY
}

pod tally-validate-gpu '{nvidia.com/gpu: "1"}'
pod tally-validate-plain '{cpu: 100m}'
pod tally-validate-hami '{nvidia.com/gpu: "1", nvidia.com/gpumem: "4096", nvidia.com/gpucores: "25"}'
for p in tally-validate-gpu tally-validate-plain tally-validate-hami; do
  wait_until 60 bound "$p" || fail "$p was not scheduled"
done
[[ "$(calls tally-validate-gpu filter)" -ge 1 ]] || fail "GPU pod never reached <prefix>/filter"
[[ "$(calls tally-validate-gpu prioritize)" -ge 1 ]] || fail "GPU pod never reached <prefix>/prioritize (two nodes fit)"
[[ "$(calls tally-validate-gpu bind)" -ge 1 ]] || fail "GPU pod was not bound through <prefix>/bind"
[[ "$(node_of tally-validate-gpu)" == "$n2" ]] || fail "the extender's score did not decide the node (weight 5)"
[[ "$(calls tally-validate-plain filter)" -eq 0 ]] || fail "a pod without GPU resources reached the extender"
[[ "$(calls tally-validate-hami filter)" -ge 1 ]] || fail "the HAMi pod never reached the extender"
python3 -c 'import json,sys; sys.exit(any(json.loads(l)["fullNodes"] for l in open(sys.argv[1])))' "$work/calls.log" ||
  fail "the scheduler sent full Node objects although nodeCacheCapable is true"

if (( rc != 0 )); then
  echo "extender calls:"; sed 's/^/  /' "$work/calls.log"
  echo "scheduler log (tail):"; tail -20 "$work/scheduler.log" | sed 's/^/  /'
  echo "check-scheduler: FAILED"
else
  echo "check-scheduler: OK ($(wc -l < "$work/calls.log") extender calls; lease, filter, prioritize, bind, managedResources, ignoredByScheduler)"
fi
exit "$rc"
