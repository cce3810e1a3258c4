#!/usr/bin/env bash
# Sourced: makes the Debian base images the Dockerfile starts FROM without a
# container registry. `debootstrap --variant=minbase` (from the Debian archive
# apt uses) into a folder, packed once into a tarball cached outside the
# repository (keyed by release), then `docker import`ed as debian:RELEASE and
# debian:RELEASE-slim when the engine lacks them.
#
#   tally_base_images [RELEASE]   # default bookworm; needs tally_docker (dockerd.sh)

tally_base_images() {
  local release="${1:-bookworm}" cache tarball
  if tally_docker image inspect "debian:$release" >/dev/null 2>&1 &&
     tally_docker image inspect "debian:$release-slim" >/dev/null 2>&1; then
    return 0
  fi
  cache="$(tally_cache_dir)/images"
  tarball="$cache/debian-$release-minbase.tar"
  mkdir -p "$cache"
  if [[ ! -s "$tarball" ]]; then
    tally_apt_ensure "debootstrap debootstrap"
    local dir; dir="$(mktemp -d "$cache/.debootstrap.XXXXXX")"
    tally_log "debootstrap --variant=minbase $release (once; cached in $tarball)"
    if ! debootstrap --variant=minbase "$release" "$dir" >"$dir.log" 2>&1; then
      tail -n 30 "$dir.log" >&2
      rm -rf "$dir" "$dir.log"
      tally_log "debootstrap $release failed"
      return 1
    fi
    rm -rf "$dir"/var/cache/apt/archives/*.deb "$dir"/var/lib/apt/lists/*
    tar -C "$dir" --numeric-owner -cf "$tarball.tmp" .
    mv "$tarball.tmp" "$tarball"
    rm -rf "$dir" "$dir.log"
  fi
  tally_log "importing debian:$release from $tarball"
  tally_docker import "$tarball" "debian:$release" >/dev/null
  tally_docker tag "debian:$release" "debian:$release-slim"
}
