#!/usr/bin/env bash
# Load benchmark (`make loadtest`): a real attnlabd on a free port, a training run active, wrk with
# 64 connections on the same machine, each figure printed next to its target:
#   GET /api/runs                                        p99 <= 20 ms
#   GET /api/runs/{id}/metrics?max_points=1000 (10,000 steps) p99 <= 50 ms
#   GET /api/runs/{id}/metrics, every key, every step    (no target; the audit's 1.56 MB figure)
#   100 live-stream viewers (GET /api/events)            0 errors
#   training throughput while the API is under load      drop <= 10 %
# Throughput is steps per second of the active run, over quiet windows (before and after the load)
# and over each loaded one. The machine's load (uptime) is printed with the figures: wrk, the server
# and the training share its cores, so the figures mean little on a machine that is busy otherwise.
# usage: scripts/loadtest.sh [BUILD/release]
# env: LOADTEST_SECONDS (per phase, 10), LOADTEST_CONNECTIONS (64), LOADTEST_VIEWERS (100),
#      LOADTEST_STRICT=1 (exit 1 when a target is missed)
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-build/release}
ATTNLABD=$OUT/attnlabd
DUR=${LOADTEST_SECONDS:-10}
CONNS=${LOADTEST_CONNECTIONS:-64}
VIEWERS=${LOADTEST_VIEWERS:-100}
LUA=tests/load/report.lua
for tool in wrk curl; do
  command -v "$tool" >/dev/null || { echo "loadtest: $tool is missing (scripts/deps.sh --test installs it)"; exit 2; }
done
[ -x "$ATTNLABD" ] || { echo "loadtest: no $ATTNLABD (make MODE=release build)"; exit 2; }

work=$(mktemp -d "${TMPDIR:-/tmp}/attnlab-loadtest.XXXXXX")
server=""
cleanup() {
  [ -n "$server" ] && kill "$server" 2>/dev/null && wait "$server" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

"$ATTNLABD" --port 0 --data-dir "$work/data" --log-level warn >"$work/stdout" 2>"$work/server.log" &
server=$!
for _ in $(seq 100); do
  URL=$(sed -n 's|.*listening on \(http://[^/]*\)/.*|\1|p' "$work/stdout" | head -n 1)
  [ -n "$URL" ] && break
  sleep 0.1
done
[ -n "${URL:-}" ] || { echo "loadtest: attnlabd did not start"; cat "$work/server.log"; exit 1; }

field() { # field NAME JSON: the first numeric or string value of "NAME"
  sed -n "s/.*\"$1\":\"\{0,1\}\([^\",}]*\).*/\1/p" <<<"$2" | head -n 1
}
create_run() { # create_run NAME CONFIG-JSON -> id
  local r
  r=$(curl -sf -XPOST "$URL/api/runs" -H 'Content-Type: application/json' -d "{\"name\":\"$1\",\"config\":$2}") ||
    { echo "loadtest: could not create run $1" >&2; exit 1; }
  field id "$r"
}
run_json() { curl -sf --max-time 30 "$URL/api/runs/$1"; }
now() { date +%s.%N; }
calc() { awk "BEGIN { printf \"%.6f\", $1 }"; }
is_true() { awk "BEGIN { exit !($1) }"; }

echo "loadtest: attnlabd at $URL, $(nproc) CPUs; load at start:$(uptime | sed 's/.*load average:/ /')"

# A finished 10,000-step run: a tiny model on the small corpus as bytes (vocabulary 256), so that it
# takes a minute or so; its metrics are what the figures read.
curl -sf -XPOST "$URL/api/corpora?name=smallbytes&encoding=bytes" -H 'Content-Type: text/plain' \
  --data-binary @corpora/small/text.txt >/dev/null || { echo "loadtest: corpus upload failed"; exit 1; }
until [ "$(field status "$(curl -sf "$URL/api/corpora/smallbytes")")" = ready ]; do sleep 0.5; done
long=$(create_run long10k '{"corpus":"smallbytes","steps":10000,"n_layer":1,"n_head":1,"d_model":16,"seq_len":16,"batch":1,"eval_every":10000,"checkpoint_every":10000,"threads":1}')
t0=$(now)
while :; do
  j=$(run_json "$long")
  st=$(field status "$j")
  case "$st" in succeeded) break ;; failed|cancelled|interrupted) echo "loadtest: the 10,000-step run $st"; exit 1 ;; esac
  sleep 2
done
printf 'loadtest: 10,000-step run ready after %.0f s\n' "$(calc "$(now) - $t0")"

# The training that stays active during the measurements.
active=$(create_run active '{"corpus":"small","steps":10000000,"n_layer":2,"n_head":4,"d_model":128,"seq_len":64,"batch":8,"eval_every":1000000,"checkpoint_every":1000000}')
until [ "$(field status "$(run_json "$active")")" = running ] && [ "$(field step "$(run_json "$active")")" -ge 5 ] 2>/dev/null; do sleep 1; done

steps_now() { # the active run's step; asked again when the answer is slow to come under load
  local n=""
  for _ in $(seq 20); do
    n=$(field step "$(run_json "$active" || true)")
    [ -n "$n" ] && { echo "$n"; return; }
    sleep 0.5
  done
  echo "loadtest: the active run's step could not be read" >&2
  exit 1
}
window_start() { W0_STEP=$(steps_now); W0_T=$(now); }
window_rate() { calc "($(steps_now) - $W0_STEP) / ($(now) - $W0_T)"; }

quiet() { window_start; sleep "$DUR"; window_rate; }

