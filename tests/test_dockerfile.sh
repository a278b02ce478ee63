#!/usr/bin/env bash
# What can be checked of the image without a Docker engine (the README says how the image itself was
# built and run): the Dockerfile cannot hide a failed build (no `|| true`, the build step under
# `set -e`), it builds the default corpus with `make corpus` and installs every package scripts/deps.sh
# lists for the build and the corpus, keeps the docs the corpus is made from, leaves local builds out of
# the context, and its entrypoint puts the corpus where attnlabd looks for it (run here with a stand-in
# attnlabd).
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
F=$ROOT/Dockerfile
ok() { echo "PASS $1"; }
bad() { echo "FAIL $1: $2"; }

if grep -nE '\|\|[[:space:]]*true' "$F"; then bad dockerfile_no_swallowed_errors "'|| true' above"
else ok dockerfile_no_swallowed_errors; fi
# The RUN step that starts with `set -e`, joined over its continuation lines.
step=$(awk '/^RUN set -e/ {on=1} on {print} on && !/\\$/ {exit}' "$F")
if grep -q 'make MODE=release' <<<"$step"; then ok dockerfile_build_step_fails_on_error
else bad dockerfile_build_step_fails_on_error "the make step is not under set -e"; fi
if grep -qE 'make [^;]* corpus;' <<<"$step" && grep -q 'test -s /corpus/corpora/default/tokens.u16' <<<"$step"; then
  ok dockerfile_builds_the_default_corpus
else bad dockerfile_builds_the_default_corpus "no 'make ... corpus' (and its check) in the set -e step"; fi

# Every package deps.sh installs for building and for the corpus is in the build stage.
build_stage=$(awk '/^FROM .* AS build/ {on=1; next} /^FROM / {on=0} on' "$F")
pkgs() { bash -c "source <(sed -n '/^$1=(/,/)/p' '$ROOT/scripts/deps.sh'); echo \${$1[@]}"; }
missing=""
for p in $(pkgs APT_PACKAGES) $(pkgs APT_CORPUS_PACKAGES); do
  grep -qE "(^|[[:space:]])$p([[:space:]]|$)" <<<"$build_stage" || missing="$missing $p"
done
if [ -z "$(pkgs APT_CORPUS_PACKAGES)" ]; then bad dockerfile_installs_what_deps_lists "no APT_CORPUS_PACKAGES in deps.sh"
elif [ -n "$missing" ]; then bad dockerfile_installs_what_deps_lists "not in the build stage:$missing"
else ok dockerfile_installs_what_deps_lists; fi
# The slim base drops man pages and docs, which the corpus is made from: the build stage keeps them.
first_apt=$(grep -n 'apt-get install' <<<"$build_stage" | head -n 1 | cut -d: -f1)
rm_line=$(grep -n 'rm -f /etc/dpkg/dpkg.cfg.d/docker' <<<"$build_stage" | head -n 1 | cut -d: -f1)
if [ -n "$rm_line" ] && [ -n "$first_apt" ] && [ "$rm_line" -le "$first_apt" ]; then ok dockerfile_keeps_the_corpus_docs
else bad dockerfile_keeps_the_corpus_docs "the build stage installs before removing the slim image's path excludes"; fi
# Local builds, node_modules and data stay out of the context (they would replace the image's own).
missing=""
for p in .git build 'build-\*' node_modules var static/vendor; do
  grep -qx "$p" "$ROOT/.dockerignore" 2>/dev/null || missing="$missing $p"
done
if [ -z "$missing" ]; then ok dockerignore_leaves_out_local_builds; else bad dockerignore_leaves_out_local_builds "missing:$missing"; fi
if grep -q '^COPY --from=build /out/docker-entrypoint.sh /usr/local/bin/attnlab-entrypoint' "$F" &&
  grep -q '^ENTRYPOINT \["attnlab-entrypoint"' "$F" && grep -q 'corpus-default' "$F"; then
  ok dockerfile_entrypoint_installs_the_corpus
else bad dockerfile_entrypoint_installs_the_corpus "the runtime stage does not use attnlab-entrypoint with the corpus"; fi

# The entrypoint itself, with a stand-in attnlabd that prints its arguments.
E=$ROOT/scripts/docker-entrypoint.sh
T=$(mktemp -d "${TMPDIR:-/tmp}/attnlab-docker.XXXXXX")
trap 'rm -rf "$T"' EXIT
mkdir -p "$T/bin" "$T/src"
printf '#!/bin/sh\necho "attnlabd $*"\n' >"$T/bin/attnlabd" && chmod +x "$T/bin/attnlabd"
printf 'tokens' >"$T/src/tokens.u16" && printf '{"tokenizer":"gpt2"}' >"$T/src/meta.json"
run() { PATH="$T/bin:$PATH" ATTNLAB_IMAGE_CORPUS="$T/src" sh "$E" "$@" 2>/dev/null; }
out=$(run --bind 0.0.0.0 --data-dir "$T/data" --port 8080)
if [ "$out" = "attnlabd --bind 0.0.0.0 --data-dir $T/data --port 8080" ] && cmp -s "$T/src/tokens.u16" "$T/data/corpora/default/tokens.u16" &&
  cmp -s "$T/src/meta.json" "$T/data/corpora/default/meta.json" && [ -z "$(ls -A "$T/data/corpora/default" | grep '^\.')" ]; then
  ok entrypoint_copies_the_corpus_into_the_data_dir
else bad entrypoint_copies_the_corpus_into_the_data_dir "out '$out', $(ls -A "$T/data/corpora/default" 2>&1)"; fi
run --data-dir "$T/data2" --artifacts "$T/art" >/dev/null
if [ -f "$T/art/corpora/default/tokens.u16" ] && [ ! -e "$T/data2/corpora" ]; then ok entrypoint_uses_the_artifacts_dir
else bad entrypoint_uses_the_artifacts_dir "$(find "$T/art" "$T/data2" 2>&1 | head -5)"; fi
printf 'mine' >"$T/data/corpora/default/tokens.u16"
run --data-dir "$T/data" >/dev/null
if [ "$(cat "$T/data/corpora/default/tokens.u16")" = mine ]; then ok entrypoint_keeps_a_corpus_already_there
else bad entrypoint_keeps_a_corpus_already_there "it was overwritten"; fi
