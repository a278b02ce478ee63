#!/usr/bin/env bash
# The engine against its peers on one config and one token stream, interleaved (A B C D A B C D):
# attnlab on every kernel path this CPU runs (bench_train --kernel-path: fp32, avx512_bf16, amx) and
# the same model in PyTorch (bench/torch_train.py, Debian's python3-torch) in fp32 and under
# torch.autocast("cpu", dtype=torch.bfloat16). Prints the kernel-path table and the chosen path,
# the measured peaks (fp32 FMA, vdpbf16ps, AMX where present), tokens/s, the ratio against the
# faster PyTorch mode, MFU against the peak of each path's own unit (measured by bench_train
# around its steps), each program's peak RSS, and where a step's time goes.
# Then the A/B of how an experiment's two variants share the machine (both at once, threads split,
# against one after the other with every thread), the seed-blog experiment's wall time estimated
# from it, and (with the default corpus built, BENCH_QUALITY=1) the training-quality guard for
# every bf16 path this CPU runs: 300 steps fp32 vs bf16 on the default corpus, mean loss of steps
# 251-300 within 0.02 nats and every tau within 0.01.
# $1: the release build directory. BENCH_STEPS (5), BENCH_ROUNDS (2), BENCH_THREADS (nproc),
# BENCH_ATTENTION (rope), BENCH_QUALITY (1 when var/corpora/default exists), DATA_DIR (var).
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-build/release}
BIN=$OUT/bench/bench_train
STEPS=${BENCH_STEPS:-5}
ROUNDS=${BENCH_ROUNDS:-2}
THREADS=${BENCH_THREADS:-$(nproc)}
ATT=${BENCH_ATTENTION:-rope}
DATA_DIR=${DATA_DIR:-var}
PY=/usr/bin/python3 # Debian's, where python3-torch lives
[ -x "$BIN" ] || { echo "bench_peers: $BIN is missing" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$BIN" --write-tokens "$work/tokens" --steps "$STEPS"
# PyTorch's matrix products go through OpenBLAS (libblas.so.3); where OpenBLAS does not know the CPU
# it falls back to its generic SSE3 kernels (Debian's 0.3.21 on an Emerald Rapids: "Prescott").
# The peer then gets the AVX-512 kernels it would pick on a CPU it knows, so it is measured at its best.
TORCH_ENV=()
if [ "$("$BIN" --blas-core)" = Prescott ] && grep -qw avx512f /proc/cpuinfo; then
  TORCH_ENV=(OPENBLAS_CORETYPE=SkylakeX)
  echo "(OpenBLAS takes this CPU for a Prescott: PyTorch runs with OPENBLAS_CORETYPE=SkylakeX)"
fi
have_torch=1
"$PY" -c 'import torch' 2>/dev/null || { have_torch=0; echo "(python3-torch is not installed: scripts/deps.sh --bench)"; }

echo "load before: $(uptime)"
# The kernel-path table as this CPU sees it; every path that runs (bf16_portable aside) is timed.
"$BIN" --kernel-paths >"$work/paths"
chosen=$("$BIN" --default-kernel-path)
echo "kernel paths on this CPU ($(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //')):"
awk -F'\t' -v c="$chosen" '{printf "  %-14s %-10s %-28s %7.1f GFLOP/s per thread%s\n", $1, $2, $3, $4, ($1 == c ? "   <- chosen" : "")}' "$work/paths"
echo "chosen kernel path: $chosen (default precision $("$BIN" --default-precision))"
PATHS=$(awk -F'\t' '$3 == "runs" && $1 != "bf16_portable" {print $1}' "$work/paths")
echo "seed configuration L3 H4 C128 T128 V50257 B32, attention $ATT, $STEPS steps per run (the first is warm-up), $THREADS threads, $ROUNDS interleaved rounds"
for r in $(seq "$ROUNDS"); do
  for p in $PATHS; do
    prec=$([ "$p" = fp32 ] && echo fp32 || echo bf16)
    "$BIN" --attention "$ATT" --steps "$STEPS" --threads "$THREADS" --kernel-path "$p" --precision "$prec" \
      --tokens "$work/tokens" --json >>"$work/results"
    tail -n1 "$work/results"
  done
  if [ "$have_torch" = 1 ]; then
    for p in fp32 bf16; do
      env "${TORCH_ENV[@]}" "$PY" bench/torch_train.py --tokens "$work/tokens" --steps "$STEPS" --threads "$THREADS" --mode "$p" --attention "$ATT" >>"$work/results"
      tail -n1 "$work/results"
    done
  fi
done
echo "load after: $(uptime)"
"$PY" - "$work/results" <<'PYEOF'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
def sel(impl, key, val):
    return [r for r in rows if r["impl"] == impl and r.get(key) == val]
def med(rs, key):
    v = [r[key] for r in rs]
    return statistics.median(v) if v else None
att = [r for r in rows if r["impl"] == "attnlab"]
fma = statistics.mean(r["fma_peak_gflops"] for r in att)
bf = statistics.mean(r["bf16_peak_gflops"] for r in att)
amx = statistics.mean(r.get("amx_peak_gflops", 0) for r in att)
step_gflop = att[0]["gflops"] * att[0]["ms_per_step"] / 1000
unit = {"fp32": ("fp32 FMA", fma), "avx512_bf16": ("vdpbf16ps", bf), "amx": ("TDPBF16PS", amx)}
print(f"measured peaks, all threads (mean over the attnlab runs): fp32 FMA {fma:.1f} GFLOP/s, vdpbf16ps {bf:.1f} GFLOP/s"
      + (f", AMX TDPBF16PS {amx:.1f} GFLOP/s" if amx else ", AMX: none on this CPU") + f"; one step = {step_gflop:.1f} GFLOP")
torch_best = max([med(sel("pytorch", "mode", m), "tokens_per_s") or 0 for m in ("fp32", "bf16")])
print(f"{'program':<24}{'tokens/s':>9}{'ms/step':>9}{'x PyTorch':>10}{'MFU (own unit)':>24}{'RSS MB':>8}"
      "   ms/step: output layer / products / attention / optimizer / other")
paths = []
for r in att:
    if r["kernel_path"] not in paths:
        paths.append(r["kernel_path"])
for p in paths:
    rs = [r for r in att if r["kernel_path"] == p]
    tps, ms = med(rs, "tokens_per_s"), med(rs, "ms_per_step")
    name, pk = unit.get(p, ("fp32 FMA", fma))
    gf = step_gflop / (ms / 1000)
    mfu = f"{100 * gf / pk:.1f}% of {name}" if pk else "-"
    split = " / ".join(f"{statistics.median(r['time_ms'][k] for r in rs):.0f}"
                       for k in ("output_layer", "products", "attention", "optimizer", "other"))
    ratio = f"{tps / torch_best:.2f}" if torch_best else "-"
    print(f"{'attnlab ' + p:<24}{tps:>9.0f}{ms:>9.0f}{ratio:>10}{mfu:>24}{med(rs, 'peak_rss_mb'):>8.0f}   {split}")
for mode, label in (("fp32", "PyTorch fp32"), ("bf16", "PyTorch bf16 autocast")):
    rs = sel("pytorch", "mode", mode)
    if not rs:
        continue
    tps, ms = med(rs, "tokens_per_s"), med(rs, "ms_per_step")
    gf = step_gflop / (ms / 1000)
    print(f"{label:<24}{tps:>9.0f}{ms:>9.0f}{tps / torch_best:>10.2f}{f'{100 * gf / fma:.1f}% of fp32 FMA':>24}"
          f"{med(rs, 'peak_rss_mb'):>8.0f}")
# The speed issue's targets: >= 10x the faster PyTorch mode on a CPU with AMX (stretch 12x), >= 4x on
# one with AVX-512 BF16 only; peak RSS <= 400 MB at the seed configuration.
bf_paths = [p for p in paths if p != "fp32"]
if bf_paths and torch_best:
    best_p = max(bf_paths, key=lambda p: med([r for r in att if r["kernel_path"] == p], "tokens_per_s"))
    x = med([r for r in att if r["kernel_path"] == best_p], "tokens_per_s") / torch_best
    want = 10 if "amx" in paths else 4
    rss = max(r["peak_rss_mb"] for r in att)
    print(f"targets: fastest bf16 path ({best_p}) {x:.2f}x the faster PyTorch mode, target >= {want}x"
          f"{' (stretch 12x)' if want == 10 else ''} on this form: {'met' if x >= want else 'missed'}; "
          f"peak RSS {rss:.0f} MB, target <= 400: {'met' if rss <= 400 else 'missed'}")
PYEOF

# ---- A/B: both variants at once (threads split) against one after the other (all threads) ----
half=$(( THREADS / 2 > 0 ? THREADS / 2 : 1 ))
prec=${BENCH_PRECISION:-$("$BIN" --default-precision)} # what the service does by default on this CPU
echo "A/B: rope and cosine_rope, $STEPS steps each, precision $prec; load $(uptime | sed 's/.*load/load/')"
t0=$(date +%s.%N)
"$BIN" --attention rope --steps "$STEPS" --threads "$THREADS" --precision "$prec" --tokens "$work/tokens" --no-peaks --json >"$work/s1"
"$BIN" --attention cosine_rope --steps "$STEPS" --threads "$THREADS" --precision "$prec" --tokens "$work/tokens" --no-peaks --json >"$work/s2"
t1=$(date +%s.%N)
"$BIN" --attention rope --steps "$STEPS" --threads "$half" --precision "$prec" --tokens "$work/tokens" --no-peaks --json >"$work/p1" &
"$BIN" --attention cosine_rope --steps "$STEPS" --threads "$half" --precision "$prec" --tokens "$work/tokens" --no-peaks --json >"$work/p2"
wait
t2=$(date +%s.%N)
"$PY" - "$work" "$t0" "$t1" "$t2" "$THREADS" "$half" <<'PYEOF'
import json, sys
w, t0, t1, t2, th, half = sys.argv[1], *map(float, sys.argv[2:5]), sys.argv[5], sys.argv[6]
j = lambda n: json.loads(open(f"{w}/{n}").read().splitlines()[-1])
s1, s2, p1, p2 = j("s1"), j("s2"), j("p1"), j("p2")
serial = (s1["ms_per_step"] + s2["ms_per_step"]) / 1000          # s per step of both variants
parallel = max(p1["ms_per_step"], p2["ms_per_step"]) / 1000      # both at once
print(f"one after the other, {th} threads each: {s1['ms_per_step']:.0f} + {s2['ms_per_step']:.0f} ms/step "
      f"-> {1 / serial:.3f} steps/s of the pair (wall {t1 - t0:.0f} s)")
print(f"both at once, {half} threads each:       {p1['ms_per_step']:.0f} | {p2['ms_per_step']:.0f} ms/step "
      f"-> {1 / parallel:.3f} steps/s of the pair (wall {t2 - t1:.0f} s)")
best = min(serial, parallel)
which = "both at once (attnlabd serve --train-workers 2)" if parallel < serial else "one after the other (--train-workers 1, the default)"
# 2000 steps per variant, plus 20 evaluations of 4 forward-only batches (about a third of a step each)
est = 2000 * best * (1 + 20 * 4 / 3 / 2000)
print(f"faster: {which}, by {max(serial, parallel) / best:.2f}x")
print(f"seed-blog experiment (2 x 2000 steps, B32) estimated wall time: {est / 60:.0f} min (target <= 15 min: "
      f"{'met' if est <= 15 * 60 else 'missed'})")
PYEOF

# ---- training-quality guard at full size, for every bf16 path this CPU runs ----
ATTNLABD=$OUT/attnlabd
BF_PATHS=$(echo "$PATHS" | grep -v '^fp32$' || true)
if [ "${BENCH_QUALITY:-1}" = 1 ] && [ -f "$DATA_DIR/corpora/default/tokens.u16" ] && [ -x "$ATTNLABD" ] && [ -n "$BF_PATHS" ]; then
  runs="fp32 $BF_PATHS"
  n=$(echo $runs | wc -w)
  th=$(( THREADS / n > 0 ? THREADS / n : 1 ))
  echo "quality guard: cosine_rope, 300 steps of the seed configuration on the default corpus, fp32 vs bf16 on $(echo $BF_PATHS) ($n runs at once, $th threads each; load $(uptime | sed 's/.*load/load/'))"
  # all at once, threads split: a run's numbers do not depend on its thread count
  for p in $runs; do
    prec=$([ "$p" = fp32 ] && echo fp32 || echo bf16)
    # the corpus's token file itself (--corpus needs the data directory's catalogue, made by a server's start)
    ATTNLAB_KERNEL_PATH=$p "$ATTNLABD" train --data "$DATA_DIR/corpora/default/tokens.u16" --vocab 50257 \
      --attention cosine_rope --steps 300 --threads "$th" --precision "$prec" >"$work/q_$p" 2>"$work/q_$p.err" &
  done
  wait || true
  for p in $runs; do
    grep -q '"step":300' "$work/q_$p" || { echo "attnlabd train ($p) failed:"; tail -3 "$work/q_$p.err"; exit 1; }
  done
  # shellcheck disable=SC2086
  "$PY" - "$work" $runs <<'PYEOF'
import json, sys
w, runs = sys.argv[1], sys.argv[2:]
def load(p):
    rows = [json.loads(l) for l in open(f"{w}/q_{p}") if l.startswith("{")]
    start = next((r for r in rows if r.get("type") == "start"), {})
    return start.get("kernel_path", "?"), {r["step"]: r for r in rows if r.get("type") == "step"}
_, a = load("fp32")
ma = sum(a[s]["loss"] for s in range(251, 301)) / 50
bad = 0
for p in runs[1:]:
    path, b = load(p)
    mb = sum(b[s]["loss"] for s in range(251, 301)) / 50
    dt = max(abs(x - y) for s in a for ra, rb in [(a[s]["tau"], b[s]["tau"])] for la, lb in zip(ra, rb) for x, y in zip(la, lb))
    ok = abs(ma - mb) <= 0.02 and dt <= 0.01 and path == p
    bad += not ok
    print(f"  {p} (ran on {path}): mean train loss of steps 251-300 fp32 {ma:.4f}, bf16 {mb:.4f} "
          f"(|diff| {abs(ma - mb):.4f} <= 0.02); max |tau difference| {dt:.4f} (<= 0.01): {'PASS' if ok else 'FAIL'}")
sys.exit(1 if bad else 0)
PYEOF
else
  echo "quality guard at full size skipped (needs $DATA_DIR/corpora/default: make corpus; BENCH_QUALITY=1; a bf16 path this CPU runs)"
fi
