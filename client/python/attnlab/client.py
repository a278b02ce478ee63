"""The REST client: one method per route of attnlabd's API (server/api/openapi.json describes them).

Every method returns the decoded JSON answer (unwrapped where the answer is one object under one
key, e.g. {"run": {...}} gives the run) and raises ApiError with the server's code, message and
field for any answer that is not 2xx. Nothing here retries a mutation on its own."""
import json
import socket
import sys
import time
import urllib.error
import urllib.parse
import urllib.request

DEFAULT_URL = "http://127.0.0.1:8080"
ENDED = ("succeeded", "failed", "cancelled", "interrupted")


class ApiError(Exception):
    """An answer that is not 2xx: status (HTTP), code, message and field as the server said them."""

    def __init__(self, status, code, message, field=None, retry_after=None):
        super().__init__(f"HTTP {status} {code}: {message}" + (f" (field {field})" if field else ""))
        self.status, self.code, self.message, self.field = status, code, message, field
        self.retry_after = retry_after


def _optional(name):
    try:
        return __import__(name)
    except ImportError:
        return None


class Client:
    """A connection to one attnlabd: `url` (default http://127.0.0.1:8080) and its bearer `token`
    (None when the server has none). `timeout` is each request's socket timeout in seconds."""

    def __init__(self, url=DEFAULT_URL, token=None, timeout=60.0):
        self.url = url.rstrip("/")
        self.token = token
        self.timeout = timeout

    # ---- transport ------------------------------------------------------------------------------
    def _url(self, path, query=None):
        q = {k: v for k, v in (query or {}).items() if v is not None}
        for k, v in list(q.items()):
            if isinstance(v, (list, tuple)):
                q[k] = ",".join(str(x) for x in v)
            elif isinstance(v, bool):
                q[k] = "1" if v else "0"
        return self.url + path + ("?" + urllib.parse.urlencode(q) if q else "")

    def request(self, method, path, body=None, query=None, raw=None, content_type=None, accept_json=True):
        """One request. `body` is sent as JSON, `raw` (bytes or str) as it is. Returns the decoded
        JSON (or the bytes when accept_json is False); raises ApiError on a non-2xx answer."""
        headers = {"Accept": "application/json" if accept_json else "*/*"}
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        elif raw is not None:
            data = raw.encode() if isinstance(raw, str) else bytes(raw)
            headers["Content-Type"] = content_type or "application/octet-stream"
        elif method in ("POST", "PATCH", "PUT"):
            headers["Content-Type"] = "application/json"
            data = b""
        if self.token:
            headers["Authorization"] = "Bearer " + self.token
        req = urllib.request.Request(self._url(path, query), data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as r:
                payload = r.read()
        except urllib.error.HTTPError as e:
            payload = e.read()
            try:
                err = json.loads(payload).get("error", {})
            except ValueError:
                err = {}
            raise ApiError(e.code, err.get("code", "http_error"), err.get("message", payload[:200].decode("utf-8", "replace")),
                           err.get("field"), e.headers.get("Retry-After")) from None
        if not accept_json:
            return payload
        return json.loads(payload) if payload else None

    def get(self, path, **query):
        return self.request("GET", path, query=query)

    # ---- system ---------------------------------------------------------------------------------
    def health(self):
        """GET /api/health: status, version, store, writes, disk, kernel path."""
        return self.get("/api/health")

    def presets(self):
        return self.get("/api/presets")["presets"]

    # ---- runs -----------------------------------------------------------------------------------
    def runs(self, status=None, tag=None, experiment=None, variant=None, sort=None, limit=None, offset=None, q=None,
             **config):
        """GET /api/runs: a page of runs; q searches their names, tags and notes. Config filters as
        keyword arguments: config_lr=0.001 is config.lr=0.001 (any RunConfig key)."""
        search = q
        q = dict(status=status, tag=tag, experiment=experiment, variant=variant, sort=sort, limit=limit, offset=offset,
                 q=search)
        for k, v in config.items():
            if not k.startswith("config_"):
                raise TypeError(f"unknown filter {k!r} (config keys are given as config_<key>)")
            q["config." + k[len("config_"):]] = v
        return self.get("/api/runs", **q)["runs"]

    def run(self, run_id):
        return self.get(f"/api/runs/{int(run_id)}")["run"]

    def create_run(self, config, name=None, tags=None, note=None):
        """POST /api/runs: queue a run of `config` (a RunConfig; unset keys take their defaults)."""
        body = {"config": config}
        if name is not None:
            body["name"] = name
        if tags is not None:
            body["tags"] = list(tags)
        if note is not None:
            body["note"] = note
        return self.request("POST", "/api/runs", body)["run"]

    def update_run(self, run_id, **fields):
        """PATCH /api/runs/{id}: name, tags or note."""
        return self.request("PATCH", f"/api/runs/{int(run_id)}", fields)["run"]

    def delete_run(self, run_id):
        return self.request("DELETE", f"/api/runs/{int(run_id)}")

    def cancel(self, run_id):
        return self.request("POST", f"/api/runs/{int(run_id)}/cancel")["run"]

    def resume(self, run_id):
        return self.request("POST", f"/api/runs/{int(run_id)}/resume")["run"]

    def summary(self, run_id):
        return self.get(f"/api/runs/{int(run_id)}/summary")

    def metrics(self, run_id, keys=None, since_step=None, max_points=None):
        """GET /api/runs/{id}/metrics: {key: {"steps": [...], "values": [...], ...}}; with NumPy the
        steps and values are arrays."""
        series = self.get(f"/api/runs/{int(run_id)}/metrics", keys=keys, since_step=since_step, max_points=max_points)["series"]
        np = _optional("numpy")
        if np is not None:
            for s in series.values():
                s["steps"] = np.asarray(s["steps"], dtype=np.int64)
                s["values"] = np.asarray([np.nan if v is None else v for v in s["values"]], dtype=np.float64)
        return series

    def metrics_frame(self, run_id, keys=None, max_points=None):
        """The metrics as a pandas DataFrame indexed by step, one column per key (needs pandas)."""
        pd = _optional("pandas")
        if pd is None:
            raise RuntimeError("metrics_frame needs pandas; metrics() gives the same as dicts")
        series = self.metrics(run_id, keys=keys, max_points=max_points)
        cols = {k: pd.Series(list(s["values"]), index=list(s["steps"])) for k, s in series.items()}
        return pd.DataFrame(cols).rename_axis("step")

    def metrics_csv(self, run_id):
        return self.request("GET", f"/api/runs/{int(run_id)}/metrics.csv", accept_json=False).decode()

    def weights(self, run_id, optimizer=False):
        """The run's latest weights as safetensors bytes (with the optimizer state when asked)."""
        return self.request("GET", f"/api/runs/{int(run_id)}/weights", query={"optimizer": 1 if optimizer else None},
                            accept_json=False)

    def events(self, run_id=None, last_event_id=None, timeout=None):
        """Yields (event, data) from the live stream of one run (or of all runs), decoding data as
        JSON. Ends when the server closes the stream."""
        path = f"/api/runs/{int(run_id)}/events" if run_id is not None else "/api/events"
        headers = {"Accept": "text/event-stream"}
        if self.token:
            headers["Authorization"] = "Bearer " + self.token
        if last_event_id is not None:
            headers["Last-Event-ID"] = str(last_event_id)
        req = urllib.request.Request(self.url + path, headers=headers)
        try:
            resp = urllib.request.urlopen(req, timeout=timeout or self.timeout)
        except urllib.error.HTTPError as e:
            raise ApiError(e.code, "http_error", e.read()[:200].decode("utf-8", "replace")) from None
        with resp:
            event, data = "message", []
            for line in resp:
                line = line.decode("utf-8").rstrip("\r\n")
                if not line:
                    if data:
                        text = "\n".join(data)
                        try:
                            yield event, json.loads(text)
                        except ValueError:
                            yield event, text
                    event, data = "message", []
                elif line.startswith(":"):
                    continue
                else:
                    k, _, v = line.partition(":")
                    v = v[1:] if v.startswith(" ") else v
                    if k == "event":
                        event = v
                    elif k == "data":
                        data.append(v)

    def wait(self, run_id, progress=False, poll=1.0):
        """Waits until the run has ended and returns it. `progress`: True prints a line per change
        of step to stderr, or a callable(run) called on each change. Follows the live stream and
        falls back to polling GET /api/runs/{id} when the stream breaks; never gives up on a run
        that is still moving."""
        say = progress if callable(progress) else (_Progress() if progress else None)
        last = None
        while True:
            r = self.run(run_id)
            if say and (last is None or r["step"] != last or r["status"] in ENDED):
                say(r)
                last = r["step"]
            if r["status"] in ENDED:
                return r
            try:
                for ev, data in self.events(run_id, timeout=max(self.timeout, 30.0)):
                    if not isinstance(data, dict):
                        continue
                    if ev == "status" and data.get("status") in ENDED:
                        break
                    if say and ev == "metrics" and data.get("step") != last:
                        last = data.get("step")
                        say(dict(r, step=last, status="running"))
            except (OSError, socket.timeout, ApiError):
                time.sleep(poll)

    # ---- experiments ------------------------------------------------------------------------------
    def experiments(self, limit=None, offset=None, q=None):
        """GET /api/experiments: a page, newest first; q searches names, and the runs' names, tags
        and notes (each word begins a word there)."""
        return self.get("/api/experiments", limit=limit, offset=offset, q=q)["experiments"]

    def experiment(self, exp_id):
        return self.get(f"/api/experiments/{int(exp_id)}")

    def create_experiment(self, preset=None, **body):
        """POST /api/experiments: {"preset": ...} or a name, base config and variants (see the API);
        keyword arguments are the body's fields."""
        if preset is not None:
            body["preset"] = preset
        return self.request("POST", "/api/experiments", body)

    def rerun_bundle(self, bundle, name=None):
        """POST /api/experiments {"from_bundle"}: the bundle's experiment created and queued again
        (refused, ApiError 409, when a corpus its runs trained on has other tokens here now). Only
        the experiment and the runs' provenance are sent, not the points."""
        slim = {"experiment": bundle["experiment"],
                "runs": [{"id": r.get("id"), "provenance": r.get("provenance")} for r in bundle.get("runs", [])]}
        body = {"from_bundle": slim}
        if name:
            body["name"] = name
        return self.request("POST", "/api/experiments", body)

    def add_runs(self, exp_id, replicates=None, variants=None):
        """POST /api/experiments/{id}/runs: replicates=N more replicates of every variant, or
        variants=[{"name", "config"}] new variants run for every replicate it has (same seeds);
        one of them. Returns {"experiment", "runs": the new runs}, queued."""
        body = {}
        if replicates is not None:
            body["replicates"] = replicates
        if variants is not None:
            body["variants"] = variants
        return self.request("POST", f"/api/experiments/{int(exp_id)}/runs", body)

    def rename_experiment(self, exp_id, name):
        return self.request("PATCH", f"/api/experiments/{int(exp_id)}", {"name": name})

    def delete_experiment(self, exp_id, runs="keep"):
        """DELETE /api/experiments/{id}: runs="keep" leaves its runs as runs of no experiment,
        runs="delete" removes them too (refused while any of them is queued or running)."""
        return self.request("DELETE", f"/api/experiments/{int(exp_id)}", query={"runs": runs})

    def wait_experiment(self, exp_id, progress=False, poll=2.0):
        """Waits until every run of the experiment has ended; returns the experiment."""
        say = progress if callable(progress) else (_print_experiment if progress else None)
        seen = None
        while True:
            e = self.experiment(exp_id)
            runs = e.get("runs", [])
            state = tuple((r["id"], r["status"], r["step"]) for r in runs)
            if say and state != seen:
                say(e)
                seen = state
            if runs and all(r["status"] in ENDED for r in runs):
                return e
            time.sleep(poll)

    def stats(self, exp_id, k=None, resamples=None, seed=None):
        return self.get(f"/api/experiments/{int(exp_id)}/stats", k=k, resamples=resamples, seed=seed)["stats"]

    def series(self, exp_id, key, max_points=None):
        return self.get(f"/api/experiments/{int(exp_id)}/series", key=key, max_points=max_points)

    def head_spread(self, exp_id, at=None):
        return self.get(f"/api/experiments/{int(exp_id)}/head-spread", at=at)

    def accuracy(self, exp_id):
        return self.get(f"/api/experiments/{int(exp_id)}/accuracy")

    def bundle(self, exp_id, keys=None, max_points=None, csv=False):
        """The experiment's whole result: the JSON bundle (a dict), or with csv=True its CSV text."""
        path = f"/api/experiments/{int(exp_id)}/bundle" + (".csv" if csv else "")
        q = {"keys": keys, "max_points": max_points}
        if csv:
            return self.request("GET", path, query=q, accept_json=False).decode()
        return self.request("GET", path, query=q)

    # ---- corpora, tasks, probes -------------------------------------------------------------------
    def corpora(self):
        return self.get("/api/corpora")["corpora"]

    def corpus(self, name):
        return self.get(f"/api/corpora/{urllib.parse.quote(name, safe='')}")["corpus"]

    def upload_corpus(self, name, text, encoding=None, wait=True, poll=0.5):
        """POST /api/corpora: `text` (str or bytes) becomes corpus `name` (encoding "bytes" for a
        byte-level corpus, else GPT-2's BPE). With wait=True, returns once it is tokenized."""
        c = self.request("POST", "/api/corpora", query={"name": name, "encoding": encoding}, raw=text,
                         content_type="text/plain; charset=utf-8")["corpus"]
        while wait and c["status"] not in ("ready", "failed"):
            time.sleep(poll)
            c = self.corpus(name)
        if c["status"] == "failed":
            raise ApiError(422, "corpus_failed", c.get("error") or "tokenization failed", "name")
        return c

    def tokenize(self, text):
        return self.request("POST", "/api/tokenize", {"text": text})

    def probe_kinds(self):
        return self.get("/api/probe-kinds")["kinds"]

    def probe(self, kind, run_id=None, **params):
        """POST /api/probes: runs probe `kind` with `params` (see probe_kinds(); a model probe needs
        run_id), or answers from the store for the same request. Returns the probe result."""
        body = {"kind": kind, "params": params}
        if run_id is not None:
            body["run_id"] = int(run_id)
        return self.request("POST", "/api/probes", body)

    def probes(self, kind=None, limit=None, offset=None):
        return self.get("/api/probes", kind=kind, limit=limit, offset=offset)["probes"]

    def probe_result(self, probe_id):
        return self.get(f"/api/probes/{int(probe_id)}")


    # ---- logging runs trained elsewhere --------------------------------------------------------------
    def log_run(self, name, config, **kw):
        """A context manager that records a run trained outside attnlab (an external run): see
        RunLogger. Keywords: tags, note, experiment (an experiment id to join), variant, replicate,
        flush_every (seconds)."""
        from .logging import RunLogger
        return RunLogger(self, name, config, **kw)


class _Progress:
    """Prints a run's progress to stderr: on a terminal one line redrawn in place, elsewhere a line
    at most every `every` seconds; always the last one."""

    def __init__(self, every=2.0):
        self.every, self.t, self.tty = every, 0.0, sys.stderr.isatty()

    def __call__(self, run):
        ended = run["status"] in ENDED
        now = time.monotonic()
        if not ended and not self.tty and now - self.t < self.every:
            return
        self.t = now
        total = run.get("total_steps") or 0
        line = f"run {run['id']} {run['status']} step {run['step']}/{total}"
        if run.get("tokens_per_s"):
            line += f" {run['tokens_per_s']:.0f} tok/s"
        if self.tty:
            print("\r" + line.ljust(60), end="\n" if ended else "", file=sys.stderr, flush=True)
        else:
            print(line, file=sys.stderr, flush=True)


def _print_experiment(e):
    runs = e.get("runs", [])
    done = sum(r["status"] in ENDED for r in runs)
    print(f"experiment {e.get('experiment', {}).get('id', '?')}: {done}/{len(runs)} runs ended", file=sys.stderr, flush=True)
