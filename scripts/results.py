#!/usr/bin/env python3
"""The published results: each folder of results/ holds one experiment the README quotes, kept so
that every quoted figure can be regenerated from data in the tree.

    scripts/results.py run NAME [--attnlabd PATH]    runs results/NAME/request.json on a fresh server
                                                     and writes its bundle, probe answers and provenance
    scripts/results.py tables [--attnlabd PATH] [--write] [README]
                                                     imports every results/*/bundle.json.gz into a fresh
                                                     server, computes the figures through the service's
                                                     own routes (stats, head-spread, accuracy) and checks
                                                     (or with --write rewrites) every README block between
                                                     <!-- results:NAME/TABLE --> and <!-- /results -->

A request.json: {"server": [flags of attnlabd], "corpora": [{"name", "encoding", "file"}],
"data_corpora": [names of built-in corpora copied from --data-dir, e.g. "default" from `make corpus`],
"experiment": the body of POST /api/experiments, "bundle": {"keys", "max_points"},
"probes": [{"kind", "variant", "replicate", "params"}], "stage_replicates": n (optional: n replicates
per invocation, each continuing the bundle kept so far; see results/README.md)}. Standard library and
the in-tree Python client only; the server is the release build (make build)."""
import argparse
import datetime
import gzip
import json
import os
import platform
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "client", "python"))
from attnlab import Client  # noqa: E402
from attnlab.client import ENDED  # noqa: E402

RESULTS = os.path.join(ROOT, "results")


class Server:
    """attnlabd on a free loopback port and a temporary data directory, for the length of a with."""

    def __init__(self, binary, flags=(), corpora=(), corpora_from=None):
        self.binary, self.flags = binary, list(flags)
        self.corpora, self.corpora_from = list(corpora), corpora_from

    def __enter__(self):
        self.dir = tempfile.TemporaryDirectory(prefix="attnlab-results-")
        for name in self.corpora:  # a built-in corpus (the default one) that the server finds at start
            src = os.path.join(self.corpora_from, "corpora", name)
            if not os.path.isfile(os.path.join(src, "meta.json")):
                raise SystemExit(f"corpus {name} not found in {src} (make corpus)")
            shutil.copytree(src, os.path.join(self.dir.name, "corpora", name))
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        self.log = open(os.path.join(self.dir.name, "server.log"), "w")
        self.proc = subprocess.Popen([self.binary, "--port", str(port), "--data-dir", self.dir.name,
                                      "--static-dir", os.path.join(ROOT, "static"), "--log-level", "warn"]
                                     + self.flags, stdout=self.log, stderr=subprocess.STDOUT)
        self.client = Client(f"http://127.0.0.1:{port}", timeout=600)
        for _ in range(600):  # its start, however long it takes: until it answers or exits
            if self.proc.poll() is not None:
                raise SystemExit(f"attnlabd exited at start: {open(self.log.name).read()[-2000:]}")
            try:
                self.client.health()
                return self
            except OSError:
                time.sleep(0.1)
        raise SystemExit("attnlabd did not answer")

    def __exit__(self, *exc):
        self.proc.terminate()
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.log.close()
        self.dir.cleanup()


def load_request(results_dir, name):
    with open(os.path.join(results_dir, name, "request.json")) as f:
        return json.load(f)


def upload_corpora(c, req):
    for corp in req.get("corpora", []):
        with open(os.path.join(ROOT, corp["file"]), "rb") as f:
            c.upload_corpus(corp["name"], f.read(), encoding=corp.get("encoding"))


