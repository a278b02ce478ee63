// Series arithmetic kept free of the DOM so node can test it directly.

// TensorBoard's smoothing: an exponential moving average debiased like Adam's moments, so the first
// points are not dragged towards zero. weight 0 returns the input; NaN/inf points are passed through
// without entering the average.
export function emaDebiased(values, weight) {
  const out = new Array(values.length);
  if (!(weight > 0)) { for (let i = 0; i < values.length; i++) out[i] = values[i]; return out; }
  let last = 0, n = 0;
  for (let i = 0; i < values.length; i++) {
    const v = values[i];
    if (!Number.isFinite(v)) { out[i] = v; continue; }
    last = last * weight + (1 - weight) * v;
    n++;
    out[i] = last / (1 - Math.pow(weight, n));
  }
  return out;
}

// Learning rate at a step, as the engine's scheduler computes it (train_lr_at).
export function lrAt(cfg, step) {
  if (cfg.lr_schedule !== 'cosine') return cfg.lr;
  const warm = cfg.warmup_steps || 0;
  if (step <= warm) return cfg.lr * step / warm;
  const span = cfg.steps - warm;
  let p = span > 0 ? (step - warm) / span : 1;
  if (p > 1) p = 1;
  const lo = cfg.lr * (cfg.min_lr_ratio ?? 0.1);
  return lo + 0.5 * (cfg.lr - lo) * (1 + Math.cos(Math.PI * p));
}

// Adam moves a parameter by at most about lr per step (its update is m/sqrt(v) <= 1 in size), so after
// t steps tau lies within tau0 ± sum(lr). With the log parameterisation the bound is on log tau.
// Returns [{step, lo, hi}] at the given steps (sorted ascending).
export function adamTauBound(cfg, tau0, steps) {
  const out = [];
  let sum = 0, s = 0;
  for (const target of steps) {
    while (s < target) { s++; sum += lrAt(cfg, s); }
    if (cfg.tau_param === 'log') out.push({ step: target, lo: tau0 * Math.exp(-sum), hi: tau0 * Math.exp(sum) });
    else out.push({ step: target, lo: tau0 - sum, hi: tau0 + sum });
  }
  return out;
}

// Merges live points into a fetched series: points at or before the last known step are dropped
// (they are already there, or arrived twice), later ones are appended in order.
export function appendAfter(series, step, value, wall) {
  const n = series.steps.length;
  if (n && series.steps[n - 1] >= step) return false;
  series.steps.push(step);
  series.values.push(value);
  series.wall_times.push(wall);
  return true;
}

// What a run card shows as its latest figures. A fetched series is downsampled (each bucket keeps
// its minimum and maximum), so its last point need not be the final step's value: the run's own
// summary (`run.last`, computed by the server over every step and kept current by live events)
// wins; the series is used only for what the summary lacks. Returns
// { loss, lossMin, val, tauMin, tauMax }, each a number or null.
export function runLatest(run, series) {
  const s = series || {};
  const lastOf = (k) => (s[k] && s[k].values.length ? s[k].values[s[k].values.length - 1] : null);
  const minOf = (k) => (s[k] && s[k].values.length ? Math.min(...s[k].values) : null);
  const b = (run && run.last) || {};
  const tauKeys = Object.keys(s).filter((k) => /^tau\.\d+\.\d+$/.test(k));
  const taus = tauKeys.map(lastOf).filter((v) => v !== null);
  const pick = (v, fallback) => (typeof v === 'number' ? v : fallback);
  return {
    loss: pick(b.loss?.last, lastOf('loss')),
    lossMin: pick(b.loss?.min, minOf('loss')),
    val: pick(b.val_loss?.last, lastOf('val_loss')),
    tauMin: pick(b.tau?.min, taus.length ? Math.min(...taus) : null),
    tauMax: pick(b.tau?.max, taus.length ? Math.max(...taus) : null),
  };
}

// Folds one live metrics event into a run's summary so runLatest stays exact while training.
export function foldLive(run, values) {
  const last = { ...(run.last || {}) };
  if (typeof values.loss === 'number') {
    const min = last.loss && typeof last.loss.min === 'number' ? Math.min(last.loss.min, values.loss) : values.loss;
    last.loss = { last: values.loss, min };
  }
  if (typeof values.val_loss === 'number') {
    const min = last.val_loss && typeof last.val_loss.min === 'number' ? Math.min(last.val_loss.min, values.val_loss) : values.val_loss;
    last.val_loss = { last: values.val_loss, min };
  }
  const taus = Object.entries(values).filter(([k]) => /^tau\.\d+\.\d+$/.test(k)).map(([, v]) => v);
  if (taus.length) last.tau = { min: Math.min(...taus), max: Math.max(...taus) };
  run.last = last;
}
