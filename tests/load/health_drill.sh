#!/usr/bin/env bash
# One heavy drill of scripts/loadtest.sh, alone: N concurrent heavy requests of one kind against a
# running server, with /api/health sampled at 20 req/s (open loop, bench/loadgen) until they are all
# answered, then one line: the kind, the wall time, the answers' codes, health's latencies and the
# load average (quote it with any figure: on two cores other work moves these numbers).
#   tests/load/health_drill.sh URL N KIND [EXPERIMENT]
# KIND: stats (resamples $RESAMPLES, default 90000, a seed of its own per request, from $SEED or a
# random base, so that none is answered from the cache of an earlier drill), head-spread, series. EXPERIMENT (default 1) needs trained runs: the
# loadtest's drill experiment (8 variants x 3 replicates) is the reference.
# LOADGEN: the generator (default build/release/bench/loadgen).
set -u
SEED=${SEED:-$((RANDOM * 100))}
URL=${1:?usage: health_drill.sh URL N KIND [EXPERIMENT]}
N=${2:?N}
KIND=${3:?KIND}
EXP=${4:-1}
LOADGEN=${LOADGEN:-build/release/bench/loadgen}
W=$(mktemp -d "${TMPDIR:-/tmp}/health-drill.XXXXXX")
trap 'rm -rf "$W"' EXIT
"$LOADGEN" --url "$URL" --rate 20 --seconds 3600 --timeout-ms 5000 /api/health >"$W/health" &
hp=$!
sleep 0.3
t0=$(date +%s.%N)
pids=()
for i in $(seq "$N"); do
  case "$KIND" in
    stats) q="stats?resamples=${RESAMPLES:-90000}&seed=$((SEED + i))" ;;
    head-spread) q="head-spread?at=$((100 + SEED % 50 + i))" ;;
    series) q="series?key=loss&max_points=$((100 + SEED % 50 + i))" ;;
    *) echo "health_drill: unknown kind $KIND" >&2; kill "$hp"; exit 2 ;;
  esac
  curl -s -o "$W/body.$i" -w '%{http_code}\n' "$URL/api/experiments/$EXP/$q" >"$W/code.$i" &
  pids+=($!)
done
wait "${pids[@]}"
t1=$(date +%s.%N)
kill -INT "$hp"
wait "$hp"
codes=$(cat "$W"/code.* | sort | uniq -c | awk '{printf " %s:%s", $2, $1}')
printf '%d x %s: %s s, answers%s | health %s | load%s\n' "$N" "$KIND" "$(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.1f", b-a}')" \
  "$codes" "$(grep '^RESULT' "$W/health" | sed 's/RESULT //')" "$(uptime | sed 's/.*load average://')"
