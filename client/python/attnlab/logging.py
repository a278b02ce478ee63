"""Logging a run trained elsewhere (a PyTorch loop, a notebook) into attnlab, as an external run.

    with client.log_run("torch-cosine", {"attention": "cosine_rope", "lr": 3e-4}) as run:
        for step in range(1, 301):
            ...
            run.log(step, loss=loss, **{"tau.0.0": tau00})

Points are batched (at most 1000 a request, the server's bound) and sent by a background thread,
so logging never waits on the network; leaving the block flushes every point and marks the run
succeeded, or failed with the exception's message when the block raised."""
import math
import queue
import threading
import time

BATCH = 1000  # the server's bound on points per request


def _provenance():
    """Where a logged run's numbers come from, as this process can tell: Python, the machine, and the
    versions of the numerical libraries it has loaded (those it has not imported are not named)."""
    import platform
    import sys
    libs = {}
    for name in ("torch", "numpy", "jax", "tensorflow"):
        mod = sys.modules.get(name)
        if mod is not None and getattr(mod, "__version__", None):
            libs[name] = str(mod.__version__)
    return {"client": "attnlab-python", "python": platform.python_version(),
            "machine": {"cpu": platform.processor() or platform.machine(), "os": platform.platform()},
            "libraries": libs}


class RunLogger:
    """An external run being logged: see the module's comment. flush_every: seconds between sends
    while points wait (a send also starts as soon as a full batch is there)."""

    def __init__(self, client, name, config, tags=None, note=None, experiment=None, variant=None, replicate=None,
                 flush_every=0.5):
        self.client = client
        self.name, self.config, self.tags, self.note, self.experiment = name, dict(config), tags, note, experiment
        self.variant, self.replicate = variant, replicate
        self.flush_every = flush_every
        self.run = None
        self._q = queue.Queue()
        self._error = None
        self._thread = None
        self._stop = threading.Event()
        self.sent = 0
        self.queued = 0

    @property
    def id(self):
        return self.run["id"] if self.run else None

    def start(self):
        body = {"source": "external", "name": self.name, "config": self.config}
        if self.tags is not None:
            body["tags"] = list(self.tags)
        if self.note is not None:
            body["note"] = self.note
        if self.experiment is not None:
            body["experiment_id"] = int(self.experiment)
        if self.variant is not None:
            body["variant"] = self.variant
        if self.replicate is not None:
            body["replicate"] = int(self.replicate)
        body["provenance"] = _provenance()
        self.run = self.client.request("POST", "/api/runs", body)["run"]
        self._thread = threading.Thread(target=self._sender, name=f"attnlab-log-{self.id}", daemon=True)
        self._thread.start()
        return self

    def log(self, step, wall_time=None, **metrics):
        """Queues one point per metric at `step` (an int ≥ 0). Values must be finite numbers;
        a bad one raises ValueError here rather than failing the batch later."""
        if self._error:
            raise self._error
        if not isinstance(step, int) or step < 0:
            raise ValueError(f"step must be an integer >= 0, not {step!r}")
        t = time.time() if wall_time is None else float(wall_time)
        for key, value in metrics.items():
            v = float(value)
            if not math.isfinite(v):
                raise ValueError(f"{key} at step {step} is {v}: only finite values are stored")
            self._q.put({"step": step, "key": key, "value": v, "wall_time": t})
            self.queued += 1

    def _take(self, wait):
        points = []
        try:
            points.append(self._q.get(timeout=wait) if wait else self._q.get_nowait())
            while len(points) < BATCH:
                points.append(self._q.get_nowait())
        except queue.Empty:
            pass
        return points

    def _send(self, points):
        delay = 0.2
        while True:
            try:
                self.client.request("POST", f"/api/runs/{self.id}/metrics", {"points": points})
                self.sent += len(points)
                return
            except Exception as e:  # a 422 is final; a 429/503 or a dropped connection is retried
                status = getattr(e, "status", None)
                if status is not None and status not in (429, 503):
                    self._error = e
                    return
                if self._stop.is_set() and delay > 5:
                    self._error = e
                    return
                time.sleep(float(getattr(e, "retry_after", None) or delay))
                delay = min(delay * 2, 10)

    def _sender(self):
        while not (self._stop.is_set() and self._q.empty()):
            points = self._take(self.flush_every)
            if points and not self._error:
                self._send(points)

    def flush(self):
        """Returns once every point logged so far is stored (raises the sender's error if any)."""
        while self.sent < self.queued and not self._error:
            time.sleep(0.02)
        if self._error:
            raise self._error

    def finish(self, status="succeeded", error=None):
        """Flushes, stops the sender and sets the run's final status."""
        self._stop.set()
        if self._thread:
            self._thread.join()
        body = {"status": status}
        if error:
            body["error"] = str(error)[:1000]
        self.run = self.client.request("PATCH", f"/api/runs/{self.id}", body)["run"]
        if self._error:
            raise self._error
        return self.run

    def __enter__(self):
        return self.start()

    def __exit__(self, exc_type, exc, tb):
        if exc is None:
            self.finish("succeeded")
        else:
            try:
                self.finish("failed", f"{exc_type.__name__}: {exc}")
            except Exception:
                pass
        return False
