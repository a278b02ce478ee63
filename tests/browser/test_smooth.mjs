// The dashboard's series arithmetic (static/js/smooth.js), run by node without a browser:
// debiased EMA smoothing, the engine's learning-rate schedule, the Adam bound on τ (with AdamW's
// weight decay and the learned-scale form), replicate bands, and the merge of live points into a
// fetched series. Prints PASS/FAIL per case; exits non-zero on failure.
import { emaDebiased, lrAt, adamTauBound, initialTau, bandPoints, appendAfter, runLatest, foldLive } from '../../static/js/smooth.js';

let failures = 0;
function test(name, fn) {
  try { fn(); console.log(`PASS ${name}`); } catch (e) { failures++; console.log(`FAIL ${name}: ${e.message}`); }
}
function assert(cond, msg) { if (!cond) throw new Error(msg); }
const close = (a, b, tol = 1e-12) => Math.abs(a - b) <= tol * Math.max(1, Math.abs(a), Math.abs(b));

// A small deterministic generator so the test needs no seed from the environment.
function lcg(seed) { let x = seed >>> 0; return () => { x = (Math.imul(x, 1664525) + 1013904223) >>> 0; return x / 2 ** 32; }; }

test('ema weight 0 returns the series unchanged', () => {
  const v = [3, 1, 4, 1, 5, 9, 2, 6];
  const out = emaDebiased(v, 0);
  assert(out.length === v.length && out.every((x, i) => x === v[i]), `got ${out}`);
  assert(out !== v, 'must not return the input array itself');
});

test('debiased ema starts at the first value and keeps a constant series constant', () => {
  for (const w of [0.3, 0.9, 0.99]) {
    const out = emaDebiased(new Array(50).fill(7.25), w);
    assert(out.every((x) => close(x, 7.25)), `weight ${w}: ${out.slice(0, 3)}`);
    const r = emaDebiased([10, 0, 0], w);
    assert(close(r[0], 10), `first point ${r[0]} at weight ${w}`);
  }
});

test('debiased ema equals the TensorBoard recurrence', () => {
  const rnd = lcg(42);
  const v = Array.from({ length: 500 }, () => 5 + rnd());
  const w = 0.8;
  const out = emaDebiased(v, w);
  let last = 0;
  for (let i = 0; i < v.length; i++) {
    last = last * w + (1 - w) * v[i];
    const want = last / (1 - w ** (i + 1));
    assert(close(out[i], want, 1e-12), `point ${i}: ${out[i]} vs ${want}`);
  }
  // Smoothing must reduce the point-to-point variation of noisy data.
  const tv = (a) => a.slice(1).reduce((s, x, i) => s + Math.abs(x - a[i]), 0);
  assert(tv(out) < tv(v) / 3, `total variation ${tv(out)} vs raw ${tv(v)}`);
});

test('non-finite points pass through without poisoning the average', () => {
  const out = emaDebiased([1, NaN, 1, Infinity, 1], 0.5);
  assert(Number.isNaN(out[1]) && out[3] === Infinity, 'non-finite not passed through');
  assert([0, 2, 4].every((i) => close(out[i], 1)), `finite points ${out}`);
});

test('learning rate follows the engine schedule (constant, warm-up + cosine)', () => {
  assert(lrAt({ lr: 3e-4, lr_schedule: 'constant', steps: 100 }, 57) === 3e-4, 'constant');
  const c = { lr: 1e-3, lr_schedule: 'cosine', warmup_steps: 10, steps: 110, min_lr_ratio: 0.1 };
  assert(close(lrAt(c, 5), 5e-4), `warm-up half: ${lrAt(c, 5)}`);
  assert(close(lrAt(c, 10), 1e-3), `end of warm-up: ${lrAt(c, 10)}`);
  assert(close(lrAt(c, 60), 1e-4 + 0.5 * 9e-4), `midpoint: ${lrAt(c, 60)}`);
  assert(close(lrAt(c, 110), 1e-4), `last step: ${lrAt(c, 110)}`);
  assert(close(lrAt(c, 500), 1e-4), 'past the end stays at the floor');
});

