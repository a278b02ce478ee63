#!/usr/bin/python3
"""The Python client (client/python/attnlab) against a real attnlabd, used from the tree.

Starts a fresh attnlabd, then drives it only through attnlab.Client: health, a byte corpus
uploaded and waited for, a run created and followed to its end with progress, its metrics (as
NumPy arrays when NumPy is there, a DataFrame when pandas is), a two-variant experiment with its
statistics and bundle (JSON and CSV, checked against the raw API's bytes), a model probe on a
trained run, refusals as ApiError with the server's code and field, runs logged from Python as
external runs (200,000 points while the server trains a run of its own, every one counted; a block
that raises marks its run failed with the exception), and a second server with a token (a mutation
without it is a 401, with it succeeds). Prints PASS name / FAIL name: why.
"""
import json
import os
import sys
import tempfile
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from attnlabd_server import ROOT, Server  # noqa: E402

sys.path.insert(0, os.path.join(ROOT, "client", "python"))
import attnlab  # noqa: E402

TINY = {"corpus": "pybytes", "n_layer": 1, "n_head": 2, "d_model": 16, "seq_len": 16, "batch": 4, "steps": 30,
        "eval_every": 10, "checkpoint_every": 0}
failures = 0


def case(name):
    def wrap(fn):
        global failures
        try:
            fn()
            print(f"PASS {name}", flush=True)
        except Exception as e:  # every failure names its case and goes on
            failures += 1
            print(f"FAIL {name}: {type(e).__name__}: {e}", flush=True)
        return fn
    return wrap


def check(cond, what):
    if not cond:
        raise AssertionError(what)


def raw_get(url):
    with urllib.request.urlopen(url, timeout=60) as r:
        return r.read()


