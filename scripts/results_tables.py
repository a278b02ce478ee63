"""The README's research figures, regenerated from results/ (scripts/results.py tables).

Every bundle in results/*/bundle.json.gz is imported into a fresh attnlabd
(POST /api/experiments/import), and the figures come from the service's own routes over the
import: GET /api/experiments/{id}/stats (intervals, paired tests, Holm, bootstrap), head-spread and
accuracy. Probe answers kept in results/*/probes.json.gz are read as they were answered.

The README names what it quotes with markers: a block

    <!-- results:NAME -->
    ...generated lines...
    <!-- /results -->

and inline figures <!--=NAME-->text<!--/=-->. `tables` fails (exit 1) when any marked text differs
from what the data gives, or names nothing; with --write it rewrites them instead."""
import gzip
import json
import math
import os
import re
import sys

VARIANT_LABEL = {
    "rope": "`rope`",
    "dot": "`dot`",
    "cosine_rope": "`cosine_rope` (cos/τ, as in the blog)",
    "cosine_rope_no_wd": "`cosine_rope_no_wd` (τ without weight decay)",
    "cosine_log_scale_10": "`cosine_log_scale_10` (s·cos, log s from 10, clamp 100)",
}
SPREAD_LABEL = {
    "tau_ratio": "τ max/min over the {heads} heads",
    "tau_std": "τ std over heads",
    "entropy_frac_std": "std over heads of entropy ÷ uniform",
    "distance_std": "std over heads of attended distance (tokens)",
}
TASKS = ["copy_offset", "induction", "associative_recall", "relative_order"]


def num(x, d, sign=False):
    """x with d decimals, a real minus sign, '+' when sign and x > 0."""
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "–"
    s = f"{x:+.{d}f}" if sign else f"{x:.{d}f}"
    if s.lstrip("+-").strip("0.") == "":  # -0.000 and +0.000 are 0
        s = f"{0:.{d}f}"
    return s.replace("-", "−")


def decimals(x, least=4):
    """Enough decimals to show x with 3 significant digits, at least `least`."""
    if x is None or x == 0 or not math.isfinite(x):
        return least
    return max(least, 2 - math.floor(math.log10(abs(x))))


def ci(c, d, sign=False):
    if not c or c[0] is None:
        return "–"
    return f"[{num(c[0], d, sign)}, {num(c[1], d, sign)}]"


def interval(c, d, sign=False):
    """" [lo, hi]" to follow a figure, or nothing where the service gives no interval (it gives them
    from three replicates on)."""
    return f" {ci(c, d, sign)}" if c and c[0] is not None else ""


def summary_cell(x, d, with_ci=True):
    """A summary as mean ± std [t interval]; the mean alone for one replicate."""
    if x.get("std") is None:
        return num(x["mean"], d)
    return f"{num(x['mean'], d)} ± {num(x['std'], d)}" + (interval(x.get("ci"), d) if with_ci else "")


def pval(p):
    if p is None:
        return "–"
    if p < 1e-3:
        m, e = f"{p:.1e}".split("e")
        return f"{m}e{int(e)}".replace("-", "−")
    return f"{p:.2g}" if p < 0.01 else f"{p:.3f}".rstrip("0").rstrip(".")


def table(head, rows):
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(out)


def load_gz(path):
    with gzip.open(path, "rt") as f:
        return json.load(f)


