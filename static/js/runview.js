// One run, or every run of an experiment, overlaid: loss (train and validation), τ per layer and head
// with its reference lines, attention entropy, tokens/s and gradient norm. The page fetches each
// run's series downsampled once, then appends the points that arrive over the live stream. An
// experiment with replicates also gets its bands and statistics (replicates.js) above the curves.
import { api, cached } from './api.js';
import { h, clear, fmt, frameThrottle, throttle, debounce, keepFocus, downloadLink } from './dom.js';
import { variantColor, headShade, withAlpha } from './colors.js';
import { lineChart, setAxisTypes, chartsAvailable, chartExport } from './charts.js';
import { cssVar, onTheme } from './theme.js';
import { differingKeys } from './configdiff.js';
import { emaDebiased, adamTauBound, initialTau, appendAfter, runLatest, foldLive } from './smooth.js';
import { replicatesSection } from './replicates.js';
import { subscribe } from './live.js';
import { questionDatasets, fittedRange, accuracyTable, experimentSummaries, headColor, layerDash } from './questions.js';
import { progressCell, runActions, variantTag, runName, fmtConfig } from './runs.js';
import { answerCard } from './answer.js';

const MAX_POINTS = 1000;     // asked of the API per series; min and max per bucket are kept
const REFETCH_ABOVE = 4000;  // live points pile up; past this, ask for a fresh downsampled copy
const TERMINAL = new Set(['succeeded', 'failed', 'cancelled', 'interrupted']);

// One legend entry per (variant, kind of line) for datasets that carry `variant`: the first of each
// group stands for the rest (legendText names the variant and the kind; a click on it shows or hides
// the whole group), the others leave the legend but keep their own label in the tooltip. Datasets
// without a variant (reference lines) are left as they are.
export function groupLegend(datasets) {
  const seen = new Set();
  for (const d of datasets) {
    if (!d.variant || d.hideInLegend) continue;
    const kind = d.legendKind ?? d.series ?? '';
    const key = `${d.variant}\u0000${kind}`;
    d.legendGroup = key;
    if (seen.has(key)) { d.hideInLegend = true; d.tooltip = true; continue; }
    seen.add(key);
    d.legendText = kind ? `${d.variant} (${kind})` : d.variant;
  }
  for (const d of datasets) if (d.hideInLegend && d.variant && !d.legendGroup) d.legendGroup = `${d.variant}\u0000${d.legendKind ?? d.series ?? ''}`;
  return datasets;
}

function headKeys(series, prefix) {
  return Object.keys(series).filter((k) => k.startsWith(prefix + '.'))
    .sort((a, b) => {
      const [, la, ha] = a.split('.').map(Number), [, lb, hb] = b.split('.').map(Number);
      return la - lb || ha - hb;
    });
}

// What every part of the view reads: the runs (one, or an experiment's), their series, the controls'
// state; the hooks (redraw, reload, …) are set by mount.
function runViewModel(params) {
  const isExp = params.kind === 'experiment';
  const id = Number(params.id);
  return {
    isExp, id, kind: params.kind,
    runs: [],
    title: '',
    replicates: 1,                  // runs per variant (an experiment's)
    preset: null,                   // the preset an experiment was started from
    series: new Map(),              // run id -> {key: {steps, values, wall_times}}
    state: { smooth: Number(localStorage.getItem('attnlab.smooth') ?? 0.6), logY: false, xAxis: 'step' },
    alive: true,
    loaded: false,
    scales: new Map(),              // each variant's learned scale (GET /api/attention-kinds), by name
    pending: [],                    // live events that arrived while the runs were being fetched
    everyStep: new Map(),           // run id -> its fetched loss series holds every stored point
    holeRefetches: 0,
    charts: null,
    note: h('p.muted#run-note', { 'aria-live': 'polite' }, 'Loading…'),
    titleEl: h('h2', {}, isExp ? `Experiment ${id}` : `Run ${id}`),
  };
}

const xTitle = (v) => (v.state.xAxis === 'step' ? 'step' : 'wall time since start (s)');

function runLabel(v, r) {
  const { runs } = v;
  const same = runs.filter((x) => x.variant === r.variant).length > 1;
  if (runs.length > 1 && same && v.replicates > 1) return `${r.variant} r${r.replicate}`;
  return runs.length === 1 ? runName(r) : same ? `${r.variant} #${r.id}` : r.variant;
}

function xsOf(v, r, s) {
  if (v.state.xAxis === 'step') return s.steps;
  // A resumed run's started_at is the resume time; its earlier points must not go negative.
  const all = v.series.get(r.id) || {};
  const first = all.loss?.wall_times[0] ?? s.wall_times[0] ?? 0;
  const t0 = Math.min(r.started_at || first, first);
  return s.wall_times.map((t) => t - t0);
}

function points(xs, ys) {
  const out = new Array(xs.length);
  for (let i = 0; i < xs.length; i++) out[i] = { x: xs[i], y: ys[i] };
  return out;
}

const positive = (v, pts) => (v.state.logY ? pts.filter((p) => p.y > 0) : pts);

// An experiment's whole result in one file: configs, summaries and series (JSON), or every point (CSV).
function bundleLinks(id) {
  return h('div.toolbar.small#bundle-links', {}, h('span.muted', {}, 'whole experiment: '),
    downloadLink(`/api/experiments/${id}/bundle`, `experiment-${id}.json`, 'JSON bundle', 'a.button.small'), ' ',
    downloadLink(`/api/experiments/${id}/bundle.csv`, `experiment-${id}.csv`, 'CSV of every point', 'a.button.small'));
}