test('Adam bound on tau: tau0 ± lr·t (linear), tau0·exp(±lr·t) (log)', () => {
  const cfg = { lr: 0.01, lr_schedule: 'constant', steps: 100, tau_param: 'linear' };
  const b = adamTauBound(cfg, 4, [1, 10, 100]);
  assert(b.map((x) => x.step).join() === '1,10,100', 'steps');
  assert(close(b[0].hi, 4.01) && close(b[1].lo, 3.9) && close(b[2].hi, 5), JSON.stringify(b));
  const lg = adamTauBound({ ...cfg, tau_param: 'log' }, 4, [50]);
  assert(close(lg[0].hi, 4 * Math.exp(0.5)) && close(lg[0].lo, 4 * Math.exp(-0.5)), JSON.stringify(lg));
  const cos = { lr: 1e-3, lr_schedule: 'cosine', warmup_steps: 0, steps: 100, min_lr_ratio: 0.1 };
  let sum = 0;
  for (let s = 1; s <= 100; s++) sum += lrAt(cos, s);
  assert(close(adamTauBound(cos, 2, [100])[0].hi, 2 + sum), 'cosine bound is the sum of the schedule');
});

test('the bound includes weight decay: the closed form for a constant lr', () => {
  // θ_t = θ_{t-1}·k ± lr with k = 1 - lr·wd: hi_t = τ0·k^t + lr·(1 - k^t)/(1 - k), lo likewise with -lr.
  const lr = 0.01, wd = 0.5, tau0 = 5.657;
  const cfg = { lr, lr_schedule: 'constant', steps: 400, tau_param: 'linear', weight_decay: wd, tau_weight_decay: true };
  const k = 1 - lr * wd;
  for (const b of adamTauBound(cfg, tau0, [1, 50, 400])) {
    const kt = k ** b.step, drift = lr * (1 - kt) / (1 - k);
    assert(close(b.hi, tau0 * kt + drift, 1e-10) && close(b.lo, tau0 * kt - drift, 1e-10), JSON.stringify(b));
  }
  // decay pulls both edges towards 0: below the decay-free bound
  const free = adamTauBound({ ...cfg, weight_decay: 0 }, tau0, [400])[0], wdb = adamTauBound(cfg, tau0, [400])[0];
  assert(wdb.hi < free.hi && wdb.lo < free.lo, `${JSON.stringify(wdb)} vs ${JSON.stringify(free)}`);
  // excluded from decay (tau_weight_decay false): the decay-free bound
  const off = adamTauBound({ ...cfg, tau_weight_decay: false }, tau0, [400])[0];
  assert(close(off.hi, free.hi) && close(off.lo, free.lo), JSON.stringify(off));
  // the learned scale's lr multiplier scales the step and the decay
  const m = adamTauBound({ ...cfg, scale_lr_mult: 2 }, tau0, [10])[0], k2 = 1 - 2 * lr * wd;
  assert(close(m.hi, tau0 * k2 ** 10 + 2 * lr * (1 - k2 ** 10) / (1 - k2), 1e-10), JSON.stringify(m));
  // the seed config (wd 0.01, lr 3e-4, 2000 steps, Σlr = 0.6): decay lowers the upper edge by about
  // (τ0 + Σlr/2)·Σlr·wd = 0.036 and the lower by (τ0 - Σlr/2)·Σlr·wd = 0.032: far less than Σlr
  const seed = { lr: 3e-4, lr_schedule: 'constant', steps: 2000, tau_param: 'linear', weight_decay: 0.01 };
  const sb = adamTauBound(seed, 5.657, [2000])[0];
  assert(Math.abs(5.657 + 0.6 - sb.hi - (5.657 + 0.3) * 0.6 * 0.01) < 2e-4, JSON.stringify(sb));
  assert(Math.abs(5.657 - 0.6 - sb.lo - (5.657 - 0.3) * 0.6 * 0.01) < 2e-4, JSON.stringify(sb));
});

// A multiplier scale and a temperature, as GET /api/attention-kinds publishes a row's scale.
const MULT = { form: 'mult', tensor: 'attn.scale', init: 'scale_init', param: 'scale_param', clamp: 'scale_clamp' };
const TAU = { form: 'tau', tensor: 'attn.tau', init: 'tau_init', param: 'tau_param' };

