#!/usr/bin/env bash
# Fault drills (`make faultdrill`, and `make loadtest` after its load figures): a real attnlabd on a
# free port and a temporary data directory, hurt on purpose, then checked against what the README
# promises ("What survives a crash", "Faults the service is drilled against"). One row per drill:
#   1. SIGKILL during training, at random moments and during checkpoint writes (FAULTDRILL_KILLS, 10):
#      after a restart the run is interrupted (or finished), resume finishes it, its loss curve has
#      every step 1..total with the losses of an uninterrupted twin, PRAGMA integrity_check is ok.
#   2. SIGKILL during the tokenization of an upload (FAULTDRILL_TOKENIZE_KILLS, 3): after a restart
#      the corpus is failed or ready, never left tokenizing; a new upload works; integrity ok.
#   3. Disk full (a 16 MiB tmpfs as the data directory, filled): an upload gets a JSON error, the
#      training run fails saying why with no metric dropped, health answers 503; once space is freed
#      uploads and runs work again; integrity ok.
#   4. Database unwritable under the running server: health answers 503 with the reason and writes
#      answer a JSON 5xx; once it is back, health is ok and writes work; integrity ok.
# Drills 3 and 4 mount a tmpfs and need root; without it their rows say "skipped".
# usage: scripts/faultdrill.sh [BUILD/release]
# env: FAULTDRILL_KILLS (10), FAULTDRILL_TOKENIZE_KILLS (3), FAULTDRILL_STRICT=1 (exit 1 on a
#      broken promise), FAULTDRILL_SEED (the random moments; default: from the clock, printed),
#      FAULTDRILL_ONLY ("1 3": those drills only), FAULTDRILL_LOG (a file to keep the servers' log in)
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-build/release}
ATTNLABD=$OUT/attnlabd
KILLS=${FAULTDRILL_KILLS:-10}
TOKKILLS=${FAULTDRILL_TOKENIZE_KILLS:-3}
SEED=${FAULTDRILL_SEED:-$(($(date +%s) % 100000))}
RANDOM=$SEED
TEXT=corpora/small/text.txt
for tool in curl sqlite3 python3; do
  command -v "$tool" >/dev/null || { echo "faultdrill: $tool is missing (scripts/deps.sh --test installs it)"; exit 2; }
done
[ -x "$ATTNLABD" ] || { echo "faultdrill: no $ATTNLABD (make MODE=release build)"; exit 2; }
[ -f "$TEXT" ] || { echo "faultdrill: no $TEXT"; exit 2; }