// Smoothing, log-scale loss and the x axis (step or wall time).
function chartControls(v) {
  const smoothIn = h('input#smooth', { type: 'range', min: 0, max: 0.99, step: 0.01, value: v.state.smooth, 'aria-describedby': 'smooth-val' });
  const smoothVal = h('output#smooth-val', {}, v.state.smooth.toFixed(2));
  const logIn = h('input#log-y', { type: 'checkbox' });
  const xSel = h('select#x-axis', {}, h('option', { value: 'step' }, 'step'), h('option', { value: 'wall' }, 'wall time (s)'));
  smoothIn.addEventListener('input', () => {
    v.state.smooth = Number(smoothIn.value);
    smoothVal.textContent = v.state.smooth.toFixed(2);
    localStorage.setItem('attnlab.smooth', String(v.state.smooth));
    v.redraw();
  });
  logIn.addEventListener('change', () => { v.state.logY = logIn.checked; setAxisTypes(v.charts.loss, { logY: v.state.logY }); v.redraw(); });
  xSel.addEventListener('change', () => { v.state.xAxis = xSel.value; for (const c of Object.values(v.charts)) c.options.scales.x.title.text = xTitle(v); v.redraw(); });
  return h('div.toolbar.chart-controls', { role: 'group', 'aria-label': 'chart controls' },
    h('label', { for: 'smooth' }, 'smoothing (EMA)'), smoothIn, smoothVal,
    h('label.check', {}, logIn, ' log-scale loss'),
    h('label', { for: 'x-axis' }, 'x axis'), xSel);
}

// The detail charts' boxes (canvas, caption, export links), the questions' controls in them, and the
// charts made on their canvases once they are in the page.
const CHART_AXES = { loss: 'cross-entropy (nats)', tau: 'τ', entropy: 'nats', tokens: 'tokens/s', grad: '‖g‖', spread: 'τ max / min',
  efrac: 'entropy / ln(keys)', dist: 'tokens', acc: 'accuracy' };
function detailCharts(v) {
  const canvases = {};
  const box = (key, label, short) => {
    canvases[key] = h('canvas', { id: `chart-${key}`, role: 'img', 'aria-label': label });
    return h('figure.chart-box', { id: `box-${key}` },
      h('figcaption', {}, h('span', {}, label), chartExport(() => v.charts?.[key], `${v.kind}-${v.id}-${key}`, `${short} chart`)),
      h('div.chart-canvas' + (key === 'loss' ? '.tall' : ''), {}, canvases[key]));
  };
  const p = { canvases, tauHint: h('div.small.muted#tau-hint'), accTableBox: h('div#acc-table-box') };
  // The blog's open questions: spread of τ across heads, per-head entropy and distance, accuracy.
  p.logSpreadIn = h('input#log-spread', { type: 'checkbox', checked: true });
  p.headSel = h('select#head-run', { 'aria-label': 'run whose heads are drawn' });
  p.spreadBox = box('spread', 'Spread of τ across heads: max/min per layer (dashed) and over the model (bold)', 'τ spread');
  p.spreadBox.append(h('div.toolbar.small', {}, h('label.check', {}, p.logSpreadIn, ' log scale'),
    v.isExp ? h('label', { for: 'head-run' }, 'per-head charts of') : null, v.isExp ? p.headSel : null));
  p.accBox = box('acc', 'Exact-match accuracy on the task answers: overall (bold) and per offset or distance bucket (dashed)', 'accuracy');
  p.accBox.append(p.accTableBox);
  p.logSpreadIn.addEventListener('change', () => { setAxisTypes(v.charts.spread, { logY: p.logSpreadIn.checked }); v.redraw(); });
  p.headSel.addEventListener('change', () => v.redraw());
  p.tauBox = box('tau', 'τ per layer and head, with the initial √d and AdamW’s reach at unit steps (τ₀ ± Σ lr, pulled in by weight decay)', 'τ');
  p.tauBox.append(p.tauHint);
  p.el = h('div.chart-grid', {}, box('loss', 'Loss: train (solid; faint = raw, bold = smoothed) and validation (dashed)', 'loss'), p.tauBox,
    box('entropy', 'Attention entropy per layer and head (nats)', 'entropy'),
    box('tokens', 'Tokens per second', 'tokens per second'),
    box('grad', 'Gradient norm (before clipping)', 'gradient norm'),
    p.spreadBox, box('efrac', 'Attention entropy ÷ uniform entropy ln(keys), per head (colour) and layer (dash)', 'entropy fraction'),
    box('dist', 'Mean attended distance per head (tokens), head = colour, layer = dash', 'attended distance'),
    p.accBox);
  p.makeCharts = () => Object.fromEntries(Object.entries(CHART_AXES).map(([k, yTitle]) =>
    [k, lineChart(canvases[k], { xTitle: 'step', yTitle, ...(k === 'spread' ? { logY: true } : {}) })]));
  return p;
}

