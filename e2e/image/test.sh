#!/usr/bin/env bash
# The image test: builds the project's Dockerfile on a private Docker engine
# (e2e/image/dockerd.sh) with base images made offline (lib.sh), then
# checks the image as the manifests run it: a numeric non-root user, a
# read-only root filesystem with every capability dropped, and the three
# programs answering --help. Stops everything it started; the engine's data
# root (images, build cache) and the base tarball stay as caches outside the
# repository.
#
#   e2e/image/test.sh [--from-source] [--prebuilt DIR]
#
# --prebuilt DIR: DIR holds tally-extender, tally-controller and tallyctl
# compiled on this (bookworm) host, e.g. build/bin; they go into the image
# through TALLY_BINARIES=prebuilt instead of compiling the repository again.
# Without it, or on a host that is not the image's Debian release, the
# Dockerfile compiles from source (--from-source forces that).
# TALLY_IMAGE names the tag (default tally:dev).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
export TALLY_LOG_TAG="image-test"
# shellcheck source=dockerd.sh
source "$here/dockerd.sh"
# shellcheck source=lib.sh
source "$here/lib.sh"

image="${TALLY_IMAGE:-tally:dev}"
prebuilt="" from_source=0
while (($#)); do
  case "$1" in
    --prebuilt) prebuilt="$(cd "$2" && pwd)"; shift ;;
    --from-source) from_source=1 ;;
    -h|--help) sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
  esac
  shift
done
((from_source)) && prebuilt=""

cleanup() {
  local rc=$?
  tally_dockerd_stop
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

start=$(date +%s)
tally_dockerd_start tally
tally_build_image "$root" "$image" "$prebuilt"

fails=0 passes=0
ok() { tally_log "ok: $*"; passes=$((passes + 1)); }
bad() { tally_log "FAIL: $*"; fails=$((fails + 1)); }

# The image's user is numeric and not root (runAsNonRoot needs a number).
user="$(tally_docker image inspect -f '{{.Config.User}}' "$image")"
if [[ "$user" =~ ^[1-9][0-9]*(:[0-9]+)?$ ]]; then ok "image user $user"; else bad "image user is '$user', not a numeric non-root uid"; fi

# As the manifests run it: read-only root, no capabilities, no privilege gain.
run() { tally_docker run --rm --read-only --cap-drop ALL --security-opt no-new-privileges --network none "$@"; }
uid="$(run --entrypoint /bin/sh "$image" -c 'id -u')"
if [[ "$uid" != 0 && -n "$uid" ]]; then ok "runs as uid $uid"; else bad "runs as uid '$uid'"; fi
if run --entrypoint /bin/sh "$image" -c 'touch /usr/local/bin/x 2>/dev/null || touch /x 2>/dev/null'; then
  bad "the root filesystem is writable under --read-only"
else
  ok "root filesystem read-only"
fi
for b in tally-extender tally-controller tallyctl; do
  out=""
  if out="$(run --entrypoint "/usr/local/bin/$b" "$image" --help 2>&1)" && grep -qi 'usage\|options' <<<"$out"; then
    ok "$b --help ($(wc -l <<<"$out") lines)"
  else
    bad "$b --help failed: $(head -c 400 <<<"$out")"
  fi
done
# The default entrypoint is the extender (manifests choose with command:).
if run "$image" >/dev/null 2>&1; then ok "default entrypoint"; else bad "default entrypoint (tally-extender --help) failed"; fi
# Every shared library resolves in the runtime stage.
if missing="$(run --entrypoint /bin/sh "$image" -c 'for b in /usr/local/bin/*; do ldd "$b" | grep "not found"; done; true')" && [[ -z "$missing" ]]; then
  ok "shared libraries resolve"
else
  bad "unresolved libraries: $missing"
fi

tally_log "image test: $passes checks passed, $fails failed in $(($(date +%s) - start)) s"
((fails == 0))