# ---- each experiment's figures --------------------------------------------------------------------
def scale_figures(name, c, exp_id, bundle, prov, out, val):
    st = c.stats(exp_id)
    rows = []
    for v in st["variants"]:
        m = v["metrics"]
        vl, tl, tm, en = (m.get(k) or {} for k in ("final_val_loss", "final_train_loss", "final_tau_mean",
                                                   "final_entropy_mean"))
        de = max(3, -math.floor(math.log10(en["std"]))) if en.get("std") else 3  # the std's first digit
        tau = "— (fixed √d)"
        if tm.get("n"):
            tau = num(tm["mean"], 4) + interval(tm.get("ci"), 4)
            if v["name"].startswith("cosine_log_scale"):
                tau += f" (= 1/s, s ≈ {1 / tm['mean']:.1f})"
        rows.append([VARIANT_LABEL.get(v["name"], f"`{v['name']}`"), summary_cell(vl, 4),
                     summary_cell(tl, 4, False), tau, summary_cell(en, de)])
        val[f"{name}/{v['name']}/val_loss"] = num(vl["mean"], 4)
        val[f"{name}/{v['name']}/entropy"] = num(en["mean"], 4)
        if tm.get("n"):
            dr = m["tau_drift"]
            val[f"{name}/{v['name']}/tau_drift"] = f"{num(dr['mean'], 3, True)} {ci(dr['ci'], 3, True)}"
            val[f"{name}/{v['name']}/tau_drift_p"] = pval(dr.get("p"))
    out[f"{name}/variants"] = table(["variant", "validation loss", "training loss (last 10 steps)",
                                     "final τ (mean over heads)", "attention entropy (nats)"], rows)
    rows = []
    for cmp in st["comparisons"]:
        key = f"{name}/{cmp['a']}-{cmp['b']}/{cmp['metric']}"
        d = decimals(cmp["mean_diff"])
        val[key] = num(cmp["mean_diff"], d, True) + interval(cmp.get("ci"), d, True)
        val[key + "/p"] = pval(cmp["p"])
        if cmp["metric"] != "final_val_loss":
            continue
        rows.append([f"{cmp['a']} − {cmp['b']}", num(cmp["mean_diff"], d, True), ci(cmp["ci"], d, True),
                     f"{pval(cmp['p'])} ({pval(cmp['p_holm'])})", ci(cmp["bootstrap_ci"], d, True)])
    out[f"{name}/pairs"] = table(["a − b", "difference", "t interval", "p (Holm)", "bootstrap"], rows)
    # per head: the final tau of every head of every cos/tau run
    for variant in ("cosine_rope", "cosine_rope_no_wd"):
        finals = [s["values"][-1] for r in bundle["runs"] if r["variant"] == variant
                  for k, s in r["series"].items() if k.startswith("tau.")]
        if finals:
            val[f"{name}/{variant}/tau_heads"] = f"{len(finals)}"
            val[f"{name}/{variant}/tau_range"] = f"{num(min(finals), 3)} and {num(max(finals), 3)}"
    cfg = bundle["runs"][0]["config"]
    t = cfg["seq_len"]
    val[f"{name}/uniform_entropy"] = num(sum(math.log(i) for i in range(1, t + 1)) / t, 4)
    val[f"{name}/wall"] = f"{prov['experiment_wall_s'] / 60:.1f} minutes"