// What to look for, for a class: shown for an experiment started from a preset (the classroom demos)
// and in classroom mode; the figures in it are this experiment's own.
function lookForCard(v) {
  const el = h('section.card.look-for#look-for', { hidden: true, 'aria-labelledby': 'look-for-title' });
  function render() {
    const show = !!v.preset || document.body.classList.contains('classroom');
    el.hidden = !show;
    if (!show) return;
    const variants = [...new Set(v.runs.map((r) => r.variant))];
    // per variant: the mean over its runs and heads of the last entropy ÷ uniform
    const frac = variants.map((name) => {
      const vals = v.runs.filter((r) => r.variant === name).flatMap((r) => {
        const s = v.series.get(r.id) || {};
        return Object.keys(s).filter((k) => /^entropy_frac\.\d+\.\d+$/.test(k)).map((k) => s[k].values[s[k].values.length - 1]).filter(Number.isFinite);
      });
      return [name, vals.length ? vals.reduce((a, b) => a + b, 0) / vals.length : null];
    }).filter(([, f]) => f !== null);
    const uniform = frac.length && frac.every(([, f]) => f >= 0.95);
    clear(el, h('h3#look-for-title', {}, 'What to look for'),
      h('ul', {},
        h('li', {}, 'The loss curves: solid is training, dashed validation. Where the variants’ curves lie on top of each other the change ',
          'made no difference at this size and length; the answer above says whether a gap is larger than the replicates’ spread.'),
        h('li', {}, 'τ (cosine variants only): the learned temperature starts at √d; the dashed AdamW reach shows how far it could have moved, ',
          'so a τ that barely moves was not held back by its optimizer.'),
        h('li#look-for-entropy', { dataset: { uniform: String(!!uniform) } }, 'Attention entropy as a fraction of uniform: 100 % means every query spreads its weight evenly over the keys before it ',
          '— the heads have not learned where to look. ',
          frac.length ? `Now: ${frac.map(([name, f]) => `${name} ${fmt(f * 100, 3)} %`).join(', ')}${uniform ? ' — uniform: the attention maps will look flat; a longer run or a byte-level corpus gives them structure.' : '.'}` : '')));
  }
  return { el, render };
}

// --- the curves -----------------------------------------------------------------------------------
// Train loss (raw and smoothed) and validation loss of one run.
function lossDatasets(v, r, s, col, label) {
  const out = [];
  if (s.loss) {
    const xs = xsOf(v, r, s.loss);
    out.push({ label: `${label} raw`, data: positive(v, points(xs, s.loss.values)), borderColor: withAlpha(col, 0.28),
      backgroundColor: withAlpha(col, 0.28), borderWidth: 1, hideInLegend: true, tooltip: true, runId: r.id, series: 'loss',
      variant: r.variant, legendKind: 'train' });
    out.push({ label: `${label} train`, data: positive(v, points(xs, emaDebiased(s.loss.values, v.state.smooth))), borderColor: col,
      backgroundColor: col, borderWidth: 2.5, runId: r.id, series: 'loss_smoothed', variant: r.variant, legendKind: 'train' });
  }
  if (s.val_loss) {
    out.push({ label: `${label} validation`, data: positive(v, points(xsOf(v, r, s.val_loss), s.val_loss.values)), borderColor: col,
      backgroundColor: cssVar('--card', '#fff'), borderDash: [7, 4], pointRadius: 3, pointBorderWidth: 1.5, borderWidth: 2, runId: r.id, series: 'val_loss',
      variant: r.variant, legendKind: 'validation' });
  }
  return out;
}

// One line per layer and head of a per-head key (τ, entropy): one run, each head its own colour and
// each layer its own dash; several, the run's colour shaded per head.
function headDatasets(v, r, s, keys, col, label) {
  return keys.map((k, i) => {
    const [, L, H] = k.split('.');
    const hc = v.runs.length === 1 ? headColor(Number(H)) : headShade(col, i, keys.length);
    return { label: `${v.runs.length === 1 ? '' : label + ' '}L${L}H${H}`, data: points(xsOf(v, r, s[k]), s[k].values),
      borderColor: hc, backgroundColor: hc, borderDash: v.runs.length === 1 ? layerDash(Number(L)) : undefined, borderWidth: 1.5,
      runId: r.id, variant: r.variant, legendKind: 'every head' };
  });
}

// τ's reference lines for one run (√d, and AdamW's reach each way), and the run's line of the τ hint.
function tauReference(v, r, s, tk, label) {
  const c = r.config;
  const sqrtD = Math.sqrt(c.d_model / c.n_head);
  if (!tk.length) return { ds: [], note: s.loss ? `${label}: ${r.variant} has no learned τ (its scale is the fixed √d = ${fmt(sqrtD, 3)})` : null };
  const steps = s[tk[0]].steps;
  const xs = xsOf(v, r, s[tk[0]]);
  const scale = v.scales.get(c.attention);
  const tau0 = scale ? initialTau(c, scale) : NaN;
  const bound = scale ? adamTauBound(c, tau0, steps, scale) : steps.map(() => ({ lo: NaN, hi: NaN }));
  const refCol = cssVar('--ref', '#777');
  const ref = { borderColor: refCol, backgroundColor: refCol, borderWidth: 1, pointRadius: 0, runId: r.id, ref: true };
  const first = v.runs.filter((x) => headKeys(v.series.get(x.id) || {}, 'tau').length).indexOf(r) === 0;
  const finite = (x) => (Number.isFinite(x) ? x : null);
  const last = tk.map((k) => s[k].values[s[k].values.length - 1]);
  return {
    ds: [{ ...ref, label: `√d = ${fmt(sqrtD, 3)}`, data: [{ x: xs[0], y: sqrtD }, { x: xs[xs.length - 1], y: sqrtD }],
      borderDash: [2, 3], borderWidth: 2, hideInLegend: !first },
    { ...ref, label: `AdamW reach (${label})`, data: points(xs, bound.map((b) => finite(b.hi))), borderDash: [8, 4], hideInLegend: !first },
    { ...ref, label: `AdamW reach, lower (${label})`, data: points(xs, bound.map((b) => finite(b.lo))), borderDash: [8, 4], hideInLegend: true }],
    note: `${label}: τ now ${fmt(Math.min(...last), 3)} – ${fmt(Math.max(...last), 3)} (τ₀ ${fmt(tau0, 3)}, √d ${fmt(sqrtD, 3)})`,
  };
}

