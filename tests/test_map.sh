#!/usr/bin/env bash
# The README's architecture map names every source file: each file of server/, client/, bench/ and
# scripts/ is named in the map (its file name, or a pattern such as `api_*.c` that covers it; a
# header goes with its .c, a module's contract), and the folders the map describes as a whole (the
# probes, the dashboard's modules, the migrations, the tests, the corpora) are named there, as
# `probes/` or in full. Prints PASS map, or FAIL map with the files it misses.
set -u
cd "$(dirname "$0")/.."
map=$(sed -n '/^## Architecture/,/^## REST API/p' README.md)
if [ -z "$map" ]; then echo "FAIL map: README.md has no '## Architecture' section"; exit 0; fi
# The patterns the map writes in backticks (`api_*.c`, `test_*.c`, `bench*.sh`), by their last part.
patterns=$(grep -o '`[^`]*\*[^`]*`' <<<"$map" | tr -d '`' | sed 's|.*/||' | sort -u)
named() { # file name: 0 when the map names it, alone or at the end of a path
  grep -qP "(?<![A-Za-z0-9_./-])([A-Za-z0-9_./-]*/)?\Q$1\E(?![A-Za-z0-9_])" <<<"$map" && return 0
  local p
  for p in $patterns; do
    # shellcheck disable=SC2053
    [[ $1 == $p ]] && return 0
  done
  return 1
}
missing=()
# Folders described as a whole: one row says what every file in them is.
wholes=(server/engine/probes/ static/js/ db/migrations/ tests/ corpora/)
for w in "${wholes[@]}"; do
  last=${w%/}
  grep -qF "\`${last##*/}/\`" <<<"$map" || grep -qF "\`$w\`" <<<"$map" || missing+=("$w")
done
files=$(git ls-files server client bench scripts 2>/dev/null; git ls-files --others --exclude-standard server client bench scripts 2>/dev/null)
n=0
for f in $(sort -u <<<"$files"); do
  case "$f" in server/engine/probes/*) continue ;; esac
  case "$f" in *.c | *.h | *.json | *.sh | *.py | *.js | *.mjs) ;; *) continue ;; esac
  n=$((n + 1))
  b=$(basename "$f")
  named "$b" && continue
  # a header is its module's contract: named with its .c
  [[ $b == *.h && -e ${f%.h}.c ]] && named "${b%.h}.c" && continue
  missing+=("$f")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "PASS map: the README's architecture map names all $n source files and ${#wholes[@]} folders"
else
  echo "FAIL map: the README's architecture map misses ${#missing[@]}: ${missing[*]}"
fi