def spread_figures(name, c, exp_id, bundle, prov, out, val, at):
    hs = c.head_spread(exp_id, at=at)
    hs = hs.get("head_spread", hs)
    heads = bundle["runs"][0]["config"]["n_layer"] * bundle["runs"][0]["config"]["n_head"]
    rows = []
    for v in hs["variants"]:
        for metric in ("tau_ratio", "tau_std", "entropy_frac_std", "distance_std"):
            m = v["metrics"].get(metric)
            if not m or not (m.get("at") or {}).get("n"):
                continue
            def cell(smry, sign=False):  # the value's own decimals: 1 past 10, 4 below 0.01
                x = abs(smry["mean"] or 0)
                d = 1 if x >= 10 else (2 if metric == "distance_std" else (4 if x < 0.01 else 3))
                return f"{num(smry['mean'], d, sign)} {ci(smry['ci'], d, sign)}"

            rows.append([v["name"], SPREAD_LABEL[metric].format(heads=heads), cell(m["at"]), cell(m["end"]),
                         cell(m["change"], True), pval(m["change"].get("p"))])
    steps = max(r["config"]["steps"] for r in bundle["runs"])
    out[f"{name}/head-spread"] = table(["variant", "metric", f"step {hs['at_step']}", f"step {steps}",
                                        "paired change", "p"], rows)
    finals = {}
    for r in bundle["runs"]:
        taus = [r["series"][k]["values"][-1] for k in sorted(r["series"]) if re.fullmatch(r"tau\.\d+\.\d+", k)]
        if taus:
            finals.setdefault(r["variant"], []).append(" ".join(f"{x:.2f}" for x in taus))
    for variant, lines in finals.items():
        val[f"{name}/{variant}/final_tau_per_head"] = " / ".join(lines)
    # per run at its end: the smallest tau, the sharpest head's entropy / uniform and the others'
    lo_tau, sharp, others = {}, {}, {}
    for r in bundle["runs"]:
        ser = r["series"]
        taus = [ser[k]["values"][-1] for k in ser if re.fullmatch(r"tau\.\d+\.\d+", k)]
        fr = {k: ser[k]["values"][-1] for k in ser if re.fullmatch(r"entropy_frac\.\d+\.\d+", k)}
        if taus:
            lo_tau.setdefault(r["variant"], []).append(min(taus))
        if fr:
            key = min(fr, key=fr.get)
            if taus:  # the head of the smallest tau
                tk = min((k for k in ser if re.fullmatch(r"tau\.\d+\.\d+", k)), key=lambda k: ser[k]["values"][-1])
                key = "entropy_frac." + tk[4:]
            sharp.setdefault(r["variant"], []).append(fr[key])
            others.setdefault(r["variant"], []).extend(v for k, v in fr.items() if k != key)
    span = lambda xs, d: f"{num(min(xs), d)}–{num(max(xs), d)}"
    for variant in lo_tau:
        val[f"{name}/{variant}/smallest_tau"] = span(lo_tau[variant], 2)
    for variant in sharp:
        val[f"{name}/{variant}/sharpest_entropy_frac"] = span(sharp[variant], 2)
        val[f"{name}/{variant}/other_entropy_frac"] = span(others[variant], 2)
        val[f"{name}/{variant}/entropy_frac"] = span(sharp[variant] + others[variant], 2)
    st = c.stats(exp_id)
    for v in st["variants"]:
        vl = v["metrics"]["final_val_loss"]
        val[f"{name}/{v['name']}/val_loss"] = f"{num(vl['mean'], 3)} ± {num(vl['std'], 3)}"
    val[f"{name}/wall"] = f"{prov['experiment_wall_s'] / 60:.1f} minutes"