work=$(mktemp -d "${TMPDIR:-/tmp}/attnlab-faultdrill.XXXXXX")
SERVER="" URL="" mounts=()
cleanup() {
  if [ -n "$SERVER" ]; then kill -9 "$SERVER" 2>/dev/null || true; wait "$SERVER" 2>/dev/null || true; fi
  local m
  for m in "${mounts[@]}"; do
    mount -o remount,rw "$m" 2>/dev/null || true
    umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true
  done
  [ -n "${FAULTDRILL_LOG:-}" ] && cp "$work/server.log" "$FAULTDRILL_LOG" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

start_server() { # start_server DATA-DIR: a server in SERVER, its address in URL
  local log=$work/server.$RANDOM
  "$ATTNLABD" --port 0 --data-dir "$1" --log-level warn --train-workers 1 --compute-threads 1 \
    >"$log.out" 2>>"$work/server.log" &
  SERVER=$! URL=""
  for _ in $(seq 200); do
    URL=$(sed -n 's|.*listening on \(http://[^/]*\)/.*|\1|p' "$log.out" | head -n 1)
    [ -n "$URL" ] && return 0
    kill -0 "$SERVER" 2>/dev/null || break
    sleep 0.05
  done
  echo "faultdrill: attnlabd did not start on $1"; tail -n 5 "$work/server.log"
  exit 1
}
kill_server() { kill -9 "$SERVER" 2>/dev/null || true; wait "$SERVER" 2>/dev/null || true; SERVER=""; }
stop_server() { kill -TERM "$SERVER" 2>/dev/null || true; wait "$SERVER" 2>/dev/null || true; SERVER=""; }

# api METHOD PATH [curl args…]: the answer's status in CODE (000: no answer), its body in BODY.
api() {
  local m=$1 p=$2
  shift 2
  local b=$work/body.$BASHPID
  CODE=$(curl -s -o "$b" -w '%{http_code}' --max-time 30 -X "$m" "$@" "$URL$p" 2>/dev/null) || true
  [ -n "$CODE" ] || CODE=000
  BODY=$(cat "$b" 2>/dev/null || true)
  rm -f "$b"
}
js() { # js PYTHON-EXPR: evaluated with d = BODY parsed as JSON; empty when it is not JSON
  python3 -c 'import json,sys
try: d=json.loads(sys.stdin.read())
except Exception: sys.exit(0)
try: v=eval(sys.argv[1])
except Exception: sys.exit(0)
print("" if v is None else v)' "$1" <<<"$BODY"
}
is_json_error() { [ -n "$(js 'd["error"]["code"]')" ]; }
integrity() { sqlite3 "$1/attnlab.db" 'PRAGMA busy_timeout=5000; PRAGMA integrity_check' 2>&1 | tail -n 1; }
run_status() { api GET "/api/runs/$1"; js 'd["run"]["status"]'; }
wait_run_final() { # wait_run_final ID SECONDS -> the final status (or the last one seen)
  local st="" end=$((SECONDS + $2))
  while [ $SECONDS -lt $end ]; do
    st=$(run_status "$1")
    case "$st" in succeeded | failed | cancelled | interrupted) break ;; esac
    sleep 0.1
  done
  echo "$st"
}
wait_corpus() { # wait_corpus NAME SECONDS -> ready, failed, or the last status seen
  local st="" end=$((SECONDS + $2))
  while [ $SECONDS -lt $end ]; do
    api GET "/api/corpora/$1"
    st=$(js 'd["corpus"]["status"]')
    case "$st" in ready | failed) break ;; esac
    sleep 0.1
  done
  echo "$st"
}
upload() { # upload NAME ENCODING FILE: POST /api/corpora, CODE and BODY as api
  api POST "/api/corpora?name=$1&encoding=$2" -H 'Content-Type: text/plain' --data-binary "@$3"
}
create_run() { # create_run NAME CONFIG -> the id (empty if refused; CODE and BODY as api)
  api POST /api/runs -H 'Content-Type: application/json' -d "{\"name\":\"$1\",\"config\":$2}"
  js 'd["run"]["id"]'
}
loss_steps() { # loss_steps ID -> "N FIRST LAST WHOLE" of the loss series (WHOLE: 1 when it is 1..N)
  api GET "/api/runs/$1/metrics?keys=loss"
  js '(lambda s: "%d %d %d %d" % (len(s), s[0] if s else 0, s[-1] if s else 0, s == list(range(1, len(s) + 1))))(d["series"]["loss"]["steps"])'
}
loss_values() { api GET "/api/runs/$1/metrics?keys=loss"; js 'json.dumps(d["series"]["loss"]["values"])'; }
mount_tmpfs() { # mount_tmpfs DIR SIZE: 0 when mounted (and remembered for the cleanup)
  mkdir -p "$1"
  [ "$(id -u)" = 0 ] || return 1
  mount -t tmpfs -o "size=$2" tmpfs "$1" 2>/dev/null || return 1
  mounts+=("$1")
}
unmount() { umount "$1" && mounts=("${mounts[@]/$1/}"); }
rand_ms() { echo $((RANDOM * 32768 + RANDOM)) | awk -v lo="$1" -v hi="$2" '{ printf "%.3f", (lo + $1 % (hi - lo + 1)) / 1000 }'; }

rows=() missed=0
row() { # row DRILL REPS OUTCOME PROMISE OK
  rows+=("$(printf '  %-34s %5s  %-74s  %-62s %s' "$1" "$2" "$3" "$4" "$5")")
  [ "$5" = MISSED ] && missed=$((missed + 1))
  echo "faultdrill: $1: $5"
}
note() { echo "    $*"; }

echo "faultdrill: attnlabd $ATTNLABD, $(nproc) CPUs, seed $SEED (FAULTDRILL_SEED replays the moments)"

