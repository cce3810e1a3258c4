#!/usr/bin/env bash
# Sourced (after dockerd.sh): the image's build on a private engine, shared by
# e2e/image/test.sh and e2e/kind/run.sh --offline.
#
# tally_base_images makes the Debian base images the Dockerfile starts FROM
# without a container registry. `debootstrap --variant=minbase` (from the Debian archive
# apt uses) into a folder, packed once into a tarball cached outside the
# repository (keyed by release), then `docker import`ed as debian:RELEASE and
# debian:RELEASE-slim when the engine lacks them.
#
#   tally_base_images [RELEASE]   # default bookworm; needs tally_docker (dockerd.sh)
#   tally_build_image ROOT IMAGE [PREBUILT_DIR]
#       builds ROOT/Dockerfile as IMAGE; with PREBUILT_DIR (tally-extender,
#       tally-controller, tallyctl compiled on a host of the image's Debian
#       release) through TALLY_BINARIES=prebuilt, else compiling the repository.

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

tally_build_image() { # root image [prebuilt-dir]
  local root="$1" image="$2" prebuilt="${3:-}" release host_release start
  release="$(sed -n 's/^ARG DEBIAN_RELEASE=//p' "$root/Dockerfile")"
  tally_base_images "$release" || return 1
  if [[ -n "$prebuilt" ]]; then
    host_release="$(. /etc/os-release && echo "${VERSION_CODENAME:-}")"
    if [[ "$host_release" != "$release" ]]; then
      tally_log "host is '$host_release', the image is $release: compiling from source instead"
      prebuilt=""
    fi
  fi
  start=$(date +%s)
  if [[ -n "$prebuilt" ]]; then
    local ctx b
    ctx="$(mktemp -d /tmp/tally-image-ctx.XXXXXX)"
    mkdir "$ctx/prebuilt"
    for b in tally-extender tally-controller tallyctl; do
      [[ -x "$prebuilt/$b" ]] || { tally_log "missing $prebuilt/$b"; rm -rf "$ctx"; return 1; }
      cp "$prebuilt/$b" "$ctx/prebuilt/"
    done
    tally_log "building $image from the Dockerfile with the binaries of $prebuilt"
    if ! tally_docker build -q -t "$image" -f "$root/Dockerfile" --build-arg TALLY_BINARIES=prebuilt "$ctx" >/dev/null; then
      rm -rf "$ctx"; tally_log "docker build failed"; return 1
    fi
    rm -rf "$ctx"
  else
    tally_log "building $image from the Dockerfile (compiling the repository)"
    tally_docker build -t "$image" "$root" >&2 || { tally_log "docker build failed"; return 1; }
  fi
  tally_log "built $image in $(($(date +%s) - start)) s"
}
