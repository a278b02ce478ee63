#!/usr/bin/env python3
"""The PyTorch peer of bench_train: the same model (GPT-2-style pre-LayerNorm, untied wte/lm_head,
fused qkv, GELU-tanh MLP, attention dot / rope / cosine_rope as in server/engine/model.h), the
same AdamW (lr 3e-4, betas 0.9/0.999, eps 1e-8, weight decay 0.01 on every tensor) and the same
token stream (a file written by `bench_train --write-tokens`), trained in fp32 or under
torch.autocast("cpu", dtype=torch.bfloat16). Prints one JSON object: tokens/s of the median step
(the first is warm-up), ms/step, peak RSS, first and last loss.

  torch_train.py --tokens FILE [--mode fp32|bf16] [--attention KIND] [--steps N] [--threads N]
                 [--batch B] [--layers L] [--heads H] [--dim C] [--seq T] [--vocab V]
"""
import argparse
import json
import math
import resource
import statistics
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, C, H, T, attention, rope_base):
        super().__init__()
        self.C, self.H, self.d, self.attention = C, H, C // H, attention
        self.ln1 = nn.LayerNorm(C)
        self.qkv = nn.Linear(C, 3 * C)
        self.proj = nn.Linear(C, C)
        self.ln2 = nn.LayerNorm(C)
        self.fc = nn.Linear(C, 4 * C)
        self.fcp = nn.Linear(4 * C, C)
        if attention == "cosine_rope":
            self.tau = nn.Parameter(torch.full((H,), math.sqrt(self.d)))
        self.register_buffer("mask", torch.tril(torch.ones(T, T, dtype=torch.bool)), persistent=False)

    def forward(self, x, cos, sin):
        B, T, C = x.shape
        H, d = self.H, self.d
        q, k, v = self.qkv(self.ln1(x)).split(C, dim=2)
        q = q.view(B, T, H, d).transpose(1, 2)
        k = k.view(B, T, H, d).transpose(1, 2)
        v = v.view(B, T, H, d).transpose(1, 2)
        if self.attention != "dot":
            if self.attention == "cosine_rope":
                q = q * torch.rsqrt((q.float() * q.float()).sum(-1, keepdim=True) + 1e-6).to(q.dtype)
                k = k * torch.rsqrt((k.float() * k.float()).sum(-1, keepdim=True) + 1e-6).to(k.dtype)
            q, k = rotate(q, cos[:T], sin[:T]), rotate(k, cos[:T], sin[:T])
        att = q @ k.transpose(-2, -1)
        if self.attention == "cosine_rope":
            att = att / self.tau.view(1, H, 1, 1)
        else:
            att = att * (1.0 / math.sqrt(d))
        att = att.masked_fill(~self.mask[:T, :T], float("-inf")).softmax(dim=-1)
        y = (att @ v).transpose(1, 2).reshape(B, T, C)
        x = x + self.proj(y)
        return x + self.fcp(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))


def rotate(x, cos, sin):
    """RoPE on adjacent pairs (2i, 2i+1)."""
    x0, x1 = x[..., 0::2], x[..., 1::2]
    return torch.stack((x0 * cos - x1 * sin, x0 * sin + x1 * cos), dim=-1).flatten(-2)


class GPT(nn.Module):
    def __init__(self, L, H, C, T, V, attention, rope_base=10000.0):
        super().__init__()
        self.attention = attention
        self.wte = nn.Embedding(V, C)
        self.wpe = nn.Embedding(T, C) if attention == "dot" else None
        self.h = nn.ModuleList(Block(C, H, T, attention, rope_base) for _ in range(L))
        self.lnf = nn.LayerNorm(C)
        self.lm_head = nn.Linear(C, V, bias=False)
        for n, p in self.named_parameters():
            if p.dim() == 2:
                nn.init.normal_(p, 0.0, 0.02)
            elif n.endswith(".bias"):
                nn.init.zeros_(p)
        d = C // H
        inv = rope_base ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
        ang = torch.arange(T, dtype=torch.float64)[:, None] * inv[None, :]
        self.register_buffer("cos", ang.cos().float(), persistent=False)
        self.register_buffer("sin", ang.sin().float(), persistent=False)

    def forward(self, idx, targets):
        B, T = idx.shape
        x = self.wte(idx)
        if self.wpe is not None:
            x = x + self.wpe(torch.arange(T))
        for blk in self.h:
            x = blk(x, self.cos, self.sin)
        logits = self.lm_head(self.lnf(x))
        return F.cross_entropy(logits.float().view(-1, logits.size(-1)), targets.reshape(-1))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokens", required=True)
    ap.add_argument("--mode", default="fp32", choices=["fp32", "bf16"])
    ap.add_argument("--attention", default="rope", choices=["dot", "rope", "cosine_rope"])
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--layers", type=int, default=3)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--dim", type=int, default=128)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--vocab", type=int, default=50257)
    a = ap.parse_args()
    if a.threads > 0:
        torch.set_num_threads(a.threads)
    torch.manual_seed(1337)
    B, T = a.batch, a.seq
    raw = torch.frombuffer(bytearray(open(a.tokens, "rb").read()), dtype=torch.int32)
    per = B * (T + 1)
    if raw.numel() < per * a.steps:
        sys.exit(f"torch_train: {a.tokens} holds {raw.numel() // per} batches, {a.steps} wanted")
    model = GPT(a.layers, a.heads, a.dim, T, a.vocab, a.attention)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01)
    times, losses = [], []
    for s in range(a.steps):
        batch = raw[s * per:(s + 1) * per].view(B, T + 1).long()
        x, y = batch[:, :T], batch[:, 1:]
        t0 = time.perf_counter()
        if a.mode == "bf16":
            with torch.autocast("cpu", dtype=torch.bfloat16):
                loss = model(x, y)
        else:
            loss = model(x, y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        times.append(time.perf_counter() - t0)
        losses.append(float(loss))
    ms = 1000 * statistics.median(times[1:] if len(times) > 1 else times)
    print(json.dumps({
        "impl": "pytorch", "version": torch.__version__, "mode": a.mode, "attention": a.attention,
        "threads": torch.get_num_threads(), "batch": B, "seq": T, "steps": a.steps,
        "ms_per_step": round(ms, 1), "tokens_per_s": round(B * T / (ms / 1000), 1),
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0, 1),
        "loss_first": round(losses[0], 4), "loss_last": round(losses[-1], 4)}))


if __name__ == "__main__":
    main()
