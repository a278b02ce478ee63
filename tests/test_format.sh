#!/usr/bin/env bash
# The tree keeps the house style of .clang-format: every tracked C file is what clang-format 14
# (Debian 12's) makes of it. `make format` rewrites the tree in place.
set -u
cd "$(dirname "$0")/.."
CF=$(command -v clang-format-14 || command -v clang-format || true)
if [ -z "$CF" ]; then echo "FAIL format: clang-format is not installed (scripts/deps.sh --test installs it)"; exit 0; fi
files=$(git ls-files '*.c' '*.h' 2>/dev/null || find server client tests bench -name '*.[ch]')
bad=()
for f in $files; do
  "$CF" --dry-run -Werror "$f" >/dev/null 2>&1 || bad+=("$f")
done
n=$(echo "$files" | wc -w)
if [ ${#bad[@]} -eq 0 ]; then echo "PASS format: $n C files conform to .clang-format"
else echo "FAIL format: ${#bad[@]} of $n files differ from .clang-format (make format fixes them): ${bad[*]}"; fi
