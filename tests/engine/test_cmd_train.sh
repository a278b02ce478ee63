#!/usr/bin/env bash
# `attnlabd train` from the outside: flags, JSON lines, exit codes, weights in and out, resume.
set -u
BIN=${ATTNLABD:-build/release/attnlabd}
T=$(mktemp -d /tmp/attnlab-cmdtrain-XXXXXX)
trap 'rm -rf "$T"' EXIT
ok() { echo "PASS $1"; }
bad() { echo "FAIL $1: $2"; }
# 2000 tokens, every one 0x0a79 = 2681 ("y\n" little-endian)
yes | head -c 4000 >"$T/y.u16"
SMALL=(--data "$T/y.u16" --vocab 3000 --n-layer 1 --n-head 2 --d-model 8 --seq-len 8 --batch 2 --threads 1)

if "$BIN" train --help | grep -q -- '--attention dot|rope|cosine_rope'; then ok cmd_train_help; else bad cmd_train_help "no flag list"; fi

"$BIN" train --no-such-flag 1 >/dev/null 2>&1; rc=$?
[ "$rc" -eq 2 ] && ok cmd_train_bad_flag_exits_2 || bad cmd_train_bad_flag_exits_2 "exit $rc"
"$BIN" train "${SMALL[@]}" --attention sideways >/dev/null 2>&1; rc=$?
[ "$rc" -eq 2 ] && ok cmd_train_bad_value_exits_2 || bad cmd_train_bad_value_exits_2 "exit $rc"
"$BIN" train "${SMALL[@]}" --lr 0 >/dev/null 2>&1; rc=$?
[ "$rc" -eq 2 ] && ok cmd_train_bad_config_exits_2 || bad cmd_train_bad_config_exits_2 "exit $rc"

"$BIN" train "${SMALL[@]}" --loss-on answers >/dev/null 2>"$T/err"; rc=$?
if [ "$rc" -eq 2 ] && grep -q 'task corpus' "$T/err"; then ok cmd_train_loss_on_answers_needs_the_service
else bad cmd_train_loss_on_answers_needs_the_service "rc=$rc $(cat "$T/err")"; fi

out=$("$BIN" train "${SMALL[@]}" --steps 3 --eval-every 2 --attention cosine_rope --save "$T/w.safetensors"); rc=$?
steps=$(grep -c '"type":"step"' <<<"$out"); evals=$(grep -c '"type":"eval"' <<<"$out")
if [ "$rc" -eq 0 ] && [ "$steps" -eq 3 ] && [ "$evals" -eq 2 ] && grep -q '"type":"done","status":"ok"' <<<"$out" \
   && grep -q '"tau":\[\[' <<<"$out" && [ -s "$T/w.safetensors" ]; then
  ok cmd_train_runs_and_prints_json_lines
else
  bad cmd_train_runs_and_prints_json_lines "rc=$rc steps=$steps evals=$evals"
fi

# the saved weights say where their tokens came from (vocabulary 3000: neither GPT-2 nor bytes)
meta=$(python3 -c 'import json,struct,sys; b=open(sys.argv[1],"rb").read(); n=struct.unpack("<Q",b[:8])[0]; m=json.loads(b[8:8+n])["__metadata__"]; print(m.get("corpus"), m.get("tokenizer"), "run_id" in m)' "$T/w.safetensors" 2>&1)
if [ "$meta" = "y.u16 unknown False" ]; then ok cmd_train_weights_name_their_tokens
else bad cmd_train_weights_name_their_tokens "metadata: $meta"; fi
"$BIN" train --data "$T/y.u16" --vocab 50257 --n-layer 1 --n-head 2 --d-model 8 --seq-len 8 --batch 2 --threads 1 \
  --steps 1 --save "$T/g.safetensors" >/dev/null 2>&1
meta=$(python3 -c 'import json,struct,sys; b=open(sys.argv[1],"rb").read(); n=struct.unpack("<Q",b[:8])[0]; m=json.loads(b[8:8+n])["__metadata__"]; print(m.get("tokenizer"), "GPT-2" in m.get("vocab_source", ""))' "$T/g.safetensors" 2>&1)
if [ "$meta" = "gpt2 True" ]; then ok cmd_train_gpt2_weights_say_gpt2
else bad cmd_train_gpt2_weights_say_gpt2 "metadata: $meta"; fi

"$BIN" train "${SMALL[@]}" --steps 1 --attention cosine_rope --init "$T/w.safetensors" >/dev/null 2>&1; rc1=$?
"$BIN" train "${SMALL[@]}" --steps 1 --attention rope --init "$T/w.safetensors" >/dev/null 2>"$T/err"; rc2=$?
if [ "$rc1" -eq 0 ] && [ "$rc2" -eq 1 ] && grep -q 'different model' "$T/err"; then ok cmd_train_init_weights_checked
else bad cmd_train_init_weights_checked "rc=$rc1/$rc2 $(cat "$T/err")"; fi

"$BIN" train --data "$T/y.u16" --vocab 2000 --n-layer 1 --n-head 2 --d-model 8 --seq-len 8 --batch 2 --steps 1 \
  >/dev/null 2>"$T/err"; rc=$?
