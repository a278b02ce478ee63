#!/usr/bin/python3
"""A run's weights, downloaded over REST, rebuilt in PyTorch from the file's own metadata.

Starts a fresh attnlabd (ATTNLABD), uploads a small byte-level corpus, trains one tiny run per
attention variant and scale form, then for each run:
  - GET /api/runs/{id}/weights is the model only (no AdamW moments), ?optimizer=1 the whole
    checkpoint with the same model bytes, ?optimizer=2 a 422 JSON error;
  - a PyTorch model built from nothing but the safetensors metadata (positions, q/k transform,
    RoPE layout and base, cosine and LayerNorm epsilons, score scale and its parameterisation,
    GELU form) and tensors gives the attention maps of the server's attention_map probe and the
    dense loss of its sparse_attention probe on the same tokens, to a tight tolerance;
  - the same model with one metadata value changed (the RoPE layout, the tau parameterisation,
    the GELU form, the LayerNorm epsilon) no longer does: the test reads what it claims to read.
Prints PASS name / FAIL name: why lines.
"""
import json
import os
import sys
import tempfile
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from attnlabd_server import ROOT, Server  # noqa: E402


# Tolerances: the server computes in float32, the reference here in float64. Measured on these runs:
# attention up to 1.1e-6 (the sharpest heads, dot), loss up to 5e-8 relative. A wrong metadata value
# is caught by the same check: GELU erf instead of tanh, the smallest change tried, moves the loss by
# 5e-7 or more and the attention by 3e-6 or more; the others by 1e-4 or more.
ATT_TOL = 5e-6   # max |difference| of an attention weight
LOSS_TOL = 2e-7  # |difference| of the mean next-token loss, relative

failures = 0


def ok(name):
    print(f"PASS {name}", flush=True)


def bad(name, why):
    global failures
    failures += 1
    print(f"FAIL {name}: {why}", flush=True)


# ---- safetensors, read by hand (no package needed) -------------------------------------------

DTYPES = {"F32": torch.float32, "F64": torch.float64}


def read_safetensors(buf):
    """(tensors by name, metadata dict, raw bytes by name) of a safetensors file's bytes."""
    n = int.from_bytes(buf[:8], "little")
    header = json.loads(buf[8:8 + n])
    meta = header.pop("__metadata__", {})
    base = 8 + n
    tensors, raw = {}, {}
    for name, e in header.items():
        lo, hi = e["data_offsets"]
        raw[name] = bytes(buf[base + lo:base + hi])
        tensors[name] = torch.frombuffer(bytearray(raw[name]), dtype=DTYPES[e["dtype"]]).reshape(e["shape"])
    return tensors, meta, raw


# ---- the model, from the metadata alone -------------------------------------------------------

