# SPDX-License-Identifier: Apache-2.0
# pacerd as a sidecar container: Debian 12 slim, pacerd as an unprivileged user.
#
#   podman build --format docker -t pacerd .     (or: docker build -t pacerd .)
#   make container-test                          (builds it and runs it against the mock)
#
# Inside a pod, the application container reaches the sidecar on 127.0.0.1,
# so pacerd keeps listening on loopback unless PACERD_LISTEN says otherwise
# (an admin listener beyond loopback needs admin.token). Configuration: mount a
# file at /etc/pacerd/pacerd.yaml, or use the PACERD_* variables (docs/configuration.md).
#
# No registry on the machine: scripts/container-base.sh makes debian:12-slim
# locally, and `podman build --pull=never` finds it (as localhost/debian:12-slim).

FROM debian:12-slim AS build
# What `make all` needs: the compiler, make, pkg-config (the Makefile asks it for
# the flags of libevent, libevent_openssl, libcurl, jansson, yaml-0.1, libssl,
# libcrypto, hiredis) and those -dev packages (libevent-dev has libevent_openssl);
# libhttp-parser and libwslay have no .pc file and are linked by name. Not `check`,
# valgrind, clang or node: no test runs here (scripts/install-deps.sh has those).
RUN apt-get update \
 && apt-get install -y --no-install-recommends \
      gcc make pkg-config libc6-dev libevent-dev libhttp-parser-dev libcurl4-openssl-dev \
      libjansson-dev libyaml-dev libssl-dev libhiredis-dev libwslay-dev \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
# Only what the build reads (.dockerignore keeps everything else out of the
# context): a change to the tests or the docs does not rebuild.
COPY Makefile ./
COPY src ./src
RUN make -j2 all

FROM debian:12-slim
# The shared libraries pacerd links, CA certificates for https upstreams, the
# IANA zones of plans' day_time_zone, and curl for the HEALTHCHECK: pacerd has
# no HTTP client mode of its own, and curl costs only its own ~0.5 MB here
# because libcurl4 is already in for pacerd.
RUN apt-get update \
 && apt-get install -y --no-install-recommends \
      libevent-2.1-7 libevent-openssl-2.1-7 libhttp-parser2.9 libcurl4 libjansson4 libyaml-0-2 \
      libssl3 libhiredis0.14 libwslay1 \
      ca-certificates tzdata curl \
 && rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin /var/log/apt /var/log/dpkg.log
COPY --from=build /src/build/pacerd /usr/local/bin/pacerd
COPY conf/pacerd.yaml /etc/pacerd/pacerd.yaml
# The state directory: what the lanes learned (lanes.state, read back at the
# next start: docs/operations.md) and the CA for CONNECT tunnels, made here at
# first start (docs/https-proxy.md). A volume, so that it is writable under
# --read-only and outlives the container; sidecars whose clients must trust one CA mount the same
# one, or a secret with forward.ca_cert and forward.ca_key. Without a writable
# directory pacerd still runs; only CONNECT to a provider is answered 503, and
# nothing learned is kept.
RUN mkdir -p /var/lib/pacerd && chown 65534:65534 /var/lib/pacerd && chmod 0700 /var/lib/pacerd
ENV STATE_DIRECTORY=/var/lib/pacerd
VOLUME /var/lib/pacerd
# nobody:nogroup; nothing else in the image needs to be written (read-only root works).
USER 65534:65534
EXPOSE 8080 9090
STOPSIGNAL SIGTERM
# Liveness of the event loop on the admin listener: PACERD_ADMIN_LISTEN when set
# (it overrides the file), else the default 127.0.0.1:9090; not with admin.token.
# Exit 1, not curl's own status: 1 is the only failure a HEALTHCHECK may return.
# Docker keeps HEALTHCHECK; podman only with `podman build --format docker`.
HEALTHCHECK --interval=30s --timeout=3s --start-period=5s --retries=3 \
  CMD curl -fsS -o /dev/null --max-time 2 "http://${PACERD_ADMIN_LISTEN:-127.0.0.1:9090}/healthz" || exit 1
ENTRYPOINT ["/usr/local/bin/pacerd"]
CMD ["-c", "/etc/pacerd/pacerd.yaml"]
