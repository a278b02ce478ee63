// The dashboard's formatting, axis, time-estimate, SVG-recording and experiment-answer helpers
// (static/js/dom.js fmt/fmtConfig, scales.js, estimate.js, svgexport.js, answer.js), run by node
// without a browser. Prints PASS/FAIL per case; exits non-zero on failure.
import { fmt, fmtConfig } from '../../static/js/dom.js';
import { spansDecades } from '../../static/js/scales.js';
import { forwardFlopsPerToken, runFlops, measuredSpeed, speedFor, estimateSeconds, estimateText, roughDuration } from '../../static/js/estimate.js';
import { SvgRecorder, svgPaint } from '../../static/js/svgexport.js';
import { answerSentence, niceTicks, withReplicateDiffs } from '../../static/js/answer.js';

let failures = 0;
function test(name, fn) {
  try { fn(); console.log(`PASS ${name}`); } catch (e) { failures++; console.log(`FAIL ${name}: ${e.message}`); }
}
function assert(cond, msg) { if (!cond) throw new Error(msg); }
const eq = (a, b, what) => assert(JSON.stringify(a) === JSON.stringify(b), `${what}: got ${JSON.stringify(a)}, want ${JSON.stringify(b)}`);
const close = (a, b, tol = 1e-9) => Math.abs(a - b) <= tol * Math.max(1, Math.abs(a), Math.abs(b));

test('fmt writes a figure to the same precision whatever its digits (6.79996 → 6.800, next to 6.799)', () => {
  eq([6.79996, 6.7994, 6.8, 2.5, 0.1 + 0.2].map((v) => fmt(v)), ['6.800', '6.799', '6.800', '2.500', '0.3000'], '4 digits');
  eq([fmt(0.5, 2), fmt(12345.6), fmt(3e-4), fmt(2e6), fmt(7), fmt(null), fmt('x')], ['0.50', '12350', '3.00e-4', '2000000', '7', '–', 'x'], 'edges');
  eq(fmt(2.5e6 + 0.5), '2.50e+6', 'large');
});

test('fmtConfig: lr 3e-4, never 0.00029999999999999997 or 3.0000e-4', () => {
  eq([0.00029999999999999997, 3e-4, 1e-3, 0.001 * 0.3, 0.01, 0.1 + 0.2, 1e-8, 10000, 2.5e6, 0.9, 0.999, 1337, true, 'log', null].map(fmtConfig),
    ['3e-4', '3e-4', '0.001', '3e-4', '0.01', '0.3', '1e-8', '10000', '2500000', '0.9', '0.999', '1337', 'true', 'log', '–'], 'values');
});

test('spansDecades: a log axis only for positive values spread over two decades or more', () => {
  const angles = [0, 1, 2, 3, 4, 5, 6, 7].map((i) => 4096 * 10000 ** (-i / 8)); // a pair's angle falls geometrically
  assert(spansDecades(angles), 'RoPE pair angles span decades');
  assert(!spansDecades([1, 2, 50]), 'under 100×');
  assert(!spansDecades([0, 1, 1000]), 'a zero cannot go on a log axis');
  assert(!spansDecades([-1, 1, 1000]), 'a negative value cannot go on a log axis');
  assert(spansDecades([null, 0.01, NaN, 5]), 'nulls are left out');
  assert(!spansDecades([5]), 'one value');
});

const cfg = { n_layer: 2, n_head: 4, d_model: 64, seq_len: 64, batch: 8, steps: 200, eval_every: 20, eval_batches: 8, corpus: 'small', precision: 'fp32' };
const vocabOf = (c) => (c === 'bytes' ? 256 : 50257);

test('work per token: the blocks, the causal attention and the logits', () => {
  eq(forwardFlopsPerToken(cfg, 50257), 2 * (24 * 64 * 64 + 2 * 64 * 64) + 2 * 64 * 50257, 'forward');
  const tokens = 200 * 8 * 64, evalTokens = 10 * 8 * 8 * 64;
  eq(runFlops(cfg, 50257), 3 * forwardFlopsPerToken(cfg, 50257) * tokens + forwardFlopsPerToken(cfg, 50257) * evalTokens, 'run');
  eq(forwardFlopsPerToken({ n_layer: 0, d_model: 64, seq_len: 64 }, 256), null, 'no layers');
});

