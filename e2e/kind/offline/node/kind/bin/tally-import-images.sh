#!/bin/sh
# Imports the component images baked into the offline node image
# (/kind/images/*.tar) into containerd's k8s.io namespace.
set -eu
i=0
until ctr version >/dev/null 2>&1; do
  i=$((i + 1))
  [ "$i" -lt 60 ] || { echo "containerd did not answer" >&2; exit 1; }
  sleep 1
done
for f in /kind/images/*.tar; do
  ctr -n k8s.io images import "$f"
done