def pair_figures(name, c, exp_id, bundle, prov, out, val):
    """One seed per arm, as in the blog: the validation curves side by side, each head's final tau and
    entropy, and the service's statistics of the pair (no interval: one replicate has no spread)."""
    runs = {r["variant"]: r for r in bundle["runs"]}
    a, b = "rope", "cosine_rope"
    va, vb = (dict(zip(runs[v]["series"]["val_loss"]["steps"], runs[v]["series"]["val_loss"]["values"]))
              for v in (a, b))
    steps = sorted(set(va) & set(vb))
    shown = [s for s in steps if s in (steps[0], steps[-1]) or s % max(1, steps[-1] // 8) == 0]
    out[f"{name}/curve"] = table(["step", f"`{a}`", f"`{b}` (cos/τ)", f"{b} − {a}"],
                                 [[str(s), num(va[s], 4), num(vb[s], 4), num(vb[s] - va[s], 4, True)] for s in shown])
    gaps = [vb[s] - va[s] for s in steps]
    val[f"{name}/gap_range"] = f"{num(min(gaps), 3, True)} to {num(max(gaps), 3, True)}"
    st = c.stats(exp_id)
    fin = {v["name"]: v for v in st["variants"]}
    for v in (a, b):
        m = fin[v]["metrics"]
        val[f"{name}/{v}/val_loss"] = num(m["final_val_loss"]["mean"], 4)
        val[f"{name}/{v}/train_loss"] = num(m["final_train_loss"]["mean"], 4)
        val[f"{name}/{v}/entropy"] = num(m["final_entropy_mean"]["mean"], 3)
        r = runs[v]
        cfg = r["config"]
        tokens = cfg["steps"] * cfg["batch"] * cfg["seq_len"]
        val[f"{name}/{v}/tokens_per_s"] = f"{tokens / (r['finished_at'] - r['started_at']):,.0f}"
    val[f"{name}/gap"] = num(fin[b]["metrics"]["final_val_loss"]["mean"] - fin[a]["metrics"]["final_val_loss"]["mean"],
                             4, True)
    val[f"{name}/train_gap"] = num(fin[b]["metrics"]["final_train_loss"]["mean"]
                                   - fin[a]["metrics"]["final_train_loss"]["mean"], 4, True)
    tau0 = fin[b]["tau_initial"]
    val[f"{name}/tau0"] = num(tau0, 3)
    cfg = runs[b]["config"]
    t = cfg["seq_len"]
    val[f"{name}/uniform_entropy"] = num(sum(math.log(i) for i in range(1, t + 1)) / t, 3)
    heads = sorted((k[4:] for k in runs[b]["series"] if re.fullmatch(r"tau\.\d+\.\d+", k)),
                   key=lambda h: tuple(map(int, h.split("."))))
    last = lambda v, k: runs[v]["series"][k]["values"][-1] if k in runs[v]["series"] else None
    rows, finals = [], []
    for h in heads:
        tau = last(b, "tau." + h)
        finals.append(tau)
        rows.append([h, num(tau, 3), num(tau - tau0, 3, True), num(last(b, "entropy." + h), 3),
                     num(last(a, "entropy." + h), 3)])
    out[f"{name}/heads"] = table(["layer.head", "final τ (cos/τ)", "τ − τ₀", "entropy, cos/τ (nats)",
                                  "entropy, rope (nats)"], rows)
    if finals:
        val[f"{name}/tau_down"] = f"{sum(x < tau0 for x in finals)} of {len(finals)}"
        val[f"{name}/tau_range"] = f"{num(min(finals), 3)} to {num(max(finals), 3)}"
        val[f"{name}/tau_drift"] = num(fin[b]["metrics"]["tau_drift"]["mean"], 4, True)
    val[f"{name}/wall"] = f"{prov['experiment_wall_s'] / 60:.1f} minutes"


def tau_decay_figures(name, bundle, val, variant="cosine_rope"):
    """How much of each head's tau drift is weight decay, exactly: AdamW's decoupled decay takes
    lr * scale_lr_mult * weight_decay * tau_(t-1) off tau at step t, so over a run whose tau series has
    every step it removed the sum of those, and the rest of the change tau_T - tau_0 is the gradient's.
    Figures over every head of every run of `variant` (weight decay on tau, constant lr): how many
    heads ended below tau_0, the mean amount the decay took, and its share of the drift (mean, and its
    range over the heads)."""
    shares, decays, finals, tau0 = [], [], [], None
    for r in bundle["runs"]:
        cfg = r["config"]
        if r["variant"] != variant or not cfg.get("tau_weight_decay") or cfg.get("lr_schedule") != "constant":
            continue
        lr, tau0 = cfg["lr"] * cfg.get("scale_lr_mult", 1), cfg["tau_init"]
        for k, ser in r["series"].items():
            if not re.fullmatch(r"tau\.\d+\.\d+", k):
                continue
            if ser["steps"] != list(range(1, cfg["steps"] + 1)):
                return  # thinned: the sum needs every step
            prev = [tau0] + ser["values"][:-1]
            decay = lr * cfg["weight_decay"] * sum(prev)
            finals.append(ser["values"][-1])
            decays.append(decay)
            shares.append(decay / (tau0 - ser["values"][-1]))
    if not finals:
        return
    val[f"{name}/{variant}/tau_down"] = f"{sum(x < tau0 for x in finals)} of {len(finals)}"
    val[f"{name}/{variant}/tau_decay"] = num(sum(decays) / len(decays), decimals(sum(decays) / len(decays)))
    val[f"{name}/{variant}/tau_decay_share"] = (f"{100 * sum(shares) / len(shares):.1f} %"
                                                f" ({100 * min(shares):.1f}–{100 * max(shares):.1f} %)")


def replicated_figures(name, c, exp_id, bundle, prov, out, val, ctx):
    """The replicated experiment at the seed configuration, run a replicate per sitting: the tables of
    scale_figures (intervals once three replicates are in), how many replicates are in, and replicate 0
    of rope and cos/tau against the one-seed pair of results/seed-blog (same seed, config and data
    order, another kernel path and precision: what the path changes over 2000 steps). ctx: compute's
    results directory ("dir") and the bundles read so far ("bundles", by name)."""
    scale_figures(name, c, exp_id, bundle, prov, out, val)
    tau_decay_figures(name, bundle, val)
    with open(os.path.join(ctx["dir"], name, "request.json")) as f:
        want = json.load(f)
    have = max(r["replicate"] for r in bundle["runs"]) + 1
    val[f"{name}/replicates"] = f"{have} of {want['experiment']['replicates']}"
    val[f"{name}/runs"] = str(len(bundle["runs"]))
    stages = prov.get("stages", [])
    val[f"{name}/sittings"] = "; ".join(
        f"replicate {', '.join(map(str, st['replicates']))}: {st['date'][:10]}, {(st.get('kernel') or {}).get('path', '?')}"
        f" path, {st['experiment_wall_s'] / 60:.1f} min, load {st['load_before'][0]:.1f}–{st['load_after'][0]:.1f}"
        for st in stages)
    # each pair of arms' difference in final validation loss, replicate by replicate (the paired
    # table's mean gives no sign of agreement with two replicates, and intervals start at three)
    last = lambda r: r["series"]["val_loss"]["values"][-1]
    by = {}
    for r in bundle["runs"]:
        by.setdefault(r["variant"], {})[r["replicate"]] = last(r)
    arms = list(dict.fromkeys(r["variant"] for r in bundle["runs"]))
    for i, a in enumerate(arms):
        for b in arms[i + 1:]:
            reps = sorted(set(by[a]) & set(by[b]))
            d = [num(by[a][q] - by[b][q], 4, True) for q in reps]
            val[f"{name}/{a}-{b}/per_replicate"] = " and ".join([", ".join(d[:-1]), d[-1]] if len(d) > 1 else d)
    pair = ctx["bundles"].get("seed-blog")
    if not pair:
        return
    old = {r["variant"]: r for r in pair["runs"]}
    for r in bundle["runs"]:
        o = old.get(r["variant"])
        if r["replicate"] != 0 or not o or o["seed"] != r["seed"]:
            continue
        val[f"{name}/{r['variant']}/r0_val_loss"] = num(last(r), 4)
        val[f"{name}/{r['variant']}/r0_precision"] = (
            f"{r['config'].get('precision')} on {(r.get('provenance') or {}).get('kernel_path', '?')}")
        val[f"{name}/{r['variant']}/r0_minus_pair"] = num(last(r) - last(o), 4, True)


PREDICTOR_LABEL = {"dense": "dense", "topk": "top-k", "lsh": "LSH", "hamming": "Hamming", "unrotated": "unrotated",
                   "window": "window"}


def sparse_figures(name, probes, out, val):
    """The sparse_attention probes' loss tables side by side, and their recall and mass at k = 4."""
    cols, by_k = [], {}
    for p in probes:
        res = p["answer"]["probe"]["result"]
        tables = {t["name"]: t for t in res["tables"]}
        variant = p["request"]["variant"]
        loss = tables["loss"]
        names = [c for c in loss["columns"] if c != "k"]
        cols += [f"{variant}: {PREDICTOR_LABEL.get(c, c)}" if i == 0 else PREDICTOR_LABEL.get(c, c)
                 for i, c in enumerate(names)]
        at = {}
        for row in loss["rows"]:
            cells = dict(zip(loss["columns"], row))
            at[cells["k"]] = cells
            by_k.setdefault(cells["k"], []).extend(num(cells[c], 3) for c in names)
        for k in (4, 16):
            if k in at:
                for c in names:
                    if c != "dense":
                        val[f"{name}/sparse/{variant}/k{k}/{c}-dense"] = num(at[k][c] - at[k]["dense"], 3)
        for tname in ("recall", "mass"):
            for row in tables[tname]["rows"]:
                cells = dict(zip(tables[tname]["columns"], row))
                if cells["k"] == 4:
                    for c in ("topk", "lsh", "hamming", "window"):
                        val[f"{name}/sparse/{variant}/{tname}4/{c}"] = num(cells[c], 2)
        val[f"{name}/sparse/{variant}/wall"] = f"{p['wall_s']:.1f} s"
    rows = [[str(k)] + v for k, v in sorted(by_k.items())]
    out[f"{name}/sparse"] = table(["k"] + cols, rows)


def accuracy_figures(name, c, exp_id, bundle, prov, out, val):
    acc = c.accuracy(exp_id)
    acc = acc.get("accuracy", acc)
    cells, arms, buckets = {}, [], {}
    for v in acc["variants"]:
        task, arm = v["name"].split(".", 1)  # <task>.<arm>
        if arm not in arms:
            arms.append(arm)
        cells[(task, arm)] = v["acc"]["acc"]
        for key in sorted((k for k in v["acc"] if k.startswith("acc.")), key=lambda k: int(re.sub(r"\D", "", k) or 0)):
            buckets.setdefault(task, {}).setdefault(key[4:], {})[arm] = v["acc"][key]["mean"]
    rows = []
    for task in TASKS:
        means = [cells[(task, a)]["mean"] for a in arms if (task, a) in cells]
        if not means:
            continue
        best = max(means)
        row = [task]
        for a in arms:
            s = cells.get((task, a))
            m = num(s["mean"], 3)
            interval = f" {ci(s.get('ci'), 3)}" if s.get("ci") and s["ci"][0] is not None else ""
            row.append(f"{f'**{m}**' if s['mean'] == best else m}{interval}")
            val[f"{name}/{task}/{a}"] = f"{m}{interval}"
        rows.append(row)
    out[f"{name}/accuracy"] = table(["task"] + [f"`{a}`" for a in arms], rows)
    rows = []
    for task in TASKS:
        for b, per in buckets.get(task, {}).items():
            rows.append([task, b] + [num(per.get(a), 2) for a in arms])
    out[f"{name}/buckets"] = table(["task", "bucket"] + [f"`{a}`" for a in arms], rows)
    val[f"{name}/wall"] = f"{prov['experiment_wall_s'] / 60:.1f} minutes"
    val[f"{name}/runs"] = str(prov["runs"])


FIGURES = {  # results/<name>: how its figures are made (ctx: see compute)
    "seed-blog": lambda *a, ctx: (pair_figures(*a), tau_decay_figures(a[0], a[3], a[6])),
    "seed-blog-replicated": lambda *a, ctx: replicated_figures(*a, ctx),
    "attention-scale-bytes": lambda *a, ctx: (scale_figures(*a), tau_decay_figures(a[0], a[3], a[6])),
    "tau-long-bytes": lambda *a, ctx: spread_figures(*a, at=600),
    "tau-long-seed": lambda *a, ctx: spread_figures(*a, at=2000),
    "positional-precision": lambda *a, ctx: accuracy_figures(*a),
    "positional-precision-d128": lambda *a, ctx: accuracy_figures(*a),
}


# The SVG figures of each experiment kept beside its data (results/<name>/<kind>[-<arg>].svg) and
# embedded in the README: GET /api/experiments/{id}/plot.svg over the import, compared byte for byte.
SVG_FILES = {
    "seed-blog": [("bands", "key", "val_loss"), ("tau", None, None)],
    "seed-blog-replicated": [("bands", "key", "val_loss"), ("forest", "metric", "final_val_loss"), ("tau", None, None)],
    "attention-scale-bytes": [("bands", "key", "val_loss"), ("forest", "metric", "final_val_loss"), ("tau", None, None)],
    "tau-long-bytes": [("head_spread", None, None), ("tau", None, None), ("bands", "key", "val_loss")],
    "tau-long-seed": [("head_spread", None, None), ("tau", None, None), ("bands", "key", "val_loss")],
}


def svg_figures(name, c, exp_id, files):
    for kind, arg_name, arg in SVG_FILES.get(name, []):
        q = {"kind": kind}
        if arg_name:
            q[arg_name] = arg
        svg = c.request("GET", f"/api/experiments/{exp_id}/plot.svg", query=q, accept_json=False)
        files[f"{name}/{kind}{'-' + arg if arg else ''}.svg"] = svg


def provenance_figures(name, prov, val):
    val[f"{name}/date"] = prov["date"][:10]
    val[f"{name}/cpu"] = prov["cpu"]
    val[f"{name}/kernel_path"] = (prov.get("kernel") or {}).get("path", "?")
    val[f"{name}/load"] = f"{prov['load_before'][0]:.1f}–{prov['load_after'][0]:.1f}"


def compute(server, results_dir):
    out, val, files = {}, {}, {}
    c = server.client
    # in name order, so an experiment's figures can use those read before it (seed-blog's in
    # seed-blog-replicated's)
    ctx = {"dir": results_dir, "bundles": {}}
    for name in sorted(os.listdir(results_dir)):
        d = os.path.join(results_dir, name)
        bpath = os.path.join(d, "bundle.json.gz")
        if not os.path.exists(bpath):
            continue
        with open(bpath, "rb") as f:
            raw = gzip.decompress(f.read())
        bundle = json.loads(raw)
        ctx["bundles"][name] = bundle
        imp = c.request("POST", "/api/experiments/import", raw=raw, content_type="application/json")
        with open(os.path.join(d, "provenance.json")) as f:
            prov = json.load(f)
        provenance_figures(name, prov, val)
        if name in FIGURES:
            FIGURES[name](name, c, imp["experiment"]["id"], bundle, prov, out, val, ctx=ctx)
        svg_figures(name, c, imp["experiment"]["id"], files)
        ppath = os.path.join(d, "probes.json.gz")
        if os.path.exists(ppath):
            sparse_figures(name, load_gz(ppath), out, val)
    return out, val, files


# a block's text holds no other marker, and may be empty
BLOCK = re.compile(r"(<!-- results:(\S+) -->\n)((?:(?!<!-- /?results)[\s\S])*?)(<!-- /results -->)")
INLINE = re.compile(r"(<!--=([^>]+?)-->)(.*?)(<!--/=-->)", re.S)


def check(text, out, val):
    """The README with every marked place regenerated, and the list of differences."""
    diffs = []

    def block(m):
        name = m.group(2)
        if name not in out:
            diffs.append(f"{name}: no such table (known: {', '.join(sorted(out))})")
            return m.group(0)
        want = out[name] + "\n"
        if m.group(3) != want:
            diffs.append(f"{name}: the table differs from the data:\n--- README\n{m.group(3)}+++ data\n{want}")
        return m.group(1) + want + m.group(4)

    def inline(m):
        name = m.group(2)
        if name not in val:
            diffs.append(f"{name}: no such figure")
            return m.group(0)
        if m.group(3) != val[name]:
            diffs.append(f"{name}: README says {m.group(3)!r}, the data {val[name]!r}")
        return m.group(1) + val[name] + m.group(4)

    new = BLOCK.sub(block, text)
    new = INLINE.sub(inline, new)
    return new, diffs


def main(args, Server, results_dir):
    with Server(args.attnlabd, []) as srv:
        out, val, files = compute(srv, results_dir)
    for rel, svg in sorted(files.items()):
        path = os.path.join(results_dir, rel)
        old = open(path, "rb").read() if os.path.exists(path) else None
        if args.write and old != svg:
            with open(path, "wb") as f:
                f.write(svg)
    with open(args.readme) as f:
        text = f.read()
    new, diffs = check(text, out, val)
    diffs += [f"results/{rel}: not as the data draws it" for rel, svg in files.items()
              if not os.path.exists(os.path.join(results_dir, rel))
              or open(os.path.join(results_dir, rel), "rb").read() != svg]
    n_blocks, n_inline = len(BLOCK.findall(text)), len(INLINE.findall(text))
    if os.environ.get("RESULTS_LIST"):
        for k in sorted(out):
            print(f"table {k}\n{out[k]}\n")
        for k in sorted(val):
            print(f"figure {k} = {val[k]}")
    if args.write:
        with open(args.readme, "w") as f:
            f.write(new)
        print(f"results: {args.readme}: {n_blocks} tables and {n_inline} figures written from {len(out)} tables "
              f"and {len(val)} figures of results/")
        return 0
    for d in diffs:
        print(f"FAIL {d}")
    if diffs:
        return 1
    print(f"PASS results: the README's {n_blocks} tables and {n_inline} figures, and the {len(files)} SVG figures "
          "of results/, equal what the data gives")
    return 0
