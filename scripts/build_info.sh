#!/usr/bin/env bash
# Writes the C source of attnlab_commit (core/provenance.h): the tree's commit as a short
# hash, with "-dirty" when tracked files have changed, or "unknown" outside a git checkout. Prints
# the file only when its text would change, so a build redoes nothing until the commit does.
set -u
out=$1
commit=$(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)
if [ "$commit" != unknown ] && ! git diff --quiet HEAD -- 2>/dev/null; then commit="$commit-dirty"; fi
text="const char attnlab_commit[] = \"$commit\";"
[ -f "$out" ] && [ "$(cat "$out")" = "$text" ] && exit 0
mkdir -p "$(dirname "$out")"
printf '%s\n' "$text" > "$out"
