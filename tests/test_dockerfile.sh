#!/usr/bin/env bash
# The Dockerfile cannot hide a failed build: no RUN step swallows errors with `|| true`, and the
# build step runs under `set -e`. (Building the image needs a Docker engine; see the README.)
set -u
F=$(dirname "$0")/../Dockerfile
if grep -nE '\|\|[[:space:]]*true' "$F"; then echo "FAIL dockerfile_no_swallowed_errors: '|| true' above"
else echo "PASS dockerfile_no_swallowed_errors"; fi
if grep -A2 '^RUN set -e' "$F" | grep -q 'make MODE=release'; then echo "PASS dockerfile_build_step_fails_on_error"
else echo "FAIL dockerfile_build_step_fails_on_error: the make step is not under set -e"; fi