# ---- 1. SIGKILL during training -------------------------------------------------------------------
# A tiny model on the small text as bytes: 1500 steps, a checkpoint every 10, so that a kill has many
# writes to land in. Odd kills wait for a checkpoint being written (its staging file on disk), even
# ones strike at a random moment of the run.
drill_kill_training() {
  local dir=$work/kill cfg id ref t0 dur i st st2 steps whole ck pending=0 fromck=0 fin=0 bad=() why
  cfg='{"corpus":"drillbytes","steps":1500,"n_layer":1,"n_head":1,"d_model":16,"seq_len":16,"batch":2,"eval_every":100,"eval_batches":1,"checkpoint_every":10,"threads":1,"seed":5}'
  start_server "$dir"
  upload drillbytes bytes "$TEXT"
  [ "$CODE" = 202 ] && [ "$(wait_corpus drillbytes 60)" = ready ] || { row "SIGKILL during training" 0 \
    "the corpus upload failed ($CODE)" "-" MISSED; kill_server; return; }
  t0=$(date +%s%N)
  ref=$(create_run twin "$cfg")
  st=$(wait_run_final "$ref" 300)
  dur=$((($(date +%s%N) - t0) / 1000000))
  [ "$st" = succeeded ] || { row "SIGKILL during training" 0 "the uninterrupted twin ended $st" "-" MISSED; kill_server; return; }
  local refloss
  refloss=$(loss_values "$ref")
  note "uninterrupted twin: 1500 steps in $dur ms"
  for i in $(seq "$KILLS"); do
    id=$(create_run "killed-$i" "$cfg")
    [ -n "$id" ] || { bad+=("kill $i: run not created ($CODE)"); continue; }
    local how
    if [ $((i % 2)) = 1 ]; then
      local f=$dir/runs/$id/checkpoint.pending.safetensors end=$((SECONDS + 60)) skip=$((RANDOM % 20))
      # the (skip+1)-th checkpoint write seen
      while [ $SECONDS -lt $end ]; do
        if [ -e "$f" ]; then
          [ "$skip" = 0 ] && break
          skip=$((skip - 1))
          while [ -e "$f" ] && [ $SECONDS -lt $end ]; do :; done
        fi
      done
      how="during a checkpoint write"
    else
      # from its first step, within the first half of the twin's time (later ones would mostly find it done)
      local end=$((SECONDS + 60))
      while [ $SECONDS -lt $end ]; do api GET "/api/runs/$id"; [ "$(js 'd["run"]["step"]')" -ge 1 ] 2>/dev/null && break; done
      sleep "$(rand_ms 0 $((dur / 2)))"
      how="at a random moment"
    fi
    kill_server
    [ -e "$dir/runs/$id/checkpoint.pending.safetensors" ] && pending=$((pending + 1))
    why=$(integrity "$dir")
    [ "$why" = ok ] || bad+=("kill $i ($how): integrity_check after the kill: $why")
    start_server "$dir"
    api GET "/api/runs/$id"
    st=$(js 'd["run"]["status"]')
    ck=$(js 'd["run"]["checkpoint_step"]')
    case "$st" in
      interrupted)
        [ "${ck:-0}" -gt 0 ] && fromck=$((fromck + 1))
        api POST "/api/runs/$id/resume"
        [ "$CODE" = 202 ] || bad+=("kill $i ($how): resume answered $CODE")
        ;;
      succeeded) fin=$((fin + 1)) ;;
      queued | running) ;; # killed before it started: it trains again by itself
      *) bad+=("kill $i ($how): after the restart the run is '$st'") ;;
    esac
    st2=$(wait_run_final "$id" 300)
    if [ "$st2" != succeeded ]; then
      api GET "/api/runs/$id"
      bad+=("kill $i ($how): the run ended '$st2' ($(js 'd["run"]["error"]'))")
      continue
    fi
    read -r steps _ _ whole <<<"$(loss_steps "$id")" || true
    [ "$steps" = 1500 ] && [ "$whole" = 1 ] || bad+=("kill $i ($how, resumed from step $ck): $steps loss points, whole=$whole")
    [ "$(loss_values "$id")" = "$refloss" ] || bad+=("kill $i ($how, resumed from step $ck): losses differ from the uninterrupted twin")
    [ "$(curl -s -o /dev/null -w '%{http_code}' --max-time 30 "$URL/api/runs/$id/weights")" = 200 ] || bad+=("kill $i: its checkpoint is not served ($CODE)")
    note "kill $i $how: status '$st' after restart, checkpoint step ${ck:-0}, then $st2 with $steps loss steps"
  done
  stop_server
  why=$(integrity "$dir")
  [ "$why" = ok ] || bad+=("integrity_check at the end: $why")
  local b
  for b in "${bad[@]}"; do note "BROKEN: $b"; done
  row "SIGKILL during training" "$KILLS" \
    "$fromck resumed from a checkpoint, $fin had finished; $pending kills left a half-written checkpoint" \
    "interrupted, resume, loss 1..1500 = twin's, integrity ok" "$([ ${#bad[@]} = 0 ] && echo ok || echo MISSED)"
}

