# pacerd as a sidecar container.
#
#   docker build -t pacerd .
#   docker run --rm -p 8080:8080 -e PACERD_LISTEN=0.0.0.0:8080 pacerd
#
# Inside a pod, the application container reaches the sidecar on 127.0.0.1,
# so pacerd keeps listening on loopback unless PACERD_LISTEN says otherwise
# (an admin listener beyond loopback needs admin.token). Configuration: mount a
# file at /etc/pacerd/pacerd.yaml, or use the PACERD_* variables (README).

FROM debian:12-slim AS build
RUN apt-get update \
 && apt-get install -y --no-install-recommends \
      gcc make pkg-config libc6-dev libevent-dev libhttp-parser-dev libcurl4-openssl-dev \
      libjansson-dev libyaml-dev libssl-dev \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY Makefile ./
COPY src ./src
RUN make all

FROM debian:12-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends \
      libevent-2.1-7 libhttp-parser2.9 libcurl4 libjansson4 libyaml-0-2 libssl3 \
      ca-certificates tzdata \
 && rm -rf /var/lib/apt/lists/*
COPY --from=build /src/build/pacerd /usr/local/bin/pacerd
COPY conf/pacerd.yaml /etc/pacerd/pacerd.yaml
USER 65534:65534
EXPOSE 8080 9090
STOPSIGNAL SIGTERM
ENTRYPOINT ["/usr/local/bin/pacerd"]
CMD ["-c", "/etc/pacerd/pacerd.yaml"]
