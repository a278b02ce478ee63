#!/usr/bin/env bash
# Runs every test program of both builds (release, then asan) and any scripted suites,
# counts PASS/FAIL lines, and ends with the line "N passed, N failed".
# A program that exits non-zero without reporting a FAIL (a crash, a sanitizer report)
# counts as one failure of its own.
set -u
BUILD=${1:-build}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
LOGDIR=$BUILD/test-logs
mkdir -p "$LOGDIR"
pass=0; fail=0
# Tests make temporary data directories; keep them all under one folder removed at the end.
export TMPDIR=$(mktemp -d "${TMPDIR:-/tmp}/attnlab-tests.XXXXXX")
# One throw-away PostgreSQL cluster for the whole suite (tests make their own databases on it).
PG_CLUSTER=$TMPDIR/pg
export ATTNLAB_TEST_PG=${ATTNLAB_TEST_PG:-$(tests/support/pg.sh start "$PG_CLUSTER" || echo)}
[ -n "$ATTNLAB_TEST_PG" ] || echo "run.sh: no PostgreSQL cluster could be started; its tests will fail" >&2
trap 'tests/support/pg.sh stop "$PG_CLUSTER"; rm -rf "$TMPDIR"' EXIT
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

run_one() { # mode label command...   (BINMODE: the build whose binaries run, default mode)
  local mode=$1 label=$2; shift 2
  local bin=${BINMODE:-$mode}
  local log="$LOGDIR/$mode-$(echo "$label" | tr '/' '_').log"
  local t0=$(date +%s.%N)
  ATTNLAB_TEST_MODE=$bin ATTNLABD="$ROOT/$BUILD/$bin/attnlabd" ATTNLAB="$ROOT/$BUILD/$bin/attnlab" \
    timeout 900 "$@" >"$log" 2>&1
  local rc=$?
  local p f
  p=$(grep -c '^PASS ' "$log"); f=$(grep -c '^FAIL ' "$log")
  if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then f=1; echo "FAIL $label: exited with status $rc" >>"$log"; fi
  pass=$((pass + p)); fail=$((fail + f))
  printf '%-6s %-40s %4d passed %3d failed  %5.1fs\n' "$mode" "$label" "$p" "$f" \
    "$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN{print b-a}')"
  if [ "$f" -gt 0 ]; then grep -E '^FAIL ' "$log" | sed 's/^/    /'; tail -n 20 "$log" | sed 's/^/    | /'; fi
}

export TSAN_OPTIONS=${TSAN_OPTIONS:-halt_on_error=1:second_deadlock_stack=1}
for mode in release asan tsan; do
  for bin in $(find "$BUILD/$mode/tests" -type f -perm -u+x 2>/dev/null | sort); do
    run_one "$mode" "${bin#$BUILD/$mode/tests/}" "$bin"
  done
  [ "$mode" = tsan ] && continue # only the programs built for it, above
  for script in $(find tests -name 'test_*.sh' -o -name 'test_*.mjs' | sort); do
    case "$script" in
      # checks of the source tree (and of the README, the staging and the sittings of results/), not of a build: once
      tests/test_format.sh|tests/test_map.sh|tests/test_results.sh|tests/test_results_stages.sh|tests/test_results_sittings.sh) [ "$mode" = release ] && run_one "$mode" "$script" bash "$script" ;;
      *.sh)  run_one "$mode" "$script" bash "$script" ;;
      *.mjs) [ "$mode" = release ] && run_one "$mode" "$script" node "$script" ;;
    esac
  done
done
# The API tests once more with every server on PostgreSQL (release build): the harness gives each
# server a database of its own on the suite's cluster. Cases about the SQLite file itself say SKIP.
if [ -n "$ATTNLAB_TEST_PG" ]; then
  for src in $(grep -lE 'harness_start|api_suite_main' tests/server/test_*.c | grep -v test_nodes.c | sort); do # test_nodes: PostgreSQL already
    bin=$BUILD/release/tests/server/$(basename "$src" .c)
    [ -x "$bin" ] && BINMODE=release ATTNLAB_TEST_DB=$ATTNLAB_TEST_PG run_one pg "${bin#$BUILD/release/tests/}" "$bin"
  done
fi
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
