#!/usr/bin/env bash
# Runs every fuzz target built in DIR/fuzzers for SECONDS each, starting from its committed seeds
# (tests/fuzz/corpus/NAME). With --keep (make fuzz) what a run finds is kept in DIR/corpus/NAME
# and grows from run to run; otherwise it goes to a temporary directory. A crashing input is
# written to DIR/artifacts/NAME/. Prints one PASS or FAIL line per target; exits 1 on any FAIL.
# usage: tests/fuzz/run.sh DIR SECONDS [--keep]
set -u
dir=$1 secs=$2 keep=${3:-}
root=$(cd "$(dirname "$0")/../.." && pwd)
mkdir -p "$dir/logs"
fail=0
found=0
for bin in "$dir"/fuzzers/fuzz_*; do
  [ -x "$bin" ] || continue
  found=1
  name=$(basename "$bin")
  if [ "$keep" = --keep ]; then
    work="$dir/corpus/$name"
    mkdir -p "$work"
  else
    work=$(mktemp -d "${TMPDIR:-/tmp}/fuzz-$name.XXXXXX")
  fi
  art="$dir/artifacts/$name/"
  mkdir -p "$art"
  log="$dir/logs/$name.log"
  # From the repository root, where the tokenizer finds node_modules.
  (cd "$root" && "$bin" -max_total_time="$secs" -timeout=20 -rss_limit_mb=4096 -max_len=65536 \
      -artifact_prefix="$art" -print_final_stats=1 "$work" "tests/fuzz/corpus/$name") >"$log" 2>&1
  rc=$?
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
  if [ "$rc" -eq 0 ]; then
    echo "PASS $name: ${runs:-?} inputs in ${secs}s"
  else
    echo "FAIL $name: exit status $rc (log: $log, inputs: $art)"
    grep -E 'ERROR|SUMMARY|fuzz_[a-z_]+:' "$log" | head -n 5 | sed 's/^/    /'
    fail=1
  fi
  [ "$keep" = --keep ] || rm -rf "$work"
done
if [ "$found" -eq 0 ]; then
  echo "FAIL fuzz: no fuzz targets in $dir/fuzzers (build them with: make MODE=fuzz fuzz-bins)"
  exit 1
fi
exit $fail
