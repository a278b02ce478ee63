#!/usr/bin/env bash
# Cluster benchmark (`make bench-cluster`): a throw-away PostgreSQL cluster (tests/support/pg.sh), two
# attnlabd nodes on it sharing one artefact directory, and three figures:
#   claims/s      N one-step runs (a tiny model on a byte corpus, so a run costs ~20 ms) queued
#                 through an API-only node, then two nodes started at once to drain the queue: runs
#                 claimed per second (first claim to last, from the runs' started_at, which the claim
#                 statement sets), runs completed per second, and how the claims split over the nodes
#                 (the runs' node field, and each node's attnlab_node_claims_total);
#   API p99       wrk with 64 connections on GET /api/runs and GET /api/runs/{id}/metrics?max_points=1000
#                 against a PostgreSQL node and against one attnlabd on SQLite holding the same runs,
#                 in this run: two tries each, in the order PostgreSQL, SQLite, SQLite, PostgreSQL, the
#                 better (lower p99) of each kept, with the ratios and a one-connection p50 beside;
#   resume        a run on one node, SIGKILLed after a checkpoint: the time from the kill until the
#                 other node has claimed the run, and until its step moves there; the lease timeout is
#                 attnlabd's default unless CLUSTER_BENCH_LEASE says otherwise; the resumed run's losses
#                 are compared with an uninterrupted twin's.
# Everything runs on this machine (PostgreSQL, the nodes, wrk, the clients), so the load average,
# printed at the start and the end, says how much the figures mean.
# usage: scripts/cluster_bench.sh [BUILD_DIR]        (uses BUILD_DIR/release/attnlabd; default build)
# env: CLUSTER_BENCH_RUNS (queued runs, 200), CLUSTER_BENCH_WORKERS (training workers per node, 1),
#      CLUSTER_BENCH_SECONDS (per wrk figure, 10), CLUSTER_BENCH_CONNECTIONS (64),
#      CLUSTER_BENCH_METRIC_STEPS (steps of the run whose metrics are read, 10000),
#      CLUSTER_BENCH_LEASE (seconds; unset: attnlabd's default)
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${1:-build}
ATTNLABD=$BUILD_DIR/release/attnlabd
[ -x "$ATTNLABD" ] || ATTNLABD=$BUILD_DIR/attnlabd # a release directory itself
N=${CLUSTER_BENCH_RUNS:-200}
WORKERS=${CLUSTER_BENCH_WORKERS:-1}
DUR=${CLUSTER_BENCH_SECONDS:-10}
CONNS=${CLUSTER_BENCH_CONNECTIONS:-64}
METRIC_STEPS=${CLUSTER_BENCH_METRIC_STEPS:-10000}
LEASE=${CLUSTER_BENCH_LEASE:-}
LUA=tests/load/report.lua
for tool in wrk curl; do
  command -v "$tool" >/dev/null || { echo "cluster_bench: $tool is missing (scripts/deps.sh --test installs it)"; exit 2; }
done
[ -x "$ATTNLABD" ] || { echo "cluster_bench: no attnlabd in $BUILD_DIR/release (make BUILD=$BUILD_DIR MODE=release build)"; exit 2; }