class MetaGPT:
    """The decoder the file describes; every choice below is read from the metadata."""

    def __init__(self, tensors, meta):
        self.w = {k: v.to(torch.float64) for k, v in tensors.items()}
        self.L, self.H, self.C = int(meta["n_layer"]), int(meta["n_head"]), int(meta["d_model"])
        self.d = self.C // self.H
        self.positions = meta["positions"]                      # learned | none
        steps = meta["qk_transform"]                            # none | rope | l2norm | l2norm,rope
        self.qk_steps = [] if steps == "none" else steps.split(",")
        for s in self.qk_steps:
            if s not in ("l2norm", "rope"):
                raise ValueError(f"qk_transform step {s!r} is not one this loader knows")
        self.rope_layout = meta["rope_layout"]                  # interleaved | half_split
        self.rope_base = float(meta["rope_base"])
        self.cosine_eps = float(meta["cosine_eps"])
        self.score_scale = meta["score_scale"]                  # fixed | inv_tau | mult
        self.fixed_scale = float(meta["fixed_scale"]) if self.score_scale == "fixed" else None
        self.tau_param, self.scale_param = meta["tau_param"], meta["scale_param"]  # linear | log
        self.scale_clamp = float(meta["scale_clamp"])
        self.ln_eps = float(meta["layernorm_eps"])
        self.gelu = {"tanh": "tanh", "erf": "none"}[meta["gelu"]]

    def ln(self, x, name):
        return F.layer_norm(x, (self.C,), self.w[name + ".w"], self.w[name + ".b"], eps=self.ln_eps)

    def rope(self, x):  # x [H, T, d]
        T, d = x.shape[1], self.d
        i = torch.arange(d // 2, dtype=torch.float64)
        ang = torch.arange(T, dtype=torch.float64)[:, None] * self.rope_base ** (-2.0 * i / d)
        c, s = torch.cos(ang), torch.sin(ang)
        if self.rope_layout == "interleaved":  # pairs (2i, 2i+1)
            x0, x1 = x[..., 0::2], x[..., 1::2]
            return torch.stack((x0 * c - x1 * s, x0 * s + x1 * c), dim=-1).flatten(-2)
        if self.rope_layout == "half_split":  # pairs (i, i + d/2)
            x0, x1 = x[..., : d // 2], x[..., d // 2:]
            return torch.cat((x0 * c - x1 * s, x0 * s + x1 * c), dim=-1)
        raise ValueError(f"rope_layout {self.rope_layout!r}")

    def multiplier(self, l):  # g per head: score = g * q_used . k_used
        if self.score_scale == "fixed":
            return torch.full((self.H,), self.fixed_scale, dtype=torch.float64)
        if self.score_scale == "inv_tau":
            th = self.w[f"h.{l}.attn.tau"]
            return torch.exp(-th) if self.tau_param == "log" else 1.0 / th
        if self.score_scale == "mult":
            th = self.w[f"h.{l}.attn.scale"]
            s = torch.exp(th) if self.scale_param == "log" else th
            return torch.clamp(s, max=self.scale_clamp) if self.scale_clamp > 0 else s
        raise ValueError(f"score_scale {self.score_scale!r}")

    def forward(self, ids):
        """(logits [T, V], attention [L, H, T, T]) for one window of token ids."""
        T, C, H, d = len(ids), self.C, self.H, self.d
        x = self.w["wte"][torch.tensor(ids)]
        if self.positions == "learned":
            x = x + self.w["wpe"][:T]
        mask = torch.tril(torch.ones(T, T, dtype=torch.bool))
        maps = []
        for l in range(self.L):
            p = f"h.{l}."
            qkv = self.ln(x, p + "ln1") @ self.w[p + "attn.qkv.w"].T + self.w[p + "attn.qkv.b"]
            q, k, v = (t.view(T, H, d).transpose(0, 1) for t in qkv.split(C, dim=1))
            for step in self.qk_steps:
                if step == "l2norm":
                    q = q / torch.sqrt((q * q).sum(-1, keepdim=True) + self.cosine_eps)
                    k = k / torch.sqrt((k * k).sum(-1, keepdim=True) + self.cosine_eps)
                else:
                    q, k = self.rope(q), self.rope(k)
            scores = self.multiplier(l).view(H, 1, 1) * (q @ k.transpose(1, 2))
            att = scores.masked_fill(~mask, float("-inf")).softmax(-1)
            maps.append(att)
            y = (att @ v).transpose(0, 1).reshape(T, C)
            x = x + y @ self.w[p + "attn.proj.w"].T + self.w[p + "attn.proj.b"]
            h = self.ln(x, p + "ln2") @ self.w[p + "mlp.fc.w"].T + self.w[p + "mlp.fc.b"]
            x = x + F.gelu(h, approximate=self.gelu) @ self.w[p + "mlp.proj.w"].T + self.w[p + "mlp.proj.b"]
        logits = self.ln(x, "lnf") @ self.w["lm_head.w"].T
        return logits, torch.stack(maps)

    def loss(self, ids):
        logits, _ = self.forward(ids[:-1])
        return F.cross_entropy(logits, torch.tensor(ids[1:])).item()


# ---- the server -------------------------------------------------------------------------------

def probe(srv, kind, run_id, params):
    code, j = srv.json("POST", "/api/probes", {"kind": kind, "run_id": run_id, "params": params})
    if code not in (200, 201):
        raise RuntimeError(f"probe {kind} on run {run_id}: HTTP {code} {j}")
    return j["probe"]["result"]


def table(result, name):
    for t in result["tables"]:
        if t["name"] == name:
            return t
    raise KeyError(name)


# Each variant and scale form; tiny and short so every build trains them in seconds.
RUNS = [
    ("dot", {}),
    ("rope", {}),
    ("cosine_rope", {}),
    ("cosine_rope", {"tau_param": "log"}),
    ("cosine_rope_scale", {"scale_param": "log", "scale_clamp": 100}),
]
BASE = {"n_layer": 2, "n_head": 2, "d_model": 32, "seq_len": 32, "batch": 4, "steps": 100, "lr": 0.01,
        "precision": "fp32", "corpus": "tinybytes", "eval_every": 0, "threads": 1}
TEXT = "Call me Ishmael. Some years ago, never mind how long precisely, having little money"
# Every key the weights must carry to be rebuilt elsewhere.
META_KEYS = ["n_layer", "n_head", "d_model", "seq_len", "vocab", "attention", "rope_base", "tau_init", "tau_param",
             "scale_init", "scale_param", "scale_clamp", "positions", "qk_transform", "rope_layout", "cosine_eps",
             "score_scale", "fixed_scale", "layernorm_eps", "gelu", "attnlab_version", "step", "precision",
             "tokenizer", "vocab_source", "corpus", "run_id", "format"]


def compare(meta, tensors, ids, server_att, server_loss):
    """(max attention difference, relative loss difference) of the model built from meta."""
    m = MetaGPT(tensors, meta)
    _, att = m.forward(ids[:server_att.shape[-1]])
    return (att - server_att).abs().max().item(), abs(m.loss(ids) - server_loss) / abs(server_loss)


def readme_example():
    """The README's loader example (the python block under 'Loading a run's weights in PyTorch')."""
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
        text = f.read()
    start = text.index("```python\n", text.index("### Loading a run's weights in PyTorch")) + len("```python\n")
    return text[start:text.index("```", start)]


def run_readme_example(srv, run_id, ids):
    """The README example's loss on ids, for run_id's weights from srv."""
    code = readme_example().replace("http://127.0.0.1:8080/api/runs/2/weights", f"{srv.url}/api/runs/{run_id}/weights")
    scope = {}
    exec(compile(code, "README.md", "exec"), scope)
    out = scope["logits"](ids[:-1])
    return F.cross_entropy(out.double(), torch.tensor(ids[1:])).item()


def check_run(srv, label, run_id, want_steps):
    code, raw, ctype = srv.call("GET", f"/api/runs/{run_id}/weights")
    if code != 200:
        return bad(f"weights_{label}", f"HTTP {code} {raw[:200]!r}")
    tensors, meta, raw_w = read_safetensors(raw)
    code, full, _ = srv.call("GET", f"/api/runs/{run_id}/weights?optimizer=1")
    ftensors, fmeta, raw_f = read_safetensors(full) if code == 200 else ({}, {}, {})
    adam = [n for n in raw_w if n.startswith("adamw.")]
    model_names = [n for n in raw_f if not n.startswith("adamw.")]
    if adam or meta.get("format") != "attnlab-weights":
        bad(f"weights_{label}_without_optimizer", f"adamw tensors {adam[:3]}, format {meta.get('format')}")
    elif code != 200 or fmeta.get("format") != "attnlab-checkpoint" or len(raw_f) != 3 * len(raw_w):
        bad(f"weights_{label}_without_optimizer", f"?optimizer=1: HTTP {code}, {len(raw_f)} tensors")
    elif sorted(model_names) != sorted(raw_w) or any(raw_f[n] != raw_w[n] for n in raw_w):
        bad(f"weights_{label}_without_optimizer", "the model tensors differ from the checkpoint's")
    elif len(full) - len(raw) < 2 * sum(len(b) for b in raw_w.values()):
        bad(f"weights_{label}_without_optimizer", f"{len(raw)} bytes against {len(full)} for the checkpoint")
    else:
        ok(f"weights_{label}_without_optimizer")
    missing = [k for k in META_KEYS if k not in meta]
    if missing or meta["step"] != str(want_steps) or meta["tokenizer"] != "bytes" or meta["run_id"] != str(run_id):
        bad(f"weights_{label}_metadata", f"missing {missing}, step {meta.get('step')}, "
            f"tokenizer {meta.get('tokenizer')}, run_id {meta.get('run_id')}")
    else:
        ok(f"weights_{label}_metadata")

    # The server's attention maps and loss on the same tokens.
    amap = probe(srv, "attention_map", run_id, {"text": TEXT, "max_tokens": 32})
    ids = [int(r[1]) for r in table(amap, "tokens")["rows"]]
    T = len(ids)
    L, H = int(meta["n_layer"]), int(meta["n_head"])
    server_att = torch.zeros(L, H, T, T, dtype=torch.float64)
    for l in range(L):
        for h in range(H):
            rows = table(amap, f"attention_l{l}_h{h}")["rows"]
            server_att[l, h] = torch.tensor([r[1:] for r in rows], dtype=torch.float64)
    loss_ids = ids + [ord(c) for c in " to interest me"][: int(meta["seq_len"]) + 1 - T]
    sp = probe(srv, "sparse_attention", run_id, {"ids": loss_ids, "ks": [1, 2]})
    server_loss = float(sp["summary"]["dense_loss"])
    att_err, loss_err = compare(meta, tensors, loss_ids, server_att, server_loss)
    print(f"# {label}: run {run_id}, {T} tokens, max |attention difference| {att_err:.2e}, "
          f"relative loss difference {loss_err:.2e} (server loss {server_loss:.6f})", flush=True)
    if att_err <= ATT_TOL and loss_err <= LOSS_TOL:
        ok(f"torch_matches_server_{label}")
    else:
        bad(f"torch_matches_server_{label}",
            f"attention {att_err:.3g} (tolerance {ATT_TOL}), loss {loss_err:.3g} (tolerance {LOSS_TOL})")

    # The README's example, in float32 like the server.
    readme_loss = run_readme_example(srv, run_id, loss_ids)
    readme_err = abs(readme_loss - server_loss) / abs(server_loss)
    if readme_err <= LOSS_TOL * 10:
        ok(f"readme_loader_example_{label}")
    else:
        bad(f"readme_loader_example_{label}", f"loss {readme_loss} against the server's {server_loss}")
    print(f"#   README example: relative loss difference {readme_err:.2e}", flush=True)

    # One metadata value changed: the rebuilt model must then fail the check above.
    changes = {"layernorm_eps": "0.01", "gelu": "erf" if meta["gelu"] == "tanh" else "tanh"}
    if "rope" in meta["qk_transform"]:
        changes["rope_layout"] = "half_split" if meta["rope_layout"] == "interleaved" else "interleaved"
    if meta["score_scale"] == "inv_tau":
        changes["tau_param"] = "linear" if meta["tau_param"] == "log" else "log"
    if meta["score_scale"] == "mult":
        changes["scale_param"] = "linear" if meta["scale_param"] == "log" else "log"
    for key, value in changes.items():
        a, l_ = compare(dict(meta, **{key: value}), tensors, loss_ids, server_att, server_loss)
        print(f"#   {key}={value}: attention {a:.2e}, loss {l_:.2e}", flush=True)
        if a > ATT_TOL or l_ > LOSS_TOL:  # the check above would have failed
            ok(f"torch_reads_{key}_{label}")
        else:
            bad(f"torch_reads_{key}_{label}", f"changing it to {value} left attention {a:.3g}, loss {l_:.3g}")


def main():
    t0 = time.time()
    tmp = tempfile.mkdtemp(prefix="attnlab-torch.", dir=os.environ.get("TMPDIR"))
    srv = Server(tmp)
    try:
        with open(os.path.join(ROOT, "corpora/small/text.txt"), "rb") as f:
            text = f.read()[:40000]
        code, _, _ = srv.call("POST", "/api/corpora?name=tinybytes&encoding=bytes", text, "text/plain")
        if code not in (200, 201, 202):
            return bad("torch_loader_corpus", f"upload answered {code}")
        for _ in range(400):
            code, j = srv.json("GET", "/api/corpora/tinybytes")
            status = (j.get("corpus", j) if j else {}).get("status")
            if status in ("ready", "failed"):
                break
            time.sleep(0.05)
        if status != "ready":
            return bad("torch_loader_corpus", f"corpus status {status}")
        ids = []
        for attention, extra in RUNS:
            cfg = dict(BASE, attention=attention, **extra)
            code, j = srv.json("POST", "/api/runs", {"name": f"torch-{attention}", "config": cfg})
            if code != 201:
                return bad("torch_loader_runs", f"creating a {attention} run answered {code}: {j}")
            ids.append(j["run"]["id"])
        deadline = time.time() + 600
        for run_id in ids:
            while True:
                code, j = srv.json("GET", f"/api/runs/{run_id}")
                status = j["run"]["status"]
                if status not in ("queued", "running") or time.time() > deadline:
                    break
                time.sleep(0.1)
            if status != "succeeded":
                return bad("torch_loader_runs", f"run {run_id} ended {status}: {j['run'].get('error')}")
        ok("torch_loader_runs_trained")

        code, j = srv.json("GET", f"/api/runs/{ids[0]}/weights?optimizer=2")
        if code == 422 and j and j["error"]["field"] == "optimizer":
            ok("weights_bad_optimizer_value_is_422")
        else:
            bad("weights_bad_optimizer_value_is_422", f"HTTP {code} {j}")

        for (attention, extra), run_id in zip(RUNS, ids):
            label = attention + "".join(f"_{v}" for k, v in extra.items() if k.endswith("_param"))
            check_run(srv, label, run_id, BASE["steps"])
    finally:
        rc, errors = srv.stop()
        if rc == 0 and not errors:
            ok("torch_loader_server_stopped_cleanly")
        else:
            bad("torch_loader_server_stopped_cleanly", f"exit status {rc}; {''.join(errors[:3])}")
    print(f"# {time.time() - t0:.1f} s", flush=True)


if __name__ == "__main__":
    try:
        main()
    except Exception as e:  # a crash is a failure with its reason, not a silent exit
        bad("torch_loader", f"{type(e).__name__}: {e}")
    sys.exit(1 if failures else 0)
