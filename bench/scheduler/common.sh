# shellcheck shell=bash disable=SC2154 # $repo, $port, $token, $SCHED_PORT are the caller's
# What bench/scheduler/run.sh and dra.sh both use (sourced after
# bench/lib.sh): the scheduler configurations they restart kube-scheduler
# with, kube-scheduler's counters, and CPU ticks per process and thread group.
# They read the caller's $repo, $port (tally-extender's), $token and
# $SCHED_PORT (the cluster's env).

# config FILE PROFILE WITH_EXTENDER: the same configuration but for the
# extenders block (the shipped one, pointed at $port). High client QPS so
# that no run is limited by the scheduler's own rate limiter.
config() { # FILE PROFILE WITH_EXTENDER
  cat >"$1" <<EOF
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection:
  kubeconfig: __KUBECONFIG__
  qps: 5000
  burst: 5000
leaderElection:
  leaderElect: false
profiles:
  - schedulerName: $2
EOF
  if (($3)); then
    sed -n '/^extenders:/,$p' "$repo/manifests/scheduler/kube-scheduler-config.yaml" |
      sed "s#urlPrefix: .*#urlPrefix: http://127.0.0.1:$port/tally#" >>"$1"
  fi
}

# Pods of profile `bench` kube-scheduler has scheduled so far.
scheduled() {
  curl -sk -H "Authorization: Bearer $token" "https://127.0.0.1:$SCHED_PORT/metrics" 2>/dev/null |
    awk '/^scheduler_schedule_attempts_total\{/ && /profile="bench"/ && /result="scheduled"/ {print $2; f=1} END {if (!f) print 0}'
}

# kube-scheduler's mean algorithm and attempt time per pod so far.
cycle_means() {
  curl -sk -H "Authorization: Bearer $token" "https://127.0.0.1:$SCHED_PORT/metrics" 2>/dev/null |
    awk '/^scheduler_scheduling_algorithm_duration_seconds_(sum|count) / { a[$1] = $2 }
         /^scheduler_scheduling_attempt_duration_seconds_(sum|count)\{/ && /profile="bench"/ && /result="scheduled"/ {
           split($1, n, "{"); b[n[1]] = $2 }
         END { ca = a["scheduler_scheduling_algorithm_duration_seconds_count"]; cb = b["scheduler_scheduling_attempt_duration_seconds_count"]
               printf "algorithm %.2f ms, attempt %.2f ms",
                 ca ? 1000 * a["scheduler_scheduling_algorithm_duration_seconds_sum"] / ca : 0,
                 cb ? 1000 * b["scheduler_scheduling_attempt_duration_seconds_sum"] / cb : 0 }'
}

api_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; } # PID -> utime + stime in clock ticks

# A process's threads by name, numbers dropped: "PREFIX/<name> ticks" per group.
thread_ticks() { # PREFIX PID
  python3 - "$1" "$2" <<'PY'
import glob, re, sys
groups = {}
for stat in glob.glob(f"/proc/{sys.argv[2]}/task/*/stat"):
    try:
        text = open(stat).read()
    except OSError:
        continue  # the thread ended between the glob and the read
    name = text[text.index("(") + 1:text.rindex(")")]
    fields = text[text.rindex(")") + 2:].split()
    group = re.sub(r"-?[0-9]+$", "", name)
    groups[group] = groups.get(group, 0) + int(fields[11]) + int(fields[12])
for group, ticks in sorted(groups.items()):
    print(f"{sys.argv[1]}/{group} {ticks}")
PY
}

# Binding POSTs the API server has answered so far, by status code: "code
# count" per line (apiserver_request_total, every client's: kube-scheduler's
# own binds in the baseline, the extender's with bindVerb).
binding_posts() {
  k get --raw /metrics 2>/dev/null |
    awk '/^apiserver_request_total\{/ && /subresource="binding"/ && /verb="POST"/ {
           match($0, /code="[0-9]+"/); c = substr($0, RSTART + 6, RLENGTH - 7); n[c] += $2 }
         END { for (c in n) print c, n[c] }'
}

# kube-scheduler's attempts of profile bench that ended in an error since it
# started (a bind that failed, was refused or timed out among them).
sched_errors() {
  curl -sk -H "Authorization: Bearer $token" "https://127.0.0.1:$SCHED_PORT/metrics" 2>/dev/null |
    awk '/^scheduler_schedule_attempts_total\{/ && /profile="bench"/ && /result="error"/ {print $2; f=1} END {if (!f) print 0}'
}

# One counter of an extender's metrics by one label, "value count" per line.
extender_counter() { # PORT METRIC LABEL
  [[ -n "${1:-}" ]] || return 0
  curl -s "http://127.0.0.1:$1/metrics" 2>/dev/null |
    awk -v metric="$2" -v label="$3" 'index($0, metric "{") == 1 && match($0, label "=\"[^\"]*\"") {
      print substr($0, RSTART + length(label) + 2, RLENGTH - length(label) - 3), $2 }'
}

# An extender's bind outcomes so far, "result count" per line
# (tally_extender_binds_total on the metrics of the port given).
extender_binds() { extender_counter "${1:-}" tally_extender_binds_total result; } # PORT

# Prioritize answers by where their scores came from (source="filter": the
# filter of the same cycle; "snapshot": scored anew), "source count" lines.
extender_prioritize_sources() { extender_counter "${1:-}" tally_extender_prioritize_answers_total source; } # PORT
extender_api_connections() { extender_counter "${1:-}" tally_extender_api_connections_total handshake; } # PORT

# counts_used BEFORE AFTER -> "key=delta ..." for "key count" lines.
counts_used() {
  python3 - "$1" "$2" <<'PY'
import sys
def read(t):
    return {l.split()[0]: float(l.split()[1]) for l in t.splitlines() if len(l.split()) == 2}
a, b = read(sys.argv[1]), read(sys.argv[2])
print(" ".join(f"{k}={int(b[k] - a.get(k, 0))}" for k in sorted(b) if b[k] - a.get(k, 0) > 0) or "none")
PY
}