// Tokens per second and gradient norm of one run (raw and smoothed), into ds.tokens and ds.grad.
function rateDatasets(v, r, s, col, label, ds) {
  for (const [key, chart] of [['tokens_per_s', 'tokens'], ['grad_norm', 'grad']]) {
    if (!s[key]) continue;
    const xs = xsOf(v, r, s[key]);
    ds[chart].push({ label: `${label} raw`, data: points(xs, s[key].values), borderColor: withAlpha(col, 0.28), borderWidth: 1, hideInLegend: true, tooltip: true, runId: r.id,
      variant: r.variant, legendKind: '' });
    ds[chart].push({ label, data: points(xs, emaDebiased(s[key].values, v.state.smooth)), borderColor: col, backgroundColor: col, borderWidth: 2, runId: r.id,
      variant: r.variant, legendKind: '' });
  }
}

// Every run's curves, by chart; tauNotes: the τ hint's lines; anyTau: some run has learned τ.
function runsDatasets(v) {
  const ds = { loss: [], tau: [], entropy: [], tokens: [], grad: [], spread: [], efrac: [], dist: [], acc: [] };
  let anyTau = false;
  const tauNotes = [];
  for (const r of v.runs) {
    const s = v.series.get(r.id);
    if (!s) continue;
    const col = variantColor(r.variant);
    const label = runLabel(v, r);
    ds.loss.push(...lossDatasets(v, r, s, col, label));
    const tk = headKeys(s, 'tau');
    if (tk.length) anyTau = true;
    ds.tau.push(...headDatasets(v, r, s, tk, col, label));
    const ref = tauReference(v, r, s, tk, label);
    ds.tau.push(...ref.ds);
    if (ref.note) tauNotes.push(ref.note);
    ds.entropy.push(...headDatasets(v, r, s, headKeys(s, 'entropy'), col, label));
    rateDatasets(v, r, s, col, label, ds);
  }
  return { ds, anyTau, tauNotes };
}

// The runs whose heads the questions' per-head charts draw: every run, or the one chosen in an
// experiment (the select lists the runs that have such keys).
function headRuns(v, headSel) {
  const withHeads = v.runs.filter((r) => Object.keys(v.series.get(r.id) || {}).some((k) => k.startsWith('entropy_frac.') || k.startsWith('acc.')));
  if (v.isExp && withHeads.length) {
    const keep = headSel.value;
    if (headSel.options.length !== withHeads.length) {
      clear(headSel, withHeads.map((r) => h('option', { value: String(r.id) }, `#${r.id} ${runLabel(v, r)}`)));
      headSel.value = withHeads.some((r) => String(r.id) === keep) ? keep : String(withHeads[0].id);
    }
  }
  return new Set(v.isExp ? [Number(headSel.value)] : v.runs.map((r) => r.id));
}

// Every chart drawn again from the series, and the boxes with nothing to show hidden.
function build(v, p) {
  const { charts, runs, series } = v;
  const { ds, anyTau, tauNotes } = runsDatasets(v);
  const label = (r) => runLabel(v, r);
  Object.assign(ds, questionDatasets({ runs, series, xsOf: (r, s) => xsOf(v, r, s), label, headRuns: headRuns(v, p.headSel), logSpread: p.logSpreadIn.checked }));
  // Several runs of a variant share its colour: one legend entry per variant (and kind of line),
  // every run's and head's own label kept for the tooltip.
  if (runs.length > 1) for (const k of ['loss', 'tau', 'entropy', 'tokens', 'grad', 'spread']) groupLegend(ds[k]);
  for (const [k, chart] of Object.entries(charts)) { chart.data.datasets = ds[k]; chart.update('none'); }
  // τ's axis follows the heads' values, not the reference band around them
  const tauRange = fittedRange(ds.tau);
  charts.tau.options.scales.y.min = tauRange ? tauRange.min : undefined;
  charts.tau.options.scales.y.max = tauRange ? tauRange.max : undefined;
  charts.tau.update('none');
  p.spreadBox.hidden = !ds.spread.length;
  for (const k of ['efrac', 'dist']) document.getElementById(`box-${k}`).hidden = !ds[k].length;
  p.accBox.hidden = !ds.acc.length;
  clear(p.accTableBox, accuracyTable(runs, series, label));
  p.tauBox.hidden = false;
  p.tauHint.textContent = anyTau ? tauNotes.join(' · ') : tauNotes.join(' · ') || 'No τ recorded yet.';
  p.canvases.tau.parentElement.hidden = !anyTau;
}

// --- the run cards --------------------------------------------------------------------------------
// The config keys in which the runs on the page differ (beyond the summary line), so two runs that
// differ only in, say, tau_param do not show identical cards.
function differs(v, r) {
  const shown = ['n_layer', 'n_head', 'd_model', 'seq_len', 'batch', 'lr', 'lr_schedule', 'precision', 'corpus', 'seed', 'loss_on'];
  if (v.runs.every((x) => x.variant === x.config.attention)) shown.push('attention');
  const keys = differingKeys(v.runs, shown);
  if (!keys.length) return null;
  return h('div.small.differs', { dataset: { keys: keys.join(',') } }, h('span.muted', {}, 'differs: '),
    keys.map((k, i) => [i ? ' · ' : '', h('span.nowrap', {}, h('span.diff-key', {}, k), ' ', fmtConfig(r.config[k]))]));
}