# ---- 2. SIGKILL during tokenization -----------------------------------------------------------------
drill_kill_tokenize() {
  local dir=$work/tok big=$work/big.txt enc=bytes i st t0 dur hit=0 failed=0 ready=0 bad=() why
  for _ in $(seq 200); do cat "$TEXT"; done >"$big"
  start_server "$dir"
  api POST /api/tokenize -H 'Content-Type: application/json' -d '{"text":"attention","encoding":"gpt2"}'
  [ "$CODE" = 200 ] && enc=gpt2
  upload calibrate "$enc" "$big"
  t0=$(date +%s%N)
  st=$(wait_corpus calibrate 300)
  dur=$((($(date +%s%N) - t0) / 1000000))
  note "calibration: $(($(stat -c %s "$big") / 1048576)) MiB as $enc, tokenized in $dur ms after the upload's answer ($st)"
  for i in $(seq "$TOKKILLS"); do
    upload "cut$i" "$enc" "$big" # answered 202 once stored; tokenization runs in the background
    sleep "$(rand_ms 0 $((dur * 4 / 5)))"
    api GET "/api/corpora/cut$i"
    [ "$(js 'd["corpus"]["status"]')" = tokenizing ] && hit=$((hit + 1))
    kill_server
    why=$(integrity "$dir")
    [ "$why" = ok ] || bad+=("kill $i: integrity_check after the kill: $why")
    start_server "$dir"
    api GET "/api/corpora/cut$i"
    st=$(js 'd["corpus"]["status"]')
    case "$st" in
      failed) failed=$((failed + 1)) ;;
      ready) ready=$((ready + 1)) ;;
      "") [ "$CODE" = 404 ] || bad+=("kill $i: the corpus answered $CODE") ;; # killed before the upload was taken
      *) bad+=("kill $i: after the restart the corpus is '$st'") ;;
    esac
    upload "again$i" bytes "$TEXT"
    [ "$CODE" = 202 ] && [ "$(wait_corpus "again$i" 60)" = ready ] || bad+=("kill $i: a new upload did not become ready ($CODE)")
    note "kill $i: corpus '${st:-absent}' after the restart; a new upload is ready"
  done
  stop_server
  why=$(integrity "$dir")
  [ "$why" = ok ] || bad+=("integrity_check at the end: $why")
  local b
  for b in "${bad[@]}"; do note "BROKEN: $b"; done
  row "SIGKILL during tokenization ($enc)" "$TOKKILLS" \
    "$hit kills hit it tokenizing; after restart $failed failed, $ready ready, none tokenizing" \
    "never stuck tokenizing, re-upload works, integrity ok" "$([ ${#bad[@]} = 0 ] && echo ok || echo MISSED)"
}

