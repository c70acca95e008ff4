# Cellar's processes in one image (cellar, cellard, cellar-relay,
# cellar-indexer, cellar-trigger, cellar-billing, cellar-webhook-sink).
# Debian 12 packages only; nothing is downloaded at build time beyond apt.
FROM debian:bookworm-20241111-slim AS build
RUN apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      build-essential cmake pkg-config libmariadb-dev librdkafka-dev nlohmann-json3-dev \
      libyaml-cpp-dev libcli11-dev libzstd-dev libcpp-httplib-dev libssl-dev libgtest-dev \
      libgmock-dev libbenchmark-dev libjemalloc-dev mariadb-server \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
RUN cmake -S . -B /build -DCMAKE_BUILD_TYPE=Release \
    && cmake --build /build -j"$(nproc)" --target cellar cellard cellar-relay cellar-indexer \
         cellar-trigger cellar-billing cellar-webhook-sink

FROM debian:bookworm-20241111-slim
RUN apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      libmariadb3 librdkafka++1 libyaml-cpp0.7 libzstd1 libcpp-httplib0.11 libssl3 libjemalloc2 curl \
    && rm -rf /var/lib/apt/lists/*
COPY --from=build /build/bin/cellar /build/bin/cellard /build/bin/cellar-relay \
     /build/bin/cellar-indexer /build/bin/cellar-trigger /build/bin/cellar-billing \
     /build/bin/cellar-webhook-sink /usr/local/bin/
COPY config/examples /etc/cellar/examples
COPY docker/entrypoint.sh /usr/local/bin/cellar-entrypoint
ENTRYPOINT ["cellar-entrypoint"]
