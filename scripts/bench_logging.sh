#!/usr/bin/env bash
# `make bench` (scripts/bench.sh): issue 24's logging target. A Python loop logs 20 keys a step for
# 10,000 steps through the Python client (client/python, run.log batching in the background) into
# a real attnlabd that trains a run of its own meanwhile; prints how long the loop took, how long
# after its last step the flush ended (target: within 5 s) and that every one of the 200,000 points
# was stored, with the load average it ran under. ATTNLAB_BENCH_LOG_ROUNDS rounds (default 3).
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-build/release}
ATTNLABD=$(cd "$OUT" && pwd)/attnlabd exec /usr/bin/python3 scripts/bench_logging.py
