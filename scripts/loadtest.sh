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
# Then bench/loadgen's open loop (exactly LOADTEST_RATE requests a second, latency from each one's
# scheduled time, the generator's own CPU reported):
#   200 req/s mixed (/api/runs, metrics?max_points=1000, /api/runs/{id}) p99 <= 20 ms, and the
#   training drop <= 10 % once the generator's own share of the cores is taken off (both printed)
# and the heavy-request drills, with /api/health sampled at 20 req/s and the server's RSS throughout:
#   4 and 16 concurrent requests of each heavy kind (stats at the work bound, head-spread, series,
#   bundle and bundle.csv of 2,000,000 points, a run's metrics.csv, a sparse_cost probe):
#   health p99 <= 50 ms, every answer its result or a JSON 429/503/422
#   8 clients stalled on the 2,000,000-point bundle: peak RSS <= 200 MB above idle
# usage: scripts/loadtest.sh [BUILD/release]
# env: LOADTEST_SECONDS (per phase, 10), LOADTEST_CONNECTIONS (64), LOADTEST_VIEWERS (100),
#      LOADTEST_RATE (200), LOADTEST_BUNDLE_POINTS (2000000), LOADTEST_DRILLS=0 (skip the heavy drills),
#      LOADTEST_STRICT=1 (exit 1 when a target is missed)
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-build/release}
ATTNLABD=$OUT/attnlabd
DUR=${LOADTEST_SECONDS:-10}
CONNS=${LOADTEST_CONNECTIONS:-64}
VIEWERS=${LOADTEST_VIEWERS:-100}
LUA=tests/load/report.lua
LOADGEN=$OUT/bench/loadgen
RATE=${LOADTEST_RATE:-200}
BUNDLE_POINTS=${LOADTEST_BUNDLE_POINTS:-2000000}
for tool in wrk curl; do
  command -v "$tool" >/dev/null || { echo "loadtest: $tool is missing (scripts/deps.sh --test installs it)"; exit 2; }
done
[ -x "$ATTNLABD" ] || { echo "loadtest: no $ATTNLABD (make MODE=release build)"; exit 2; }
[ -x "$LOADGEN" ] || { echo "loadtest: no $LOADGEN (make MODE=release $LOADGEN)"; exit 2; }

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
# Open loop: exactly $RATE requests a second, mixed, while the run trains.
window_start
ol=$("$LOADGEN" --url "$URL" --rate "$RATE" --seconds "$DUR" /api/runs "/api/runs/$long/metrics?max_points=1000" \
  "/api/runs/$active" | grep '^RESULT' || true)
ol_rate=$(window_rate)
q2=$(quiet)
load_end=$(uptime | sed 's/.*load average:/ /')
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
echo
echo "loadtest: open loop (bench/loadgen), $RATE req/s for $DUR s: /api/runs, metrics?max_points=1000, /api/runs/{id}"
row "open loop p99" "$(val p99_ms "$ol") ms" "<= 20 ms" "$(le "$(val p99_ms "$ol")" 20)"
printf '  %-58s %16s\n' "  p50, p90, max; answered of sent" "$(val p50_ms "$ol"), $(val p90_ms "$ol"), $(val max_ms "$ol") ms; $(val done "$ol") of $(val sent "$ol")"
printf '  %-58s %16s\n' "  codes, errors" "$(val codes "$ol"), $(val errors "$ol")"
gen_share=$(calc "100 * $(val cpu_share "$ol")")
ol_drop=$(drop "$ol_rate")
ol_adj=$(calc "$ol_drop - $gen_share")
printf '  %-58s %16s\n' "  generator's own CPU (of all cores)" "$(val cpu_s "$ol") s, $(printf '%.1f' "$gen_share") %"
printf '  %-58s %16s\n' "  training drop, raw" "$(printf '%.0f %%' "$ol_drop")"
row "  training drop less the generator's share" "$(printf '%.0f %%' "$ol_adj")" "<= 10 %" "$(le "$ol_adj" 10)"
echo "  load average at the end:$load_end"