test('the bound of a learned scale s (cos·s): τ = 1/min(s, clamp)', () => {
  const cfg = { attention: 'cosine_rope_scale', lr: 0.01, lr_schedule: 'constant', steps: 100, d_model: 64, n_head: 2,
    scale_param: 'log', scale_init: 10, scale_clamp: 100, weight_decay: 0.1, tau_weight_decay: false };
  assert(close(initialTau(cfg, MULT), 0.1), `initial ${initialTau(cfg, MULT)}`);
  const b = adamTauBound(cfg, 123, [50], MULT)[0]; // tau0 is not used for this form
  assert(close(b.lo, 1 / (10 * Math.exp(0.5))) && close(b.hi, 1 / (10 * Math.exp(-0.5))), JSON.stringify(b));
  // the clamp holds s at 100: τ never below 1/100
  const c = adamTauBound({ ...cfg, scale_clamp: 12 }, 0, [50], MULT)[0];
  assert(close(c.lo, 1 / 12), JSON.stringify(c));
  // linear s that may reach 0: τ unbounded above
  const lin = adamTauBound({ ...cfg, scale_param: 'linear', scale_init: 0.2, scale_clamp: 0 }, 0, [50], MULT)[0];
  assert(lin.hi === Infinity && close(lin.lo, 1 / 0.7), JSON.stringify(lin));
  assert(close(initialTau({ d_model: 64, n_head: 2, attention: 'cosine_rope' }, TAU), Math.sqrt(32)), 'sqrt(d)');
  assert(initialTau({ d_model: 64, n_head: 2, attention: 'cosine_rope', tau_init: 3 }, TAU) === 3, 'tau_init');
  // the form decides, not the name: a row named otherwise with a multiplier scale is read as one
  assert(close(initialTau({ ...cfg, attention: 'another_name' }, MULT), 0.1), 'a multiplier by its form');
});

test('bands: mean ∓ std per step, the mean alone for one replicate, gaps left out', () => {
  const band = { steps: [1, 2, 3, 4], n: [3, 3, 1, 0], mean: [5, 4, 3, null], std: [1, 0.5, null, null], min: [], max: [] };
  const p = bandPoints(band);
  assert(p.length === 3 && p[0].lo === 4 && p[0].hi === 6 && p[1].lo === 3.5 && p[2].lo === 3 && p[2].hi === 3, JSON.stringify(p));
  const sm = bandPoints(band, 0.5);
  assert(sm[0].mean === 5 && sm[0].hi === 6 && sm[1].mean < 4.5 && sm[1].mean > 4, JSON.stringify(sm));
});

test('live points append only after the last fetched step', () => {
  const s = { steps: [1, 2, 3], values: [9, 8, 7], wall_times: [0, 1, 2] };
  assert(!appendAfter(s, 3, 100, 3), 'duplicate step accepted');
  assert(!appendAfter(s, 2, 100, 3), 'older step accepted');
  assert(appendAfter(s, 5, 6, 4), 'newer step refused');
  assert(s.steps.join() === '1,2,3,5' && s.values.join() === '9,8,7,6' && s.wall_times.join() === '0,1,2,4', JSON.stringify(s));
  const e = { steps: [], values: [], wall_times: [] };
  assert(appendAfter(e, 1, 1, 1) && e.steps.length === 1, 'empty series');
});

test('run card figures come from the run summary, not the downsampled series tail', () => {
  // A downsampled series keeps each bucket's min and max: here the last kept point (step 990, 2.5)
  // is not the final step's value (step 1000, 3.1), which only the server's summary knows.
  const series = { loss: { steps: [1, 500, 990], values: [10, 2.0, 2.5], wall_times: [0, 1, 2] },
                   'tau.0.0': { steps: [1, 990], values: [5.6, 5.2], wall_times: [0, 2] } };
  const run = { last: { loss: { last: 3.1, min: 2.0 }, val_loss: { last: 3.3, min: 3.2 }, tau: { min: 5.1, max: 5.4 } } };
  const x = runLatest(run, series);
  assert(x.loss === 3.1 && x.lossMin === 2.0 && x.val === 3.3 && x.tauMin === 5.1 && x.tauMax === 5.4, JSON.stringify(x));
  const y = runLatest({}, series); // no summary yet: fall back to the series
  assert(y.loss === 2.5 && y.lossMin === 2.0 && y.val === null && y.tauMin === 5.2, JSON.stringify(y));
});

test('live events keep the run summary current', () => {
  const run = { last: { loss: { last: 3.0, min: 2.0 } } };
  foldLive(run, { loss: 2.5, 'tau.0.0': 5.0, 'tau.0.1': 5.5, val_loss: 2.9 });
  assert(run.last.loss.last === 2.5 && run.last.loss.min === 2.0, JSON.stringify(run.last));
  assert(run.last.tau.min === 5.0 && run.last.tau.max === 5.5 && run.last.val_loss.last === 2.9, JSON.stringify(run.last));
  foldLive(run, { loss: 1.5 });
  assert(run.last.loss.min === 1.5 && run.last.tau.min === 5.0, JSON.stringify(run.last));
});

process.exit(failures ? 1 : 0);
