#!/usr/bin/env bash
# HNC's part in the demo (HNC itself does not run here): every HIERARCHICAL
# ResourceQuota's status.hard follows its spec.hard, as HNC's controller
# writes it. status.used is left as it is (the demo writes none: Tally's
# doors count holders from the pods and GPUDevices themselves).
#
#   e2e/demo/hnc-standin.sh KUBECTL KUBECONFIG   (runs until killed)
set -uo pipefail
kubectl="$1"
export KUBECONFIG="$2"
while :; do
  "$kubectl" get hrq -A -o jsonpath='{range .items[*]}{.metadata.namespace} {.metadata.name} {.spec.hard} {.status.hard}{"\n"}{end}' 2>/dev/null |
    while read -r ns name spec status; do
      [[ -n "$spec" && "$spec" != "$status" ]] || continue
      "$kubectl" patch hrq -n "$ns" "$name" --subresource=status --type=merge \
        -p "{\"status\":{\"hard\":$spec}}" >/dev/null 2>&1 || true
    done
  sleep 1
done