def main():
    tmp = tempfile.mkdtemp(prefix="attnlab-pyclient-")
    os.makedirs(os.path.join(tmp, "a"))
    srv = Server(os.path.join(tmp, "a"))
    c = attnlab.Client(srv.url)
    state = {}

    @case("client_health")
    def _():
        h = c.health()
        check(h["status"] == "ok", f"health {h}")

    @case("client_upload_corpus_waits_until_ready")
    def _():
        with open(os.path.join(ROOT, "corpora/small/text.txt"), "rb") as f:
            text = f.read()[:200000]
        corp = c.upload_corpus("pybytes", text, encoding="bytes")
        check(corp["status"] == "ready" and corp["tokens"] > 1000, f"corpus {corp}")
        check(any(x["name"] == "pybytes" for x in c.corpora()), "the corpus is not listed")

    @case("client_run_create_wait_progress_metrics")
    def _():
        seen = []
        run = c.create_run(TINY, name="py-run", tags=["py"])
        end = c.wait(run["id"], progress=seen.append)
        check(end["status"] == "succeeded" and end["step"] == TINY["steps"], f"ended {end['status']} at {end['step']}")
        check(seen and seen[-1]["status"] == "succeeded", "progress did not see the end")
        steps = [s["step"] for s in seen]
        check(steps == sorted(steps), f"progress went backwards: {steps}")
        m = c.metrics(run["id"], keys=["loss", "val_loss"])
        check(set(m) == {"loss", "val_loss"}, f"keys {list(m)}")
        check(len(m["loss"]["steps"]) == TINY["steps"] and int(m["loss"]["steps"][-1]) == TINY["steps"], "loss steps")
        check(float(m["val_loss"]["values"][-1]) == end["last"]["val_loss"]["last"], "val_loss differs from the run's")
        api = json.loads(raw_get(f"{srv.url}/api/runs/{run['id']}/metrics?keys=loss"))
        check([float(v) for v in m["loss"]["values"]] == api["series"]["loss"]["values"], "values differ from the API's")
        check([r["id"] for r in c.runs(tag="py")] == [run["id"]], "tag filter")
        check([r["id"] for r in c.runs(config_d_model=16)] == [run["id"]], "config filter")
        state["run"] = run["id"]

    @case("client_metrics_as_numpy_and_pandas_when_present")
    def _():
        try:
            import numpy as np
        except ImportError:
            print("# numpy not installed: the lists path only", flush=True)
            return
        m = c.metrics(state["run"], keys=["loss"])
        check(isinstance(m["loss"]["values"], np.ndarray) and m["loss"]["values"].dtype == np.float64, "not an array")
        try:
            import pandas  # noqa: F401
        except ImportError:
            print("# pandas not installed: metrics_frame says so", flush=True)
            try:
                c.metrics_frame(state["run"])
            except RuntimeError as e:
                check("pandas" in str(e), str(e))
                return
            raise AssertionError("metrics_frame without pandas did not refuse")
        df = c.metrics_frame(state["run"], keys=["loss"])
        check(len(df) == TINY["steps"] and list(df.columns) == ["loss"], f"frame {df.shape}")

    @case("client_refusals_are_api_errors_with_code_and_field")
    def _():
        try:
            c.create_run(dict(TINY, n_head=3))
        except attnlab.ApiError as e:
            check(e.status == 422 and e.field and "n_head" in e.field, f"{e.status} {e.code} {e.field}")
        else:
            raise AssertionError("an invalid config was accepted")
        try:
            c.run(999999)
        except attnlab.ApiError as e:
            check(e.status == 404 and e.code == "not_found", f"{e.status} {e.code}")
        else:
            raise AssertionError("an unknown run was found")
        try:
            c.runs(lr=1)
        except TypeError:
            pass
        else:
            raise AssertionError("an unknown filter was sent")

    @case("client_experiment_wait_stats_bundle")
    def _():
        e = c.create_experiment(name="py-exp", base=TINY, replicates=2,
                                variants=[{"name": "rope", "config": {"attention": "rope"}},
                                          {"name": "cos", "config": {"attention": "cosine_rope"}}])
        exp_id = e["experiment"]["id"]
        done = c.wait_experiment(exp_id, poll=0.3)
        check(len(done["runs"]) == 4 and all(r["status"] == "succeeded" for r in done["runs"]), "runs did not succeed")
        st = c.stats(exp_id)
        names = sorted(v["name"] for v in st["variants"])
        check(names == ["cos", "rope"], f"stats variants {names}")
        b = c.bundle(exp_id, keys=["loss"], max_points=10)
        check(b == json.loads(raw_get(f"{srv.url}/api/experiments/{exp_id}/bundle?keys=loss&max_points=10")), "bundle")
        csv = c.bundle(exp_id, csv=True, keys=["loss"])
        check(csv.encode() == raw_get(f"{srv.url}/api/experiments/{exp_id}/bundle.csv?keys=loss"), "bundle.csv bytes")
        check(any(x["id"] == exp_id for x in c.experiments()), "experiment not listed")
        c.rename_experiment(exp_id, "py-exp-renamed")
        check(c.experiment(exp_id)["experiment"]["name"] == "py-exp-renamed", "rename")
        check([x["id"] for x in c.experiments(q="renamed py")] == [exp_id], "search by name")
        check([r["id"] for r in c.runs(q="py exp cos", sort="id")] == [r["id"] for r in done["runs"] if r["variant"] == "cos"],
              "runs by their words")
        # one more replicate of both variants joins the statistics
        grown = c.add_runs(exp_id, replicates=1)
        check(len(grown["runs"]) == 2 and {r["replicate"] for r in grown["runs"]} == {2}, "add_runs")
        done = c.wait_experiment(exp_id, poll=0.3)
        check(len(done["runs"]) == 6 and all(r["status"] == "succeeded" for r in done["runs"]), "added runs did not succeed")
        n = {v["name"]: v["metrics"]["final_train_loss"]["n"] for v in c.stats(exp_id)["variants"]}
        check(n == {"rope": 3, "cos": 3}, f"stats n after add_runs {n}")
        try:
            c.create_experiment(name="py-exp-renamed", base=TINY, variants=[{"name": "a"}])
            check(False, "a name in use was taken")
        except attnlab.ApiError as err:
            check(err.status == 409 and err.field == "name", f"{err.status} {err.field}")
        run_ids = [r["id"] for r in done["runs"]]
        c.delete_experiment(exp_id, runs="keep")
        check(all(c.run(i)["experiment_id"] is None for i in run_ids), "kept runs still point at the experiment")

    @case("client_model_probe_on_a_trained_run")
    def _():
        p = c.probe("attention_map", run_id=state["run"], text="the quick brown fox")
        check(p["probe"]["status"] == "succeeded", f"probe {p['probe']['status']}")
        again = c.probe_result(p["probe"]["id"])
        check(again["probe"]["id"] == p["probe"]["id"], "probe not found again")
        check(any(k["name"] == "attention_map" for k in c.probe_kinds()), "kinds")

    @case("client_log_run_stores_every_point_while_the_server_trains")
    def _():
        # a run of the server's own trains meanwhile (long enough to outlast the logging on a fast machine;
        # cancelled at the end), as the figure asks: 20 keys a step for 10,000 steps
        own = c.create_run(dict(TINY, steps=100000, eval_every=1000), name="busy")
        import time
        t0 = time.time()
        with c.log_run("torch-loop", {"attention": "cosine_rope", "optimizer": "adamw"}, tags=["pylog"]) as run:
            for step in range(1, 10001):
                run.log(step, **{f"k{i}": step * 1e-3 + i for i in range(20)})
            last = time.time()
        flushed = time.time()
        print(f"# 200,000 points: logged in {last - t0:.2f} s, flushed {flushed - last:.2f} s after the last step "
              f"(target <= 5 s; server training run {c.run(own['id'])['status']})", flush=True)
        c.cancel(own["id"])
        end = c.run(run.id)
        check(end["status"] == "succeeded" and end["source"] == "external" and end["step"] == 10000, f"{end['status']} {end['step']}")
        summary = c.summary(run.id)["summary"]
        counts = {k: v["count"] for k, v in summary.items()}
        check(len(counts) == 20 and all(n == 10000 for n in counts.values()), f"counts {counts}")
        check(summary["k19"]["last"] == 10.0 + 19, f"k19 last {summary['k19']['last']}")
        prov = end.get("provenance") or {}
        check(prov.get("client") == "attnlab-python" and prov.get("python"), f"provenance {prov}")

    @case("client_log_run_marks_a_run_failed_with_the_exception")
    def _():
        try:
            with c.log_run("doomed", {"attention": "rope"}) as run:
                run.log(1, loss=2.5)
                raise ValueError("loss went NaN at step 2")
        except ValueError:
            pass
        end = c.run(run.id)
        check(end["status"] == "failed" and "ValueError: loss went NaN at step 2" in (end["error"] or ""), f"{end['status']} {end['error']}")
        check(c.summary(run.id)["summary"]["loss"]["count"] == 1, "the point before the failure is not stored")
        try:
            run.log(3, loss=float("nan"))
        except ValueError as e:
            check("finite" in str(e), str(e))
        else:
            raise AssertionError("a NaN was accepted")

    @case("client_example_pytorch_run_beside_attnlabs_own")
    def _():
        # client/python/examples/torch_seed_blog.py, small: a PyTorch run logged into an experiment
        # beside attnlab's run of the same config, its weights uploaded and probed
        try:
            import torch  # noqa: F401
        except ImportError:
            raise AssertionError("python3-torch is not installed (scripts/deps.sh --test installs it)")
        import subprocess
        out = subprocess.run([sys.executable, os.path.join(ROOT, "client/python/examples/torch_seed_blog.py"), "--url",
                              srv.url, "--tiny", "--steps", "10", "--threads", "1"], capture_output=True, text=True,
                             timeout=600)
        check(out.returncode == 0, f"exit {out.returncode}: {out.stderr[-500:]}")
        tail = out.stdout[out.stdout.index("{\n"):]
        res = json.loads(tail)
        e = c.experiment(res["experiment"])
        variants = sorted(r["variant"] for r in e["runs"])
        check(variants == ["attnlab", "pytorch"], f"variants {variants}")
        check(res["comparison"] and res["comparison"]["n"] == 1, f"comparison {res['comparison']}")
        check(set(res["attention_map"].values()) == {"succeeded"}, f"probes {res['attention_map']}")

    rc, errors = srv.stop()
    check_stop("client_server_stopped_cleanly", rc, errors)

    tok_dir = os.path.join(tmp, "b")
    os.makedirs(tok_dir)
    srv2 = Server(tok_dir, args=("--token", "s3cret-token"))

    @case("client_token_is_sent_and_required")
    def _():
        try:
            attnlab.Client(srv2.url).create_run(TINY)
        except attnlab.ApiError as e:
            check(e.status == 401, f"without the token: {e.status}")
        else:
            raise AssertionError("a mutation without the token was accepted")
        try:
            attnlab.Client(srv2.url, token="s3cret-token").create_run(dict(TINY, corpus="small"))
        except attnlab.ApiError as e:
            raise AssertionError(f"with the token: {e}")

    rc, errors = srv2.stop()
    check_stop("client_token_server_stopped_cleanly", rc, errors)
    return failures


def check_stop(name, rc, errors):
    global failures
    if rc == 0 and not errors:
        print(f"PASS {name}", flush=True)
    else:
        failures += 1
        print(f"FAIL {name}: exit {rc}, {errors[:3]}", flush=True)


if __name__ == "__main__":
    sys.exit(1 if main() else 0)
