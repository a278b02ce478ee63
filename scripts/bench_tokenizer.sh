#!/usr/bin/env bash
# Tokenizer throughput over a sample of the default corpus mix, next to the npm reference
# encoder on the same documents in the same run; the ids must be identical.
# $1: release build directory (holding bench/bench_tok). SAMPLE_MB: sample size (default 8).
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-build/release}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
python3 scripts/corpus/extract.py "$tmp" 2>/dev/null
# the mix: documents of every source in turn, until SAMPLE_MB
python3 - "$tmp" "${SAMPLE_MB:-8}" <<'PY'
import glob, os, sys
tmp, mb = sys.argv[1], float(sys.argv[2])
srcs = [open(p, "rb").read().split(b"\0")[:-1] for p in sorted(glob.glob(os.path.join(tmp, "*.docs")))]
out, size, i = [], 0, 0
while size < mb * 1e6 and any(i < len(s) for s in srcs):
    for s in srcs:
        if i < len(s):
            out.append(s[i]); size += len(s[i])
    i += 1
open(os.path.join(tmp, "mix"), "wb").write(b"".join(d + b"\0" for d in out))
print(f"sample: {len(out)} documents, {size / 1e6:.1f} MB, every source in turn")
PY
"$OUT/bench/bench_tok" "$tmp/mix" "$tmp/ours.u16"
node scripts/corpus/ref_encode.js "$tmp/mix" "$tmp/ref.u16"
if cmp -s "$tmp/ours.u16" "$tmp/ref.u16"; then
  echo "ids: identical to the reference ($(( $(stat -c %s "$tmp/ours.u16") / 2 )) tokens)"
else
  echo "ids: DIFFER from the reference: $(cmp "$tmp/ours.u16" "$tmp/ref.u16" | head -1)"
  exit 1
fi
