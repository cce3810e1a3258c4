#!/usr/bin/env bash
# Writes go.mod for the kubernetes wrapper: require k8s.io/kubernetes at the pinned
# release and map every staging module (the list is read from that release's own
# go.mod) to the matching v0.Y.Z tag, since upstream points them at local paths.
set -euo pipefail
ver="$1"; mod_file="$2"; out="$3"
staging_ver="v0.${ver#v1.}"
{
  echo "module tally.dev/e2e/kubernetes"
  echo
  echo "go 1.26.0"
  echo
  echo "require k8s.io/kubernetes ${ver}"
  echo
  echo "replace ("
  sed -n '/^replace (/,/^)/p' "$mod_file" | grep -oE 'k8s\.io/[a-z0-9-]+ => \./staging' | awk '{print $1}' | sort -u |
    while read -r m; do echo "	${m} => ${m} ${staging_ver}"; done
  echo ")"
} > "$out"