def git_commit():
    try:
        out = subprocess.run(["git", "-C", ROOT, "rev-parse", "HEAD"], capture_output=True, text=True, check=True)
        dirty = subprocess.run(["git", "-C", ROOT, "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True).stdout.strip()
        return out.stdout.strip() + ("-dirty" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return None


def built_from(bundle, ids=None):
    """The commit the server binary was built from, as its runs (those of `ids` when given) recorded
    it (the checkout may have moved on while a long experiment ran); the checkout's own when no run
    says."""
    for r in bundle.get("runs", []):
        if ids is not None and r.get("id") not in ids:
            continue
        c = (r.get("provenance") or {}).get("commit")
        if c:
            return c
    return git_commit()


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None


def wait_runs(c, exp_id, name, ids, t0):
    """Waits until every run of the experiment has ended (those imported had already), printing each
    change of the count of the new runs `ids` that have."""
    last = [None]

    def progress(e):
        mine = [r for r in e.get("runs", []) if r["id"] in ids]
        line = f"{name}: {sum(r['status'] in ENDED for r in mine)}/{len(mine)} runs ended"
        if line != last[0]:
            print(line, f"({time.time() - t0:.0f} s)", flush=True)
            last[0] = line

    return c.wait_experiment(exp_id, progress=progress, poll=5.0)


def read_gz(path, default):
    if not os.path.exists(path):
        return default
    with gzip.open(path, "rt") as f:
        return json.load(f)


def start_runs(c, req, out):
    """The runs this invocation makes: the whole experiment; or, for a request with "stage_replicates"
    (an experiment too long for one sitting), the next stage_replicates replicates of every variant
    on top of the bundle already kept (imported as it was, the runs added with POST
    /api/experiments/{id}/runs: seeds and data orders as one experiment would give them). Returns
    (experiment id, ids of the new runs, their replicates) or exits when nothing is left to run."""
    want = req["experiment"].get("replicates")
    stage = req.get("stage_replicates")
    kept = os.path.join(out, "bundle.json.gz")
    if stage and os.path.exists(kept):
        with gzip.open(kept, "rb") as f:
            raw = f.read()
        imp = c.request("POST", "/api/experiments/import", raw=raw, content_type="application/json")
        exp_id = imp["experiment"]["id"]
        had = imp["experiment"]["replicates"]
        more = min(stage, want - had)
        if more < 1:
            raise SystemExit(f"{req['experiment'].get('name')}: all {want} replicates are in the bundle already")
        added = c.add_runs(exp_id, replicates=more)
        return exp_id, {r["id"] for r in added["runs"]}, set(range(had, had + more))
    body = dict(req["experiment"])
    if stage:
        body["replicates"] = min(stage, want)
    exp = c.create_experiment(**body)
    return exp["experiment"]["id"], {r["id"] for r in exp["runs"]}, set(range(body.get("replicates") or 1))


def run(args):
    req = load_request(args.results_dir, args.name)
    out = os.path.join(args.results_dir, args.name)
    with Server(args.attnlabd, req.get("server", []), req.get("data_corpora", []), args.data_dir) as srv:
        c = srv.client
        health = c.health()
        upload_corpora(c, req)
        load_before = os.getloadavg()
        t0 = time.time()
        exp_id, ids, reps = start_runs(c, req, out)
        e = wait_runs(c, exp_id, args.name, ids, t0)
        wall = time.time() - t0
        load_after = os.getloadavg()
        bad = [r for r in e["runs"] if r["id"] in ids and r["status"] != "succeeded"]
        if bad:
            raise SystemExit(f"{len(bad)} runs did not succeed: {[(r['id'], r['status']) for r in bad]}")
        probes = read_gz(os.path.join(out, "probes.json.gz"), []) if req.get("stage_replicates") else []
        for p in req.get("probes", []):
            if p.get("replicate", 0) not in reps:
                continue  # a replicate of an earlier stage: its answer is kept already
            rid = next(r["id"] for r in e["runs"]
                       if r["variant"] == p["variant"] and r.get("replicate", 0) == p.get("replicate", 0))
            t1 = time.time()
            ans = c.probe(p["kind"], run_id=rid, **p.get("params", {}))
            probes.append({"request": p, "run_id": rid, "wall_s": round(time.time() - t1, 1), "answer": ans})
        b = req.get("bundle", {})
        bundle = c.bundle(exp_id, keys=b.get("keys"), max_points=b.get("max_points"))
    os.makedirs(out, exist_ok=True)
    with gzip.open(os.path.join(out, "bundle.json.gz"), "wt", compresslevel=9) as f:
        f.write(json.dumps(bundle, separators=(",", ":")))
    if probes:
        with gzip.open(os.path.join(out, "probes.json.gz"), "wt", compresslevel=9) as f:
            f.write(json.dumps(probes, separators=(",", ":")))
    sitting = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
               "commit": built_from(bundle, ids), "cpu": cpu_model(), "kernel": health.get("kernel"),
               "experiment_wall_s": round(wall, 1), "load_before": [round(x, 2) for x in load_before],
               "load_after": [round(x, 2) for x in load_after]}
    prov = {"name": args.name, "attnlab_version": health.get("version"), "cores": os.cpu_count(), **sitting,
            "runs": len(bundle.get("runs", []))}
    if req.get("stage_replicates"):  # one entry per sitting; the first sitting's fields also at the top
        path = os.path.join(out, "provenance.json")
        stages = []
        if min(reps) > 0 and os.path.exists(path):
            with open(path) as f:
                old = json.load(f)
            stages = old.get("stages", [])
            prov = {**old, "runs": prov["runs"],
                    "experiment_wall_s": round(sum(st["experiment_wall_s"] for st in stages) + wall, 1)}
        prov["stages"] = stages + [{"replicates": sorted(reps), "runs": len(ids), **sitting}]
    with open(os.path.join(out, "provenance.json"), "w") as f:
        json.dump(prov, f, indent=1)
        f.write("\n")
    print(json.dumps({k: prov[k] for k in ("name", "experiment_wall_s", "runs", "load_before", "load_after")}))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("name")
    r.add_argument("--attnlabd", default=os.path.join(ROOT, "build", "release", "attnlabd"))
    r.add_argument("--data-dir", default=os.path.join(ROOT, "var"), help="where data_corpora are (default: var)")
    r.add_argument("--results-dir", default=RESULTS, help="where NAME's folder is (default: results)")
    t = sub.add_parser("tables")
    t.add_argument("readme", nargs="?", default=os.path.join(ROOT, "README.md"))
    t.add_argument("--attnlabd", default=os.path.join(ROOT, "build", "release", "attnlabd"))
    t.add_argument("--write", action="store_true")
    args = ap.parse_args()
    if args.cmd == "run":
        run(args)
    else:
        import results_tables  # noqa: E402  (scripts/results_tables.py)
        sys.exit(results_tables.main(args, Server, RESULTS))


if __name__ == "__main__":
    main()
