#!/usr/bin/env bash
# Prints N realistic Pod manifests (multi-document YAML) for namespace NS:
# GPU and CPU containers, sidecar init containers, a RuntimeClass with
# overhead, owner references, labels, annotations, env, probes and volumes.
#   pods.sh NS N [PREFIX]
set -euo pipefail
ns="$1"; n="$2"; prefix="${3:-pod}"
# OWNER_UIDS: space-separated uids of existing owners (a garbage collector
# deletes pods whose owner is missing); fixed fake uids otherwise.
if [[ -n "${OWNER_UIDS:-}" ]]; then
  read -r -a owner_uids <<<"$OWNER_UIDS"
else
  owner_uids=()
  for ((j = 0; j < 100; j++)); do owner_uids+=("00000000-0000-4000-8000-$(printf '%012d' "$j")"); done
fi
for ((i = 0; i < n; i++)); do
  # GPU_EVERY=k: every k-th pod is a GPU trainer (1-4 GPUs), the rest CPU jobs.
  if ((i % ${GPU_EVERY:-1} == 0)); then gpus=$((i % 4 + 1)); else gpus=0; fi
  if ((gpus > 0)); then
    requests="{cpu: \"$((gpus * 8))\", memory: $((gpus * 64))Gi, nvidia.com/gpu: \"${gpus}\"}"
    limits="{memory: $((gpus * 64))Gi, nvidia.com/gpu: \"${gpus}\"}"
  else
    requests="{cpu: \"2\", memory: 8Gi}"
    limits="{memory: 8Gi}"
  fi
  cat <<YAML
---
apiVersion: v1
kind: Pod
metadata:
  name: ${prefix}-${i}
  namespace: ${ns}
  labels: {app: trainer-$((i % 50)), team: team-$((i % 7)), tier: batch, pod-template-hash: 5d8f7c9b$((i % 10))}
  annotations:
    gpu.tally.dev/profile: nvidia-h200-passthrough
    prometheus.io/scrape: "true"
    kubectl.kubernetes.io/default-container: main
  ownerReferences:
  - {apiVersion: batch/v1, kind: Job, name: job-$((i % 100)), uid: ${owner_uids[$((i % ${#owner_uids[@]}))]}, controller: true, blockOwnerDeletion: true}
spec:
  runtimeClassName: tally-gpu
  schedulerName: default-scheduler
  nodeSelector: {type: kwok}
  tolerations:
  - {key: kwok.x-k8s.io/node, operator: Exists, effect: NoSchedule}
  - {key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}
  initContainers:
  - name: fetch-dataset
    image: registry.example.com/tools/fetch:1.4.2
    command: ["/bin/fetch", "--dataset=s3://datasets/imagenet-$((i % 9))", "--dest=/data"]
    resources: {requests: {cpu: 500m, memory: 512Mi}, limits: {cpu: "1", memory: 1Gi}}
    volumeMounts: [{name: data, mountPath: /data}]
  - name: log-shipper
    image: registry.example.com/observability/shipper:2.11.0
    restartPolicy: Always
    resources: {requests: {cpu: 100m, memory: 128Mi}}
  containers:
  - name: main
    image: registry.example.com/ml/pytorch-train:2.5.1-cuda12.4
    command: ["torchrun", "--nproc-per-node=$((gpus > 0 ? gpus : 1))", "train.py"]
    args: ["--epochs=90", "--batch-size=256", "--lr=0.1", "--checkpoint-dir=/ckpt/run-${i}"]
    env:
    - {name: NCCL_DEBUG, value: WARN}
    - {name: RUN_ID, value: "run-${i}"}
    - name: POD_NAME
      valueFrom: {fieldRef: {fieldPath: metadata.name}}
    ports: [{name: metrics, containerPort: 9090}]
    resources:
      requests: ${requests}
      limits: ${limits}
    readinessProbe: {httpGet: {path: /healthz, port: 9090}, periodSeconds: 10}
    volumeMounts: [{name: data, mountPath: /data}, {name: ckpt, mountPath: /ckpt}]
  - name: exporter
    image: registry.example.com/observability/dcgm-exporter:3.3.5
    resources: {requests: {cpu: 50m, memory: 64Mi}}
  volumes:
  - {name: data, emptyDir: {}}
  - name: ckpt
    emptyDir: {sizeLimit: $((i % 20 + 10))Gi}
YAML
done