// Last and lowest loss, last validation loss and the current τ range: the run's own summary (every
// step) first, the downsampled series on the page only for what it lacks.
function latest(v, r) {
  const x = runLatest(r, v.series.get(r.id));
  const parts = [];
  if (x.loss !== null) parts.push(`loss ${fmt(x.loss)} (min ${fmt(x.lossMin)})`);
  if (x.val !== null) parts.push(`validation ${fmt(x.val)}`);
  if (x.tauMin !== null) parts.push(`τ ${fmt(x.tauMin, 4)} – ${fmt(x.tauMax, 4)}`);
  return parts.join(' · ');
}

// The parts of a card that change with every step; replaced in place so that keyboard focus on the
// card's buttons survives a live stream.
function headerLive(v, r) {
  return [progressCell(r), differs(v, r),
    h('div.small.muted', {}, `L${r.config.n_layer} H${r.config.n_head} d${r.config.d_model} T${r.config.seq_len} B${r.config.batch} · ` +
      `lr ${fmtConfig(r.config.lr)} ${r.config.lr_schedule} · ${r.config.precision || 'fp32'} · seed ${r.seed}` +
      (r.experiment_id && v.replicates > 1 ? ` · replicate ${r.replicate}` : '') + ` · corpus ${r.config.corpus}` +
      (r.config.loss_on === 'answers' ? ' · loss on the answers' : '') +
      (r.tokens_per_s ? ` · ${fmt(r.tokens_per_s, 3)} tok/s` : '')),
    h('div.small', {}, latest(v, r))];
}

// The note, the title and a card per run; an experiment's cards come after its answer and charts,
// folded when there are many (replicates): the page opens with what the experiment says.
function runCards(v) {
  const box = h('div.run-headers');
  const count = h('span.muted#exp-runs-count');
  const fold = v.isExp ? h('details.exp-runs#exp-runs', { open: true },
    h('summary', {}, h('h3.inline', {}, 'Runs of this experiment'), ' ', count), box) : null;
  const card = (r) => h('div.run-header.card', { dataset: { runId: r.id } },
    h('div.run-title', {}, variantTag(r.variant), ' ', h('a', { href: `#/run/${r.id}` }, `#${r.id} ${runName(r)}`)),
    h('div.hdr-live', {}, headerLive(v, r)),
    h('div.toolbar', {},
      downloadLink(`/api/runs/${r.id}/metrics.csv`, `run-${r.id}-metrics.csv`, 'CSV', 'a.button.small'),
      r.checkpoint_step > 0 ? h('a.button.small', { href: `#/attention?run=${r.id}` }, 'Attention map') : null,
      runActions(r, (kind) => { if (kind === 'delete' && (!v.isExp || v.runs.length === 1)) location.hash = '#/runs'; else v.reload(); })));
  function render() {
    const { runs } = v;
    v.note.textContent = runs.some((r) => r.status === 'running' || r.status === 'queued')
      ? 'Live: new points are added as the runs train.' : `${runs.length} run${runs.length > 1 ? 's' : ''}, not training.`;
    if (runs.length > 1) {
      v.note.append(' ', h('a#compare-these', { href: `#/compare?runs=${runs.map((r) => r.id).join(',')}` }, 'Compare these runs'));
    }
    v.titleEl.textContent = v.isExp ? `Experiment ${v.id}: ${v.title}` : `Run ${v.id}: ${runs[0] ? runName(runs[0]) : ''}`;
    if (fold) {
      const by = {};
      for (const r of runs) by[r.status] = (by[r.status] || 0) + 1;
      count.textContent = `(${runs.length}: ${Object.entries(by).map(([k, n]) => `${n} ${k}`).join(', ')})`;
      // folded by default once the experiment has replicates or many runs; the reader's choice stays
      if (!fold.dataset.set) { fold.open = !(v.replicates > 1 || runs.length > 4); fold.dataset.set = '1'; }
    }
    keepFocus(box, () => clear(box, runs.map(card)));
  }
  function update() {
    for (const r of v.runs) {
      const el = box.querySelector(`.run-header[data-run-id="${r.id}"] .hdr-live`);
      if (el) clear(el, headerLive(v, r));
    }
  }
  return { box, fold, render, update };
}

// --- the series and the live stream ---------------------------------------------------------------
async function fetchSeries(v, r) {
  const d = await api(`/api/runs/${r.id}/metrics?max_points=${MAX_POINTS}`);
  const s = {};
  for (const [k, x] of Object.entries(d.series)) s[k] = { steps: x.steps.slice(), values: x.values.slice(), wall_times: x.wall_times.slice() };
  // A fetch again (a hole, a resync, too many live points): the live points past what the store
  // answered stay, since the store is behind the stream.
  for (const [k, o] of Object.entries(v.series.get(r.id) || {})) {
    const t = s[k] || (s[k] = { steps: [], values: [], wall_times: [] });
    for (let i = 0; i < o.steps.length; i++) appendAfter(t, o.steps[i], o.values[i], o.wall_times[i]);
  }
  v.series.set(r.id, s);
  const loss = d.series.loss;
  v.everyStep.set(r.id, !loss || loss.steps.length === loss.count);
  // Still a hole between the stored points and the live ones kept: the writer has not caught up yet.
  const n = loss ? loss.steps.length : 0;
  if (v.everyStep.get(r.id) && s.loss && s.loss.steps.length > n && s.loss.steps[n] > (n ? loss.steps[n - 1] : 0) + 1) refetchHole(v);
}