# The active run stops here: the drills' experiment trains on the one training worker.
curl -sf -XPOST "$URL/api/runs/$active/cancel" >/dev/null || true
if [ "${LOADTEST_DRILLS:-1}" = 1 ]; then
  # ---- the heavy-request drills ------------------------------------------------------------------
  # An experiment to compute over (stats, head-spread, series): 8 variants x 3 replicates of a tiny
  # model; and one for the bundles: a one-step run plus external runs holding $BUNDLE_POINTS points
  # in all, less a few hundred (the bound counts the trained run's too).
  exp=$(curl -sf -XPOST "$URL/api/experiments" -H 'Content-Type: application/json' -d '{"name":"drill","replicates":3,
    "base":{"corpus":"smallbytes","steps":200,"n_layer":1,"n_head":2,"d_model":16,"seq_len":16,"batch":2,"eval_every":20,
    "attention":"cosine_rope","threads":1},"grid":{"lr":[1e-3,2e-3,3e-3,4e-3,5e-3,6e-3,7e-3,8e-3]}}')
  exp_id=$(python3 -c 'import json,sys;print(json.loads(sys.argv[1])["experiment"]["id"])' "$exp")
  bexp=$(curl -sf -XPOST "$URL/api/experiments" -H 'Content-Type: application/json' -d '{"name":"bulk","replicates":1,
    "base":{"corpus":"smallbytes","steps":1,"n_layer":1,"n_head":2,"d_model":16,"seq_len":16,"batch":2,"threads":1},
    "variants":[{"name":"trained","config":{}}]}')
  bexp_id=$(python3 -c 'import json,sys;print(json.loads(sys.argv[1])["experiment"]["id"])' "$bexp")
  python3 - "$URL" "$bexp_id" "$((BUNDLE_POINTS - 500))" <<'PY' || { echo "loadtest: the bundle's points could not be stored"; exit 1; }
import http.client, json, sys, urllib.parse
url, exp, total = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
u = urllib.parse.urlparse(url)
c = http.client.HTTPConnection(u.hostname, u.port, timeout=300)
def call(method, path, body):
    c.request(method, path, json.dumps(body), {"Content-Type": "application/json"})
    r = c.getresponse(); data = r.read()
    if r.status >= 300: raise SystemExit(f"{method} {path}: {r.status} {data[:200]}")
    return json.loads(data) if data else None
runs, keys = 8, 25
steps = total // (runs * keys)
for k in range(runs):
    rid = call("POST", "/api/runs", {"source": "external", "name": f"bulk{k}", "experiment_id": exp, "variant": "bulk",
                                     "replicate": k, "config": {"lr": 1e-3}})["run"]["id"]
    batch = []
    for s in range(1, steps + 1):
        for j in range(keys):
            batch.append({"step": s, "key": f"m{j}", "value": (s * 7 + j) % 1000 / 1000.0, "wall_time": 1.7e9 + s})
            if len(batch) == 1000:
                call("POST", f"/api/runs/{rid}/metrics", {"points": batch}); batch = []
    if batch: call("POST", f"/api/runs/{rid}/metrics", {"points": batch})
    call("PATCH", f"/api/runs/{rid}", {"status": "succeeded"})
