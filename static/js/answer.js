// The answer an experiment gives, shown first on its page: per variant the final validation loss
// (mean and 95 % interval over its replicates), the paired differences between the variants as a
// forest plot (one row per pair: the mean difference, its interval, each replicate's own difference
// as a dot, and the zero line), and one sentence saying what that means. All figures are those of
// GET /api/experiments/{id}/stats; nothing is recomputed here. The forest plot is inline SVG, so it
// is crisp on a projector and saved as it is drawn.
import { h, clear, fmt } from './dom.js';
import { variantColor } from './colors.js';
import { svgExportLink } from './svgexport.js';

const METRIC = 'final_val_loss';
const SVG_NS = 'http://www.w3.org/2000/svg';

const num = (v) => (typeof v === 'number' && Number.isFinite(v) ? v : null);
const hasCi = (c) => Array.isArray(c) && num(c[0]) !== null && num(c[1]) !== null;

// "Nice" tick values covering [lo, hi]: 1, 2 or 5 times a power of ten apart, about `n` of them.
export function niceTicks(lo, hi, n = 5) {
  if (!(hi > lo)) { const d = Math.abs(lo) || 1; lo -= d / 2; hi += d / 2; }
  const raw = (hi - lo) / Math.max(1, n - 1);
  const p = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 5, 10].map((m) => m * p).find((s) => s >= raw) || 10 * p;
  const out = [];
  for (let v = Math.ceil(lo / step) * step; v <= hi + step * 1e-9; v += step) out.push(Math.abs(v) < step * 1e-9 ? 0 : Number(v.toPrecision(12)));
  return out;
}

// One sentence on what the comparisons of final validation loss say (a − b: positive means a ends
// higher, i.e. b is better). stats: the /stats object.
export function answerSentence(stats) {
  const cmp = (stats.comparisons || []).filter((c) => c.metric === METRIC && num(c.mean_diff) !== null);
  const vs = stats.variants || [];
  if (vs.length < 2) return 'One variant: nothing to compare.';
  if (!cmp.length) {
    const done = vs.reduce((a, v) => a + (v.n_included || 0), 0);
    return done ? 'No variant pair has a final validation loss in both arms yet.' : 'No run has finished yet: the answer appears as the runs end.';
  }
  const phrase = (c) => {
    const d = c.mean_diff, better = d > 0 ? c.b : c.a, worse = d > 0 ? c.a : c.b;
    const size = `${fmt(Math.abs(d), 3)} nats`;
    if (!hasCi(c.ci) || c.n < 2) {
      return `${better} ended ${size} below ${worse} in ${c.n === 1 ? 'its one paired replicate' : `${c.n} pairs`}, with no interval: one replicate cannot tell that from chance (3 or more replicates give an interval).`;
    }
    const excludes = c.ci[0] > 0 || c.ci[1] < 0;
    const iv = `95 % interval of ${c.a} − ${c.b}: ${fmt(c.ci[0], 3)} to ${fmt(c.ci[1], 3)}, ${c.n} pairs`;
    return excludes
      ? `${better} ends with the lower validation loss, by ${size} (${iv}): the interval excludes zero, so the gap is larger than the spread between replicates explains.`
      : `${better} ends ${size} lower, but the interval includes zero (${iv}): these replicates cannot tell ${c.a} and ${c.b} apart.`;
  };
  if (cmp.length === 1) return phrase(cmp[0]);
  const means = vs.map((v) => ({ name: v.name, m: num(v.metrics?.[METRIC]?.mean) })).filter((x) => x.m !== null).sort((x, y) => x.m - y.m);
  const clear0 = cmp.filter((c) => hasCi(c.ci) && (c.ci[0] > 0 || c.ci[1] < 0)).length;
  return `${means.length ? `${means[0].name} has the lowest mean final validation loss (${fmt(means[0].m, 4)}); ` : ''}` +
    `${clear0} of ${cmp.length} paired differences have a 95 % interval that excludes zero (the rows of the plot whose bar does not cross the zero line).`;
}

function svgEl(tag, attrs = {}, text) {
  const el = document.createElementNS(SVG_NS, tag);
  for (const [k, v] of Object.entries(attrs)) if (v !== undefined && v !== null) el.setAttribute(k, String(v));
  if (text !== undefined) el.textContent = text;
  return el;
}

