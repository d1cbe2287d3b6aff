# syntax=docker/dockerfile:1
# One image with the `keelson` binary; the Helm chart (charts/keelson) runs
# every service from it with a different subcommand.
#
#   docker build -t keelson:0.1.0 .
#   docker run --rm keelson:0.1.0 --help

# The toolchain the project is built and tested with (the workspace's rust-version).
ARG RUST_VERSION=1.95
ARG DEBIAN_RELEASE=bookworm

# ---- build ------------------------------------------------------------------
FROM rust:${RUST_VERSION}-slim-${DEBIAN_RELEASE} AS builder
WORKDIR /src
# protoc comes vendored (protoc-bin-vendored, found by .cargo/protoc); the
# Cap'n Proto code is committed; SQLite is bundled by libsqlite3-sys. A C
# compiler is all the build scripts need beyond Rust.
RUN apt-get update \
    && apt-get install -y --no-install-recommends gcc libc6-dev pkg-config \
    && rm -rf /var/lib/apt/lists/*
COPY . .
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked --bin keelson \
    && install -D -m 0755 target/release/keelson /out/keelson

# ---- runtime ----------------------------------------------------------------
FROM debian:${DEBIAN_RELEASE}-slim
RUN apt-get update \
    && apt-get install -y --no-install-recommends ca-certificates tzdata \
    && rm -rf /var/lib/apt/lists/* \
    && groupadd --system --gid 10001 keelson \
    && useradd --system --uid 10001 --gid keelson --home-dir /var/lib/keelson --shell /usr/sbin/nologin keelson \
    && install -d -o keelson -g keelson -m 0750 /var/lib/keelson /etc/keelson /run/keelson
COPY --from=builder /out/keelson /usr/local/bin/keelson
USER 10001:10001
WORKDIR /var/lib/keelson
# Placement REST, Orchestration REST, inventory, candidates, engine gRPC,
# controller RPC.
EXPOSE 8778 8004 50051 50052 50053 7001
ENTRYPOINT ["/usr/local/bin/keelson"]
CMD ["--help"]
