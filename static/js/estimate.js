// How long a run or an experiment will take here, before it is started: from the speed this machine
// showed on the runs it finished recently, in floating-point operations per second (a token of a
// bigger model costs more), taken from the runs most like the one planned. Kept free of the DOM so
// node can test it.
//
// Work per token of training (forward and backward, about 3 × the forward): the forward of a GPT
// block costs 2 × its 12·d² weights (attention 4·d², MLP 8·d²) plus 2·T·d for the causal attention
// scores and their weighted sum (T/2 keys on average, both products), per layer; then the logits, 2·d·V.
// Every eval_every steps, eval_batches forward passes over batch × seq_len tokens.
// This is an approximation: what matters is that the same count is used to measure the speed and to
// predict the time, so a run like the ones measured is predicted well.

export const VOCAB = { gpt2: 50257, bytes: 256 };

export function forwardFlopsPerToken(cfg, vocab) {
  const L = cfg.n_layer, d = cfg.d_model, T = cfg.seq_len;
  if (![L, d, T].every((x) => Number.isFinite(x) && x > 0)) return null;
  return L * (24 * d * d + 2 * T * d) + 2 * d * (vocab || VOCAB.gpt2);
}

// Floating-point work of a whole run: `steps` training steps (or `done`, for one that ran) and its evaluations.
export function runFlops(cfg, vocab, steps = cfg.steps) {
  const fwd = forwardFlopsPerToken(cfg, vocab);
  if (fwd === null || !(steps > 0) || !(cfg.batch > 0)) return null;
  const tokens = steps * cfg.batch * cfg.seq_len;
  const evals = cfg.eval_every > 0 ? Math.floor(steps / cfg.eval_every) + (steps % cfg.eval_every ? 1 : 0) : 1;
  const evalTokens = evals * (cfg.eval_batches ?? 8) * cfg.batch * cfg.seq_len;
  return 3 * fwd * tokens + fwd * evalTokens;
}

// This machine's measured speeds: one sample per recent run that succeeded with a measurable wall
// time (started_at to finished_at, at least 0.1 s and 10 steps): its work, its interval and its work
// per token; runs still training give their live tokens_per_s instead when no run has finished.
// vocabOf(corpusName) gives a corpus's vocabulary size. Returns null when nothing has been measured.
export function measuredSpeed(runs, vocabOf, { take = 20 } = {}) {
  const usable = (r) => r.status === 'succeeded' && r.started_at > 0 && r.finished_at - r.started_at >= 0.1 && r.step >= 10;
  const pool = runs.filter(usable).sort((a, b) => b.finished_at - a.finished_at).slice(0, take);
  const samples = [];
  for (const r of pool) {
    const w = runFlops(r.config, vocabOf(r.config.corpus), r.step);
    if (w === null) continue;
    samples.push({ id: r.id, work: w, span: [r.started_at, r.finished_at], perToken: forwardFlopsPerToken(r.config, vocabOf(r.config.corpus)),
      precision: r.config.precision || 'fp32' });
  }
  if (!samples.length) {
    for (const r of runs.filter((x) => x.status === 'running' && x.tokens_per_s > 0)) {
      const fwd = forwardFlopsPerToken(r.config, vocabOf(r.config.corpus));
      if (fwd !== null) samples.push({ id: r.id, rate: 3 * fwd * r.tokens_per_s, perToken: fwd, precision: r.config.precision || 'fp32' });
    }
  }
  return samples.length ? { samples } : null;
}

// The speed (FLOP/s) that applies to a config: that of the measured runs whose work per token is
// nearest to its own (a tiny model runs far below the machine's peak, so a bigger model's speed is
// not a tiny one's), preferring its precision: the work of those runs over the time the machine
// spent on them, the union of their intervals (runs side by side share the cores and their times
// overlap; runs one after another add up). `factor`: how far (×) their work per token is from the
// config's; over 4 the estimate is rough and says so.
export function speedFor(cfg, vocabOf, speed) {
  if (!speed || !speed.samples.length) return null;
  const target = forwardFlopsPerToken(cfg, vocabOf(cfg.corpus));
  if (target === null) return null;
  const prec = cfg.precision || 'fp32';
  let pool = speed.samples.some((x) => x.precision === prec) ? speed.samples.filter((x) => x.precision === prec) : speed.samples;
  const dist = (x) => Math.abs(Math.log(x.perToken / target));
  const best = Math.min(...pool.map(dist));
  pool = pool.filter((x) => dist(x) <= best + Math.log(1.5));
  const factor = Math.exp(best);
  const live = pool.filter((x) => x.rate);
  if (live.length) return { flops: live.reduce((a, x) => a + x.rate, 0), runs: live.map((x) => x.id), factor };
  const spans = pool.map((x) => x.span).sort((a, b) => a[0] - b[0]);
  let busy = 0, [s0, e0] = spans[0];
  for (const [s1, e1] of spans.slice(1)) {
    if (s1 > e0) { busy += e0 - s0; [s0, e0] = [s1, e1]; } else e0 = Math.max(e0, e1);
  }
  busy += e0 - s0;
  return { flops: pool.reduce((a, x) => a + x.work, 0) / busy, runs: pool.map((x) => x.id), factor };
}

// Seconds for the given configs (one per run: trained one after another or sharing the cores, the
// machine's work per second is the same either way) and how far the speeds used are from them (the
// largest factor), or null.
export function estimateSeconds(configs, vocabOf, speed) {
  if (!speed || !configs.length) return null;
  let total = 0, factor = 1;
  const runs = new Set();
  for (const c of configs) {
    const w = runFlops(c, vocabOf(c.corpus));
    const sp = speedFor(c, vocabOf, speed);
    if (w === null || !sp || !(sp.flops > 0)) return null;
    total += w / sp.flops;
    factor = Math.max(factor, sp.factor);
    for (const id of sp.runs) runs.add(id);
  }
  return { seconds: total, factor, runs: [...runs] };
}

// "about 3 min", "about 1 h 20 min", "under a minute": the estimate rounded as roughly as it is known.
export function roughDuration(s) {
  if (!(s >= 0) || !Number.isFinite(s)) return '';
  if (s < 60) return 'under a minute';
  const min = s / 60;
  if (min < 10) return `about ${Math.round(min)} min`;
  if (min < 90) return `about ${Math.round(min / 5) * 5} min`;
  const hrs = Math.floor(min / 60), rest = Math.round((min - hrs * 60) / 10) * 10;
  return rest === 60 ? `about ${hrs + 1} h` : `about ${hrs} h${rest ? ` ${rest} min` : ''}`;
}

// The sentence shown next to a start button: empty when nothing has been measured here.
export function estimateText(configs, vocabOf, speed) {
  const e = estimateSeconds(configs, vocabOf, speed);
  if (e === null) return '';
  const n = configs.length;
  return `${roughDuration(e.seconds)} at this machine's recent speed${n > 1 ? ` (${n} runs)` : ''}` +
    (e.factor > 4 ? `; rough: measured on models ${fmtFactor(e.factor)} different in size` : '');
}

const fmtFactor = (f) => (f < 100 ? `${Math.round(f)}×` : `${Math.round(f / 10 ** Math.floor(Math.log10(f)))}e${Math.floor(Math.log10(f))}×`);