// The store is behind the live stream by up to the writer's interval, and the stream only reaches
// the view once it has subscribed: steps trained between the two (a run started just before the view
// opened, on a slow machine) are in neither the fetched series nor the live points. A live step past
// the fetched loss series' last step + 1 (told only while that series holds every stored step, not a
// downsampled copy) is such a hole: fetch the series again once the writer has stored it, a few
// times at most.
function leavesHole(v, r, step) {
  if (!v.everyStep.get(r.id)) return false;
  const l = v.series.get(r.id)?.loss;
  const last = l && l.steps.length ? l.steps[l.steps.length - 1] : 0;
  return step > last + 1;
}
function refetchHole(v) { if (v.holeRefetches < 10) { v.holeRefetches++; v.refetchSoon(); } }

// A live step into its run and series; true when a series grew.
function applyMetrics(v, d) {
  const r = v.runs.find((x) => x.id === d.run_id);
  if (!r) return false;
  r.step = d.step; r.total_steps = d.total_steps; r.eta_s = d.eta_s; r.status = 'running';
  if (d.tokens_per_s) r.tokens_per_s = d.tokens_per_s;
  foldLive(r, d.values || {});
  if (d.values && 'loss' in d.values && leavesHole(v, r, d.step)) refetchHole(v);
  let s = v.series.get(r.id);
  if (!s) { s = {}; v.series.set(r.id, s); }
  let grew = false;
  for (const [k, x] of Object.entries(d.values || {})) {
    if (!s[k]) s[k] = { steps: [], values: [], wall_times: [] };
    grew = appendAfter(s[k], d.step, x, d.wall_time) || grew;
    if (s[k].steps.length > REFETCH_ABOVE) v.refetchSoon();
  }
  return grew;
}

async function fetchRuns(v) {
  if (v.isExp) {
    const d = await api(`/api/experiments/${v.id}`);
    v.title = d.experiment.name;
    v.preset = d.experiment.preset || null;
    v.replicates = d.experiment.replicates || 1;
    v.runs = d.runs;
  } else {
    const d = await api(`/api/runs/${v.id}`);
    v.runs = [d.run];
  }
}

// Live steps and statuses; those that arrive while the runs are being fetched wait in v.pending.
function liveUpdates(v, { headersSoon, replicatesSoon, cards }) {
  return subscribe({
    metrics(d) {
      if (!v.loaded) { v.pending.push(['metrics', d]); return; }
      if (applyMetrics(v, d)) { v.liveRedraw(); headersSoon(); replicatesSoon(); }
    },
    status(d) {
      if (!v.loaded) { v.pending.push(['status', d]); return; }
      const r = v.runs.find((x) => x.id === d.run_id);
      if (!r) return;
      Object.assign(r, { status: d.status, step: d.step, total_steps: d.total_steps, error: d.error });
      cards.render();
      if (TERMINAL.has(d.status)) {
        v.refreshRunsSoon();
        // Everything the run reported is stored before its end is told: complete a series cut short.
        if (d.step > 0 && leavesHole(v, r, d.step + 1)) refetchHole(v);
      }
    },
    resync() { v.reload(); },
  });
}

// The live events that arrived while the runs were being fetched.
function applyPending(v) {
  for (const [type, d] of v.pending.splice(0)) {
    if (type === 'metrics') applyMetrics(v, d);
    else {
      const r = v.runs.find((x) => x.id === d.run_id);
      if (r) Object.assign(r, { status: d.status, step: d.step });
      // A run that ended while the runs were being fetched may have been read before its last
      // evaluation was stored (its final val_loss missing): read the runs again.
      if (TERMINAL.has(d.status)) v.refreshRunsSoon();
    }
  }
}

// The runs and all their series, then everything drawn; `after` draws the experiment's panels.
async function reload(v, { cards, draw, after }) {
  if (!v.alive) return;
  v.loaded = false;
  try {
    await fetchRuns(v);
    await Promise.all(v.runs.map((r) => fetchSeries(v, r)));
    if (!v.alive) return;
    v.loaded = true;
    applyPending(v);
    cards.render();
    draw();
    after();
  } catch (e) {
    v.loaded = true;
    v.note.textContent = `Could not load: ${e.message}`;
  }
}

// An experiment's panels above the curves: its answer (answer.js), the replicates' bands and tables
// (from the same /stats), the parallel coordinates of three or more runs, and the question summaries.
function experimentPanels(v) {
  if (!v.isExp) return { answer: null, repl: null, parBox: null, questions: { el: null, load: () => {} }, replSlot: h('div#replicates-slot') };
  const answer = answerCard(v.id);
  const repl = chartsAvailable()
    ? replicatesSection({ expId: v.id, runs: () => v.runs, series: (rid) => v.series.get(rid), state: v.state, onStats: (st) => answer.render(st) }) : null;
  // holds the replicates panel once the experiment is known to have replicates
  return { answer, repl, parBox: parcoordsBox(`experiment-${v.id}`), questions: experimentSummaries(v.id), replSlot: h('div#replicates-slot') };
}

