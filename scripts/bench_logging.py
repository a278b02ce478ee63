"""The logging benchmark of scripts/bench_logging.sh (see there): one line per round and the
median, each with the load average."""
import os
import statistics
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "python"))
sys.path.insert(0, os.path.join(ROOT, "client", "python"))
from attnlabd_server import Server  # noqa: E402
import attnlab  # noqa: E402

STEPS, KEYS, TARGET_S = 10000, 20, 5.0
BUSY = {"corpus": "small", "n_layer": 1, "n_head": 2, "d_model": 16, "seq_len": 16, "batch": 4,
        "steps": 1000000, "eval_every": 1000, "threads": 1}


def one_round(c):
    own = c.create_run(BUSY, name="busy")  # the server trains meanwhile
    while c.run(own["id"])["status"] != "running":
        time.sleep(0.05)
    t0 = time.time()
    with c.log_run("bench-loop", {"attention": "cosine_rope"}) as run:
        for step in range(1, STEPS + 1):
            run.log(step, **{f"k{i}": step * 1e-3 + i for i in range(KEYS)})
        last = time.time()
    flushed = time.time()
    c.cancel(own["id"])
    counts = [v["count"] for v in c.summary(run.id)["summary"].values()]
    stored = sum(counts)
    return last - t0, flushed - last, stored


def main():
    rounds = int(os.environ.get("ATTNLAB_BENCH_LOG_ROUNDS", "3"))
    flushes = []
    with tempfile.TemporaryDirectory() as tmp:
        srv = Server(tmp)
        try:
            c = attnlab.Client(srv.url)
            for r in range(rounds):
                loop, flush, stored = one_round(c)
                flushes.append(flush)
                load = os.getloadavg()[0]
                print(f"logging round {r + 1}: {STEPS * KEYS} points, loop {loop:.2f} s, flushed {flush:.2f} s "
                      f"after the last step (target <= {TARGET_S:g} s), {stored} stored, load {load:.1f}",
                      flush=True)
                if stored != STEPS * KEYS:
                    print(f"logging: only {stored} of {STEPS * KEYS} points were stored", flush=True)
                    return 1
        finally:
            srv.stop()
    med = statistics.median(flushes)
    print(f"logging: median flush {med:.2f} s after the last step: target {'met' if med <= TARGET_S else 'missed'} "
          f"(load {os.getloadavg()[0]:.1f})", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