test('the machine\'s speed: work over the time it was busy, runs side by side counted once', () => {
  const w = runFlops(cfg, 50257, 200);
  const one = { id: 1, status: 'succeeded', step: 200, started_at: 100, finished_at: 110, config: cfg };
  const two = { id: 2, status: 'succeeded', step: 200, started_at: 120, finished_at: 130, config: cfg };
  const speed = (runs) => speedFor(cfg, vocabOf, measuredSpeed(runs, vocabOf));
  assert(close(speed([one, two]).flops, (2 * w) / 20), 'one after the other');
  const side = { ...two, started_at: 100, finished_at: 110 };
  assert(close(speed([one, side]).flops, (2 * w) / 10), 'side by side: twice the speed');
  eq(measuredSpeed([{ ...one, status: 'failed' }], vocabOf), null, 'nothing measured');
  eq(measuredSpeed([{ ...one, finished_at: 100.05 }], vocabOf), null, 'too short to measure');
  const live = speed([{ id: 9, status: 'running', tokens_per_s: 1000, config: cfg }]);
  assert(live && close(live.flops, 3 * forwardFlopsPerToken(cfg, 50257) * 1000) && live.runs[0] === 9, 'a running run\'s tokens/s');
});

test('the speed of the runs most like the planned one: a tiny model\'s speed is not a big one\'s', () => {
  const small = { ...cfg, d_model: 16, n_head: 2, corpus: 'bytes' }, big = { ...cfg, d_model: 256 };
  const runs = [{ id: 1, status: 'succeeded', step: 200, started_at: 1, finished_at: 11, config: small },
    { id: 2, status: 'succeeded', step: 200, started_at: 20, finished_at: 30, config: cfg }];
  const sp = measuredSpeed(runs, vocabOf);
  const a = speedFor(small, vocabOf, sp), b = speedFor(cfg, vocabOf, sp), c = speedFor(big, vocabOf, sp);
  assert(a.runs.join() === '1' && close(a.factor, 1), `small: runs ${a.runs}`);
  assert(b.runs.join() === '2' && close(b.flops, runFlops(cfg, 50257, 200) / 10), `same: runs ${b.runs}`);
  assert(c.runs.join() === '2' && c.factor > 1, `big: the nearest is run 2 (${c.runs})`);
  const text = estimateText([{ ...cfg, d_model: 1024, n_head: 8 }], vocabOf, measuredSpeed([runs[0]], vocabOf));
  assert(/; rough: measured on models .*× different in size$/.test(text), text);
});

test('the estimate: the same config takes what it took; ten times the steps, about ten times as long', () => {
  const one = { id: 1, status: 'succeeded', step: 200, started_at: 100, finished_at: 160, config: cfg };
  const speed = measuredSpeed([one], vocabOf);
  assert(close(estimateSeconds([cfg], vocabOf, speed).seconds, 60), 'same config');
  const long = estimateSeconds([{ ...cfg, steps: 2000 }], vocabOf, speed).seconds;
  assert(long > 590 && long < 610, `2000 steps: ${long}`);
  eq(estimateText([cfg, cfg], vocabOf, speed), 'about 2 min at this machine\'s recent speed (2 runs)', 'text');
  eq(estimateText([cfg], vocabOf, null), '', 'no measurement: nothing');
  eq([30, 90, 600, 80 * 60, 6000, 2 * 3600 + 58 * 60].map(roughDuration), ['under a minute', 'about 2 min', 'about 10 min', 'about 80 min', 'about 1 h 40 min', 'about 3 h'], 'rough');
});