// The timers of the live view: headers once per frame, the server's bands and statistics every few
// seconds while runs train, a fetch again after a hole, the run objects after a change of status.
function liveTimers(v, x, cards) {
  const withReplicates = () => x.repl && v.replicates > 1;
  const t = {
    headersSoon: frameThrottle(() => { if (v.alive) cards.update(); }),
    replicatesSoon: throttle(() => { if (v.alive && withReplicates()) x.repl.refresh(); }, 3000),
    // Without replicates the panel (which passes its /stats to the answer) is not shown: ask here.
    answerSoon: throttle(async () => {
      if (!v.alive || !x.answer || withReplicates()) return;
      try { const d = await api(`/api/experiments/${v.id}/stats`); if (v.alive) x.answer.render(d.stats); } catch { /* an older server: no answer card */ }
    }, 1000),
  };
  v.refetchSoon = debounce(() => v.reload(), 1000);
  // Run objects (status, last/min loss, checkpoint) without refetching the series.
  v.refreshRunsSoon = debounce(async () => {
    if (!v.alive) return; // a timer set before the view closed
    try { await fetchRuns(v); if (v.alive) { cards.render(); v.redraw(); t.replicatesSoon(); t.answerSoon(); if (x.parBox) x.parBox.draw(v.runs); } } catch { /* the next event retries */ }
  }, 400);
  return t;
}

export function mount(root, params) {
  const v = runViewModel(params);
  cached('/api/attention-kinds').then((d) => { v.scales = new Map(d.kinds.map((k) => [k.name, k.scale])); if (v.alive && v.loaded) v.redraw(); })
    .catch(() => { /* an older server: no AdamW reach drawn */ });
  const x = experimentPanels(v);
  const detail = detailCharts(v);
  const lookFor = v.isExp ? lookForCard(v) : null;
  const cards = runCards(v);
  clear(root,
    h('p.crumbs', {}, h('a', { href: '#/runs' }, '← all runs')),
    v.titleEl, v.isExp ? bundleLinks(v.id) : null, v.note, v.isExp ? null : cards.box,
    x.answer ? x.answer.el : null,
    lookFor ? lookFor.el : null,
    chartControls(v),
    x.replSlot,
    x.parBox ? x.parBox.el : null,
    v.isExp ? h('h3.section-title#detail-title', {}, 'Every run, in detail') : null,
    detail.el,
    x.repl ? x.repl.tablesEl : null,
    x.questions.el,
    cards.fold);

  if (!chartsAvailable()) { v.note.textContent = 'Chart.js did not load (static/vendor is built by make).'; return () => {}; }
  v.charts = detail.makeCharts();
  const draw = () => {
    build(v, detail);
    if (x.repl && v.replicates > 1) x.repl.redraw();
    if (lookFor) lookFor.render();
  };
  v.redraw = frameThrottle(() => { if (v.alive) draw(); });
  // Live steps can arrive dozens of times a second; rebuilding every chart four times a second
  // looks continuous and leaves a classroom laptop its CPU.
  v.liveRedraw = throttle(() => { if (v.alive) draw(); }, 250);
  const timers = liveTimers(v, x, cards);
  const unsub = liveUpdates(v, { ...timers, cards });
  v.reload = () => reload(v, { cards, draw, after: () => {
    if (x.parBox) x.parBox.draw(v.runs);
    x.questions.load();
    timers.answerSoon();
    if (x.repl && v.replicates > 1) {
      if (!x.repl.el.isConnected) x.replSlot.append(x.repl.el);
      x.repl.refresh();
    }
  } });
  const unTheme = onTheme(() => { v.redraw(); if (x.parBox) x.parBox.draw(v.runs); });
  v.reload();
  return () => { v.alive = false; unsub(); unTheme(); if (x.repl) x.repl.destroy(); if (x.parBox) x.parBox.destroy(); for (const c of Object.values(v.charts)) c.destroy(); };
}

// Low validation loss blue, high red (t in 0..1).
const lossColor = (t) => `hsl(${Math.round(220 - 220 * t)}, 75%, 48%)`;

// One axis of the parallel coordinates: a config key's values (or the final validation loss) put
// on 0..1. Numbers linearly, or logarithmically when positive and spread over a factor of 10 or
// more (a learning rate); anything else as categories in sorted order.
export function parAxis(values) {
  const present = values.filter((v) => v !== undefined && v !== null);
  if (present.length && present.every((v) => typeof v === 'number')) {
    const log = present.every((v) => v > 0) && Math.max(...present) / Math.min(...present) >= 10;
    const f = log ? Math.log10 : (x) => x;
    const lo = Math.min(...present.map(f)), hi = Math.max(...present.map(f));
    return { kind: log ? 'log' : 'linear', lo: log ? 10 ** lo : lo, hi: log ? 10 ** hi : hi,
      pos: (v) => (typeof v !== 'number' ? null : hi > lo ? (f(v) - lo) / (hi - lo) : 0.5) };
  }
  const cats = [...new Set(present.map(String))].sort();
  return { kind: 'category', cats, pos: (v) => (v === undefined || v === null ? null : cats.length > 1 ? cats.indexOf(String(v)) / (cats.length - 1) : 0.5) };
}