work=$(mktemp -d "${TMPDIR:-/tmp}/attnlab-cluster-bench.XXXXXX")
declare -A PID=() URLS=()
cleanup() {
  local n
  for n in "${!PID[@]}"; do kill "${PID[$n]}" 2>/dev/null || true; done
  for n in "${!PID[@]}"; do wait "${PID[$n]}" 2>/dev/null || true; done
  tests/support/pg.sh stop "$work/pg" || true
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP

die() {
  echo "cluster_bench: $*" >&2
  local f
  for f in "$work"/*.log; do [ -f "$f" ] && { echo "--- $f" >&2; tail -n 15 "$f" >&2; }; done
  exit 1
}
now() { date +%s.%N; }
calc() { awk "BEGIN { printf \"%.6f\", $1 }"; }
field() { # field NAME JSON: the first numeric or string value of "NAME"
  sed -n "s/.*\"$1\":\"\{0,1\}\([^\",}]*\).*/\1/p" <<<"$2" | head -n 1
}
val() { sed -n "s/.* $1=\([^ ]*\).*/\1/p" <<<" $2"; }
load() { uptime | sed 's/.*load average: *//'; }

# start_node NAME ARGS...: an attnlabd in the background; its URL in URLS[NAME], its pid in PID[NAME].
start_node() {
  local name=$1
  shift
  mkdir -p "$work/$name"
  "$ATTNLABD" --port 0 --data-dir "$work/$name" --log-level info "$@" >"$work/$name.out" 2>"$work/$name.log" &
  PID[$name]=$!
}
wait_node() { # wait_node NAME
  local u=""
  for _ in $(seq 300); do
    u=$(sed -n 's|.*listening on \(http://[^/]*\)/.*|\1|p' "$work/$1.out" 2>/dev/null | head -n 1)
    [ -n "$u" ] && break
    kill -0 "${PID[$1]}" 2>/dev/null || die "node $1 exited at start"
    sleep 0.1
  done
  [ -n "$u" ] || die "node $1 did not start"
  URLS[$1]=$u
}
stop_node() { # stop_node NAME [SIGNAL]
  kill -"${2:-TERM}" "${PID[$1]}" 2>/dev/null || true
  wait "${PID[$1]}" 2>/dev/null || true
  unset "PID[$1]"
}
node_args() { # the flags of a PostgreSQL node
  echo --db "$DB" --artifacts "$work/artifacts" --node-id "$1" --compute-threads 1 ${LEASE:+--lease-timeout "$LEASE"}
}
post_run() { # post_run URL NAME CONFIG-JSON -> id
  local r
  r=$(curl -sf -XPOST "$1/api/runs" -H 'Content-Type: application/json' -d "{\"name\":\"$2\",\"config\":$3}") ||
    die "could not create run $2 on $1"
  field id "$r"
}
run_json() { curl -sf --max-time 30 "$1/api/runs/$2"; }
count() { field total "$(curl -sf "$1/api/runs?limit=1${2:+&status=$2}")"; }
wait_drained() { # wait_drained URL TIMEOUT-S: until no run is queued or running
  local t_end
  t_end=$(calc "$(now) + $2")
  while [ "$(count "$1" queued)" != 0 ] || [ "$(count "$1" running)" != 0 ]; do
    awk "BEGIN { exit !($(now) > $t_end) }" && die "runs still queued or running after $2 s on $1"
    sleep 0.05
  done
}
wait_status() { # wait_status URL ID STATUS TIMEOUT-S
  local st t_end
  t_end=$(calc "$(now) + $4")
  while :; do
    st=$(field status "$(run_json "$1" "$2")")
    [ "$st" = "$3" ] && return
    case "$st" in succeeded | failed | cancelled | interrupted) die "run $2 ended $st (wanted $3)" ;; esac
    awk "BEGIN { exit !($(now) > $t_end) }" && die "run $2 still $st after $4 s"
    sleep 0.1
  done
}
runs_table() { # runs_table URL PREFIX: "id node started_at finished_at status" of the runs named PREFIX*
  local off=0 page
  while :; do
    page=$(curl -sf "$1/api/runs?limit=500&offset=$off&sort=id") || die "could not list runs"
    # shellcheck disable=SC2001 # one run a line
    sed 's/{"id":/\n{"id":/g' <<<"$page" | while IFS= read -r r; do
      case "$r" in "{\"id\":"*"\"name\":\"$2"*) ;; *) continue ;; esac
      printf '%s %s %s %s %s\n' "$(field id "$r")" "$(field node "$r")" "$(field started_at "$r")" \
        "$(field finished_at "$r")" "$(field status "$r")"
    done
    off=$((off + 500))
    [ "$off" -lt "$(field total "$page")" ] || break
  done
}
claims_metric() { curl -sf "$1/metrics" | sed -n 's/^attnlab_node_claims_total\({[^}]*}\)\{0,1\} \([0-9.e+]*\)$/\2/p' | head -n 1; }
pctl() { sort -g | awk -v p="$1" '{ v[NR] = $1 } END { if (!NR) { print "n/a"; exit } i = int(p / 100 * NR + 0.999999); if (i < 1) i = 1; printf "%.1f", v[i] }'; }

LOAD_START=$(load)
echo "cluster_bench: $ATTNLABD, $(nproc) CPUs, $(date -u '+%Y-%m-%d %H:%M UTC'); load average at start: $LOAD_START"

DB=$(tests/support/pg.sh start "$work/pg") || die "no PostgreSQL cluster"
mkdir -p "$work/artifacts"
# shellcheck disable=SC2046 # node_args is meant to split into flags
start_node seed $(node_args seed) --role api --max-queued $((N + 16))
wait_node seed
SEED=${URLS[seed]}

# ---- 1. claims per second ----------------------------------------------------------------------
curl -sf -XPOST "$SEED/api/corpora?name=smallbytes&encoding=bytes" -H 'Content-Type: text/plain' \
  --data-binary @corpora/small/text.txt >/dev/null || die "corpus upload failed"
