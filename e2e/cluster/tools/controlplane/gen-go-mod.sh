#!/usr/bin/env bash
# Writes go.mod for the control plane's wrapper module: require k8s.io/kubernetes
# at the pinned release, etcd's server and kwok, and map every staging module
# (the list is read from that release's own go.mod) to the matching v0.Y.Z tag,
# since upstream points them at local paths. The replacements carry no version on
# their left side, so kwok's own k8s.io requirements resolve to the same tags:
# its client-go, apimachinery and apiserver are the packages kube-apiserver
# compiles, not a second copy.
set -euo pipefail
ver="$1"; mod_file="$2"; out="$3"; etcd_ver="$4"; kwok_ver="$5"
staging_ver="v0.${ver#v1.}"
{
  echo "module tally.dev/e2e/controlplane"
  echo
  echo "go 1.26.0"
  echo
  echo "require ("
  echo "	k8s.io/kubernetes ${ver}"
  echo "	go.etcd.io/etcd/server/v3 ${etcd_ver}"
  echo "	sigs.k8s.io/kwok ${kwok_ver}"
  echo ")"
  echo
  echo "replace ("
  sed -n '/^replace (/,/^)/p' "$mod_file" | grep -oE 'k8s\.io/[a-z0-9-]+ => \./staging' | awk '{print $1}' | sort -u |
    while read -r m; do echo "	${m} => ${m} ${staging_ver}"; done
  echo ")"
} > "$out"