# ---- 3. Disk full -----------------------------------------------------------------------------------
drill_disk_full() {
  local mnt=$work/full dir id st steps first last whole runstep err upcode upjson health bad=() why
  if ! mount_tmpfs "$mnt" 16m; then
    row "disk full (16 MiB tmpfs)" - "skipped (needs root to mount a tmpfs)" "-" skipped
    return
  fi
  dir=$mnt/data
  start_server "$dir"
  upload fullbytes bytes "$TEXT"
  [ "$CODE" = 202 ] && [ "$(wait_corpus fullbytes 60)" = ready ] || bad+=("the first upload failed ($CODE)")
  id=$(create_run filling '{"corpus":"fullbytes","steps":1000000,"n_layer":1,"n_head":1,"d_model":16,"seq_len":16,"batch":2,"eval_every":1000,"eval_batches":1,"checkpoint_every":200,"threads":1}')
  local end=$((SECONDS + 60))
  while [ $SECONDS -lt $end ]; do api GET "/api/runs/$id"; [ "$(js 'd["run"]["step"]')" -ge 50 ] 2>/dev/null && break; sleep 0.1; done
  dd if=/dev/zero of="$mnt/filler" bs=64k 2>/dev/null || true
  note "filled: $(df -k --output=avail "$mnt" | tail -n 1 | tr -d ' ') KiB free"
  upload fullup bytes "$TEXT"
  upcode=$CODE
  is_json_error && upjson=" JSON" || upjson=" no JSON"
  if is_json_error; then
    note "upload on a full disk: $CODE $(js 'd["error"]["message"]')"
  else
    bad+=("an upload on a full disk got $CODE without a JSON error")
    note "upload on a full disk: $CODE (no JSON error)"
  fi
  # The run stops when its metrics cannot be stored; its final status cannot be written to a full
  # disk either: the service retries it, and it must land once there is space again (below).
  end=$((SECONDS + 60))
  until grep -q "its final status 'failed' cannot be stored yet" "$work/server.log" 2>/dev/null || [ $SECONDS -ge $end ]; do sleep 0.5; done
  api GET "/api/runs/$id"
  note "the training run on a full disk: '$(js 'd["run"]["status"]')' at step $(js 'd["run"]["step"]')"
  api GET /api/health
  health=$CODE
  [ "$CODE" = 503 ] || bad+=("health answered $CODE on a full disk, not 503")
  note "health on a full disk: $CODE $(js 'd.get("db_error") or d.get("writes_error") or "disk " + str(d.get("disk"))')"
  rm -f "$mnt/filler"
  sleep 2 # a metrics flush (every second) to retry what was kept
  api GET /api/health
  [ "$CODE" = 200 ] || bad+=("health answered $CODE once space was freed")
  st=$(wait_run_final "$id" 30)
  api GET "/api/runs/$id"
  err=$(js 'd["run"]["error"]')
  note "once space was freed: '$st': ${err:-no error}"
  [ "$st" = failed ] && [ -n "$err" ] || bad+=("the training run did not fail with a reason once space was freed ('$st': $err)")
  case "$err" in *"$work"*) bad+=("the run's error names the server's path: $err") ;; esac
  read -r steps first last whole <<<"$(loss_steps "$id")" || true
  api GET "/api/runs/$id"
  runstep=$(js 'd["run"]["step"]')
  note "after freeing: run '$(js 'd["run"]["status"]')' at step $runstep, loss steps $first..$last ($steps points)"
  [ "$whole" = 1 ] && [ "$last" = "$runstep" ] ||
    bad+=("the failed run's loss series is $first..$last ($steps points, whole=$whole) but it reached step $runstep")
  upload fullagain bytes "$TEXT"
  [ "$CODE" = 202 ] && [ "$(wait_corpus fullagain 60)" = ready ] || bad+=("an upload after freeing did not become ready ($CODE)")
  local id2
  id2=$(create_run after '{"corpus":"fullbytes","steps":100,"n_layer":1,"n_head":1,"d_model":16,"seq_len":16,"batch":2,"eval_every":50,"eval_batches":1,"checkpoint_every":20,"threads":1}')
  [ "$(wait_run_final "${id2:-0}" 120)" = succeeded ] || bad+=("a run after freeing did not succeed")
  stop_server
  why=$(integrity "$dir")
  [ "$why" = ok ] || bad+=("integrity_check: $why")
  unmount "$mnt" || true
  local b
  for b in "${bad[@]}"; do note "BROKEN: $b"; done
  row "disk full (16 MiB tmpfs)" 1 \
    "upload $upcode$upjson; run '$st' at step $runstep${err:+ ($err)}; health $health; freed: works" \
    "JSON error, run fails saying why, no metric dropped, integrity" "$([ ${#bad[@]} = 0 ] && echo ok || echo MISSED)"
}

