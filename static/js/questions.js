// The seed blog's open questions in the run and experiment views: how far the heads spread apart
// (tau across heads per layer and overall, attention entropy as a fraction of uniform and mean
// attended distance per head), exact-match accuracy on task corpora (overall and per offset or
// distance bucket, with a table of the latest values), and for an experiment the summaries over its
// replicates from /api/experiments/{id}/head-spread and /accuracy.
import { api } from './api.js';
import { h, clear, fmt, downloadLink } from './dom.js';
import { variantColor, themed, withAlpha } from './colors.js';

// One colour per head (Okabe–Ito, then more), one dash pattern per layer.
const HEAD_COLORS = ['#0072B2', '#D55E00', '#009E73', '#CC79A7', '#E69F00', '#56B4E9', '#7B4EA3', '#000000',
  '#8C564B', '#7F7F7F', '#F0E442', '#117733', '#882255', '#44AA99', '#999933', '#AA4499'];
const LAYER_DASH = [[], [7, 3], [2, 2], [10, 3, 2, 3], [1, 3], [12, 4], [4, 2, 1, 2], [6, 6]];

export function headColor(h) { return themed(HEAD_COLORS[h % HEAD_COLORS.length]); }
export function layerDash(l) { return LAYER_DASH[l % LAYER_DASH.length]; }

// Keys "prefix.L.H" of a run's series, by layer then head.
export function perHeadKeys(series, prefix) {
  return Object.keys(series || {}).filter((k) => k.startsWith(prefix + '.') && k.split('.').length === 3)
    .sort((a, b) => {
      const [, la, ha] = a.split('.').map(Number), [, lb, hb] = b.split('.').map(Number);
      return la - lb || ha - hb;
    });
}

// Keys "prefix.L" (one per layer), by layer.
export function perLayerKeys(series, prefix) {
  return Object.keys(series || {}).filter((k) => k.startsWith(prefix + '.') && k.split('.').length === 2)
    .sort((a, b) => Number(a.split('.')[1]) - Number(b.split('.')[1]));
}

// Accuracy bucket keys acc.<bucket>, in numeric order of the bucket (k1 k2 k4 … / d1 d2 d4 …).
export function accKeys(series) {
  return Object.keys(series || {}).filter((k) => k.startsWith('acc.'))
    .sort((a, b) => (Number(a.replace(/^acc\.[a-z]+/, '')) - Number(b.replace(/^acc\.[a-z]+/, ''))) || a.localeCompare(b));
}

function pts(xs, ys, positiveOnly) {
  const out = [];
  for (let i = 0; i < xs.length; i++) {
    const y = ys[i];
    if (positiveOnly && !(y > 0)) continue;
    out.push({ x: xs[i], y });
  }
  return out;
}

