#!/usr/bin/env bash
# `make bench`: runs every scripts/bench_*.sh with the release build directory as $1.
# Each prints its own figures, always next to a reference measured in the same run.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-build/release}
for b in scripts/bench_*.sh; do
  [ -e "$b" ] || continue
  echo "== ${b#scripts/}"
  bash "$b" "$OUT"
done