until [ "$(field status "$(curl -sf "$SEED/api/corpora/smallbytes")")" = ready ]; do sleep 0.2; done
ONE_STEP='{"corpus":"smallbytes","steps":1,"n_layer":1,"n_head":1,"d_model":8,"seq_len":8,"batch":1,"eval_every":1000,"eval_batches":1,"checkpoint_every":1000,"threads":1}'
for i in $(seq "$N"); do post_run "$SEED" "claim-$i" "$ONE_STEP" >/dev/null; done
echo "cluster_bench: $N one-step runs queued; two nodes start ($WORKERS training worker(s) each)"
t_nodes=$(now)
# shellcheck disable=SC2046
start_node a $(node_args node-a) --train-workers "$WORKERS" --max-queued $((N + 16))
# shellcheck disable=SC2046
start_node b $(node_args node-b) --train-workers "$WORKERS" --max-queued $((N + 16))
wait_node a
wait_node b
A=${URLS[a]} B=${URLS[b]}
wait_drained "$SEED" 600
t_drained=$(now)
stop_node seed
runs_table "$A" claim- >"$work/claims"
[ "$(wc -l <"$work/claims")" -eq "$N" ] || die "listed $(wc -l <"$work/claims") of $N runs"
bad=$(awk '$5 != "succeeded"' "$work/claims" | wc -l)
[ "$bad" -eq 0 ] || die "$bad of the one-step runs did not succeed"
read -r claim_span done_span < <(awk 'NR == 1 { s0 = $3; s1 = $3; f1 = $4 }
  { if ($3 < s0) s0 = $3; if ($3 > s1) s1 = $3; if ($4 > f1) f1 = $4 }
  END { printf "%.6f %.6f\n", s1 - s0, f1 - s0 }' "$work/claims")
run_ms_p50=$(awk '{ print ($4 - $3) * 1000 }' "$work/claims" | pctl 50)
claims_s=$(calc "($N - 1) / $claim_span")
done_s=$(calc "$N / $done_span")
split=$(awk '{ c[$2]++ } END { for (k in c) printf "%s %d, ", k, c[k] }' "$work/claims" | sed 's/, $//')
# The time a node's worker spends between finishing a run and claiming its next (one worker per node).
gap_p50=n/a gap_p99=n/a
if [ "$WORKERS" = 1 ]; then
  sort -k2,2 -k3,3g "$work/claims" | awk '$2 == n { print ($3 - f) * 1000 } { n = $2; f = $4 }' >"$work/gaps"
  gap_p50=$(pctl 50 <"$work/gaps")
  gap_p99=$(pctl 99 <"$work/gaps")
fi
ca=$(claims_metric "$A") cb=$(claims_metric "$B")
echo "cluster_bench: drained in $(printf '%.2f' "$(calc "$t_drained - $t_nodes")") s from the nodes' start"

# ---- 2. API latency, PostgreSQL node vs SQLite ---------------------------------------------------
# The same runs on one attnlabd with the SQLite default store, and on each a run of METRIC_STEPS steps
# whose metrics the second figure reads (the loadtest's run).
METRIC_CFG="{\"corpus\":\"smallbytes\",\"steps\":$METRIC_STEPS,\"n_layer\":1,\"n_head\":1,\"d_model\":16,\"seq_len\":16,\"batch\":1,\"eval_every\":$METRIC_STEPS,\"checkpoint_every\":$METRIC_STEPS,\"threads\":1}"
long_pg=$(post_run "$A" metrics-run "$METRIC_CFG")
start_node sqlite --compute-threads 1 --max-queued $((N + 16))
wait_node sqlite
S=${URLS[sqlite]}
curl -sf -XPOST "$S/api/corpora?name=smallbytes&encoding=bytes" -H 'Content-Type: text/plain' \
  --data-binary @corpora/small/text.txt >/dev/null || die "corpus upload failed (SQLite)"
until [ "$(field status "$(curl -sf "$S/api/corpora/smallbytes")")" = ready ]; do sleep 0.2; done
long_sq=$(post_run "$S" metrics-run "$METRIC_CFG")
for i in $(seq "$N"); do post_run "$S" "claim-$i" "$ONE_STEP" >/dev/null; done
echo "cluster_bench: training the $METRIC_STEPS-step runs (PostgreSQL run $long_pg, SQLite run $long_sq)"
wait_status "$A" "$long_pg" succeeded 1200
wait_drained "$S" 1200
runs_each=$(count "$A")
[ "$(count "$S")" = "$runs_each" ] || die "the two stores hold $(count "$S") and $runs_each runs"
[ "$(count "$S" succeeded)" = "$(count "$S")" ] || die "runs failed on the SQLite server"

wrk_line() { # wrk_line URL: wrk's RESULT line
  local line
  line=$(wrk -t2 -c"$CONNS" -d"${DUR}s" --timeout 10s -s "$LUA" "$1" | grep '^RESULT' || true)
  echo "${line:-RESULT requests=0 rps=0 p50_ms=0 p90_ms=0 p99_ms=0 max_ms=0 errors=1 non2xx=0 bytes=0}"
}
better() { # better LINE1 LINE2: the one with the lower p99 (the less disturbed of two tries)
  if awk -v a="$(val p99_ms "$1")" -v b="$(val p99_ms "$2")" 'BEGIN { exit !(a <= b) }'; then echo "$1"; else echo "$2"; fi
}
serial() { # serial URL: p50 of 20 requests one after the other, in ms
  for _ in $(seq 20); do curl -sf -o /dev/null -w '%{time_total}\n' "$1" || echo 999; done | awk '{ print $1 * 1000 }' | pctl 50
}
errs=0
wrk_pair() { # wrk_pair KEY PG-URL SQLITE-URL: PostgreSQL, SQLite, SQLite, PostgreSQL; the better of each
  local p1 s1 s2 p2 r
  p1=$(wrk_line "$2") s1=$(wrk_line "$3") s2=$(wrk_line "$3") p2=$(wrk_line "$2")
  for r in "$p1" "$p2"; do echo "  PostgreSQL $2: $r"; done
  for r in "$s1" "$s2"; do echo "  SQLite     $3: $r"; done
  for r in "$p1" "$s1" "$s2" "$p2"; do errs=$((errs + $(val errors "$r") + $(val non2xx "$r"))); done
  printf -v "$1_pg" '%s' "$(better "$p1" "$p2")"
  printf -v "$1_sq" '%s' "$(better "$s1" "$s2")"
  printf -v "$1_pg1" '%s' "$(serial "$2")"
  printf -v "$1_sq1" '%s' "$(serial "$3")"
}
echo "cluster_bench: wrk, $CONNS connections, ${DUR} s per try, two tries each (PostgreSQL, SQLite, SQLite, PostgreSQL)"
wrk_pair runs "$A/api/runs" "$S/api/runs"
wrk_pair mp "$A/api/runs/$long_pg/metrics?max_points=1000" "$S/api/runs/$long_sq/metrics?max_points=1000"
stop_node sqlite
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "n/a" }'; }

