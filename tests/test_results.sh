#!/usr/bin/env bash
# The README's research figures come from data kept in the tree: scripts/results.py imports every
# results/*/bundle.json.gz into a fresh attnlabd ($ATTNLABD, the build under test), computes each
# marked table and figure through the service's own statistics routes, and compares them with the
# README's text between the markers. Prints PASS results, or FAIL with each difference.
set -u
cd "$(dirname "$0")/.."
ATTNLABD=${ATTNLABD:-build/release/attnlabd}
[ -x "$ATTNLABD" ] || { echo "FAIL results: $ATTNLABD is missing (make build)"; exit 0; }
ls results/*/bundle.json.gz >/dev/null 2>&1 || { echo "FAIL results: results/ holds no bundle"; exit 0; }
python3 scripts/results.py tables --attnlabd "$ATTNLABD" README.md
rc=$?
[ "$rc" -eq 0 ] || echo "FAIL results: scripts/results.py tables ended with status $rc"
exit 0
