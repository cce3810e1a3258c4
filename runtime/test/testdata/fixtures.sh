#!/usr/bin/env bash
# Cluster-side fixtures the recorded pods need: a kwok node pool with GPUs and
# the RuntimeClass that adds pod overhead.   fixtures.sh NODES
set -euo pipefail
nodes="${1:-4}"
kubectl="${KUBECTL:-kubectl}"
{
  cat <<YAML
apiVersion: node.k8s.io/v1
kind: RuntimeClass
metadata: {name: tally-gpu}
handler: runc
overhead: {podFixed: {cpu: 250m, memory: 64Mi}}
YAML
  for ((i = 0; i < nodes; i++)); do
    cat <<YAML
---
apiVersion: v1
kind: Node
metadata:
  name: gpu-node-${i}
  annotations: {kwok.x-k8s.io/node: fake}
  labels: {type: kwok, kubernetes.io/hostname: gpu-node-${i}}
spec:
  taints: [{key: kwok.x-k8s.io/node, value: fake, effect: NoSchedule}]
status:
  allocatable: {cpu: "256", memory: 4Ti, pods: "110", nvidia.com/gpu: "8"}
  capacity: {cpu: "256", memory: 4Ti, pods: "110", nvidia.com/gpu: "8"}
YAML
  done
} | "$kubectl" apply -f - >/dev/null