PY
  until [ "$(curl -sf "$URL/api/runs?experiment=$bexp_id&status=succeeded" | python3 -c 'import json,sys;print(json.load(sys.stdin)["total"])')" -ge 9 ]; do sleep 1; done
  until [ "$(curl -sf "$URL/api/runs?experiment=$exp_id&status=succeeded" | python3 -c 'import json,sys;print(json.load(sys.stdin)["total"])')" -ge 24 ]; do sleep 2; done
  pid_rss() { awk '/^VmRSS/ {print $2}' "/proc/$server/status"; }
  sample_rss() { # background: the peak RSS (KiB) into $work/rss.peak until $work/rss.stop exists
    local peak=0 r
    while [ ! -e "$work/rss.stop" ]; do
      r=$(pid_rss); [ "${r:-0}" -gt "$peak" ] && peak=$r && echo "$peak" >"$work/rss.peak"
      sleep 0.2
    done
  }
  idle_rss=$(pid_rss)
  # each request asks something of its own (seed, at, max_points): the cache of an ended
  # experiment's answers would otherwise answer all but the first
  kinds=("stats?resamples=90000&seed=" "head-spread?at=" "series?key=loss&max_points=" "bundle?max_points=0&keys=m*,x"
    "bundle.csv?keys=m*,x" "metrics.csv" "probe")
  echo
  echo "loadtest: heavy drills; health sampled at 20 req/s (open loop); server RSS idle $((idle_rss / 1024)) MB"
  bad_total=0
  worst_health=0
  for n in 4 16; do
    for kind in "${kinds[@]}"; do
      rm -f "$work"/drill.* "$work/rss.stop" "$work/rss.peak"
      sample_rss & rss_pid=$!
      "$LOADGEN" --url "$URL" --rate 20 --seconds 600 --timeout-ms 5000 /api/health >"$work/health" &
      hp=$!
      sleep 0.3
      cpids=()
      for i in $(seq "$n"); do
        case "$kind" in
          probe) curl -s -o "$work/drill.$i.body" -w '%{http_code}\n' -XPOST "$URL/api/probes" -H 'Content-Type: application/json' \
                   -d "{\"kind\":\"sparse_cost\",\"params\":{\"ns\":[1024,4096],\"ks\":[32],\"budget_ms\":3000,\"seed\":$i}}" >"$work/drill.$i.code" & cpids+=($!) ;;
          metrics.csv) curl -s -o "$work/drill.$i.body" -w '%{http_code}\n' "$URL/api/runs/$long/metrics.csv" >"$work/drill.$i.code" & cpids+=($!) ;;
          bundle*) curl -s -o "$work/drill.$i.body" -w '%{http_code}\n' "$URL/api/experiments/$bexp_id/$kind$i" >"$work/drill.$i.code" & cpids+=($!) ;;
          *) curl -s -o "$work/drill.$i.body" -w '%{http_code}\n' "$URL/api/experiments/$exp_id/$kind$((100 + i))" >"$work/drill.$i.code" & cpids+=($!) ;;
        esac
      done
      wait "${cpids[@]}" 2>/dev/null || true
      kill -INT "$hp" 2>/dev/null; wait "$hp" 2>/dev/null || true
      touch "$work/rss.stop"; wait "$rss_pid" 2>/dev/null || true
      codes="" bad=0
      for i in $(seq "$n"); do
        c=$(cat "$work/drill.$i.code" 2>/dev/null || echo 000)
        codes="$codes $c"
        case "$c" in
          200|201) ;;
          422|429|503) grep -q '"error"' "$work/drill.$i.body" 2>/dev/null || bad=$((bad + 1)) ;;
          *) bad=$((bad + 1)) ;;
        esac
      done
      bad_total=$((bad_total + bad))
      h=$(grep '^RESULT' "$work/health" || echo "RESULT p99_ms=999999")
      hp99=$(val p99_ms "$h")
      is_true "$hp99 > $worst_health" && worst_health=$hp99
      printf '  %2d x %-30s health p99 %8s ms, max %8s ms; answers%s; peak RSS +%s MB\n' "$n" "$kind" "$hp99" \
        "$(val max_ms "$h")" "$(tr ' ' '\n' <<<"$codes" | grep . | sort | uniq -c | awk '{printf " %s:%s", $2, $1}')" \
        "$(( ($(cat "$work/rss.peak" 2>/dev/null || echo "$idle_rss") - idle_rss) / 1024 ))"
    done
  done
  row "health p99 during the drills (worst)" "$worst_health ms" "<= 50 ms" "$(le "$worst_health" 50)"
  row "answers neither a result nor a JSON 429/503/422" "$bad_total" "0" "$([ "$bad_total" -eq 0 ] && echo ok || echo MISSED)"
  # Eight clients that read a byte a second of the 2,000,000-point bundle.
  rm -f "$work/rss.stop" "$work/rss.peak"
  idle_rss=$(pid_rss)
  sample_rss & rss_pid=$!
  pids=()
  for i in $(seq 8); do
    curl -s --limit-rate 1 --max-time 20 -o /dev/null "$URL/api/experiments/$bexp_id/bundle?max_points=0" & pids+=($!)
  done
  wait "${pids[@]}" 2>/dev/null || true
  touch "$work/rss.stop"; wait "$rss_pid" 2>/dev/null || true
  stalled=$(( ($(cat "$work/rss.peak" 2>/dev/null || echo "$idle_rss") - idle_rss) / 1024 ))
  row "8 clients stalled on a $BUNDLE_POINTS-point bundle: peak RSS above idle" "$stalled MB" "<= 200 MB" \
    "$(le "$stalled" 200)"
  echo "  load average after the drills:$(uptime | sed 's/.*load average:/ /')"
fi
echo "loadtest: $missed target(s) missed"
[ "${LOADTEST_STRICT:-0}" = 1 ] && [ "$missed" -gt 0 ] && exit 1
exit 0
