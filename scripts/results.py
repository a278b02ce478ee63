#!/usr/bin/env python3
"""The published results: each folder of results/ holds one experiment the README quotes, kept so
that every quoted figure can be regenerated from data in the tree.

    scripts/results.py run NAME [--attnlabd PATH]    runs results/NAME/request.json on a fresh server
                                                     and writes its bundle, probe answers and provenance
    scripts/results.py run NAME --minutes M          one sitting of an experiment longer than a session
    scripts/results.py status NAME                   where such an experiment stands, and the time left
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
from attnlab.client import ENDED, ApiError  # noqa: E402

RESULTS = os.path.join(ROOT, "results")


class Server:
    """attnlabd on a free loopback port, for the length of a with: on a temporary data directory, or
    on `keep` (a sitting's, created the first time and left as the server leaves it)."""

    def __init__(self, binary, flags=(), corpora=(), corpora_from=None, keep=None):
        self.binary, self.flags = binary, list(flags)
        self.corpora, self.corpora_from, self.keep = list(corpora), corpora_from, keep

    def __enter__(self):
        if self.keep:
            os.makedirs(self.keep, exist_ok=True)
            self.dir, self.path = None, self.keep
        else:
            self.dir = tempfile.TemporaryDirectory(prefix="attnlab-results-")
            self.path = self.dir.name
        for name in self.corpora:  # a built-in corpus (the default one) that the server finds at start
            src = os.path.join(self.corpora_from, "corpora", name)
            if not os.path.isfile(os.path.join(src, "meta.json")):
                raise SystemExit(f"corpus {name} not found in {src} (make corpus)")
            dst = os.path.join(self.path, "corpora", name)
            if not os.path.isdir(dst):
                shutil.copytree(src, dst)
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        self.log = open(os.path.join(self.path, "server.log"), "a")
        self.proc = subprocess.Popen([self.binary, "--port", str(port), "--data-dir", self.path,
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
        """Stops the server as SIGTERM does: runs still training save a checkpoint and become
        interrupted, queued ones stay queued (a kept directory's next server resumes both)."""
        self.proc.terminate()
        try:
            self.proc.wait(timeout=600)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.log.close()
        if self.dir:
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


def save_json(path, obj):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(obj, f, indent=1)
        f.write("\n")
    os.replace(tmp, path)


def collect(c, req, exp_id, e, ids, reps, probes):
    """The request's probes on the replicates `reps` (each on its variant's run of that replicate),
    appended to `probes`, then the experiment's bundle as the request keeps it."""
    for p in req.get("probes", []):
        if p.get("replicate", 0) not in reps:
            continue  # a replicate of an earlier stage: its answer is kept already
        rid = next(r["id"] for r in e["runs"]
                   if r["variant"] == p["variant"] and r.get("replicate", 0) == p.get("replicate", 0))
        t1 = time.time()
        ans = c.probe(p["kind"], run_id=rid, **p.get("params", {}))
        probes.append({"request": p, "run_id": rid, "wall_s": round(time.time() - t1, 1), "answer": ans})
    b = req.get("bundle", {})
    return c.bundle(exp_id, keys=b.get("keys"), max_points=b.get("max_points"))


def write_results(out, bundle, probes):
    os.makedirs(out, exist_ok=True)
    with gzip.open(os.path.join(out, "bundle.json.gz"), "wt", compresslevel=9) as f:
        f.write(json.dumps(bundle, separators=(",", ":")))
    if probes:
        with gzip.open(os.path.join(out, "probes.json.gz"), "wt", compresslevel=9) as f:
            f.write(json.dumps(probes, separators=(",", ":")))


def sitting_record(health, wall, load_before, load_after):
    """What provenance.json says of one sitting (the commit is added from the runs' provenance)."""
    return {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "cpu": cpu_model(), "kernel": health.get("kernel"), "experiment_wall_s": round(wall, 1),
            "load_before": [round(x, 2) for x in load_before], "load_after": [round(x, 2) for x in load_after]}


def run(args):
    req = load_request(args.results_dir, args.name)
    out = os.path.join(args.results_dir, args.name)
    if args.minutes is not None:
        return run_sitting(args, req, out)
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
        bundle = collect(c, req, exp_id, e, ids, reps, probes)
    write_results(out, bundle, probes)
    rec = sitting_record(health, wall, load_before, load_after)
    sitting = {"date": rec.pop("date"), "commit": built_from(bundle, ids), **rec}
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
    save_json(os.path.join(out, "provenance.json"), prov)
    print(json.dumps({k: prov[k] for k in ("name", "experiment_wall_s", "runs", "load_before", "load_after")}))


FINAL = ("succeeded", "failed")


def wait_sitting(c, exp_id, name, budget_s, t0, start):
    """Waits until every run of the experiment has succeeded or failed (True), or until budget_s
    seconds have passed since t0 and some run has trained a step past `start` (its step per run id
    when the sitting began), so that every sitting moves the experiment on (False). Returns (the
    experiment, done)."""
    poll, said, said_at = (5.0 if budget_s >= 60 else 0.2), None, 0.0
    while True:
        e = c.experiment(exp_id)
        runs = e.get("runs", [])
        ended = sum(r["status"] in FINAL for r in runs)
        now = time.time()
        if ended != said or now - said_at >= 300:  # each run that ends, and the steps every 5 minutes
            print(f"{name}: {ended}/{len(runs)} runs ended ({now - t0:.0f} s)", ", ".join(
                f"{r['variant']}#{r.get('replicate', 0)} {r['status']} at step {r['step']}" for r in runs
                if r["status"] not in FINAL), flush=True)
            said, said_at = ended, now
        if runs and ended == len(runs):
            return e, True
        if now - t0 >= budget_s and any(r["step"] > start.get(r["id"], 0) for r in runs):
            return e, False
        time.sleep(poll)


def stop_sitting(c, exp_id, e):
    """Cancels the runs still queued or training (a training run saves a checkpoint at the step it
    reached) and waits until none is; returns (the experiment, whether every run has ended after all)."""
    for r in e["runs"]:
        if r["status"] in ("queued", "running"):
            try:
                c.cancel(r["id"])
            except ApiError as err:  # it ended meanwhile
                if err.status != 409:
                    raise
    while True:
        e = c.experiment(exp_id)
        if not any(r["status"] in ("queued", "running") for r in e["runs"]):
            return e, all(r["status"] in FINAL for r in e["runs"])
        time.sleep(0.2)


# The parts of a request.json read only once every run has ended (the bundle's selection, the
# probes, the description): they may change between sittings; the rest may not.
AFTER_TRAINING = ("bundle", "probes", "description")


def trained_part(req):
    return {k: v for k, v in req.items() if k not in AFTER_TRAINING}


def run_sitting(args, req, out):
    """One sitting of about args.minutes minutes of an experiment longer than a working session
    (results/README.md, "Sittings"): the server works on a data directory kept between sittings
    (args.work_dir); the first sitting creates the experiment, each later one resumes the runs the
    previous one's stop checkpointed. The sitting ends when every run has ended, or after the
    minutes once a run has trained a step in it; the runs still queued or training are then
    cancelled (a training run saves a checkpoint at the step it reached). The sitting that sees the last run end runs the probes and writes the results (with
    every sitting in provenance.json) and removes the directory."""
    if req.get("stage_replicates"):
        raise SystemExit(f"{args.name}: a request with stage_replicates is split by replicates, not into sittings"
                         " by time (drop --minutes)")
    work = args.work_dir or os.path.join(ROOT, "var", "results-work", args.name)
    state_path = os.path.join(work, "sittings.json")
    state = None
    if os.path.exists(state_path):
        with open(state_path) as f:
            state = json.load(f)
        if trained_part(state["request"]) != trained_part(req):
            raise SystemExit(f"{args.name}: request.json changed since the first sitting in {work}, in what"
                             " the runs train (remove that directory to start again)")
        if state["request"] != req:  # what is read after training: the last sitting takes the new one
            print(f"{args.name}: the request's {', '.join(k for k in AFTER_TRAINING if state['request'].get(k) != req.get(k))}"
                  " changed since the first sitting: the last sitting uses the new one", flush=True)
            state["request"] = req
    elif os.path.isdir(work) and os.listdir(work):
        raise SystemExit(f"{work} holds no sittings.json: not a sitting's directory (remove it to start again)")
    with Server(args.attnlabd, req.get("server", []), req.get("data_corpora", []), args.data_dir,
                keep=os.path.join(work, "data")) as srv:
        c = srv.client
        health = c.health()
        path = (health.get("kernel") or {}).get("path")
        first = (state["sittings"][0].get("kernel") or {}).get("path") if state and state["sittings"] else path
        if first != path:
            raise SystemExit(f"{args.name}: the first sitting trained on kernel path {first}, this server's is {path}:"
                             " the runs would not continue bit-identically (sit on a machine with the first one's path)")
        load_before = os.getloadavg()
        t0 = time.time()
        if state is None:
            upload_corpora(c, req)
            exp = c.create_experiment(**req["experiment"])
            state = {"experiment": exp["experiment"]["id"], "request": req, "sittings": []}
            save_json(state_path, state)
        e = c.experiment(state["experiment"])
        start = {r["id"]: r["step"] for r in e["runs"]}
        for r in e["runs"]:
            if r["status"] in ("interrupted", "cancelled"):
                c.resume(r["id"])
        e, done = wait_sitting(c, state["experiment"], args.name, args.minutes * 60, t0, start)
        if not done:
            e, done = stop_sitting(c, state["experiment"], e)
        wall = time.time() - t0
        load_after = os.getloadavg()
        sitting = sitting_record(health, wall, load_before, load_after)
        sitting["steps"] = sum(r["step"] - start.get(r["id"], 0) for r in e["runs"])
        sitting["runs_ended"] = sum(r["status"] in FINAL for r in e["runs"])
        sitting["left_at"] = {f"{r['variant']}#{r.get('replicate', 0)}": r["step"] for r in e["runs"]
                              if r["status"] not in FINAL and r["step"] > 0}  # each one's checkpoint
        if done:
            bad = [(r["id"], r["status"]) for r in e["runs"] if r["status"] != "succeeded"]
            if bad:
                raise SystemExit(f"{len(bad)} runs did not succeed: {bad} (their server is in {work})")
            reps = {r.get("replicate", 0) for r in e["runs"]}
            probes = []
            bundle = collect(c, req, state["experiment"], e, {r["id"] for r in e["runs"]}, reps, probes)
    state["sittings"].append(sitting)
    if not done:
        save_json(state_path, state)
        print(f"{args.name}: sitting {len(state['sittings'])} ended after {wall / 60:.1f} min,"
              f" {sitting['runs_ended']}/{len(e['runs'])} runs ended; run it again to continue", flush=True)
        return
    write_results(out, bundle, probes)
    commit = built_from(bundle)
    first = state["sittings"][0]
    prov = {"name": args.name, "attnlab_version": health.get("version"), "cores": os.cpu_count(),
            "date": first["date"], "commit": commit, "cpu": first["cpu"], "kernel": first["kernel"],
            "runs": len(bundle.get("runs", [])),
            "experiment_wall_s": round(sum(st["experiment_wall_s"] for st in state["sittings"]), 1),
            "load_before": first["load_before"], "load_after": sitting["load_after"], "sittings": state["sittings"]}
    save_json(os.path.join(out, "provenance.json"), prov)
    shutil.rmtree(work)
    print(json.dumps({k: prov[k] for k in ("name", "experiment_wall_s", "runs", "load_before", "load_after")}))


def planned_runs(req):
    """(runs, steps per run) that the request's experiment trains: its variants and replicates, or
    its preset's (server/api/presets.json) where it names one, and its steps after the overrides."""
    exp = req["experiment"]
    preset = {}
    if exp.get("preset"):
        with open(os.path.join(ROOT, "server", "api", "presets.json")) as f:
            preset = {p["name"]: p for p in json.load(f)["presets"]}.get(exp["preset"], {})
    variants = exp.get("variants") or preset.get("variants") or [{}]
    reps = exp.get("replicates") or preset.get("replicates") or 1
    steps = ((exp.get("overrides") or {}).get("steps") or (exp.get("base") or {}).get("steps")
             or (preset.get("base") or {}).get("steps") or 0)
    return len(variants) * reps, steps


def status(args):
    """One line on an experiment run in sittings: the sittings so far, the steps trained against the
    steps planned, the runs ended, where each unfinished one was left, and the time left at the rate
    of the sittings so far (results/README.md, "Sittings")."""
    work = args.work_dir or os.path.join(ROOT, "var", "results-work", args.name)
    path = os.path.join(work, "sittings.json")
    if not os.path.exists(path):
        done = os.path.exists(os.path.join(args.results_dir, args.name, "provenance.json"))
        print(f"{args.name}: no sittings in {work}" + (" (its results are in results/)" if done else ""))
        return
    with open(path) as f:
        state = json.load(f)
    sits = state["sittings"]
    runs, steps = planned_runs(state["request"])
    trained = sum(st.get("steps", 0) for st in sits)
    wall = sum(st["experiment_wall_s"] for st in sits)
    last = sits[-1] if sits else {}
    kernel = ((sits[0] if sits else {}).get("kernel") or {}).get("path", "?")
    line = (f"{args.name}: {len(sits)} sitting{'s' if len(sits) != 1 else ''}, {wall / 60:.1f} min, {trained:,} of"
            f" {runs * steps:,} steps, {last.get('runs_ended', 0)} of {runs} runs ended")
    if last.get("left_at"):
        line += "; left at " + ", ".join(f"{k} step {v:,}" for k, v in sorted(last["left_at"].items()))
    if trained and runs * steps > trained:
        rate = wall / trained
        line += f"; at {rate:.2f} s a step about {(runs * steps - trained) * rate / 3600:.1f} h more"
    print(line + f" (kernel path {kernel}: every sitting on it)")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("name")
    r.add_argument("--attnlabd", default=os.path.join(ROOT, "build", "release", "attnlabd"))
    r.add_argument("--data-dir", default=os.path.join(ROOT, "var"), help="where data_corpora are (default: var)")
    r.add_argument("--results-dir", default=RESULTS, help="where NAME's folder is (default: results)")
    r.add_argument("--minutes", type=float, help="one sitting of about this many minutes of an experiment longer"
                   " than a session: run it again until it says it is done (results/README.md, Sittings)")
    r.add_argument("--work-dir", help="the sittings' kept data directory (default: var/results-work/NAME)")
    st = sub.add_parser("status", help="where an experiment run in sittings stands")
    st.add_argument("name")
    st.add_argument("--results-dir", default=RESULTS)
    st.add_argument("--work-dir", help="the sittings' kept data directory (default: var/results-work/NAME)")
    t = sub.add_parser("tables")
    t.add_argument("readme", nargs="?", default=os.path.join(ROOT, "README.md"))
    t.add_argument("--attnlabd", default=os.path.join(ROOT, "build", "release", "attnlabd"))
    t.add_argument("--write", action="store_true")
    args = ap.parse_args()
    if args.cmd == "run":
        run(args)
    elif args.cmd == "status":
        status(args)
    else:
        import results_tables  # noqa: E402  (scripts/results_tables.py)
        sys.exit(results_tables.main(args, Server, RESULTS))


if __name__ == "__main__":
    main()
