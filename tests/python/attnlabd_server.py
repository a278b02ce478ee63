"""A throw-away attnlabd for the Python tests: started on a free port with its own data directory,
its log kept for the sanitizer check at the end. ATTNLABD names the binary (default: the release
build)."""
import json
import os
import subprocess
import time
import urllib.error
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ATTNLABD = os.environ.get("ATTNLABD", os.path.join(ROOT, "build/release/attnlabd"))


class Server:
    """attnlabd in `tmp` (its data, stdout and log there); `args` are extra flags (--token ...)."""

    def __init__(self, tmp, args=()):
        self.out = open(os.path.join(tmp, "out"), "w+")
        self.log = open(os.path.join(tmp, "log"), "w")
        self.proc = subprocess.Popen(
            [ATTNLABD, "--port", "0", "--data-dir", os.path.join(tmp, "data"), "--compute-threads", "2", *args],
            stdout=self.out, stderr=self.log, cwd=ROOT)
        self.url = None
        for _ in range(400):
            self.out.seek(0)
            for line in self.out.read().split():
                if line.startswith("http://"):
                    self.url = line.rstrip("/,")
            if self.url:
                break
            time.sleep(0.05)
        if not self.url:
            raise RuntimeError("attnlabd did not start")

    def call(self, method, path, body=None, ctype="application/json"):
        data = body if isinstance(body, bytes) or body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.url + path, data=data, method=method)
        if data is not None:
            req.add_header("Content-Type", ctype)
        try:
            with urllib.request.urlopen(req, timeout=120) as r:
                return r.status, r.read(), r.headers.get("Content-Type", "")
        except urllib.error.HTTPError as e:
            return e.code, e.read(), e.headers.get("Content-Type", "")

    def json(self, method, path, body=None):
        code, raw, _ = self.call(method, path, body)
        return code, json.loads(raw) if raw else None

    def stop(self):
        """Stops the server; returns (exit status, its log's sanitizer or runtime error lines)."""
        self.proc.terminate()
        try:
            rc = self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            rc = self.proc.wait()
        self.log.close()
        with open(self.log.name, errors="replace") as f:
            errors = [l for l in f if "Sanitizer" in l or "runtime error:" in l]
        return rc, errors