// The forest plot of the paired differences of `METRIC`: returns an <svg> (or null without rows).
// width: the drawing's width in its own units, about the pixels it will take (so its type stays
// readable on a phone).
export function forestPlot(stats, { classroom = false, width = 720 } = {}) {
  const cmp = (stats.comparisons || []).filter((c) => c.metric === METRIC && num(c.mean_diff) !== null);
  if (!cmp.length) return null;
  const vals = [0];
  for (const c of cmp) {
    vals.push(c.mean_diff);
    if (hasCi(c.ci)) vals.push(c.ci[0], c.ci[1]);
    for (const r of c.replicates_diff || []) vals.push(r);
  }
  const fs = classroom ? 18 : 13;
  const labels = cmp.map((c) => `${c.a} − ${c.b}`);
  const W = Math.max(300, width);
  // the pair's name left of its row, or above it when that would leave the plot too narrow (a phone)
  const need = Math.max(...labels.map((l) => l.length)) * fs * 0.58 + 16;
  const stacked = need > W * 0.4;
  const left = stacked ? 16 : need;
  const rowH = (classroom ? 44 : 32) + (stacked ? fs + 4 : 0), top = 8, axisH = fs * 3.2;
  const plotW = W - left - 20, H = top + rowH * cmp.length + axisH;
  let lo = Math.min(...vals), hi = Math.max(...vals);
  const pad = (hi - lo || Math.abs(hi) || 1) * 0.08;
  lo -= pad; hi += pad;
  const ticks = niceTicks(lo, hi, 5);
  lo = Math.min(lo, ticks[0]); hi = Math.max(hi, ticks[ticks.length - 1]);
  const x = (v) => left + ((v - lo) / (hi - lo)) * plotW;
  const fg = 'currentColor';
  const svg = svgEl('svg', { viewBox: `0 0 ${W} ${H}`, width: '100%', role: 'img', class: 'forest-plot', id: 'forest-plot',
    'aria-label': `forest plot: paired difference of the final validation loss for ${labels.join(', ')}, with 95 % intervals and the zero line`,
    'font-family': 'system-ui, sans-serif', 'font-size': fs });
  // axis, ticks, zero line
  const axisY = top + rowH * cmp.length + 4;
  svg.append(svgEl('line', { x1: left, x2: left + plotW, y1: axisY, y2: axisY, stroke: fg, 'stroke-opacity': 0.5 }));
  for (const t of ticks) {
    svg.append(svgEl('line', { x1: x(t), x2: x(t), y1: axisY, y2: axisY + 5, stroke: fg, 'stroke-opacity': 0.5 }));
    svg.append(svgEl('text', { x: x(t), y: axisY + 6 + fs, 'text-anchor': 'middle', fill: fg, class: 'tick' }, fmt(t, 3)));
  }
  svg.append(svgEl('text', { x: left + plotW / 2, y: axisY + 8 + 2.1 * fs, 'text-anchor': 'middle', fill: fg },
    W < 560 ? 'a − b, final val loss (nats)' : 'difference in final validation loss, a − b (nats; left of 0: a lower)'));
  svg.append(svgEl('line', { x1: x(0), x2: x(0), y1: top - 4, y2: axisY, stroke: fg, 'stroke-dasharray': '5 4', 'stroke-width': 1.5, class: 'zero-line' }));
  cmp.forEach((c, i) => {
    const y = top + rowH * i + rowH / 2 + (stacked ? (fs + 4) / 2 : 0);
    const g = svgEl('g', { class: 'forest-row', 'data-a': c.a, 'data-b': c.b });
    g.append(stacked ? svgEl('text', { x: 4, y: top + rowH * i + fs, fill: fg }, labels[i])
      : svgEl('text', { x: left - 10, y, 'text-anchor': 'end', 'dominant-baseline': 'central', fill: fg }, labels[i]));
    if (hasCi(c.ci)) {
      g.append(svgEl('line', { x1: x(c.ci[0]), x2: x(c.ci[1]), y1: y, y2: y, stroke: fg, 'stroke-width': 2.5, class: 'ci' }));
      for (const e of c.ci) g.append(svgEl('line', { x1: x(e), x2: x(e), y1: y - 6, y2: y + 6, stroke: fg, 'stroke-width': 2 }));
    }
    for (const r of c.replicates_diff || []) {
      g.append(svgEl('circle', { cx: x(r), cy: y - 9, r: 2.6, fill: variantColor(r < 0 ? c.a : c.b), 'fill-opacity': 0.8, class: 'pair' }));
    }
    g.append(svgEl('rect', { x: x(c.mean_diff) - 5, y: y - 5, width: 10, height: 10, fill: fg, class: 'mean' }));
    const t = svgEl('title', {}, `${labels[i]}: ${fmt(c.mean_diff, 4)}${hasCi(c.ci) ? ` [${fmt(c.ci[0], 4)}, ${fmt(c.ci[1], 4)}]` : ''}, n ${c.n}`);
    g.append(t);
    svg.append(g);
  });
  return svg;
}

