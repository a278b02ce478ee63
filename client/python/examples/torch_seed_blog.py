#!/usr/bin/python3
"""The seed blog's model trained in PyTorch and logged into attnlab beside attnlab's own run.

  python3 client/python/examples/torch_seed_blog.py [--url URL] [--token T] [--steps 300] [--tiny]

1. Uploads corpora/small/text.txt as a byte-level corpus (once), so both engines read the same tokens.
2. Creates one experiment: attnlab trains the blog's model (3 layers, 4 heads, d_model 128,
   128-token windows, AdamW lr 3e-4, cosine_rope with tau from sqrt(d_head)) as variant "attnlab".
3. Trains the same model in PyTorch (Debian's python3-torch; the model of bench/torch_train.py) on
   the same corpus and logs it into that experiment as variant "pytorch": loss every step, tau per
   head (tau.L.H), validation loss every 50 steps.
4. Uploads the PyTorch weights in attnlab's layout (the tensor names and metadata of attnlab's own
   run of this config) and runs the attention_map probe on both runs.
5. Prints both final losses and GET /api/experiments/{id}/stats's comparison.

Same architecture, optimiser, learning rate and data; not the same initial weights or window order
(each engine draws its own), so the gap is one seed's worth of training noise plus the engines'
numerics, not the numerics alone.
"""
import argparse
import json
import math
import os
import struct
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
sys.path.insert(0, os.path.dirname(HERE))            # client/python: the attnlab package
sys.path.insert(0, os.path.join(ROOT, "bench"))      # bench/torch_train.py: attnlab's model in PyTorch

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch_train import GPT  # noqa: E402

from attnlab import Client  # noqa: E402

CORPUS = "moby-bytes"


def config(args):
    c = {"corpus": CORPUS, "n_layer": 3, "n_head": 4, "d_model": 128, "seq_len": 128, "batch": 32, "lr": 3e-4,
         "steps": args.steps, "attention": "cosine_rope", "eval_every": 50, "seed": 1337, "precision": "fp32"}
    if args.tiny:  # a smoke run: the same code, a model that trains in seconds
        c.update(n_layer=1, n_head=2, d_model=32, seq_len=32, batch=8, eval_every=5)
    return c


def safetensors_read(buf):
    n = struct.unpack("<Q", buf[:8])[0]
    header = json.loads(buf[8:8 + n])
    return header, header.pop("__metadata__", {})


