#!/usr/bin/env bash
# `make corpus`: builds the default corpus into $DATA_DIR/corpora/default (DATA_DIR defaults to var):
# tokens.u16 (little-endian uint16 GPT-2 ids, <|endoftext|> after each document) and meta.json.
# $1 is the release build directory holding attnlabd (or set ATTNLABD to the binary).
# Text extraction is Python (standard library), tokenizing is `attnlabd tokenize --docs`.
# The same bytes come out of every build on the same Debian release: sorted file lists,
# fixed caps, fixed seeds, fixed 80-column man page rendering, no dates.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-build/release}
ATTNLABD=${ATTNLABD:-$OUT/attnlabd}
DATA_DIR=${DATA_DIR:-var}
DEST="$DATA_DIR/corpora/default"
WORK="$DATA_DIR/corpora/.default-work"
[ -x "${ATTNLABD%% *}" ] || { echo "build_corpus: $ATTNLABD not found (make MODE=release build)" >&2; exit 1; }
export LC_ALL=C.UTF-8 TZ=UTC
rm -rf "$WORK"
mkdir -p "$WORK" "$DEST"
python3 scripts/corpus/extract.py "$WORK"
for docs in "$WORK"/*.docs; do
  name=$(basename "$docs" .docs)
  $ATTNLABD tokenize --docs --u16 "$WORK/$name.u16" --doc-counts "$WORK/$name.counts" <"$docs" >/dev/null
done
python3 scripts/corpus/assemble.py "$WORK" "$DEST"
rm -rf "$WORK"
echo "corpus: $DEST/tokens.u16 ($(stat -c %s "$DEST/tokens.u16") bytes), $DEST/meta.json"
