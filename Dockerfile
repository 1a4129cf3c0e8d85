# Two images from one file (docs/operations.md, "Container"):
#   docker build -t user-service .                             the service on Node (the default)
#   docker build --target binary -t user-service:binary .      the single executable alone
# (podman build needs --format docker: its default OCI format drops HEALTHCHECK.)
# Node 26 is the active LTS; the minor version is pinned so that a rebuild gets the same Node
# (change it here, in both FROM lines, to move on).

# Build stage: the dev tools from the lock file, then the whole service bundled into one file.
FROM node:26.10-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --ignore-scripts --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json sea-config.json ./
COPY src ./src
COPY admin ./admin
COPY scripts ./scripts
RUN npm run build:bundle

# The single executable: this stage's Node 26 with the bundle injected, stripped of its symbols
# (binutils' strip: 150 MB → 116 MB), and beside it the root file system of the binary image: the
# shared libraries ldd names (with the loader, at the paths the executable asks for), and a passwd
# file naming the service's user; /datadir holds the empty data directory (COPY --chown changes what
# a directory holds, not the directory named, so the data directory is copied as an entry of one).
FROM build AS sea
RUN apt-get update && apt-get install -y --no-install-recommends binutils && rm -rf /var/lib/apt/lists/*
RUN node scripts/build-sea.mjs dist --strip
RUN set -eu; \
    mkdir -p /rootfs/usr/local/bin /rootfs/etc /datadir/data; \
    cp dist/user-service /rootfs/usr/local/bin/user-service; \
    for lib in $(ldd dist/user-service | grep -o '/[^ ]*'); do cp --parents -L "$lib" /rootfs; done; \
    printf 'root:x:0:0:root:/:/nonexistent\nuser-service:x:1000:1000:user-service:/data:/nonexistent\n' >/rootfs/etc/passwd; \
    printf 'root:x:0:\nuser-service:x:1000:\n' >/rootfs/etc/group

# Target `binary`: nothing but the executable and the C and C++ libraries it links. No Node, npm
# or shell; the executable is its own health check. Node carries its own root certificates, so
# there is no CA bundle (the service makes no outgoing TLS connections on the file store anyway).
FROM scratch AS binary
ARG VERSION=0.1.0
ARG SOURCE_URL=""
LABEL org.opencontainers.image.title="user-service" \
      org.opencontainers.image.description="A small user service: REST, HMAC bearer tokens, durable JSON files (single executable)" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.licenses="MIT" \
      org.opencontainers.image.source="${SOURCE_URL}"
COPY --from=sea /rootfs/ /
COPY --from=sea --chown=1000:1000 /datadir/ /
ENV PATH=/usr/local/bin \
    HOST=0.0.0.0 \
    PORT=8080 \
    DATA_DIR=/data
USER 1000:1000
VOLUME ["/data"]
EXPOSE 8080
STOPSIGNAL SIGTERM
HEALTHCHECK --interval=10s --timeout=3s --start-period=10s --retries=3 \
  CMD ["/usr/local/bin/user-service", "healthcheck"]
ENTRYPOINT ["/usr/local/bin/user-service"]

# The default target: Node 26 and one file, user-service.mjs (no node_modules: the service has no
# runtime dependencies). NODE_ENV is not set: the first start writes a secret into /data and prints
# an admin token once; an operator who sets NODE_ENV=production passes JWT_SECRET too.
FROM node:26.10-slim AS app
ARG VERSION=0.1.0
ARG SOURCE_URL=""
LABEL org.opencontainers.image.title="user-service" \
      org.opencontainers.image.description="A small user service: REST, HMAC bearer tokens, durable JSON files" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.licenses="MIT" \
      org.opencontainers.image.source="${SOURCE_URL}"
ENV HOST=0.0.0.0 \
    PORT=8080 \
    DATA_DIR=/data
WORKDIR /app
COPY --from=build /app/dist/user-service.mjs ./
# uid 1000 is the base image's `node` user; numeric, so that an orchestrator can tell it is not root.
RUN mkdir -p /data && chown 1000:1000 /data
USER 1000:1000
VOLUME ["/data"]
EXPOSE 8080
# SIGTERM lets in-flight requests finish and releases the data directory's lock.
STOPSIGNAL SIGTERM
HEALTHCHECK --interval=10s --timeout=3s --start-period=10s --retries=3 \
  CMD ["node", "user-service.mjs", "healthcheck"]
CMD ["node", "user-service.mjs"]