# ---- 3. resume after a node's death -------------------------------------------------------------
# TINY_CONFIG of the tests on the built-in corpus (GPT-2 vocabulary): its checkpoint is ~19 MB, so the
# resume reads and hashes a checkpoint of some size.
RESUME_CFG='{"corpus":"small","n_layer":1,"n_head":2,"d_model":16,"seq_len":16,"batch":2,"eval_every":100,"eval_batches":2,"threads":1,"steps":600,"checkpoint_every":100,"seed":5}'
rid=$(post_run "$A" resume "$RESUME_CFG")
ckpt=0
until [ "${ckpt:-0}" -ge 100 ]; do
  j=$(run_json "$A" "$rid")
  ckpt=$(field checkpoint_step "$j")
  [ "$(field status "$j")" = running ] || [ "$(field status "$j")" = queued ] || die "the resume run is $(field status "$j")"
  sleep 0.05
done
j=$(run_json "$A" "$rid")
victim_id=$(field node "$j")
case "$victim_id" in node-a) victim=a survivor=b ;; node-b) victim=b survivor=a ;; *) die "run $rid is on '$victim_id'" ;; esac
V=${URLS[$victim]} Y=${URLS[$survivor]}
# attnlabd's default, as its --help states it
lease_s=${LEASE:-$("$ATTNLABD" --help 2>&1 | sed -n 's/.*lease (PostgreSQL; default \([0-9.]*\)).*/\1/p' | head -n 1)}
j=$(run_json "$V" "$rid")
step_kill=$(field step "$j") ckpt_kill=$(field checkpoint_step "$j")
t_kill=$(now)
stop_node "$victim" KILL
t_claim="" t_step="" step_claim=""
t_end=$(calc "$t_kill + 120")
while [ -z "$t_step" ]; do
  j=$(run_json "$Y" "$rid") || j=""
  t=$(now)
  if [ "$(field node "$j")" = "node-$survivor" ] && [ "$(field status "$j")" = running ]; then
    if [ -z "$t_claim" ]; then
      t_claim=$t step_claim=$(field step "$j")
    elif [ "$(field step "$j")" != "$step_claim" ]; then
      t_step=$t step_moved=$(field step "$j")
    fi
  fi
  [ "$(field status "$j")" = succeeded ] && [ -n "$t_claim" ] && [ -z "$t_step" ] && t_step=$t step_moved="the end"
  awk "BEGIN { exit !($t > $t_end) }" && die "run $rid was not resumed within 120 s of the kill"
  sleep 0.05