// Datasets for the four charts of the questions, over the runs shown:
//   spread  tau max/min across heads: per layer (the layer's dash) and over the model (bold), every run
//   efrac   entropy / ln(keys) per head, head colour and layer dash, for the runs in `headRuns`
//   dist    mean attended distance per head, the same
//   acc     accuracy: acc per run (bold), and per bucket for the runs in `headRuns`
// ctx: { runs, series (Map id -> series), xsOf(r, s), label(r), headRuns (set of run ids), logSpread }
export function questionDatasets(ctx) {
  const ds = { spread: [], efrac: [], dist: [], acc: [] };
  const many = ctx.runs.length > 1;
  for (const r of ctx.runs) {
    const s = ctx.series.get(r.id);
    if (!s) continue;
    const col = variantColor(r.variant);
    const label = ctx.label(r);
    const heads = ctx.headRuns.has(r.id);
    if (s.tau_ratio) {
      ds.spread.push({ label: `${label}: whole model`, data: pts(ctx.xsOf(r, s.tau_ratio), s.tau_ratio.values, ctx.logSpread),
        borderColor: col, backgroundColor: col, borderWidth: 3, runId: r.id, series: 'tau_ratio', variant: r.variant, legendKind: 'whole model' });
      for (const k of perLayerKeys(s, 'tau_ratio')) {
        const L = Number(k.split('.')[1]);
        ds.spread.push({ label: `${label}: layer ${L}`, data: pts(ctx.xsOf(r, s[k]), s[k].values, ctx.logSpread),
          borderColor: withAlpha(col, 0.75), backgroundColor: col, borderWidth: 1.5, borderDash: layerDash(L + 1),
          runId: r.id, series: k, variant: r.variant, legendKind: `layer ${L}` });
      }
    }
    for (const [prefix, chart] of [['entropy_frac', 'efrac'], ['distance', 'dist']]) {
      if (!heads) continue;
      for (const k of perHeadKeys(s, prefix)) {
        const [, L, H] = k.split('.').map(Number);
        const c = headColor(H);
        ds[chart].push({ label: `${many ? label + ' ' : ''}L${L}H${H}`, data: pts(ctx.xsOf(r, s[k]), s[k].values),
          borderColor: c, backgroundColor: c, borderWidth: 1.5, borderDash: layerDash(L), runId: r.id, series: k });
      }
    }
    if (s.acc) {
      ds.acc.push({ label: `${label}: acc`, data: pts(ctx.xsOf(r, s.acc), s.acc.values), borderColor: col,
        backgroundColor: col, borderWidth: 3, pointRadius: 2, runId: r.id, series: 'acc' });
      if (heads) {
        accKeys(s).forEach((k, i) => {
          const c = headColor(i + 1);
          ds.acc.push({ label: `${many ? label + ' ' : ''}${k}`, data: pts(ctx.xsOf(r, s[k]), s[k].values), borderColor: c,
            backgroundColor: c, borderWidth: 1.5, borderDash: [5, 3], pointRadius: 2, runId: r.id, series: k });
        });
      }
    }
  }
  return ds;
}

// y limits fitted to the data of the datasets that are not reference lines (ref: true), with a
// little room: so a reference band far from the curves does not flatten them.
export function fittedRange(datasets) {
  let lo = Infinity, hi = -Infinity;
  for (const d of datasets) {
    if (d.ref) continue;
    for (const p of d.data) if (Number.isFinite(p.y)) { lo = Math.min(lo, p.y); hi = Math.max(hi, p.y); }
  }
  if (!Number.isFinite(lo)) return null;
  const pad = hi > lo ? (hi - lo) * 0.08 : Math.max(Math.abs(hi) * 0.01, 1e-3);
  return { min: lo - pad, max: hi + pad };
}

// The latest accuracy of every run that has one, per bucket: a table (runs × acc, buckets).
export function accuracyTable(runs, series, label) {
  const rows = runs.map((r) => ({ r, s: series.get(r.id) || {} })).filter((x) => x.s.acc);
  if (!rows.length) return null;
  const keys = [...new Set(rows.flatMap((x) => accKeys(x.s)))]
    .sort((a, b) => (Number(a.replace(/^acc\.[a-z]+/, '')) - Number(b.replace(/^acc\.[a-z]+/, ''))) || a.localeCompare(b));
  const last = (ser) => (ser && ser.values.length ? ser.values[ser.values.length - 1] : null);
  const lastStep = (ser) => (ser && ser.steps.length ? ser.steps[ser.steps.length - 1] : null);
  return h('div.table-scroll', {},
    h('table.table.compact#acc-table', {},
      h('caption.small.muted', {}, 'Exact-match accuracy on the answers at the latest evaluation: overall and per offset (k) or distance bucket (d)'),
      h('thead', {}, h('tr', {}, ['run', 'step', 'acc', ...keys.map((k) => k.slice(4))].map((c) => h('th', { scope: 'col' }, c)))),
      h('tbody', {}, rows.map(({ r, s }) => h('tr', { dataset: { runId: r.id } },
        h('th', { scope: 'row' }, label(r)),
        h('td.num', {}, fmt(lastStep(s.acc))),
        h('td.num', {}, fmt(last(s.acc), 3)),
        keys.map((k) => h('td.num', {}, fmt(last(s[k]), 3))))))));
}