def safetensors_write(tensors, metadata):
    """bytes of a safetensors file: the tensors (name -> float32 tensor) in the given order."""
    header, blobs, off = {"__metadata__": metadata}, [], 0
    for name, t in tensors.items():
        b = t.detach().to(torch.float32).contiguous().numpy().tobytes()
        header[name] = {"dtype": "F32", "shape": list(t.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    return struct.pack("<Q", len(h)) + h + b"".join(blobs)


def attnlab_names(model):
    """The PyTorch parameters under attnlab's tensor names (server/engine/model.c's layout)."""
    out = {"wte": model.wte.weight}
    if model.wpe is not None:
        out["wpe"] = model.wpe.weight
    for l, b in enumerate(model.h):
        p = f"h.{l}."
        out.update({p + "ln1.w": b.ln1.weight, p + "ln1.b": b.ln1.bias, p + "attn.qkv.w": b.qkv.weight,
                    p + "attn.qkv.b": b.qkv.bias, p + "attn.proj.w": b.proj.weight, p + "attn.proj.b": b.proj.bias,
                    p + "ln2.w": b.ln2.weight, p + "ln2.b": b.ln2.bias, p + "mlp.fc.w": b.fc.weight,
                    p + "mlp.fc.b": b.fc.bias, p + "mlp.proj.w": b.fcp.weight, p + "mlp.proj.b": b.fcp.bias})
        if hasattr(b, "tau"):
            out[p + "attn.tau"] = b.tau
    out.update({"lnf.w": model.lnf.weight, "lnf.b": model.lnf.bias, "lm_head.w": model.lm_head.weight})
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--url", default=os.environ.get("ATTNLAB_URL", "http://127.0.0.1:8080"))
    ap.add_argument("--token", default=os.environ.get("ATTNLAB_TOKEN"))
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--tiny", action="store_true", help="a small model, for a smoke test")
    ap.add_argument("--threads", type=int, default=0)
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    c = Client(args.url, args.token)
    if not any(x["name"] == CORPUS for x in c.corpora()):
        with open(os.path.join(ROOT, "corpora/small/text.txt"), "rb") as f:
            c.upload_corpus(CORPUS, f.read(), encoding="bytes")
    cfg = config(args)
    exp = c.create_experiment(name="pytorch-vs-attnlab", base=cfg, variants=[{"name": "attnlab", "config": {}}])
    exp_id, attnlab_run = exp["experiment"]["id"], exp["runs"][0]["id"]
    print(f"experiment {exp_id}: attnlab trains run {attnlab_run}", flush=True)

    # the same bytes attnlab tokenised: a byte corpus's ids are its bytes; the last 1% held out
    with open(os.path.join(ROOT, "corpora/small/text.txt"), "rb") as f:
        data = torch.tensor(list(f.read()), dtype=torch.long)
    split = int(len(data) * 0.99)
    train, val = data[:split], data[split:]
    L, H, C, T, B = cfg["n_layer"], cfg["n_head"], cfg["d_model"], cfg["seq_len"], cfg["batch"]
    torch.manual_seed(cfg["seed"])
    model = GPT(L, H, C, T, 256, cfg["attention"])
    opt = torch.optim.AdamW(model.parameters(), lr=cfg["lr"], betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01)
    gen = torch.Generator().manual_seed(cfg["seed"])

    def windows(src, n):
        starts = torch.randint(0, len(src) - T - 1, (n,), generator=gen)
        w = torch.stack([src[s:s + T + 1] for s in starts])
        return w[:, :T], w[:, 1:]

    with c.log_run("pytorch", cfg, experiment=exp_id, variant="pytorch", replicate=0) as run:
        for step in range(1, cfg["steps"] + 1):
            x, y = windows(train, B)
            loss = model(x, y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            taus = {f"tau.{l}.{h}": float(b.tau[h]) for l, b in enumerate(model.h) for h in range(H)}
            run.log(step, loss=float(loss), **taus)
            if step % cfg["eval_every"] == 0 or step == cfg["steps"]:
                with torch.no_grad():
                    vx, vy = windows(val, 8 * B)
                    run.log(step, val_loss=float(model(vx, vy)))
        # the weights in attnlab's layout: names and metadata from attnlab's own run of this config
        c.wait(attnlab_run)
        header, meta = safetensors_read(c.weights(attnlab_run))
        ours = attnlab_names(model)
        missing = set(header) - set(ours)
        if missing:
            raise SystemExit(f"attnlab's model has tensors this PyTorch model lacks: {sorted(missing)}")
        for name, t in ours.items():
            if list(t.shape) != header[name]["shape"]:
                raise SystemExit(f"{name}: PyTorch {list(t.shape)}, attnlab {header[name]['shape']}")
        meta = dict(meta, run_id=str(run.id))
        upload = c.request("POST", f"/api/runs/{run.id}/weights", raw=safetensors_write(
            {k: ours[k] for k in header}, meta), content_type="application/octet-stream")
        print(f"pytorch run {run.id}: weights uploaded ({upload['weights']['bytes']} bytes)", flush=True)

    final = {r: c.run(r)["last"] for r in (attnlab_run, run.id)}
    probes = {r: c.probe("attention_map", run_id=r, text="Call me Ishmael.")["probe"]["status"] for r in final}
    stats = c.stats(exp_id)
    comp = [x for x in stats["comparisons"] if x["metric"] == "final_val_loss"]
    print(json.dumps({"experiment": exp_id,
                      "final_val_loss": {"attnlab": final[attnlab_run]["val_loss"]["last"],
                                         "pytorch": final[run.id]["val_loss"]["last"]},
                      "comparison": comp[0] if comp else None, "attention_map": probes}, indent=1))
    gap = final[attnlab_run]["val_loss"]["last"] - final[run.id]["val_loss"]["last"]
    return 0 if math.isfinite(gap) and all(s == "succeeded" for s in probes.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
