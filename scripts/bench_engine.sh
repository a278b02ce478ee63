#!/usr/bin/env bash
# Training throughput of the seed configuration (L3 H4 C128 T128 V50257, B32) for each
# attention variant: tokens/s, ms/step, peak RSS and model FLOP utilisation against the FMA
# peak that the same program measures around every step (the machine may be shared: compare ratios;
# the CPU-time MFU is the figure least disturbed by other load).
# $1: the release build directory (default build/release). BENCH_STEPS, BENCH_THREADS override.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-build/release}
BIN=$OUT/bench/bench_train
STEPS=${BENCH_STEPS:-5}
THREADS=${BENCH_THREADS:-$(nproc)}
if [ ! -x "$BIN" ]; then
  echo "bench_engine: $BIN is missing (make MODE=release $BIN)" >&2
  exit 1
fi
path=$("$BIN" --default-kernel-path 2>/dev/null || echo fp32)
if [ "$path" = amx ]; then
  # on the tiles a step's FLOPs are measured against the TDPBF16PS peak, not the FMAs'
  echo "targets (kernel path amx): the issue's are in bench_peers.sh (10x the faster PyTorch mode); peak RSS <= 400 MB (first step excluded from timing)"
else
  echo "targets (kernel path $path): MFU >= 60% of the measured FMA peak, peak RSS <= 400 MB (first step excluded from timing)"
fi
for a in dot rope cosine_rope; do
  "$BIN" --attention "$a" --steps "$STEPS" --threads "$THREADS"
done
def=$("$BIN" --default-precision)
other=$([ "$def" = bf16 ] && echo fp32 || echo bf16)
echo "precision: $def by default on this CPU (above); rope in $other, for comparison:"
"$BIN" --attention rope --steps "$STEPS" --threads "$THREADS" --precision "$other"
if [ "$path" = amx ]; then
  echo "what bounds a tile kernel here (the fused output layer's target is 50% of the AMX peak):"
  "$OUT/bench/bench_amx"
fi
echo "the output layer alone, fp32 kernels and bf16 kernels (target: bf16 >= 70% of the measured bf16 dot-product peak; on amx >= 50% of the AMX peak):"
"$OUT/bench/bench_lmhead" --threads "$THREADS" --rounds 2
echo "the output layer through OpenBLAS instead of the engine's own kernels, for comparison:"
"$BIN" --attention dot --steps "$STEPS" --threads "$THREADS" --lmhead-blas
