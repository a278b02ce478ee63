// The replicates of an experiment: per variant the mean ± std band over its replicate runs of the
// training loss, the validation loss, τ (mean over layers and heads) and the attention entropy (same),
// from GET /api/experiments/{id}/series, with each replicate drawn faint; and the statistics of
// GET /api/experiments/{id}/stats: per variant and metric the mean with its 95 % interval (ci_method),
// and between every two variants the paired difference (replicate i of both shares its seed and data
// order) with its interval, the paired t-test's p, Holm's adjusted p and a bootstrap interval.
// The run view mounts it for an experiment with more than one replicate.
import { api } from './api.js';
import { h, clear, fmt, downloadLink } from './dom.js';
import { variantColor, withAlpha } from './colors.js';
import { lineChart, setAxisTypes, chartExport } from './charts.js';
import { emaDebiased, bandPoints } from './smooth.js';

const MAX_POINTS = 1000;

// Each band chart: the series key of /series, how a run's own faint line is made from its series
// (one key, or the mean over its per-head keys), and whether smoothing applies.
const BANDS = [
  { id: 'loss', key: 'loss', label: 'Training loss: mean ± std over the replicates, each replicate faint', short: 'training loss band',
    y: 'cross-entropy (nats)', smooth: true, own: 'loss' },
  { id: 'val', key: 'val_loss', label: 'Validation loss: mean ± std over the replicates', short: 'validation loss band',
    y: 'cross-entropy (nats)', smooth: false, own: 'val_loss', points: true },
  { id: 'tau', key: 'tau.mean', label: 'τ (mean over layers and heads): mean ± std over the replicates', short: 'τ band',
    y: 'τ', smooth: false, ownPrefix: 'tau.' },
  { id: 'entropy', key: 'entropy.mean', label: 'Attention entropy (mean over heads): mean ± std over the replicates',
    short: 'entropy band', y: 'nats', smooth: true, ownPrefix: 'entropy.' },
];

// What each metric of /stats is, in words for the table.
const METRIC_TEXT = {
  final_train_loss: 'final training loss (mean of the last k steps)',
  final_val_loss: 'final validation loss',
  min_val_loss: 'lowest validation loss',
  final_tau_spread: 'final τ spread (max − min over heads)',
  final_tau_mean: 'final τ (mean over heads)',
  tau_drift: 'τ drift (final mean − initial; p: drift ≠ 0)',
  final_entropy_mean: 'final attention entropy (mean over heads)',
};

const num = (v) => (typeof v === 'number' && Number.isFinite(v) ? v : null);
const ci = (c) => (c && num(c[0]) !== null && num(c[1]) !== null ? `${fmt(c[0], 4)} – ${fmt(c[1], 4)}` : '–');
const pText = (p) => (num(p) === null ? '–' : p < 1e-4 ? p.toExponential(1) : fmt(p, 2));

// A run's own curve for a band: its series, or the mean over its per-head series at the steps where
// every head has a point.
function ownCurve(s, spec) {
  if (!s) return null;
  if (spec.own) return s[spec.own] ? { steps: s[spec.own].steps, values: s[spec.own].values } : null;
  const keys = Object.keys(s).filter((k) => k.startsWith(spec.ownPrefix) && /\.\d+\.\d+$/.test(k));
  if (!keys.length) return null;
  const acc = new Map();
  for (const k of keys) s[k].steps.forEach((st, i) => {
    const a = acc.get(st) || { sum: 0, n: 0 };
    a.sum += s[k].values[i]; a.n++;
    acc.set(st, a);
  });
  const steps = [...acc.keys()].filter((st) => acc.get(st).n === keys.length).sort((a, b) => a - b);
  return { steps, values: steps.map((st) => acc.get(st).sum / keys.length) };
}

// One band's figure: its caption with the export menu, its canvas, and the line said when it is empty.
function bandBox(b, expId, charts, canvases, empty) {
  canvases[b.id] = h('canvas', { id: `band-${b.id}`, role: 'img', 'aria-label': b.label });
  empty[b.id] = h('p.small.muted', { hidden: true }, b.id === 'tau' ? 'No variant of this experiment learns τ.' : 'No points yet.');
  return h('figure.chart-box', { id: `band-box-${b.id}` },
    h('figcaption', {}, h('span', {}, b.label), chartExport(() => charts[b.id], `experiment-${expId}-${b.id}-band`, b.short)),
    h('div.chart-canvas' + (b.id === 'loss' ? '.tall' : ''), {}, canvases[b.id]), empty[b.id]);
}

// Each replicate of a variant's band, faint, as its own dataset (drawn under the band).
function replicateLines(band, b, runs, series, col, w) {
  const ds = [];
  for (const r of band.runs) {
    const run = runs.find((x) => x.id === r.id);
    const own = ownCurve(series(r.id), b);
    if (!run || !own || !own.steps.length) continue;
    const ys = emaDebiased(own.values, w);
    ds.push({ label: `${band.variant} r${r.replicate}`, data: own.steps.map((x, i) => ({ x, y: ys[i] })),
      borderColor: withAlpha(col, 0.45), backgroundColor: withAlpha(col, 0.45), borderWidth: 1, pointRadius: 0,
      hideInLegend: true, tooltip: true, replicate: r.replicate, variant: band.variant, legendGroup: band.variant });
  }
  return ds;
}