// The paired differences of each replicate, from the variants' per-run values (replicate i of a and
// of b share a seed): added to each comparison as replicates_diff for the plot's dots.
export function withReplicateDiffs(stats) {
  const byName = new Map((stats.variants || []).map((v) => [v.name, v]));
  const values = (v) => new Map((v?.metrics?.[METRIC]?.values || []).map((x) => [x.replicate, x.value]));
  return { ...stats, comparisons: (stats.comparisons || []).map((c) => {
    if (c.metric !== METRIC) return c;
    const a = values(byName.get(c.a)), b = values(byName.get(c.b));
    const reps = Array.isArray(c.replicates) ? c.replicates : [...a.keys()].filter((r) => b.has(r));
    return { ...c, replicates_diff: reps.filter((r) => num(a.get(r)) !== null && num(b.get(r)) !== null).map((r) => a.get(r) - b.get(r)) };
  }) };
}

// The card: { el, render(stats) }.
export function answerCard(expId) {
  const body = h('div.answer-body');
  const el = h('section.card.answer#exp-answer', { 'aria-labelledby': 'answer-title', hidden: true },
    h('h3#answer-title', {}, 'What this experiment says'), body);
  function render(statsIn) {
    if (!statsIn || (statsIn.variants || []).length < 2) { el.hidden = true; return; }
    const stats = withReplicateDiffs(statsIn);
    el.hidden = false;
    const rows = stats.variants.map((v) => {
      const m = v.metrics?.[METRIC];
      return h('tr', { dataset: { variant: v.name } },
        h('th', { scope: 'row' }, h('span.variant', {}, h('span.swatch', { style: { background: variantColor(v.name) }, 'aria-hidden': 'true' }), v.name)),
        h('td.num.answer-mean', {}, m && num(m.mean) !== null ? fmt(m.mean, 4) : '–'),
        h('td.num.answer-ci', {}, m && hasCi(m.ci) ? `${fmt(m.ci[0], 4)} – ${fmt(m.ci[1], 4)}` : m?.reason ? h('span.muted', {}, m.reason) : '–'),
        h('td.num', {}, `${v.n_included} of ${v.n_runs}`));
    });
    const plot = forestPlot(stats, { classroom: document.body.classList.contains('classroom'),
      width: window.innerWidth < 700 ? window.innerWidth - 60 : 720 });
    const sentence = h('p.answer-sentence#answer-sentence', {}, answerSentence(stats));
    if (!stats.variants.some((v) => v.n_included > 0)) {
      clear(body, sentence, h('p.small.muted', {}, 'Meanwhile the curves below fill in live.'));
      return;
    }
    clear(body,
      sentence,
      h('div.answer-grid', {},
        h('div.table-scroll', {}, h('table.table.compact#answer-table', {},
          h('caption.small.muted', {}, 'Final validation loss per variant: mean over its finished replicates and the 95 % interval of that mean'),
          h('thead', {}, h('tr', {}, ['variant', 'mean', '95 % interval', 'runs'].map((c) => h('th', { scope: 'col' }, c)))),
          h('tbody', {}, rows))),
        plot ? h('figure.forest-box', {},
          h('figcaption.small', {}, h('span', {}, 'Paired differences (replicate i of both arms shares its seed and data order): ■ mean, bar = 95 % interval, dots = each pair, dashed = zero'),
            svgExportLink(() => plot, `experiment-${expId}-forest`, 'forest plot')),
          plot) : null));
  }
  return { el, render };
}
