#!/usr/bin/env bash
# Writes a C file defining `const char SYMBOL[]` with the bytes of FILE (a text file).
set -euo pipefail
sym=$1 file=$2
echo "/* Generated from $file by scripts/embed_text.sh; do not edit. */"
echo "const char $sym[] ="
sed -e 's/\\/\\\\/g' -e 's/"/\\"/g' -e 's/^/    "/' -e 's/$/\\n"/' "$file"
echo ";"