// The band: mean − std, then mean + std filled down to it, then the mean on top (none without points).
function bandLines(band, b, col, w) {
  const pts = bandPoints(band, w);
  if (!pts.length) return [];
  const n = Math.max(0, ...band.n.filter((x) => typeof x === 'number'));
  return [
    { label: `${band.variant} mean − std`, data: pts.map((p) => ({ x: p.x, y: p.lo })), borderColor: withAlpha(col, 0.5),
      backgroundColor: 'transparent', borderWidth: 0.5, pointRadius: 0, hideInLegend: true, fill: false, band: 'lo', variant: band.variant, legendGroup: band.variant },
    { label: `${band.variant} mean + std`, data: pts.map((p) => ({ x: p.x, y: p.hi })), borderColor: withAlpha(col, 0.5),
      backgroundColor: withAlpha(col, 0.2), borderWidth: 0.5, pointRadius: 0, hideInLegend: true, fill: '-1', band: 'hi', variant: band.variant, legendGroup: band.variant },
    { label: `${band.variant} (mean of ${n})`, data: pts.map((p) => ({ x: p.x, y: p.mean })), borderColor: col, backgroundColor: col,
      borderWidth: 2.5, pointRadius: b.points ? 3 : 0, band: 'mean', variant: band.variant, legendGroup: band.variant },
  ];
}

// The band charts of a section: its { charts, canvases, empty, bands } and the page's opts.
function drawBands(sec, opts) {
  const runs = opts.runs();
  setAxisTypes(sec.charts.loss, { logY: opts.state.logY });
  for (const b of BANDS) {
    const ds = [];
    for (const band of sec.bands[b.key] || []) {
      const col = variantColor(band.variant);
      const w = b.smooth ? opts.state.smooth : 0;
      ds.push(...replicateLines(band, b, runs, opts.series, col, w), ...bandLines(band, b, col, w));
    }
    sec.charts[b.id].data.datasets = ds;
    sec.charts[b.id].update('none');
    // an empty chart keeps its place in the grid (stacked layouts stay aligned) and says why
    sec.canvases[b.id].parentElement.hidden = !ds.length;
    sec.empty[b.id].hidden = !!ds.length;
  }
}

// The table of /stats per variant and metric: mean ± std, its interval, n (and p for τ drift).
function summaryTable(stats) {
  const variants = stats.variants;
  const metrics = stats.metrics.map((m) => m.name).filter((m) => variants.some((v) => v.metrics[m]));
  const head = h('tr', {}, h('th', { scope: 'col' }, 'metric'),
    variants.map((v) => h('th', { scope: 'col' }, h('span.variant', {}, h('span.swatch', { style: `background:${variantColor(v.name)}` }), v.name),
      h('div.small.muted', {}, `${v.n_included} of ${v.n_runs} runs`))));
  const rows = metrics.map((m) => h('tr', { dataset: { metric: m } }, h('th', { scope: 'row' }, METRIC_TEXT[m] || m),
    variants.map((v) => {
      const s = v.metrics[m];
      if (!s) return h('td.muted', {}, '–');
      return h('td.num', { dataset: { variant: v.name } },
        h('div', {}, h('strong', {}, fmt(s.mean, 4)), s.std !== null ? ` ± ${fmt(s.std, 2)} (std)` : ''),
        h('div.small', {}, s.reason ? h('span.muted', {}, s.reason) : `95 % CI ${ci(s.ci)}${s.ci_method === 'bootstrap' ? ' (bootstrap)' : ''}`),
        m === 'tau_drift' && num(s.p) !== null ? h('div.small', {}, `p ${pText(s.p)}`) : null,
        h('div.small.muted', {}, `n ${s.n}`));
    })));
  return h('div.table-scroll', {}, h('table.table.stats-table#stats-table', {},
    h('caption.small.muted', {}, `Per variant: mean ± standard deviation over the succeeded replicates, 95 % interval of the mean (Student-t; the percentile bootstrap where a t interval would cross the metric's bound, e.g. below 0 for a spread, and marked so); final training loss averages the last ${stats.k} steps.`),
    h('thead', {}, head), h('tbody', {}, rows)));
}

// One paired comparison of two variants on a metric, as a row (marked .sig where Holm's p < 0.05).
function comparisonRow(c) {
  const sig = num(c.p_holm) !== null && c.p_holm < 0.05;
  return h('tr' + (sig ? '.sig' : ''), { dataset: { metric: c.metric, a: c.a, b: c.b } },
    h('th', { scope: 'row' }, METRIC_TEXT[c.metric] || c.metric),
    h('td', {}, `${c.a} − ${c.b}`),
    h('td.num', {}, String(c.n)),
    h('td.num', {}, h('strong', {}, fmt(c.mean_diff, 4))),
    h('td.num', {}, ci(c.ci)),
    h('td.num', {}, pText(c.p)),
    h('td.num', {}, pText(c.p_holm), sig ? h('span.sr-only', {}, ' (below 0.05)') : null),
    h('td.num', {}, ci(c.bootstrap_ci)),
    h('td.small.muted', {}, c.reason || ''));
}

