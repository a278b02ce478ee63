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

// How a variant's learned scale is set, as GET /api/attention-kinds publishes each row's `scale`:
// its form ("tau": the value is τ; "mult": the value is a multiplier s and τ = 1/min(s, clamp)) and
// the RunConfig fields of its initial value, parameterisation and clamp. Without one: cos/τ's.
const TAU_SCALE = { form: 'tau', init: 'tau_init', param: 'tau_param' };

// The temperature a run starts with (the server's attention_initial_tau, by its published rule):
// the scale's initial value (its init field, √d when absent or 0) for "tau", 1/min(s0, clamp) for
// "mult" (the engine records τ = 1/s for it).
export function initialTau(cfg, scale = TAU_SCALE) {
  const x0 = cfg[scale.init] || Math.sqrt(cfg.d_model / cfg.n_head);
  if (scale.form !== 'mult') return x0;
  const clamp = cfg[scale.clamp] || 0;
  return 1 / (clamp > 0 ? Math.min(x0, clamp) : x0);
}

// Adam moves a parameter by about lr per step (its update m/sqrt(v) is about 1 in size while the
// gradient keeps its sign and magnitude; it exceeds 1 when the gradient grows, since v lags m), and
// AdamW's decoupled weight decay first shrinks it by (1 - lr·wd): θ_t = θ_{t-1}(1 - lr_t·wd) - lr_t·u_t
// with |u_t| <= 1. Since the shrink keeps the order of θ, the bound follows the same recursion:
// hi_t = hi_{t-1}(1 - lr_t·wd) + lr_t, lo_t = lo_{t-1}(1 - lr_t·wd) - lr_t, from θ_0. Here lr_t is the
// schedule times scale_lr_mult (the learned scale's multiplier, decay included), wd is weight_decay
// when tau_weight_decay is on (the server always says; a config without weight_decay gets none).
// θ is the scale's value (its param field linear) or its log (log): τ from tau0 for a "tau" scale;
// for a "mult" scale s from its init field, and τ = 1/min(s, clamp) (the bound on τ is then
// [1/min(hi, clamp), 1/lo]; lo <= 0 leaves τ unbounded above: Infinity). tau0 is used for "tau" only.
// Returns [{step, lo, hi}] (bounds on τ) at the given steps (sorted ascending).
export function adamTauBound(cfg, tau0, steps, scale = TAU_SCALE) {
  const mult = scale.form === 'mult';
  const log = cfg[scale.param] === 'log';
  const lrMult = cfg.scale_lr_mult || 1;
  const wd = cfg.tau_weight_decay === false ? 0 : cfg.weight_decay || 0;
  const x0 = mult ? cfg[scale.init] || Math.sqrt(cfg.d_model / cfg.n_head) : tau0;
  const clamp = mult && cfg[scale.clamp] > 0 ? cfg[scale.clamp] : Infinity;
  const out = [];
  let hi = log ? Math.log(x0) : x0, lo = hi, s = 0;
  for (const target of steps) {
    while (s < target) {
      s++;
      const lr = lrAt(cfg, s) * lrMult, keep = 1 - lr * wd;
      hi = hi * keep + lr;
      lo = lo * keep - lr;
    }
    let a = log ? Math.exp(lo) : lo, b = log ? Math.exp(hi) : hi; // the parameter's own range
    if (mult) [a, b] = [1 / Math.min(b, clamp), a > 0 ? 1 / Math.min(a, clamp) : Infinity];
    out.push({ step: target, lo: a, hi: b });
  }
  return out;
}

// A band from GET /api/experiments/{id}/series (one variant: steps, mean, std, min, max, n) as the
// points a chart draws: [{x, mean, lo, hi}] with lo/hi = mean ∓ std (the mean alone where std is
// null: one replicate), leaving out steps with no value. smooth: EMA weight applied to the mean and
// to both edges alike.
export function bandPoints(band, smooth = 0) {
  const xs = [], m = [], lo = [], hi = [];
  for (let i = 0; i < band.steps.length; i++) {
    const mean = band.mean[i];
    if (typeof mean !== 'number') continue;
    const sd = typeof band.std[i] === 'number' ? band.std[i] : 0;
    xs.push(band.steps[i]); m.push(mean); lo.push(mean - sd); hi.push(mean + sd);
  }
  const [sm, slo, shi] = [m, lo, hi].map((v) => emaDebiased(v, smooth));
  return xs.map((x, i) => ({ x, mean: sm[i], lo: slo[i], hi: shi[i] }));
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
