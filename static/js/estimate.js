// How long a run or an experiment will take here, before it is started: from the speed this machine
// showed on the runs it finished recently, in floating-point operations per second, since a token of
// a bigger model costs more. Kept free of the DOM so node can test it.
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

// This machine's recent speed, in FLOP/s: the work of the last `take` runs that succeeded with a
// measurable wall time (started_at to finished_at, at least 0.5 s and 10 steps) divided by the time
// the machine spent on them, the union of their intervals (runs trained side by side share the cores,
// so their times overlap; runs one after another add up). Runs still training count with their live
// tokens_per_s when no finished run is there. vocabOf(corpusName) gives a corpus's vocabulary size.
// precision: prefer runs of that precision when there are some. Returns { flops, runs: [ids] } or
// null when nothing has been measured.
export function measuredSpeed(runs, vocabOf, { take = 6, precision = null } = {}) {
  const usable = (r) => r.status === 'succeeded' && r.started_at && r.finished_at && r.finished_at - r.started_at >= 0.5 && r.step >= 10;
  let pool = runs.filter(usable);
  const prec = (r) => r.config.precision || 'fp32';
  if (precision && pool.some((r) => prec(r) === precision)) pool = pool.filter((r) => prec(r) === precision);
  pool.sort((a, b) => b.finished_at - a.finished_at);
  let work = 0;
  const spans = [], ids = [];
  for (const r of pool.slice(0, take)) {
    const w = runFlops(r.config, vocabOf(r.config.corpus), r.step);
    if (w === null) continue;
    work += w;
    spans.push([r.started_at, r.finished_at]);
    ids.push(r.id);
  }
  if (spans.length) {
    spans.sort((a, b) => a[0] - b[0]);
    let busy = 0, [s0, e0] = spans[0];
    for (const [s, e] of spans.slice(1)) {
      if (s > e0) { busy += e0 - s0; [s0, e0] = [s, e]; } else e0 = Math.max(e0, e);
    }
    busy += e0 - s0;
    return { flops: work / busy, runs: ids };
  }
  let rate = 0;
  for (const r of runs.filter((x) => x.status === 'running' && x.tokens_per_s > 0)) {
    const fwd = forwardFlopsPerToken(r.config, vocabOf(r.config.corpus));
    if (fwd === null) continue;
    rate += 3 * fwd * r.tokens_per_s; // side by side: the machine does all of them at once
    ids.push(r.id);
  }
  return ids.length ? { flops: rate, runs: ids } : null;
}

// Seconds for the given configs (one per run, trained one after another or sharing the cores: the
// machine's work per second is the same either way), or null.
export function estimateSeconds(configs, vocabOf, speed) {
  if (!speed || !(speed.flops > 0) || !configs.length) return null;
  let work = 0;
  for (const c of configs) {
    const w = runFlops(c, vocabOf(c.corpus));
    if (w === null) return null;
    work += w;
  }
  return work / speed.flops;
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
  const s = estimateSeconds(configs, vocabOf, speed);
  if (s === null) return '';
  const n = configs.length;
  return `${roughDuration(s)} at this machine's recent speed${n > 1 ? ` (${n} runs)` : ''}`;
}
