#!/bin/sh
# The image's entrypoint: puts the default corpus the image was built with (`make corpus`, at
# /usr/local/share/attnlab/corpus-default) where attnlabd looks for it, <dir>/corpora/default with
# <dir> the --artifacts directory if one is given, else the --data-dir, then runs attnlabd with the
# arguments. A corpus already there (a volume from an earlier start, or one mounted) is left as it is.
# Copied under a temporary name and renamed, so nodes sharing one artefact volume never see half a file.
set -eu
dir=/data
artifacts=""
prev=""
for a in "$@"; do
  case "$prev" in
    --data-dir) dir=$a ;;
    --artifacts) artifacts=$a ;;
  esac
  prev=$a
done
[ -n "$artifacts" ] && dir=$artifacts
src=${ATTNLAB_IMAGE_CORPUS:-/usr/local/share/attnlab/corpus-default}
dest=$dir/corpora/default
if [ -f "$src/tokens.u16" ] && [ ! -f "$dest/tokens.u16" ]; then
  mkdir -p "$dest"
  cp "$src/meta.json" "$dest/.meta.json.$$"
  mv "$dest/.meta.json.$$" "$dest/meta.json"
  cp "$src/tokens.u16" "$dest/.tokens.u16.$$"
  mv "$dest/.tokens.u16.$$" "$dest/tokens.u16"
  echo "attnlab: the image's default corpus copied to $dest" >&2
fi
exec attnlabd "$@"
