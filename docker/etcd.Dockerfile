# etcd for Conduit's cluster mode: Debian 12's etcd-server and etcd-client (3.4) on the same base
# as docker/Dockerfile, run as the same non-root user 10001, data in the volume /var/lib/etcd.
# deploy/docker-compose.yml (profile cluster) and the Helm chart's in-chart etcd (etcd.enabled)
# run it as conduit-etcd:<appVersion>; `make image` builds it with the Conduit image
# (scripts/build-image.sh). The command line (etcd --name ... --initial-cluster ...) comes from them.
ARG BASE_IMAGE=debian:bookworm-slim
FROM ${BASE_IMAGE}
ARG DEBIAN_FRONTEND=noninteractive
# policy-rc.d: the package's install script would start a system etcd; nothing is started here.
RUN printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d && chmod 0755 /usr/sbin/policy-rc.d \
 && apt-get update -qq \
 && apt-get install -y -qq --no-install-recommends etcd-server etcd-client >/dev/null \
 && rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin /usr/sbin/policy-rc.d \
 && groupadd --system --gid 10001 conduit \
 && useradd --system --uid 10001 --gid 10001 --home-dir /var/lib/etcd --no-create-home \
      --shell /usr/sbin/nologin conduit \
 && rm -rf /var/lib/etcd && install -d -o 10001 -g 10001 -m 0700 /var/lib/etcd

USER 10001:10001
WORKDIR /var/lib/etcd
VOLUME ["/var/lib/etcd"]
# Client (gRPC v3 API, /health, /metrics) and peer.
EXPOSE 2379 2380
STOPSIGNAL SIGTERM
CMD ["etcd", "--data-dir=/var/lib/etcd"]
