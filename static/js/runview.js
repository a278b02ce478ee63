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

export function mount(root, params) {
  const isExp = params.kind === 'experiment';
  const id = Number(params.id);
  let runs = [];
  let title = '';
  let replicates = 1;               // runs per variant (an experiment's)
  let preset = null;                // the preset an experiment was started from
  const series = new Map();        // run id -> {key: {steps, values, wall_times}}
  const state = { smooth: Number(localStorage.getItem('attnlab.smooth') ?? 0.6), logY: false, xAxis: 'step' };
  let alive = true;
  let loaded = false;
  // Each variant's learned scale (GET /api/attention-kinds), by name: how its τ starts and moves.
  let scales = new Map();
  cached('/api/attention-kinds').then((d) => { scales = new Map(d.kinds.map((k) => [k.name, k.scale])); if (alive && loaded) redraw(); })
    .catch(() => { /* an older server: no AdamW reach drawn */ });
  const pending = [];

  const headerBox = h('div.run-headers');
  const titleEl = h('h2', {}, isExp ? `Experiment ${id}` : `Run ${id}`);
  const note = h('p.muted#run-note', { 'aria-live': 'polite' }, 'Loading…');
  // An experiment's whole result in one file: configs, summaries and series (JSON), or every point (CSV).
  const bundleBar = isExp ? h('div.toolbar.small#bundle-links', {}, h('span.muted', {}, 'whole experiment: '),
    downloadLink(`/api/experiments/${id}/bundle`, `experiment-${id}.json`, 'JSON bundle', 'a.button.small'), ' ',
    downloadLink(`/api/experiments/${id}/bundle.csv`, `experiment-${id}.csv`, 'CSV of every point', 'a.button.small')) : null;

  const smoothIn = h('input#smooth', { type: 'range', min: 0, max: 0.99, step: 0.01, value: state.smooth, 'aria-describedby': 'smooth-val' });
  const smoothVal = h('output#smooth-val', {}, state.smooth.toFixed(2));
  const logIn = h('input#log-y', { type: 'checkbox' });
  const xSel = h('select#x-axis', {}, h('option', { value: 'step' }, 'step'), h('option', { value: 'wall' }, 'wall time (s)'));
  smoothIn.addEventListener('input', () => {
    state.smooth = Number(smoothIn.value);
    smoothVal.textContent = state.smooth.toFixed(2);
    localStorage.setItem('attnlab.smooth', String(state.smooth));
    redraw();
  });
  logIn.addEventListener('change', () => { state.logY = logIn.checked; setAxisTypes(charts.loss, { logY: state.logY }); redraw(); });
  xSel.addEventListener('change', () => { state.xAxis = xSel.value; for (const c of Object.values(charts)) c.options.scales.x.title.text = xTitle(); redraw(); });
  const xTitle = () => (state.xAxis === 'step' ? 'step' : 'wall time since start (s)');

  const canvases = {};
  const box = (key, label, short) => {
    canvases[key] = h('canvas', { id: `chart-${key}`, role: 'img', 'aria-label': label });
    return h('figure.chart-box', { id: `box-${key}` },
      h('figcaption', {}, h('span', {}, label), chartExport(() => charts?.[key], `${params.kind}-${id}-${key}`, `${short} chart`)),
      h('div.chart-canvas' + (key === 'loss' ? '.tall' : ''), {}, canvases[key]));
  };
  const tauHint = h('div.small.muted#tau-hint');
  // The blog's open questions: spread of τ across heads, per-head entropy and distance, accuracy.
  const logSpreadIn = h('input#log-spread', { type: 'checkbox', checked: true });
  const headSel = h('select#head-run', { 'aria-label': 'run whose heads are drawn' });
  const spreadBox = box('spread', 'Spread of τ across heads: max/min per layer (dashed) and over the model (bold)', 'τ spread');
  spreadBox.append(h('div.toolbar.small', {}, h('label.check', {}, logSpreadIn, ' log scale'),
    isExp ? h('label', { for: 'head-run' }, 'per-head charts of') : null, isExp ? headSel : null));
  const accBox = box('acc', 'Exact-match accuracy on the task answers: overall (bold) and per offset or distance bucket (dashed)', 'accuracy');
  const accTableBox = h('div#acc-table-box');
  accBox.append(accTableBox);
  const questions = isExp ? experimentSummaries(id) : { el: null, load: () => {} };
  logSpreadIn.addEventListener('change', () => { setAxisTypes(charts.spread, { logY: logSpreadIn.checked }); redraw(); });
  headSel.addEventListener('change', () => redraw());
  const lossBox = box('loss', 'Loss: train (solid; faint = raw, bold = smoothed) and validation (dashed)', 'loss');
  const tauBox = box('tau', 'τ per layer and head, with the initial √d and AdamW’s reach at unit steps (τ₀ ± Σ lr, pulled in by weight decay)', 'τ');
  tauBox.append(tauHint);
  // An experiment leads with its answer (answer.js), from the same /stats the replicates panel reads.
  const answer = isExp ? answerCard(id) : null;
  const repl = isExp && chartsAvailable()
    ? replicatesSection({ expId: id, runs: () => runs, series: (rid) => series.get(rid), state, onStats: (st) => answer.render(st) }) : null;
  const replSlot = h('div#replicates-slot'); // holds the panel once the experiment is known to have replicates
  // An experiment of three or more runs: its config keys against the final validation loss.
  const parBox = isExp ? parcoordsBox(`experiment-${id}`) : null;
  // What to look for, for a class: shown for an experiment started from a preset (the classroom
  // demos) and in classroom mode; the figures in it are this experiment's own.
  const lookFor = isExp ? h('section.card.look-for#look-for', { hidden: true, 'aria-labelledby': 'look-for-title' }) : null;
  function renderLookFor() {
    if (!lookFor) return;
    const show = !!preset || document.body.classList.contains('classroom');
    lookFor.hidden = !show;
    if (!show) return;
    const variants = [...new Set(runs.map((r) => r.variant))];
    // per variant: the mean over its runs and heads of the last entropy ÷ uniform
    const frac = variants.map((v) => {
      const vals = runs.filter((r) => r.variant === v).flatMap((r) => {
        const s = series.get(r.id) || {};
        return Object.keys(s).filter((k) => /^entropy_frac\.\d+\.\d+$/.test(k)).map((k) => s[k].values[s[k].values.length - 1]).filter(Number.isFinite);
      });
      return [v, vals.length ? vals.reduce((a, b) => a + b, 0) / vals.length : null];
    }).filter(([, f]) => f !== null);
    const uniform = frac.length && frac.every(([, f]) => f >= 0.95);
    clear(lookFor, h('h3#look-for-title', {}, 'What to look for'),
      h('ul', {},
        h('li', {}, 'The loss curves: solid is training, dashed validation. Where the variants’ curves lie on top of each other the change ',
          'made no difference at this size and length; the answer above says whether a gap is larger than the replicates’ spread.'),
        h('li', {}, 'τ (cosine variants only): the learned temperature starts at √d; the dashed AdamW reach shows how far it could have moved, ',
          'so a τ that barely moves was not held back by its optimizer.'),
        h('li#look-for-entropy', { dataset: { uniform: String(!!uniform) } }, 'Attention entropy as a fraction of uniform: 100 % means every query spreads its weight evenly over the keys before it ',
          '— the heads have not learned where to look. ',
          frac.length ? `Now: ${frac.map(([v, f]) => `${v} ${fmt(f * 100, 3)} %`).join(', ')}${uniform ? ' — uniform: the attention maps will look flat; a longer run or a byte-level corpus gives them structure.' : '.'}` : '')));
  }
  // An experiment's run cards come after its answer and charts, folded when there are many
  // (replicates): the page opens with what the experiment says, not with one card per run.
  const runsCount = h('span.muted#exp-runs-count');
  const runsFold = isExp ? h('details.exp-runs#exp-runs', { open: true },
    h('summary', {}, h('h3.inline', {}, 'Runs of this experiment'), ' ', runsCount), headerBox) : null;
  const controls = h('div.toolbar.chart-controls', { role: 'group', 'aria-label': 'chart controls' },
    h('label', { for: 'smooth' }, 'smoothing (EMA)'), smoothIn, smoothVal,
    h('label.check', {}, logIn, ' log-scale loss'),
    h('label', { for: 'x-axis' }, 'x axis'), xSel);
  clear(root,
    h('p.crumbs', {}, h('a', { href: '#/runs' }, '← all runs')),
    titleEl, bundleBar, note, isExp ? null : headerBox,
    answer ? answer.el : null,
    lookFor,
    controls,
    replSlot,
    parBox ? parBox.el : null,
    isExp ? h('h3.section-title#detail-title', {}, 'Every run, in detail') : null,
    h('div.chart-grid', {}, lossBox, tauBox,
      box('entropy', 'Attention entropy per layer and head (nats)', 'entropy'),
      box('tokens', 'Tokens per second', 'tokens per second'),
      box('grad', 'Gradient norm (before clipping)', 'gradient norm'),
      spreadBox, box('efrac', 'Attention entropy ÷ uniform entropy ln(keys), per head (colour) and layer (dash)', 'entropy fraction'),
      box('dist', 'Mean attended distance per head (tokens), head = colour, layer = dash', 'attended distance'),
      accBox),
    repl ? repl.tablesEl : null,
    questions.el,
    runsFold);

  let charts = null;
  if (!chartsAvailable()) { note.textContent = 'Chart.js did not load (static/vendor is built by make).'; return () => {}; }
  charts = {
    loss: lineChart(canvases.loss, { xTitle: 'step', yTitle: 'cross-entropy (nats)' }),
    tau: lineChart(canvases.tau, { xTitle: 'step', yTitle: 'τ' }),
    entropy: lineChart(canvases.entropy, { xTitle: 'step', yTitle: 'nats' }),
    tokens: lineChart(canvases.tokens, { xTitle: 'step', yTitle: 'tokens/s' }),
    grad: lineChart(canvases.grad, { xTitle: 'step', yTitle: '‖g‖' }),
    spread: lineChart(canvases.spread, { xTitle: 'step', yTitle: 'τ max / min', logY: true }),
    efrac: lineChart(canvases.efrac, { xTitle: 'step', yTitle: 'entropy / ln(keys)' }),
    dist: lineChart(canvases.dist, { xTitle: 'step', yTitle: 'tokens' }),
    acc: lineChart(canvases.acc, { xTitle: 'step', yTitle: 'accuracy' }),
  };

  function runLabel(r) {
    const same = runs.filter((x) => x.variant === r.variant).length > 1;
    if (runs.length > 1 && same && replicates > 1) return `${r.variant} r${r.replicate}`;
    return runs.length === 1 ? runName(r) : same ? `${r.variant} #${r.id}` : r.variant;
  }

  function xsOf(r, s) {
    if (state.xAxis === 'step') return s.steps;
    // A resumed run's started_at is the resume time; its earlier points must not go negative.
    const all = series.get(r.id) || {};
    const first = all.loss?.wall_times[0] ?? s.wall_times[0] ?? 0;
    const t0 = Math.min(r.started_at || first, first);
    return s.wall_times.map((t) => t - t0);
  }

  function points(xs, ys) {
    const out = new Array(xs.length);
    for (let i = 0; i < xs.length; i++) out[i] = { x: xs[i], y: ys[i] };
    return out;
  }

  function positive(pts) { return state.logY ? pts.filter((p) => p.y > 0) : pts; }

  function build() {
    const ds = { loss: [], tau: [], entropy: [], tokens: [], grad: [], spread: [], efrac: [], dist: [], acc: [] };
    let anyTau = false;
    const tauNotes = [];
    for (const r of runs) {
      const s = series.get(r.id);
      if (!s) continue;
      const col = variantColor(r.variant);
      const label = runLabel(r);
      if (s.loss) {
        const xs = xsOf(r, s.loss);
        ds.loss.push({ label: `${label} raw`, data: positive(points(xs, s.loss.values)), borderColor: withAlpha(col, 0.28),
          backgroundColor: withAlpha(col, 0.28), borderWidth: 1, hideInLegend: true, tooltip: true, runId: r.id, series: 'loss',
          variant: r.variant, legendKind: 'train' });
        ds.loss.push({ label: `${label} train`, data: positive(points(xs, emaDebiased(s.loss.values, state.smooth))), borderColor: col,
          backgroundColor: col, borderWidth: 2.5, runId: r.id, series: 'loss_smoothed', variant: r.variant, legendKind: 'train' });
      }
      if (s.val_loss) {
        ds.loss.push({ label: `${label} validation`, data: positive(points(xsOf(r, s.val_loss), s.val_loss.values)), borderColor: col,
          backgroundColor: cssVar('--card', '#fff'), borderDash: [7, 4], pointRadius: 3, pointBorderWidth: 1.5, borderWidth: 2, runId: r.id, series: 'val_loss',
          variant: r.variant, legendKind: 'validation' });
      }
      const tk = headKeys(s, 'tau');
      tk.forEach((k, i) => {
        anyTau = true;
        const [, L, H] = k.split('.');
        // one run: each head its own colour, each layer its own dash; several: the run's colour, shaded per head
        const hc = runs.length === 1 ? headColor(Number(H)) : headShade(col, i, tk.length);
        ds.tau.push({ label: `${runs.length === 1 ? '' : label + ' '}L${L}H${H}`, data: points(xsOf(r, s[k]), s[k].values),
          borderColor: hc, backgroundColor: hc, borderDash: runs.length === 1 ? layerDash(Number(L)) : undefined, borderWidth: 1.5, runId: r.id,
          variant: r.variant, legendKind: 'every head' });
      });
      const c = r.config;
      const sqrtD = Math.sqrt(c.d_model / c.n_head);
      if (tk.length) {
        const steps = s[tk[0]].steps;
        const xs = xsOf(r, s[tk[0]]);
        const scale = scales.get(c.attention);
        const tau0 = scale ? initialTau(c, scale) : NaN;
        const bound = scale ? adamTauBound(c, tau0, steps, scale) : steps.map(() => ({ lo: NaN, hi: NaN }));
        const refCol = cssVar('--ref', '#777');
        const ref = { borderColor: refCol, backgroundColor: refCol, borderWidth: 1, pointRadius: 0, runId: r.id, ref: true };
        const first = runs.filter((x) => headKeys(series.get(x.id) || {}, 'tau').length).indexOf(r) === 0;
        ds.tau.push({ ...ref, label: `√d = ${fmt(sqrtD, 3)}`, data: [{ x: xs[0], y: sqrtD }, { x: xs[xs.length - 1], y: sqrtD }],
          borderDash: [2, 3], borderWidth: 2, hideInLegend: !first });
        const finite = (v) => (Number.isFinite(v) ? v : null);
        ds.tau.push({ ...ref, label: `AdamW reach (${label})`, data: points(xs, bound.map((b) => finite(b.hi))), borderDash: [8, 4], hideInLegend: !first });
        ds.tau.push({ ...ref, label: `AdamW reach, lower (${label})`, data: points(xs, bound.map((b) => finite(b.lo))), borderDash: [8, 4], hideInLegend: true });
        const last = tk.map((k) => s[k].values[s[k].values.length - 1]);
        tauNotes.push(`${label}: τ now ${fmt(Math.min(...last), 3)} – ${fmt(Math.max(...last), 3)} (τ₀ ${fmt(tau0, 3)}, √d ${fmt(sqrtD, 3)})`);
      } else if (s.loss) {
        tauNotes.push(`${label}: ${r.variant} has no learned τ (its scale is the fixed √d = ${fmt(sqrtD, 3)})`);
      }
      const ek = headKeys(s, 'entropy');
      ek.forEach((k, i) => {
        const [, L, H] = k.split('.');
        // one run: each head its own hue, each layer its own dash (as τ); several: the run's colour, shaded per head
        const hc = runs.length === 1 ? headColor(Number(H)) : headShade(col, i, ek.length);
        ds.entropy.push({ label: `${runs.length === 1 ? '' : label + ' '}L${L}H${H}`, data: points(xsOf(r, s[k]), s[k].values),
          borderColor: hc, backgroundColor: hc, borderDash: runs.length === 1 ? layerDash(Number(L)) : undefined, borderWidth: 1.5,
          runId: r.id, variant: r.variant, legendKind: 'every head' });
      });
      for (const [key, chart] of [['tokens_per_s', 'tokens'], ['grad_norm', 'grad']]) {
        if (!s[key]) continue;
        const xs = xsOf(r, s[key]);
        ds[chart].push({ label: `${label} raw`, data: points(xs, s[key].values), borderColor: withAlpha(col, 0.28), borderWidth: 1, hideInLegend: true, tooltip: true, runId: r.id,
          variant: r.variant, legendKind: '' });
        ds[chart].push({ label, data: points(xs, emaDebiased(s[key].values, state.smooth)), borderColor: col, backgroundColor: col, borderWidth: 2, runId: r.id,
          variant: r.variant, legendKind: '' });
      }
    }
    // the questions' charts: per-head ones for one run (the one chosen in an experiment)
    const withHeads = runs.filter((r) => Object.keys(series.get(r.id) || {}).some((k) => k.startsWith('entropy_frac.') || k.startsWith('acc.')));
    if (isExp && withHeads.length) {
      const keep = headSel.value;
      if (headSel.options.length !== withHeads.length) {
        clear(headSel, withHeads.map((r) => h('option', { value: String(r.id) }, `#${r.id} ${runLabel(r)}`)));
        headSel.value = withHeads.some((r) => String(r.id) === keep) ? keep : String(withHeads[0].id);
      }
    }
    const headRuns = new Set(isExp ? [Number(headSel.value)] : runs.map((r) => r.id));
    Object.assign(ds, questionDatasets({ runs, series, xsOf, label: runLabel, headRuns, logSpread: logSpreadIn.checked }));
    // Several runs of a variant share its colour: one legend entry per variant (and kind of line),
    // every run's and head's own label kept for the tooltip.
    if (runs.length > 1) for (const k of ['loss', 'tau', 'entropy', 'tokens', 'grad', 'spread']) groupLegend(ds[k]);
    for (const [k, chart] of Object.entries(charts)) { chart.data.datasets = ds[k]; chart.update('none'); }
    // τ's axis follows the heads' values, not the reference band around them
    const tauRange = fittedRange(ds.tau);
    charts.tau.options.scales.y.min = tauRange ? tauRange.min : undefined;
    charts.tau.options.scales.y.max = tauRange ? tauRange.max : undefined;
    charts.tau.update('none');
    spreadBox.hidden = !ds.spread.length;
    for (const k of ['efrac', 'dist']) document.getElementById(`box-${k}`).hidden = !ds[k].length;
    accBox.hidden = !ds.acc.length;
    clear(accTableBox, accuracyTable(runs, series, runLabel));
    tauBox.hidden = false;
    tauHint.textContent = anyTau ? tauNotes.join(' · ') : tauNotes.join(' · ') || 'No τ recorded yet.';
    canvases.tau.parentElement.hidden = !anyTau;
    if (repl && replicates > 1) repl.redraw();
    renderLookFor();
  }
  const redraw = frameThrottle(() => { if (alive) build(); });
  // Live steps can arrive dozens of times a second; rebuilding every chart four times a second
  // looks continuous and leaves a classroom laptop its CPU.
  const liveRedraw = throttle(() => { if (alive) build(); }, 250);

  function renderHeaders() {
    note.textContent = runs.some((r) => r.status === 'running' || r.status === 'queued')
      ? 'Live: new points are added as the runs train.' : `${runs.length} run${runs.length > 1 ? 's' : ''}, not training.`;
    if (runs.length > 1) {
      note.append(' ', h('a#compare-these', { href: `#/compare?runs=${runs.map((r) => r.id).join(',')}` }, 'Compare these runs'));
    }
    titleEl.textContent = isExp ? `Experiment ${id}: ${title}` : `Run ${id}: ${runs[0] ? runName(runs[0]) : ''}`;
    if (runsFold) {
      const by = {};
      for (const r of runs) by[r.status] = (by[r.status] || 0) + 1;
      runsCount.textContent = `(${runs.length}: ${Object.entries(by).map(([k, n]) => `${n} ${k}`).join(', ')})`;
      // folded by default once the experiment has replicates or many runs; the reader's choice stays
      if (!runsFold.dataset.set) { runsFold.open = !(replicates > 1 || runs.length > 4); runsFold.dataset.set = '1'; }
    }
    keepFocus(headerBox, () => clear(headerBox, runs.map((r) => h('div.run-header.card', { dataset: { runId: r.id } },
      h('div.run-title', {}, variantTag(r.variant), ' ', h('a', { href: `#/run/${r.id}` }, `#${r.id} ${runName(r)}`)),
      h('div.hdr-live', {}, headerLive(r)),
      h('div.toolbar', {},
        downloadLink(`/api/runs/${r.id}/metrics.csv`, `run-${r.id}-metrics.csv`, 'CSV', 'a.button.small'),
        r.checkpoint_step > 0 ? h('a.button.small', { href: `#/attention?run=${r.id}` }, 'Attention map') : null,
        runActions(r, (kind) => { if (kind === 'delete' && (!isExp || runs.length === 1)) location.hash = '#/runs'; else reload(); }))))));
  }

  // The parts of a header that change with every step; replaced in place so that keyboard focus on
  // the header's buttons survives a live stream.
  function headerLive(r) {
    return [progressCell(r), differs(r),
      h('div.small.muted', {}, `L${r.config.n_layer} H${r.config.n_head} d${r.config.d_model} T${r.config.seq_len} B${r.config.batch} · ` +
        `lr ${fmtConfig(r.config.lr)} ${r.config.lr_schedule} · ${r.config.precision || 'fp32'} · seed ${r.seed}` +
        (r.experiment_id && replicates > 1 ? ` · replicate ${r.replicate}` : '') + ` · corpus ${r.config.corpus}` +
        (r.config.loss_on === 'answers' ? ' · loss on the answers' : '') +
        (r.tokens_per_s ? ` · ${fmt(r.tokens_per_s, 3)} tok/s` : '')),
      h('div.small', {}, latest(r))];
  }

  // The config keys in which the runs on the page differ (beyond the summary line), so two runs
  // that differ only in, say, tau_param do not show identical cards.
  function differs(r) {
    const shown = ['n_layer', 'n_head', 'd_model', 'seq_len', 'batch', 'lr', 'lr_schedule', 'precision', 'corpus', 'seed', 'loss_on'];
    if (runs.every((x) => x.variant === x.config.attention)) shown.push('attention');
    const keys = differingKeys(runs, shown);
    if (!keys.length) return null;
    return h('div.small.differs', { dataset: { keys: keys.join(',') } }, h('span.muted', {}, 'differs: '),
      keys.map((k, i) => [i ? ' · ' : '', h('span.nowrap', {}, h('span.diff-key', {}, k), ' ', fmtConfig(r.config[k]))]));
  }

  function updateHeaders() {
    for (const r of runs) {
      const el = headerBox.querySelector(`.run-header[data-run-id="${r.id}"] .hdr-live`);
      if (el) clear(el, headerLive(r));
    }
  }

  // Last and lowest loss, last validation loss and the current τ range: the run's own summary
  // (every step) first, the downsampled series on the page only for what it lacks.
  function latest(r) {
    const x = runLatest(r, series.get(r.id));
    const parts = [];
    if (x.loss !== null) parts.push(`loss ${fmt(x.loss)} (min ${fmt(x.lossMin)})`);
    if (x.val !== null) parts.push(`validation ${fmt(x.val)}`);
    if (x.tauMin !== null) parts.push(`τ ${fmt(x.tauMin, 4)} – ${fmt(x.tauMax, 4)}`);
    return parts.join(' · ');
  }

  async function fetchSeries(r) {
    const d = await api(`/api/runs/${r.id}/metrics?max_points=${MAX_POINTS}`);
    const s = {};
    for (const [k, v] of Object.entries(d.series)) s[k] = { steps: v.steps.slice(), values: v.values.slice(), wall_times: v.wall_times.slice() };
    // A fetch again (a hole, a resync, too many live points): the live points past what the store
    // answered stay, since the store is behind the stream.
    for (const [k, o] of Object.entries(series.get(r.id) || {})) {
      const t = s[k] || (s[k] = { steps: [], values: [], wall_times: [] });
      for (let i = 0; i < o.steps.length; i++) appendAfter(t, o.steps[i], o.values[i], o.wall_times[i]);
    }
    series.set(r.id, s);
    const loss = d.series.loss;
    everyStep.set(r.id, !loss || loss.steps.length === loss.count);
    // Still a hole between the stored points and the live ones kept: the writer has not caught up yet.
    const n = loss ? loss.steps.length : 0;
    if (everyStep.get(r.id) && s.loss && s.loss.steps.length > n && s.loss.steps[n] > (n ? loss.steps[n - 1] : 0) + 1) refetchHole();
  }

  // The store is behind the live stream by up to the writer's interval, and the stream only
  // reaches the view once it has subscribed: steps trained between the two (a run started just
  // before the view opened, on a slow machine) are in neither the fetched series nor the live
  // points. A live step past the fetched loss series' last step + 1 (told only while that series
  // holds every stored step, not a downsampled copy) is such a hole: fetch the series again once
  // the writer has stored it, a few times at most.
  const everyStep = new Map(); // run id -> its fetched loss series holds every stored point
  let holeRefetches = 0;
  function leavesHole(r, step) {
    if (!everyStep.get(r.id)) return false;
    const l = series.get(r.id)?.loss;
    const last = l && l.steps.length ? l.steps[l.steps.length - 1] : 0;
    return step > last + 1;
  }
  function refetchHole() { if (holeRefetches < 10) { holeRefetches++; refetchSoon(); } }

  function applyMetrics(d) {
    const r = runs.find((x) => x.id === d.run_id);
    if (!r) return false;
    r.step = d.step; r.total_steps = d.total_steps; r.eta_s = d.eta_s; r.status = 'running';
    if (d.tokens_per_s) r.tokens_per_s = d.tokens_per_s;
    foldLive(r, d.values || {});
    if (d.values && 'loss' in d.values && leavesHole(r, d.step)) refetchHole();
    let s = series.get(r.id);
    if (!s) { s = {}; series.set(r.id, s); }
    let grew = false;
    for (const [k, v] of Object.entries(d.values || {})) {
      if (!s[k]) s[k] = { steps: [], values: [], wall_times: [] };
      grew = appendAfter(s[k], d.step, v, d.wall_time) || grew;
      if (s[k].steps.length > REFETCH_ABOVE) refetchSoon();
    }
    return grew;
  }

  const headersSoon = frameThrottle(() => { if (alive) updateHeaders(); });
  // The bands and statistics are the server's: asked again every few seconds while runs train.
  const replicatesSoon = throttle(() => { if (alive && repl && replicates > 1) repl.refresh(); }, 3000);
  const refetchSoon = debounce(() => reload(), 1000);
  // Without replicates the panel (which passes its /stats to the answer) is not shown: ask here.
  const answerSoon = throttle(async () => {
    if (!alive || !answer || (repl && replicates > 1)) return;
    try { const d = await api(`/api/experiments/${id}/stats`); if (alive) answer.render(d.stats); } catch { /* an older server: no answer card */ }
  }, 1000);

  const unsub = subscribe({
    metrics(d) {
      if (!loaded) { pending.push(['metrics', d]); return; }
      if (applyMetrics(d)) { liveRedraw(); headersSoon(); replicatesSoon(); }
    },
    status(d) {
      if (!loaded) { pending.push(['status', d]); return; }
      const r = runs.find((x) => x.id === d.run_id);
      if (!r) return;
      Object.assign(r, { status: d.status, step: d.step, total_steps: d.total_steps, error: d.error });
      renderHeaders();
      if (TERMINAL.has(d.status)) {
        refreshRunsSoon();
        // Everything the run reported is stored before its end is told: complete a series cut short.
        if (d.step > 0 && leavesHole(r, d.step + 1)) refetchHole();
      }
    },
    resync() { reload(); },
  });

  async function fetchRuns() {
    if (isExp) {
      const d = await api(`/api/experiments/${id}`);
      title = d.experiment.name;
      preset = d.experiment.preset || null;
      replicates = d.experiment.replicates || 1;
      runs = d.runs;
    } else {
      const d = await api(`/api/runs/${id}`);
      runs = [d.run];
    }
  }
  // Run objects (status, last/min loss, checkpoint) without refetching the series.
  const refreshRunsSoon = debounce(async () => {
    if (!alive) return; // a timer set before the view closed
    try { await fetchRuns(); if (alive) { renderHeaders(); redraw(); replicatesSoon(); answerSoon(); if (parBox) parBox.draw(runs); } } catch { /* the next event retries */ }
  }, 400);

  async function reload() {
    if (!alive) return;
    loaded = false;
    try {
      await fetchRuns();
      await Promise.all(runs.map(fetchSeries));
      if (!alive) return;
      loaded = true;
      for (const [type, d] of pending.splice(0)) {
        if (type === 'metrics') applyMetrics(d);
        else {
          const r = runs.find((x) => x.id === d.run_id);
          if (r) Object.assign(r, { status: d.status, step: d.step });
          // A run that ended while the runs were being fetched may have been read before its last
          // evaluation was stored (its final val_loss missing): read the runs again.
          if (TERMINAL.has(d.status)) refreshRunsSoon();
        }
      }
      renderHeaders();
      build();
      if (parBox) parBox.draw(runs);
      questions.load();
      answerSoon();
      if (repl && replicates > 1) {
        if (!repl.el.isConnected) replSlot.append(repl.el);
        repl.refresh();
      }
    } catch (e) {
      loaded = true;
      note.textContent = `Could not load: ${e.message}`;
    }
  }
  const unTheme = onTheme(() => { redraw(); if (parBox) parBox.draw(runs); });
  reload();
  return () => { alive = false; unsub(); unTheme(); if (repl) repl.destroy(); if (parBox) parBox.destroy(); for (const c of Object.values(charts)) c.destroy(); };
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
  // Each axis drawn as a line with its values written along it: every category at its place, or the
  // two ends and the middle of a numeric range (the geometric middle on a log axis).
  let current = { axes: [] };
  const axisLabels = {
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
      current.axes.forEach((a, j) => {
        const px = x.getPixelForValue(j);
        ctx.globalAlpha = 0.5;
        ctx.beginPath(); ctx.moveTo(px, y.getPixelForValue(0)); ctx.lineTo(px, y.getPixelForValue(1)); ctx.stroke();
        ctx.globalAlpha = 1;
        const ticks = a.kind === 'category'
          ? a.cats.map((cat, i) => [a.cats.length > 1 ? i / (a.cats.length - 1) : 0.5, cat])
          : a.hi > a.lo ? [[0, a.lo], [0.5, a.kind === 'log' ? Math.sqrt(a.lo * a.hi) : (a.lo + a.hi) / 2], [1, a.hi]].map(([p, v]) => [p, fmtConfig(Number(v.toPrecision(3)))])
            : [[0.5, fmtConfig(a.lo)]];
        const last = j === current.axes.length - 1;
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
    const datasets = runs.map((r, i) => {
      const raw = [...keys.map((k) => r.config[k]), finals[i]];
      const t = finals[i] === null ? null : lossAxis.pos(finals[i]);
      const color = t === null ? cssVar('--muted') || '#888' : lossColor(t);
      return { label: `#${r.id} ${r.variant}`, runId: r.id, raw, finalValLoss: finals[i],
        data: [...axes.map((a, j) => a.pos(raw[j])), t],
        borderColor: color, backgroundColor: color, borderWidth: 2, pointRadius: 3, tension: 0, spanGaps: false };
    });
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