function summaryText(sm) {
  if (!sm || sm.mean === null || sm.mean === undefined) return '–';
  const ci = sm.ci && sm.ci[0] !== null && sm.ci[1] !== null ? ` [${fmt(sm.ci[0], 3)}, ${fmt(sm.ci[1], 3)}]` : '';
  return `${fmt(sm.mean, 4)}${ci}`;
}

// An experiment's summaries: head spread (when its runs record it) and accuracy (when they have
// task corpora), fetched once and redrawn on reload.
export function experimentSummaries(expId) {
  const box = h('div.question-summaries');
  const load = async () => {
    const parts = [];
    try {
      const hs = (await api(`/api/experiments/${expId}/head-spread`)).head_spread;
      const anyRuns = hs.variants.some((v) => v.runs.some((r) => r.last_step >= 0));
      if (anyRuns) {
        const rows = [];
        for (const v of hs.variants) {
          for (const [m, s] of Object.entries(v.metrics)) {
            rows.push(h('tr', {}, h('th', { scope: 'row' }, v.name), h('td', {}, m), h('td.num', {}, fmt(s.end?.n)),
              h('td.num', {}, summaryText(s.at)), h('td.num', {}, summaryText(s.end)), h('td.num', {}, summaryText(s.change)),
              h('td.num', {}, s.change?.p === null || s.change?.p === undefined ? '–' : fmt(s.change.p, 3))));
          }
        }
        parts.push(h('section.card#head-spread', {},
          h('h3', {}, 'Do the heads specialise? Spread across heads, mean [95% interval] over replicates'),
          h('ul.small', {}, hs.answer.map((a) => h('li', {}, a))),
          h('div.table-scroll', {}, h('table.table.compact', {},
            h('thead', {}, h('tr', {}, ['variant', 'metric', 'n', `step ${hs.at_step}`, 'end', 'change', 'p'].map((c) => h('th', { scope: 'col' }, c)))),
            h('tbody', {}, rows))),
          h('div.toolbar', {}, downloadLink(`/api/experiments/${expId}/head-spread.csv`, `experiment-${expId}-head-spread.csv`, 'CSV', 'a.button.small'))));
      }
    } catch { /* an older server: no summary */ }
    try {
      const acc = (await api(`/api/experiments/${expId}/accuracy`)).accuracy;
      const withAcc = acc.variants.filter((v) => v.keys.length);
      if (withAcc.length) {
        const keys = [...new Set(withAcc.flatMap((v) => v.keys.filter((k) => k !== 'acc')))]
          .sort((a, b) => (Number(a.replace(/^acc\.[a-z]+/, '')) - Number(b.replace(/^acc\.[a-z]+/, ''))) || a.localeCompare(b));
        parts.push(h('section.card#accuracy-summary', {},
          h('h3', {}, 'Positional precision: exact-match accuracy at the last evaluation, mean [95% interval] over replicates'),
          h('div.table-scroll', {}, h('table.table.compact', {},
            h('thead', {}, h('tr', {}, ['variant', 'task', 'n', 'acc', ...keys.map((k) => k.slice(4))].map((c) => h('th', { scope: 'col' }, c)))),
            h('tbody', {}, withAcc.map((v) => h('tr', {}, h('th', { scope: 'row' }, v.name), h('td', {}, v.task?.kind || v.corpus || ''),
              h('td.num', {}, fmt(v.acc.acc?.n)), h('td.num', {}, summaryText(v.acc.acc)),
              keys.map((k) => h('td.num', {}, summaryText(v.acc[k])))))))),
          h('div.toolbar', {}, downloadLink(`/api/experiments/${expId}/accuracy.csv`, `experiment-${expId}-accuracy.csv`, 'CSV', 'a.button.small'))));
      }
    } catch { /* an older server */ }
    clear(box, parts);
  };
  return { el: box, load };
}