if [ "$rc" -eq 1 ] && grep -q '2681' "$T/err"; then ok cmd_train_token_outside_vocab_fails
else bad cmd_train_token_outside_vocab_fails "rc=$rc $(cat "$T/err")"; fi

"$BIN" train --data "$T/missing.u16" --steps 1 >/dev/null 2>&1; rc=$?
[ "$rc" -eq 1 ] && ok cmd_train_missing_data_fails || bad cmd_train_missing_data_fails "exit $rc"

# checkpoint at step 2 of 4, resume: the last two losses equal those of a straight 4-step run
full=$("$BIN" train "${SMALL[@]}" --steps 4 --attention rope | grep '"type":"step"' | sed 's/.*"loss":\([^,]*\),.*/\1/' | tail -2)
"$BIN" train "${SMALL[@]}" --steps 2 --attention rope --checkpoint "$T/ck.safetensors" >/dev/null
res=$("$BIN" train "${SMALL[@]}" --steps 4 --attention rope --resume "$T/ck.safetensors" | grep '"type":"step"' \
      | sed 's/.*"loss":\([^,]*\),.*/\1/')
if [ -n "$full" ] && [ "$full" = "$res" ]; then ok cmd_train_resume_continues_exactly
else bad cmd_train_resume_continues_exactly "full=[$full] resumed=[$res]"; fi

# --corpus NAME trains with the vocabulary its catalogue records: a byte corpus uploaded to a server
# (stopped before training) trains with 256, so its first loss is near ln 256 = 5.55, not ln 50257
# = 10.8; a --vocab that disagrees, an unknown corpus and a data dir without a catalogue are refused.
D="$T/dd"; mkdir -p "$D"
"$BIN" --data-dir "$D" --port 0 >"$T/srv.out" 2>"$T/srv.err" &
srv=$!
url=""
for _ in $(seq 400); do url=$(grep -o 'http://[^ ,]*' "$T/srv.out" | head -1); url=${url%/}; [ -n "$url" ] && break; sleep 0.05; done
ready=""
if [ -n "$url" ]; then
  yes 'the quick brown fox jumps over the lazy dog' | head -c 20000 |
    curl -s -o /dev/null -X POST -H 'Content-Type: text/plain' --data-binary @- "$url/api/corpora?name=bytesy&encoding=bytes"
  for _ in $(seq 600); do
    curl -s "$url/api/corpora/bytesy" | grep -q '"status":"ready"' && { ready=1; break; }
    sleep 0.05
  done
fi
kill "$srv"; wait "$srv" 2>/dev/null
TINYF=(--n-layer 1 --n-head 2 --d-model 8 --seq-len 8 --batch 2 --threads 1 --steps 1)
loss=$("$BIN" train --data-dir "$D" --corpus bytesy "${TINYF[@]}" 2>"$T/err" | grep '"type":"step"' | sed 's/.*"loss":\([^,]*\),.*/\1/')
if [ -n "$ready" ] && [ -n "$loss" ] && awk -v l="$loss" 'BEGIN { exit !(l > 5 && l < 6.2) }'; then
  ok cmd_train_corpus_takes_the_catalogue_vocabulary
else bad cmd_train_corpus_takes_the_catalogue_vocabulary "ready=$ready url=$url loss=$loss $(cat "$T/err")"; fi
"$BIN" train --data-dir "$D" --corpus bytesy --vocab 50257 "${TINYF[@]}" >/dev/null 2>"$T/err"; rc1=$?
"$BIN" train --data-dir "$D" --corpus nosuch "${TINYF[@]}" >/dev/null 2>"$T/err2"; rc2=$?
"$BIN" train --data-dir "$T/empty" --corpus bytesy "${TINYF[@]}" >/dev/null 2>"$T/err3"; rc3=$?
if [ "$rc1" -eq 2 ] && grep -q "disagrees" "$T/err" && [ "$rc2" -eq 2 ] && grep -q "not in the catalogue" "$T/err2" &&
  [ "$rc3" -eq 2 ] && grep -q "no catalogue" "$T/err3"; then
  ok cmd_train_corpus_vocabulary_refusals
else bad cmd_train_corpus_vocabulary_refusals "$rc1/$rc2/$rc3: $(cat "$T/err" "$T/err2" "$T/err3")"; fi

# The first line says what the run computes with before any step: its kernel path and precision
# (fp32 forced through ATTNLAB_KERNEL_PATH gives fp32 products for an fp32 run); an unknown path is
# refused with exit 1 and the reason.
first=$(ATTNLAB_KERNEL_PATH=fp32 "$BIN" train "${SMALL[@]}" --steps 1 --precision fp32 | head -1)
ATTNLAB_KERNEL_PATH=sideways "$BIN" train "${SMALL[@]}" --steps 1 >/dev/null 2>"$T/err"; rc=$?
if [ "$first" = '{"type":"start","kernel_path":"fp32","precision":"fp32","vocab":3000,"threads":1}' ] &&
  [ "$rc" -ne 0 ] && grep -q 'sideways' "$T/err"; then ok cmd_train_first_line_names_the_kernel_path
else bad cmd_train_first_line_names_the_kernel_path "first=$first rc=$rc $(cat "$T/err")"; fi