// The table of the paired differences between every two variants.
function comparisonTable(stats) {
  return h('div.table-scroll', {}, h('table.table.stats-table#comparison-table', {},
    h('caption.small.muted', {}, `Paired by replicate (same seed and data order): difference a − b, its 95 % t interval, the paired t-test's p, Holm's adjustment over the pairs of each metric (bold where below 0.05), and a percentile bootstrap interval (${stats.bootstrap.resamples} resamples, seed ${stats.bootstrap.seed}).`),
    h('thead', {}, h('tr', {}, ['metric', 'a − b', 'n', 'mean difference', '95 % CI (t)', 'p', 'p (Holm)', '95 % CI (bootstrap)', 'note']
      .map((c) => h('th', { scope: 'col' }, c)))),
    h('tbody', {}, stats.comparisons.map(comparisonRow))));
}

function statsTables(stats) {
  if (!stats) return [];
  const summary = summaryTable(stats);
  return stats.comparisons.length ? [summary, comparisonTable(stats)] : [summary];
}

// The bands (by series key) and the statistics of an experiment, fetched together.
async function fetchReplicates(expId) {
  const [b, s] = await Promise.all([
    Promise.all(BANDS.map((x) => api(`/api/experiments/${expId}/series?key=${encodeURIComponent(x.key)}&max_points=${MAX_POINTS}`))),
    api(`/api/experiments/${expId}/stats`)]);
  const bands = {};
  BANDS.forEach((x, i) => { bands[x.key] = b[i].variants; });
  return { bands, stats: s.stats };
}

function replicatesNoteText(stats) {
  const done = stats.variants.reduce((a, v) => a + v.n_included, 0), all = stats.variants.reduce((a, v) => a + v.n_runs, 0);
  return `${stats.experiment.replicates} replicates per variant (seeds seed, seed+1, …; replicate i of every variant shares its seed and data order). ` +
    `Bands are the mean ± one standard deviation over the replicates at each step; the statistics use the ${done} of ${all} runs that succeeded.`;
}

// The section's two cards: the band charts (el) and the statistics tables (tablesEl).
function replicatesCards(expId, sec) {
  const boxes = BANDS.map((b) => bandBox(b, expId, sec.charts, sec.canvases, sec.empty));
  const el = h('section.card#replicates', { 'aria-labelledby': 'replicates-title', hidden: true },
    h('h3#replicates-title', {}, 'Replicates: one colour per variant, its mean ± std band, each replicate a thin line'),
    sec.note,
    h('div.chart-grid', {}, boxes));
  // The tables of every figure, placed by the page after the detail charts.
  const tablesEl = h('section.card#replicate-stats', { 'aria-labelledby': 'replicate-stats-title', hidden: true },
    h('div.toolbar', {}, h('h3.inline#replicate-stats-title', {}, 'Statistics over the replicates'), h('span.spacer'),
      downloadLink(`/api/experiments/${expId}/stats.csv`, `experiment-${expId}-stats.csv`, 'CSV', 'a.button.small')),
    sec.statsBox);
  return { el, tablesEl };
}

// opts: { expId, runs() (the page's runs), series(id) (a run's fetched series), state ({smooth, logY}) }.
// Returns { el, refresh() (refetch bands and statistics), redraw() (after a control changed), destroy() }.
export function replicatesSection(opts) {
  const sec = { charts: {}, canvases: {}, empty: {}, bands: {},
    note: h('p.muted.small#replicates-note', { 'aria-live': 'polite' }, 'Loading the replicates…'),
    statsBox: h('div#stats-tables') };
  let stats = null, alive = true, busy = false, again = false;
  const { el, tablesEl } = replicatesCards(opts.expId, sec);
  for (const b of BANDS) sec.charts[b.id] = lineChart(sec.canvases[b.id], { xTitle: 'step', yTitle: b.y });

  async function refresh() {
    if (!alive) return;
    if (busy) { again = true; return; }
    busy = true;
    try {
      const got = await fetchReplicates(opts.expId);
      if (!alive) return;
      sec.bands = got.bands;
      stats = got.stats;
      el.hidden = false;
      tablesEl.hidden = false;
      if (opts.onStats) opts.onStats(stats);
      sec.note.textContent = replicatesNoteText(stats);
      clear(sec.statsBox, statsTables(stats));
      drawBands(sec, opts);
    } catch (e) {
      sec.note.textContent = `Could not load the replicates: ${e.message}`;
    } finally {
      busy = false;
      if (again && alive) { again = false; refresh(); }
    }
  }

  return {
    el,
    tablesEl,
    refresh,
    redraw: () => { if (alive && stats) drawBands(sec, opts); },
    destroy: () => { alive = false; for (const c of Object.values(sec.charts)) c.destroy(); },
  };
}
