#!/usr/bin/env bash
# The fuzz targets, a few seconds each over their committed seeds, so that a change which breaks
# one of them fails the suite. tests/run.sh runs this once per build mode; the targets are ASan +
# UBSan builds of their own, so they run in the release pass only. FUZZ_TEST_SECONDS sets the time.
set -u
[ "${ATTNLAB_TEST_MODE:-release}" = release ] || exit 0
root=$(cd "$(dirname "$0")/../.." && pwd)
attnlabd=${ATTNLABD:-$root/build/release/attnlabd}
build=$(dirname "$(dirname "$attnlabd")")
if ! ls "$build"/fuzz/fuzzers/fuzz_* >/dev/null 2>&1; then
  if ! make -C "$root" --no-print-directory BUILD="$build" MODE=fuzz fuzz-bins >"$build/fuzz-build.log" 2>&1; then
    echo "FAIL fuzz: the fuzz targets do not build (see $build/fuzz-build.log)"
    exit 1
  fi
fi
exec "$root/tests/fuzz/run.sh" "$build/fuzz" "${FUZZ_TEST_SECONDS:-3}"