// A Chart.js plugin that draws each axis of the parallel coordinates as a line with its values written
// along it: every category at its place, or the two ends and the middle of a numeric range (the
// geometric middle on a log axis). axesNow: the axes drawn (parAxis objects).
function parAxisLabels(axesNow) {
  return {
    id: 'parAxisLabels',
    afterDatasetsDraw(c) {
      const { ctx, scales: { x, y } } = c;
      const fg = cssVar('--chart-fg', '#1d1f24');
      ctx.save();
      ctx.font = `${window.Chart.defaults.font.size}px ${window.Chart.defaults.font.family}`;
      ctx.fillStyle = fg;
      ctx.strokeStyle = fg;
      ctx.lineWidth = 1;
      ctx.textBaseline = 'middle';
      axesNow().forEach((a, j) => {
        const px = x.getPixelForValue(j);
        ctx.globalAlpha = 0.5;
        ctx.beginPath(); ctx.moveTo(px, y.getPixelForValue(0)); ctx.lineTo(px, y.getPixelForValue(1)); ctx.stroke();
        ctx.globalAlpha = 1;
        const ticks = a.kind === 'category'
          ? a.cats.map((cat, i) => [a.cats.length > 1 ? i / (a.cats.length - 1) : 0.5, cat])
          : a.hi > a.lo ? [[0, a.lo], [0.5, a.kind === 'log' ? Math.sqrt(a.lo * a.hi) : (a.lo + a.hi) / 2], [1, a.hi]].map(([p, v]) => [p, fmtConfig(Number(v.toPrecision(3)))])
            : [[0.5, fmtConfig(a.lo)]];
        const last = j === axesNow().length - 1;
        ctx.textAlign = last ? 'right' : 'left';
        for (const [p, text] of ticks) {
          const py = y.getPixelForValue(p);
          ctx.beginPath(); ctx.moveTo(px - 4, py); ctx.lineTo(px + 4, py); ctx.stroke();
          ctx.fillText(String(text), last ? px - 7 : px + 7, py);
        }
      });
      ctx.restore();
    },
  };
}

// One line per run across the axes, ending in its final validation loss, coloured by it.
function parDatasets(runs, keys, axes, lossAxis, finals) {
  return runs.map((r, i) => {
    const raw = [...keys.map((k) => r.config[k]), finals[i]];
    const t = finals[i] === null ? null : lossAxis.pos(finals[i]);
    const color = t === null ? cssVar('--muted') || '#888' : lossColor(t);
    return { label: `#${r.id} ${r.variant}`, runId: r.id, raw, finalValLoss: finals[i],
      data: [...axes.map((a, j) => a.pos(raw[j])), t],
      borderColor: color, backgroundColor: color, borderWidth: 2, pointRadius: 3, tension: 0, spanGaps: false };
  });
}

// The parallel-coordinates chart of an experiment: one line per run across the config keys that
// differ among its runs (the seed left out: replicates differ in it by design), ending in the
// run's final validation loss, coloured by it. Hidden below three runs or with no differing key.
function parcoordsBox(name) {
  const canvas = h('canvas#chart-parcoords', { role: 'img', 'aria-label': 'parallel coordinates: config keys against the final validation loss' });
  const legend = h('div.small.muted#parcoords-legend');
  let chart = null;
  const el = h('figure.chart-box.wide#box-parcoords', { hidden: true },
    h('figcaption', {}, h('span', {}, 'Config keys against the final validation loss: one line per run, blue = low, red = high'),
      chartExport(() => chart, `${name}-parcoords`, 'parallel coordinates chart')),
    h('div.chart-canvas.tall', {}, canvas), legend);
  let current = { axes: [] };
  const axisLabels = parAxisLabels(() => current.axes);
  function draw(runs) {
    const keys = differingKeys(runs, ['seed']);
    // One key of words (the attention of an A/B experiment) says no more than the answer and the
    // bands above it: the chart is for sweeps.
    const oneCategory = keys.length === 1 && runs.every((r) => typeof r.config[keys[0]] !== 'number');
    if (!window.Chart || runs.length < 3 || !keys.length || oneCategory) { el.hidden = true; return; }
    el.hidden = false;
    const finals = runs.map((r) => r.last?.val_loss?.last ?? null);
    const axes = keys.map((k) => parAxis(runs.map((r) => r.config[k])));
    const lossAxis = parAxis(finals);
    const labels = [...keys, 'final val_loss'];
    const datasets = parDatasets(runs, keys, axes, lossAxis, finals);
    legend.textContent = labels.map((k, j) => {
      const a = j < axes.length ? axes[j] : lossAxis;
      return a.kind === 'category' ? `${k}: ${a.cats.join(' → ')}` : `${k}: ${fmt(a.lo, 4)} → ${fmt(a.hi, 4)}${a.kind === 'log' ? ' (log)' : ''}`;
    }).join(' · ');
    current = { axes: [...axes, lossAxis] };
    if (chart) { chart.data.labels = labels; chart.data.datasets = datasets; chart.update('none'); return; }
    chart = new window.Chart(canvas, {
      type: 'line',
      data: { labels, datasets },
      plugins: [axisLabels],
      options: {
        animation: false, responsive: true, maintainAspectRatio: false,
        plugins: { legend: { display: false },
          tooltip: { callbacks: { label: (c) => `${c.dataset.label}: ${labels[c.dataIndex]} = ${fmtConfig(c.dataset.raw[c.dataIndex])}` } } },
        scales: { x: { type: 'category', title: { display: true, text: 'config key → final validation loss' } },
          y: { min: -0.05, max: 1.05, ticks: { display: false }, title: { display: true, text: 'low → high along each axis' } } },
      },
    });
  }
  return { el, draw, destroy: () => { if (chart) chart.destroy(); chart = null; } };
}