wrk_run() { # wrk_run VAR PATH: wrk's RESULT line in $VAR, the training rate meanwhile in $VAR_rate
  window_start
  local line
  line=$(wrk -t2 -c"$CONNS" -d"${DUR}s" --timeout 10s -s "$LUA" "$URL$2" | grep '^RESULT' || true)
  printf -v "$1" '%s' "${line:-RESULT requests=0 rps=0 p50_ms=0 p90_ms=0 p99_ms=0 max_ms=0 errors=1 non2xx=0 bytes=0}"
  printf -v "$1_rate" '%s' "$(window_rate)"
}
val() { sed -n "s/.* $1=\([^ ]*\).*/\1/p" <<<" $2"; }

q1=$(quiet)
wrk_run runs /api/runs
wrk_run mp "/api/runs/$long/metrics?max_points=1000"
wrk_run all "/api/runs/$long/metrics"

# Live-stream viewers, with a few API clients beside them.
window_start
pids=()
for i in $(seq "$VIEWERS"); do
  curl -sN --max-time "$((DUR + 2))" -o "$work/sse.$i" -w '%{http_code} %{exitcode}\n' "$URL/api/events" \
    >"$work/sse.$i.status" 2>/dev/null &
  pids+=($!)
done
sleep 1
beside=$(wrk -t1 -c8 -d"$((DUR - 1))s" --timeout 10s -s "$LUA" "$URL/api/runs" | grep '^RESULT' || true)
wait "${pids[@]}" 2>/dev/null || true
sse_rate=$(window_rate)
sse_errors=0 sse_events=0
for i in $(seq "$VIEWERS"); do
  # A viewer ends at curl's --max-time (exit 28) with a 200 stream; anything else is an error.
  [ "$(cat "$work/sse.$i.status" 2>/dev/null)" = "200 28" ] || sse_errors=$((sse_errors + 1))
  grep -q '^event: metrics' "$work/sse.$i" 2>/dev/null && sse_events=$((sse_events + 1))
done
q2=$(quiet)
load_end=$(uptime | sed 's/.*load average:/ /')
curl -sf -XPOST "$URL/api/runs/$active/cancel" >/dev/null || true

quiet_rate=$(calc "($q1 + $q2) / 2")
drop() { if is_true "$quiet_rate > 0"; then calc "100 * (1 - $1 / $quiet_rate)"; else echo 0; fi; }
missed=0
row() { # row FIGURE MEASURED TARGET OK
  printf '  %-58s %16s   %-12s %s\n' "$1" "$2" "$3" "$4"
  [ "$4" = ok ] || missed=$((missed + 1))
}
le() { is_true "$1 <= $2" && echo ok || echo MISSED; }

echo
echo "loadtest: $CONNS connections, ${DUR} s per figure, training active (run $active: L2 H4 d128, batch 8 x 64)"
printf '  %-58s %16s   %-12s %s\n' figure measured target ""
row "GET /api/runs p99" "$(val p99_ms "$runs") ms" "<= 20 ms" "$(le "$(val p99_ms "$runs")" 20)"
printf '  %-58s %16s\n' "GET /api/runs p50, req/s" "$(val p50_ms "$runs") ms, $(val rps "$runs")"
row "GET /api/runs/{id}/metrics?max_points=1000 (10k steps) p99" "$(val p99_ms "$mp") ms" "<= 50 ms" \
  "$(le "$(val p99_ms "$mp")" 50)"
printf '  %-58s %16s\n' "  same, p50, req/s" "$(val p50_ms "$mp") ms, $(val rps "$mp")"
printf '  %-58s %16s\n' "GET /api/runs/{id}/metrics, every key (10k steps) p99" "$(val p99_ms "$all") ms"
printf '  %-58s %16s\n' "  same, p50, req/s, bytes per answer" \
  "$(val p50_ms "$all") ms, $(val rps "$all"), $(( $(val bytes "$all") / ($(val requests "$all") > 0 ? $(val requests "$all") : 1) ))"
row "$VIEWERS live-stream viewers: errors" "$sse_errors" "0" "$([ "$sse_errors" -eq 0 ] && echo ok || echo MISSED)"
printf '  %-58s %16s\n' "  viewers that received training events" "$sse_events of $VIEWERS"
printf '  %-58s %16s\n' "  GET /api/runs p99 beside them (8 connections)" "$(val p99_ms "$beside") ms"
errs=$(( $(val errors "$runs") + $(val errors "$mp") + $(val errors "$all") + $(val non2xx "$runs") + $(val non2xx "$mp") + $(val non2xx "$all") ))
row "wrk errors and non-2xx answers (all figures)" "$errs" "0" "$([ "$errs" -eq 0 ] && echo ok || echo MISSED)"
printf '  %-58s %16s\n' "training steps/s, quiet (before, after)" "$(printf '%.2f, %.2f' "$q1" "$q2")"
worst=0
for r in "$runs_rate" "$mp_rate" "$all_rate" "$sse_rate"; do
  d=$(drop "$r")
  is_true "$d > $worst" && worst=$d
done
printf '  %-58s %16s\n' "training drop under /api/runs, max_points, all keys, viewers" \
  "$(printf '%.0f%%, %.0f%%, %.0f%%, %.0f%%' "$(drop "$runs_rate")" "$(drop "$mp_rate")" "$(drop "$all_rate")" "$(drop "$sse_rate")")"
row "training throughput drop while serving (worst of the above)" "$(printf '%.0f %%' "$worst")" "<= 10 %" \
  "$(le "$worst" 10)"
echo "  load average at the end:$load_end"
echo "loadtest: $missed target(s) missed"
[ "${LOADTEST_STRICT:-0}" = 1 ] && [ "$missed" -gt 0 ] && exit 1
exit 0