# ---- 4. Database made unwritable ------------------------------------------------------------------
# A read-only remount is what one would try first; Linux refuses it (busy) while attnlabd holds the
# database open for writing, so the drill says so and makes the file unwritable by replacing it under
# the server (moved away, a copy in its place), the case /api/health names; then puts it back.
drill_db_unwritable() {
  local mnt=$work/ro dir how health hreason wcode wbody bad=() why id
  if ! mount_tmpfs "$mnt" 64m; then
    row "database made unwritable" - "skipped (needs root to mount a tmpfs)" "-" skipped
    return
  fi
  dir=$mnt/data
  start_server "$dir"
  id=$(create_run before '{"corpus":"small","steps":20,"n_layer":1,"n_head":1,"d_model":16,"seq_len":16,"batch":2,"eval_every":10,"eval_batches":1,"threads":1}')
  wait_run_final "${id:-0}" 60 >/dev/null
  if mount -o remount,ro "$mnt" 2>/dev/null; then
    how="the tmpfs remounted read-only"
  else
    note "mount -o remount,ro: refused while attnlabd holds the database open for writing"
    mkdir -p "$mnt/away"
    cp "$dir/attnlab.db" "$mnt/away/copy.db"
    mv "$dir/attnlab.db" "$mnt/away/attnlab.db"
    mv "$mnt/away/copy.db" "$dir/attnlab.db"
    how="the db file replaced under it"
  fi
  api GET /api/health
  health=$CODE
  hreason=$(js 'd["db"] + ": " + d.get("db_error","")')
  note "$how: health $CODE ($hreason)"
  [ "$CODE" = 503 ] && [ "$(js 'd["db"]')" = error ] || bad+=("health answered $CODE ($hreason)")
  create_run during '{"corpus":"small","steps":5}' >/dev/null
  wcode=$CODE
  wbody=$(js 'd["error"]["message"] if "error" in d else "created run %s" % d["run"]["id"]')
  note "POST /api/runs meanwhile: $CODE ($wbody)"
  [[ "$CODE" == 5* ]] && is_json_error || bad+=("a write answered $CODE ($wbody) while the database could not be written")
  api PATCH "/api/runs/$id" -H 'Content-Type: application/json' -d '{"note":"written while unwritable"}'
  note "PATCH /api/runs/$id meanwhile: $CODE"
  [[ "$CODE" == 5* ]] && is_json_error || bad+=("a PATCH answered $CODE while the database could not be written")
  if [ "$how" = "the tmpfs remounted read-only" ]; then
    mount -o remount,rw "$mnt"
  else
    rm -f "$dir/attnlab.db"
    mv "$mnt/away/attnlab.db" "$dir/attnlab.db"
  fi
  api GET /api/health
  [ "$CODE" = 200 ] || bad+=("health answered $CODE once the database was back")
  create_run after '{"corpus":"small","steps":5,"n_layer":1,"n_head":1,"d_model":16,"seq_len":16,"batch":2,"eval_every":5,"eval_batches":1,"threads":1}' >/dev/null
  [ "$CODE" = 201 ] || bad+=("a write answered $CODE once the database was back")
  stop_server
  why=$(integrity "$dir")
  [ "$why" = ok ] || bad+=("integrity_check: $why")
  unmount "$mnt" || true
  local b
  for b in "${bad[@]}"; do note "BROKEN: $b"; done
  row "database made unwritable" 1 "$how: health $health, POST /api/runs $wcode; ok once back" \
    "health 503 saying why, writes 5xx JSON, then ok, integrity" "$([ ${#bad[@]} = 0 ] && echo ok || echo MISSED)"
}

for d in ${FAULTDRILL_ONLY:-1 2 3 4}; do
  case $d in
    1) drill_kill_training ;;
    2) drill_kill_tokenize ;;
    3) drill_disk_full ;;
    4) drill_db_unwritable ;;
  esac
done

echo
echo "faultdrill: attnlabd hurt on purpose, each drill checked against the README's promises"
printf '  %-34s %5s  %-74s  %-62s %s\n' drill reps outcome "promise checked" ""
printf '%s\n' "${rows[@]}"
echo "faultdrill: $missed promise(s) broken"
[ "${FAULTDRILL_STRICT:-0}" = 1 ] && [ "$missed" -gt 0 ] && exit 1
exit 0