done
wait_status "$Y" "$rid" succeeded 600
resumed_from=$(grep -c "run $rid: training.*resuming from its checkpoint" "$work/$survivor.log" || true)
twin=$(post_run "$Y" twin "$RESUME_CFG")
wait_status "$Y" "$twin" succeeded 600
losses() { # losses URL ID: step,loss,val_loss of every step, as stored
  curl -sf "$1/api/runs/$2/metrics.csv" | awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) c[$i] = i; next }
    { print $c["step"], $c["loss"], (c["val_loss"] ? $c["val_loss"] : "") }'
}
losses "$Y" "$rid" >"$work/l1"
losses "$Y" "$twin" >"$work/l2"
if [ -s "$work/l1" ] && cmp -s "$work/l1" "$work/l2"; then
  same="identical to an uninterrupted twin's ($(wc -l <"$work/l1") steps)"
else
  same="DIFFER from the uninterrupted twin's ($(wc -l <"$work/l1") vs $(wc -l <"$work/l2") steps)"
fi
LOAD_END=$(load)

# ---- the table ------------------------------------------------------------------------------------
row() { printf '  %-56s %12s  %-6s %s\n' "$@"; }
echo
echo "cluster_bench: PostgreSQL on this machine, 2 nodes (--train-workers $WORKERS --compute-threads 1 each), $(nproc) CPUs"
row figure value unit notes
row "runs claimed per second, 2 nodes" "$(printf '%.1f' "$claims_s")" "runs/s" \
  "$N one-step runs, first claim to last ($(printf '%.2f' "$claim_span") s); split $split; attnlab_node_claims_total a $ca, b $cb"
row "runs completed per second, 2 nodes" "$(printf '%.1f' "$done_s")" "runs/s" \
  "first claim to last finish; a run takes $run_ms_p50 ms (p50, claim to finish)"
row "worker's gap between runs p50 / p99" "$gap_p50 / $gap_p99" "ms" "a run finished to the same worker's next claim"
for e in "runs GET /api/runs" "mp GET /api/runs/ID/metrics?max_points=1000"; do
  k=${e%% *} label=${e#* }
  pg_var=${k}_pg sq_var=${k}_sq pg1_var=${k}_pg1 sq1_var=${k}_sq1
  pg=${!pg_var} sq=${!sq_var}
  row "$label p99, PostgreSQL" "$(val p99_ms "$pg")" "ms" \
    "p50 $(val p50_ms "$pg") ms, $(val rps "$pg") req/s; one connection: p50 ${!pg1_var} ms"
  row "$label p99, SQLite" "$(val p99_ms "$sq")" "ms" \
    "p50 $(val p50_ms "$sq") ms, $(val rps "$sq") req/s; one connection: p50 ${!sq1_var} ms"
  row "  PostgreSQL / SQLite" "$(ratio "$(val p99_ms "$pg")" "$(val p99_ms "$sq")")" "x p99" \
    "p50 x$(ratio "$(val p50_ms "$pg")" "$(val p50_ms "$sq")"), req/s x$(ratio "$(val rps "$pg")" "$(val rps "$sq")")"
done
row "wrk errors and non-2xx answers" "$errs" "" "$CONNS connections, ${DUR} s each, $runs_each runs in each store, metrics of $METRIC_STEPS steps"
row "node killed -> run claimed elsewhere" "$(printf '%.2f' "$(calc "$t_claim - $t_kill")")" "s" \
  "lease timeout ${lease_s:-?} s${LEASE:+ (set)}${LEASE:- (the default)}; SIGKILL at step $step_kill, checkpoint $ckpt_kill"
row "node killed -> step moves on the other node" "$(printf '%.2f' "$(calc "$t_step - $t_kill")")" "s" \
  "step $step_claim when claimed, then $step_moved; resumed from the checkpoint: $([ "$resumed_from" -gt 0 ] && echo yes || echo NO)"
row "resumed run's losses" "" "" "$same"
echo "  load average at start: $LOAD_START"
echo "  load average at end:   $LOAD_END"
