#!/usr/bin/env bash
# The README's terminal session for the attnlab client, replayed against a fresh attnlabd: start
# the seed-blog experiment on a tiny config, watch both runs, export one run's curves as CSV and
# run two probes. Each step prints PASS/FAIL; the commands are the README's, word for word.
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
ATTNLABD=${ATTNLABD:-$ROOT/build/release/attnlabd}
ATTNLAB=${ATTNLAB:-$ROOT/build/release/attnlab}
# The README trains on the built-in corpus, whose GPT-2 vocabulary makes a sanitized server take
# about a minute for these two runs. Under the sanitizers the client under test stays the
# sanitized one, but talks to the release server when it is built (test_commands.c drives the
# sanitized server with a byte-level corpus instead).
case "$ATTNLABD" in
  */asan/attnlabd) rel=${ATTNLABD%/asan/attnlabd}/release/attnlabd; [ -x "$rel" ] && ATTNLABD=$rel ;;
esac
cd "$ROOT" # the built-in 'small' corpus is found from the repository root
dir=$(mktemp -d "${TMPDIR:-/tmp}/attnlab-session.XXXXXX")
"$ATTNLABD" --port 0 --data-dir "$dir/data" --compute-threads 2 >"$dir/out" 2>"$dir/log" &
pid=$!
trap 'kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; rm -rf "$dir"' EXIT
url=""
for _ in $(seq 200); do
  url=$(grep -o 'http://[0-9.]*:[0-9]*' "$dir/out" 2>/dev/null | head -n 1)
  [ -n "$url" ] && "$ATTNLAB" --server "$url" health >/dev/null 2>&1 && break
  sleep 0.05
done
if [ -z "$url" ]; then echo "FAIL session_server: attnlabd did not start"; cat "$dir/log"; exit 1; fi
export ATTNLAB_SERVER=$url
attnlab() { "$ATTNLAB" "$@"; }

step() { # name expected-exit-code grep-pattern -- command...
  local name=$1 want=$2 pattern=$3; shift 4
  local out rc
  out=$("$@" 2>&1); rc=$?
  if [ "$rc" -ne "$want" ]; then echo "FAIL $name: exit $rc (want $want): $out"; return 1; fi
  if ! grep -qE -- "$pattern" <<<"$out"; then echo "FAIL $name: no /$pattern/ in: $out"; return 1; fi
  echo "PASS $name"
}

step session_health 0 '^http://127\.0\.0\.1:[0-9]+: ok, version ' -- attnlab health
step session_experiment 0 '^experiment 1 created \(seed-blog\): run 1 \(rope\), run 2 \(cosine_rope\)$' -- \
  attnlab experiments start --preset seed-blog --set steps=20 --set d_model=32 --set n_head=2 \
    --set n_layer=1 --set seq_len=16 --set batch=4 --corpus small
step session_watch_rope 0 '^run 1 succeeded at step 20/20, loss [0-9.]+, val_loss [0-9.]+' -- attnlab watch 1
step session_watch_cosine 0 '^run 2 succeeded at step 20/20, loss [0-9.]+, val_loss [0-9.]+, tau [0-9.]+\.\.[0-9.]+' -- \
  attnlab watch 2
step session_show 0 'cosine_rope +cosine_rope +[0-9.]+ +[0-9.]+ +[0-9.]+ +[0-9.]+ +[0-9.]+–[0-9.]+$' -- attnlab experiments show 1
step session_export 0 '' -- sh -c "\"$ATTNLAB\" metrics 2 --keys 'loss,val_loss,tau.*' --format csv > \"$dir/curves.csv\""
step session_csv_header 0 '^step,loss,tau\.0\.0,tau\.0\.1,val_loss$' -- head -n 1 "$dir/curves.csv"
step session_csv_rows 0 '^21$' -- sh -c "wc -l < \"$dir/curves.csv\""
step session_probe_context 0 'position_interpolation +4096 +0\.161909' -- \
  attnlab probe context_extension --table strategies
step session_probe_dephasing 0 '^offset,self,mean_raw,mean_abs$' -- \
  attnlab probe dephasing --format csv --table dephasing
step session_exit_code_unknown_run 4 'HTTP 404 not_found: no run 99' -- attnlab watch 99