test('svg recorder: paths under transforms, dashes, alpha, clipping and text', () => {
  const r = new SvgRecorder(200, 100);
  r.fillStyle = 'rgba(10, 20, 30, 0.5)';
  r.fillRect(0, 0, 200, 100);
  r.save();
  r.beginPath(); r.rect(10, 10, 100, 50); r.clip();
  r.translate(10, 20); r.scale(2, 2);
  r.strokeStyle = '#0072B2'; r.lineWidth = 1.5; r.setLineDash([4, 2]);
  r.beginPath(); r.moveTo(0, 0); r.lineTo(5, 5); r.stroke();
  r.restore();
  r.beginPath(); r.moveTo(0, 0); r.lineTo(1, 1); r.stroke();
  r.font = '12px sans-serif'; r.textAlign = 'center'; r.textBaseline = 'middle'; r.fillStyle = '#123';
  r.fillText('a < b & "c"', 50, 50);
  r.translate(5, 5); r.rotate(-Math.PI / 2); r.fillText('up', 0, 0);
  const svg = r.toSvg();
  assert(svg.includes('<path d="M0 0L200 0L200 100L0 100Z') && svg.includes('fill="rgb(10, 20, 30)" fill-opacity="0.5"'), 'background rect with its alpha');
  assert(/<clipPath id="clip1"><path d="M10 10L110 10L110 60L10 60Z/.test(svg), 'clip path');
  assert(svg.includes('d="M10 20L20 30" fill="none" stroke="#0072B2" stroke-width="3" stroke-dasharray="8 4" clip-path="url(#clip1)"'),
    'the transformed, clipped, dashed line');
  assert(svg.includes('d="M0 0L1 1" fill="none" stroke="#000" stroke-width="1"/>'), 'restore drops the clip, the transform and the style');
  assert(svg.includes('x="50" y="50"') && svg.includes('text-anchor="middle"') && svg.includes('dominant-baseline="central"') && svg.includes('>a &lt; b &amp; &quot;c&quot;</text>'), 'text, escaped');
  assert(/transform="matrix\(0 -1 1 0 5 5\)"/.test(svg), 'rotated text keeps its matrix');
  eq(svgPaint('rgba(1,2,3,0.25)'), { paint: 'rgb(1, 2, 3)', opacity: 0.25 }, 'rgba');
  eq(svgPaint({}), { paint: 'none', opacity: 1 }, 'a gradient paints nothing');
});

test('svg recorder: a full arc is a closed ring of segments around its centre', () => {
  const r = new SvgRecorder(10, 10);
  r.beginPath(); r.arc(5, 5, 3, 0, 2 * Math.PI); r.fill();
  const pts = [...r.toSvg().matchAll(/[ML]([\d.]+) ([\d.]+)/g)].map((m) => [Number(m[1]), Number(m[2])]);
  assert(pts.length >= 8 && pts.every(([x, y]) => Math.abs(Math.hypot(x - 5, y - 5) - 3) < 1e-3), `${pts.length} points on the circle`);
});

const statsOf = (diffs, ci) => ({
  variants: [
    { name: 'rope', n_runs: 3, n_included: 3, metrics: { final_val_loss: { mean: 5.2, ci: [5.1, 5.3], values: [0, 1, 2].map((i) => ({ replicate: i, value: 5.2 + diffs[i] })) } } },
    { name: 'cosine_rope', n_runs: 3, n_included: 3, metrics: { final_val_loss: { mean: 5.2, ci: [5.1, 5.3], values: [0, 1, 2].map((i) => ({ replicate: i, value: 5.2 })) } } }],
  comparisons: [{ metric: 'final_val_loss', a: 'rope', b: 'cosine_rope', n: 3, replicates: [0, 1, 2], mean_diff: diffs.reduce((a, b) => a + b) / 3, ci }],
});

test('the answer sentence: an interval off zero is a difference, one across zero is not', () => {
  const yes = answerSentence(statsOf([0.1, 0.12, 0.11], [0.08, 0.14]));
  assert(yes.startsWith('cosine_rope ends with the lower validation loss') && yes.includes('excludes zero'), yes);
  const no = answerSentence(statsOf([0.1, -0.1, 0.03], [-0.2, 0.22]));
  assert(no.includes('includes zero') && no.includes('cannot tell rope and cosine_rope apart'), no);
  const one = answerSentence({ ...statsOf([0.1, 0.1, 0.1], null), comparisons: [{ metric: 'final_val_loss', a: 'rope', b: 'cosine_rope', n: 1, mean_diff: -0.01, ci: null }] });
  assert(one.startsWith('rope ended') && one.includes('no interval'), one);
  assert(answerSentence({ variants: [{ name: 'a', n_included: 0 }, { name: 'b', n_included: 0 }], comparisons: [] }).includes('No run has finished'), 'nothing yet');
});

test('the forest plot\'s dots: each replicate\'s own paired difference', () => {
  const s = withReplicateDiffs(statsOf([0.1, 0.12, 0.11], [0.08, 0.14]));
  assert(s.comparisons[0].replicates_diff.every((d, i) => close(d, [0.1, 0.12, 0.11][i])), JSON.stringify(s.comparisons[0].replicates_diff));
  eq(niceTicks(-0.03, 0.11, 5), [0, 0.05, 0.1], 'ticks');
  eq(niceTicks(-0.1, 0.1, 5), [-0.1, -0.05, 0, 0.05, 0.1], 'ticks around zero');
  eq(niceTicks(0, 1, 3), [0, 0.5, 1], 'ticks 0..1');
});

console.log(failures ? `${failures} failed` : 'all passed');
process.exit(failures ? 1 : 0);
