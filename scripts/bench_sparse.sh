#!/usr/bin/env bash
# Sparse attention against dense attention, one head at d 32: CPU time per query for N = 128 ..
# 16384 (dense, window, angular LSH, Hamming ranking, exact top-k; k = 32 and 64), the predictor's
# own share, and the crossover N (the kernels and timing of server/engine/sparse_timing.c, which the
# sparse_cost probe runs too). $1: the release build directory (default build/release).
# BENCH_SPARSE_MAX_N lowers the largest N.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-build/release}
BIN=$OUT/bench/bench_sparse
if [ ! -x "$BIN" ]; then
  echo "bench_sparse: $BIN is missing (make MODE=release $BIN)" >&2
  exit 1
fi
echo "load: $(uptime)"
"$BIN" --max-n "${BENCH_SPARSE_MAX_N:-16384}"
