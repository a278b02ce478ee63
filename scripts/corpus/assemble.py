#!/usr/bin/env python3
"""Assembles the default corpus from the per-source token files that build_corpus.sh made.

usage: assemble.py WORKDIR OUTDIR
Reads WORKDIR/<name>.{u16,counts,names,docs} for every source in sources.py (the .u16 holds
each document's GPT-2 tokens followed by <|endoftext|>; .counts the token count per document),
takes each whole document, in extraction order, that still fits the source's cap, shuffles the chosen
documents of all sources together with a fixed seed (so the validation split, the last 1% of
windows, is a mix of every source), and writes OUTDIR/tokens.u16 and OUTDIR/meta.json."""
import hashlib
import json
import os
import random
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sources import SOURCES  # noqa: E402

SEQ_LEN = 128
SHUFFLE_SEED = 20240617


def main():
    work, out = sys.argv[1], sys.argv[2]
    chosen = []  # (source index, token bytes of the document)
    rows = []
    for si, src in enumerate(SOURCES):
        name = src["name"]
        with open(os.path.join(work, name + ".counts")) as f:
            counts = [int(x) for x in f.read().split()]
        with open(os.path.join(work, name + ".u16"), "rb") as f:
            toks = f.read()
        with open(os.path.join(work, name + ".docs"), "rb") as f:
            doc_bytes = [len(d) for d in f.read().split(b"\0")[:-1]]
        if len(counts) != len(doc_bytes) or sum(counts) * 2 != len(toks):
            sys.exit(f"assemble: {name}: counts, documents and tokens disagree")
        off, taken, ntok, nbytes = 0, 0, 0, 0
        for c, b in zip(counts, doc_bytes):
            if ntok + c > src["cap_tokens"]:
                continue  # too big for what is left; a later, smaller document may fit
            chosen.append((si, toks[2 * off:2 * (off + c)]))
            off += c
            ntok += c
            nbytes += b
            taken += 1
        rows.append({"name": name, "kind": src["kind"], "origin": src["origin"], "license": src["license"],
                     "documents": taken, "bytes": nbytes, "tokens": ntok, "cap_tokens": src["cap_tokens"]})
    random.Random(SHUFFLE_SEED).shuffle(chosen)
    os.makedirs(out, exist_ok=True)
    h = hashlib.sha256()
    tmp = os.path.join(out, "tokens.u16.tmp")
    with open(tmp, "wb") as f:
        for _, b in chosen:
            f.write(b)
            h.update(b)
    os.replace(tmp, os.path.join(out, "tokens.u16"))
    total = sum(r["tokens"] for r in rows)
    for r in rows:
        r["share"] = round(r["tokens"] / total, 4)
    code_doc = sum(r["tokens"] for r in rows if r["kind"] in ("code", "documentation"))
    meta = {
        "name": "default",
        "description": "MiniPile stand-in built from what Debian and npm carry: books, speeches, email, "
                       "encyclopedic text, man pages and code; documents separated by <|endoftext|> and "
                       f"shuffled together (seed {SHUFFLE_SEED})",
        "source": "; ".join(f"{r['name']} ({r['kind']}): {r['origin']}" for r in rows),
        "tokenizer": "gpt2",
        "vocab_size": 50257,
        "documents": len(chosen),
        "bytes": sum(r["bytes"] for r in rows),
        "tokens": total,
        "seq_len": SEQ_LEN,
        "windows": (total - 1) // SEQ_LEN,
        "code_and_docs_share": round(code_doc / total, 4),
        "tokens_sha256": h.hexdigest(),
        "file": "tokens.u16",
        "sources": rows,
    }
    with open(os.path.join(out, "meta.json"), "w") as f:
        json.dump(meta, f, indent=2)
        f.write("\n")
    print(f"{'source':<14} {'kind':<13} {'docs':>6} {'MB':>7} {'tokens':>10} {'share':>6}")
    for r in rows:
        print(f"{r['name']:<14} {r['kind']:<13} {r['documents']:6d} {r['bytes'] / 1e6:7.2f} {r['tokens']:10d} "
              f"{100 * r['share']:5.1f}%")
    print(f"{'total':<14} {'':<13} {meta['documents']:6d} {meta['bytes'] / 1e6:7.2f} {total:10d}  "
          f"windows@128: {meta['windows']}  man+code: {100 * meta['code_and_docs_share']:.1f}%")


if __name__ == "__main__":
    main()
