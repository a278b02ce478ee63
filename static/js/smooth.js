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
