"""Point-for-point comparison of two results bundles (scripts/results.py run), for the tests that
run one experiment twice in different ways (whole, in sittings by time, in stages by replicate) and
require the same runs. Standard library only.

same_runs(whole, other, n, ignore) -> (w, o, fails): w and o map (variant, replicate) to each
bundle's run; fails lists, in words, every difference: another set of runs or not n of them, a seed
or a config (less the keys in `ignore`) that differs, a run that did not succeed, a series whose
steps or values differ."""
import gzip
import json
import os


def load(d, name, f):
    """The JSON in d/name/f, gzip-compressed (a results folder's bundle.json.gz, probes.json.gz)."""
    with gzip.open(os.path.join(d, name, f), "rt") as fh:
        return json.load(fh)


def same_runs(whole, other, n, ignore=()):
    key = lambda r: (r["variant"], r["replicate"])  # noqa: E731
    w, o = {key(r): r for r in whole["runs"]}, {key(r): r for r in other["runs"]}
    fails = []
    if sorted(w) != sorted(o) or len(o) != n:
        fails.append(f"runs {sorted(o)} against {sorted(w)} whole, want {n}")
    for k in sorted(set(w) & set(o)):
        a, b = w[k], o[k]
        if a["seed"] != b["seed"]:
            fails.append(f"{k}: seed {b['seed']}, {a['seed']} whole")
        ca = {x: v for x, v in a["config"].items() if x not in ignore}
        cb = {x: v for x, v in b["config"].items() if x not in ignore}
        if ca != cb:
            fails.append(f"{k}: config differs: {sorted(set(map(str, ca.items())) ^ set(map(str, cb.items())))}")
        if b["status"] != "succeeded":
            fails.append(f"{k}: {b['status']}")
        for series in sorted(set(a["series"]) | set(b["series"])):
            pa, pb = a["series"].get(series, {}), b["series"].get(series, {})
            if (pa.get("steps"), pa.get("values")) != (pb.get("steps"), pb.get("values")):
                fails.append(f"{k}: series {series} differs")
    return w, o, fails
