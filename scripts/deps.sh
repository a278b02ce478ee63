#!/usr/bin/env bash
# Installs what attnlab needs on Debian 12, idempotently: Debian packages through apt
# (only those missing), then the pinned npm packages from package-lock.json.
# Both `make run` and `make test` call it first, so a fresh machine needs nothing else.
set -euo pipefail
cd "$(dirname "$0")/.."

# Build tools and the libraries the C code links against. Add a package here, not elsewhere.
APT_PACKAGES=(
  gcc make pkg-config ca-certificates curl
  libmicrohttpd-dev libjansson-dev libsqlite3-dev libcurl4-openssl-dev
  libopenblas-dev libutf8proc-dev libpq-dev
)
# Test-only packages (browser tests; a throw-away PostgreSQL cluster for the PostgreSQL backend and the
# multi-node tests; clang and its libFuzzer runtime for tests/fuzz; clang-format for the style check;
# wrk for `make loadtest`; PyTorch for tests/test_torch_loader.sh, which rebuilds a run's downloaded
# weights from their metadata; venv, pip, setuptools and wheel for tests/test_python_client.sh, which
# installs the Python client offline); installed by `make test`, not needed to run the service.
APT_TEST_PACKAGES=(sqlite3 chromium postgresql libpq-dev clang libclang-rt-dev clang-format wrk python3-torch
  python3-venv python3-pip python3-setuptools python3-wheel)
# Sources of the default corpus (`make corpus`).
APT_CORPUS_PACKAGES=(dict-foldoc jargon-text manpages manpages-dev groff-base python3 libc6-dev linux-libc-dev)
# The PyTorch peer of `make bench` (bench/torch_train.py), run with Debian's /usr/bin/python3.
APT_BENCH_PACKAGES=(python3-torch)

want=("${APT_PACKAGES[@]}")
case "${1:-}" in
  --test)   want+=("${APT_TEST_PACKAGES[@]}") ;;
  --corpus) want+=("${APT_CORPUS_PACKAGES[@]}") ;;
  --bench)  want+=("${APT_BENCH_PACKAGES[@]}") ;;
esac

# Node.js and npm may come from Debian or from elsewhere (a newer Node bundles its own npm, and
# Debian's npm package would conflict with it): only install Debian's when none is on the PATH.
command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1 || want+=(nodejs npm)

missing=()
for p in "${want[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "deps: installing ${missing[*]}"
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# npm ci only when the installed tree does not match the lock file.
stamp=node_modules/.attnlab-lock
if [ ! -f "$stamp" ] || ! cmp -s package-lock.json "$stamp"; then
  echo "deps: npm ci"
  npm ci --no-audit --no-fund --loglevel=error
  cp package-lock.json "$stamp"
fi
