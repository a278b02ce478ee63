#!/usr/bin/env bash
# A trained run's weights, downloaded over REST, rebuilt in PyTorch from the safetensors metadata
# alone and checked against the server's attention maps and loss (tests/python/test_torch_loader.py).
# Needs Debian's python3-torch (scripts/deps.sh --test installs it).
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PY=/usr/bin/python3
if ! "$PY" -c 'import torch' 2>/dev/null; then
  echo "FAIL torch_loader: $PY cannot import torch (install python3-torch: scripts/deps.sh --test)"
  exit 1
fi
export ATTNLABD=${ATTNLABD:-$ROOT/build/release/attnlabd}
exec "$PY" "$ROOT/tests/python/test_torch_loader.py"
