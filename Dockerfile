# Tally image: tally-extender, tally-controller and tallyctl on Debian bookworm.
#   docker build -t tally:dev .
# TALLY_BINARIES=prebuilt takes the three binaries from the build context's
# prebuilt/ folder instead of compiling them (the image test does this with the
# binaries `make build` already compiled on a bookworm host; the context is then
# a folder holding only prebuilt/). The default, source, compiles the repository.
# The build stage installs the same Debian -dev packages as `make deps` (keep the
# two lists in step; manifests/validate.sh checks it). The runtime stage gets only
# the shared libraries the three binaries link, found with ldd + dpkg -S, so a
# library added to the build later needs no edit here.
ARG DEBIAN_RELEASE=bookworm

FROM debian:${DEBIAN_RELEASE} AS build
ARG EXTRA_BUILD_PACKAGES=""
SHELL ["/bin/bash", "-o", "pipefail", "-c"]
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      ca-certificates cmake ninja-build g++ pkg-config binutils \
      libsimdjson-dev libprotobuf-dev protobuf-compiler \
      libboost-dev libboost-system-dev libssl-dev libyaml-cpp-dev libcli11-dev \
      libfmt-dev libgtest-dev libgmock-dev libbenchmark-dev prometheus-cpp-dev \
      ${EXTRA_BUILD_PACKAGES} \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
# Declared after the toolchain's layer, so that both modes share it.
ARG TALLY_BINARIES=source
# RelWithDebInfo is the configuration `make build` tests; symbols are stripped
# below. Only the shipped targets are built (no tests, e2e or benches).
RUN set -eu; \
    case "$TALLY_BINARIES" in \
      source) \
        cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
          '-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O2 -g1 -DNDEBUG' -DTALLY_E2E=OFF -DTALLY_BENCH=OFF; \
        cmake --build build --target tally-extender tally-controller tallyctl ;; \
      prebuilt) \
        test -d prebuilt || { echo "TALLY_BINARIES=prebuilt: no prebuilt/ in the build context" >&2; exit 1; }; \
        mkdir -p build/bin; cp prebuilt/* build/bin/ ;; \
      *) echo "TALLY_BINARIES must be source or prebuilt, not '$TALLY_BINARIES'" >&2; exit 1 ;; \
    esac
RUN set -eu; \
    mkdir -p /out/bin; \
    for b in tally-extender tally-controller tallyctl; do \
      test -x "build/bin/$b" || { echo "missing build/bin/$b" >&2; exit 1; }; \
      strip --strip-unneeded -o "/out/bin/$b" "build/bin/$b"; \
    done; \
    for b in /out/bin/*; do ldd "$b" || true; done \
      | awk '/=> \//{print $3} /^[[:space:]]*\/lib/{print $1}' | sort -u \
      | while read -r lib; do \
          real="$(readlink -f "$lib")"; found=""; \
          for cand in "$lib" "$real" "${lib#/usr}" "/usr$lib" "${real#/usr}" "/usr$real"; do \
            if pkg="$(dpkg -S "$cand" 2>/dev/null)"; then echo "${pkg%%:*}"; found=1; break; fi; \
          done; \
          [ -n "$found" ] || { echo "no Debian package owns $lib" >&2; exit 1; }; \
        done | sort -u > /out/runtime-packages.txt; \
    echo "runtime packages:"; cat /out/runtime-packages.txt

FROM debian:${DEBIAN_RELEASE}-slim AS runtime
COPY --from=build /out/runtime-packages.txt /usr/share/tally/runtime-packages.txt
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      ca-certificates $(cat /usr/share/tally/runtime-packages.txt) \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --system --gid 65532 tally \
 && useradd --system --uid 65532 --gid 65532 --home-dir /nonexistent --no-create-home \
      --shell /usr/sbin/nologin tally
COPY --from=build /out/bin/ /usr/local/bin/
# Numeric user so that runAsNonRoot can verify it without reading /etc/passwd.
USER 65532:65532
# The image ships three programs; manifests choose one with `command:`.
ENTRYPOINT ["/usr/local/bin/tally-extender"]
CMD ["--help"]
