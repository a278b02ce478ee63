// The compare view, #/compare?runs=1,4,7&charts=loss,val_loss,tau.*&smooth=0.6&log=1: any runs, from
// any experiments, side by side. Their curves overlaid (one chart per chosen metric key or group of
// keys), their final metrics (last, min, step of min from /api/runs/{id}/summary), and their configs
// with the keys that differ highlighted and the equal ones folded away. Every control writes the
// address, so the link reproduces the view. Runs that are still training gain points live.
import { api, cached } from './api.js';
import { h, clear, fmt, throttle, debounce, keepFocus, announce } from './dom.js';
import { runColors, headShade, withAlpha, variantColor } from './colors.js';
import { lineChart, setAxisTypes, chartsAvailable, chartExport } from './charts.js';
import { emaDebiased, appendAfter } from './smooth.js';
import { subscribe } from './live.js';
import { onTheme } from './theme.js';
import { configDiff, parseRunIds } from './configdiff.js';
import { runName, fmtConfig, compareSelection, compareHref } from './runs.js';

const MAX_POINTS = 1000;
const TERMINAL = new Set(['succeeded', 'failed', 'cancelled', 'interrupted']);
const GROUPS = { 'tau.*': 'τ, every layer and head', 'entropy.*': 'attention entropy, every layer and head' };
const NAMES = { loss: 'training loss', val_loss: 'validation loss', lr: 'learning rate', grad_norm: 'gradient norm',
  tokens_per_s: 'tokens per second' };
const MAIN_KEYS = ['loss', 'val_loss', 'grad_norm', 'tokens_per_s', 'lr'];
const LOWER_IS_BETTER = new Set(['loss', 'val_loss']);
const DEFAULT_CHARTS = ['loss', 'val_loss', 'tau.*'];
const REPLICATE_DASH = [[], [8, 4], [2, 3], [12, 3, 3, 3], [5, 5], [1, 4]];

const keyName = (k) => NAMES[k] || GROUPS[k] || k;
const isGroup = (k) => k.endsWith('*');
const matchKeys = (keys, pattern) => (isGroup(pattern) ? keys.filter((k) => k.startsWith(pattern.slice(0, -1))) : keys.filter((k) => k === pattern));
function byHead(a, b) {
  const pa = a.split('.'), pb = b.split('.');
  return pa[0] < pb[0] ? -1 : pa[0] > pb[0] ? 1 : (Number(pa[1]) - Number(pb[1])) || (Number(pa[2]) - Number(pb[2])) || (a < b ? -1 : 1);
}
const headLabel = (k) => { const m = /^[a-z_]+\.(\d+)\.(\d+)$/.exec(k); return m ? `L${m[1]}H${m[2]}` : k; };

function initialIds(q) {
  let ids = parseRunIds(q.runs);
  if (!ids.length && !q.runs) {
    ids = compareSelection();
    if (ids.length) history.replaceState(null, '', compareHref(ids));
  }
  return ids;
}

// What every part of the view reads and writes: the runs (in the order of the address), their colours,
// summaries and series, the controls' state, the chart boxes and the address they make.
function compareModel(ids, q) {
  const v = {
    ids,
    state: {
      charts: q.charts ? q.charts.split(',').map((s) => s.trim()).filter(Boolean) : null,
      smooth: Math.min(0.99, Math.max(0, Number(q.smooth ?? localStorage.getItem('attnlab.smooth') ?? 0.6) || 0)),
      logY: q.log === '1',
    },
    runs: [],
    colors: new Map(),        // run id -> colour
    dashes: new Map(),        // run id -> dash pattern (replicates of one variant: its colour, one dash each)
    summaries: new Map(),     // run id -> {key: {last, min, max, mean, step_of_min, count, last_step}}
    data: new Map(),          // run id -> {fetched: Set(pattern), s: {key: {steps, values, wall_times}}}
    configOrder: [],
    boxes: [],                // {key, el, canvas, select, chart, n}
    boxSeq: 0,
    alive: true,
    loaded: false,
    note: h('p.muted#compare-note', { 'aria-live': 'polite' }, ids.length ? 'Loading…' : ''),
    grid: h('div.chart-grid#compare-charts'),
  };
  v.hrefFor = (list) => {
    const charts = (v.state.charts || []).map(encodeURIComponent).join(',');
    return `${compareHref(list)}${charts ? `&charts=${charts}` : ''}&smooth=${v.state.smooth}${v.state.logY ? '&log=1' : ''}`;
  };
  v.writeUrl = () => { if (v.alive) history.replaceState(null, '', v.hrefFor(v.ids)); };
  v.chartsChanged = () => { v.state.charts = v.boxes.map((x) => x.key); v.writeUrl(); };
  v.redraw = throttle(() => { if (v.alive) for (const b of v.boxes) drawBox(v, b); }, 250);
  return v;
}

const label = (r) => `#${r.id} ${runName(r)}`;
const points = (xs, ys) => xs.map((x, i) => ({ x, y: ys[i] }));

function availableKeys(v) {
  const keys = new Set();
  for (const s of v.summaries.values()) for (const k of Object.keys(s)) keys.add(k);
  for (const d of v.data.values()) for (const k of Object.keys(d.s)) keys.add(k);
  return [...keys];
}

function metricOptions(v, current) {
  const keys = availableKeys(v);
  const opts = [];
  for (const k of MAIN_KEYS) if (keys.includes(k)) opts.push(k);
  for (const g of Object.keys(GROUPS)) if (matchKeys(keys, g).length) opts.push(g);
  for (const k of keys.filter((k) => !MAIN_KEYS.includes(k)).sort(byHead)) opts.push(k);
  if (current && !opts.includes(current)) opts.unshift(current);
  return opts;
}

async function ensureSeries(v, pattern) {
  await Promise.all(v.runs.map(async (r) => {
    let d = v.data.get(r.id);
    if (!d) { d = { fetched: new Set(), s: {} }; v.data.set(r.id, d); }
    if (d.fetched.has(pattern)) return;
    d.fetched.add(pattern);
    try {
      const res = await api(`/api/runs/${r.id}/metrics?keys=${encodeURIComponent(pattern)}&max_points=${MAX_POINTS}`);
      for (const [k, s] of Object.entries(res.series)) {
        d.s[k] = { steps: s.steps.slice(), values: s.values.slice(), wall_times: s.wall_times.slice() };
      }
    } catch (e) {
      d.fetched.delete(pattern);
      v.note.textContent = `Could not load ${pattern} of run ${r.id}: ${e.message}`;
    }
  }));
}

// --- the curves -----------------------------------------------------------------------------------
// The datasets of one key (or group of keys) of one run.
function runDatasets(v, r, pattern) {
  const out = [];
  const positive = (pts) => (v.state.logY ? pts.filter((p) => p.y > 0) : pts);
  const s = v.data.get(r.id)?.s || {};
  const keys = matchKeys(Object.keys(s), pattern).sort(byHead);
  const col = v.colors.get(r.id);
  keys.forEach((key, i) => {
    const ser = s[key];
    const c = keys.length > 1 ? headShade(col, i, keys.length) : col;
    const name = isGroup(pattern) ? `${label(r)} ${headLabel(key)}` : label(r);
    const meta = { runId: r.id, metricKey: key, borderDash: v.dashes.get(r.id) };
    // Groups (τ, entropy: one line per head) and the sparse validation loss are drawn as they are;
    // a single noisy key gets the faint raw line under the smoothed one, as in the run view.
    const smooth = v.state.smooth > 0 && !isGroup(pattern) && key !== 'val_loss';
    const sparse = ser.steps.length <= 60;
    if (smooth) {
      out.push({ ...meta, kind: 'raw', label: `${name} raw`, data: positive(points(ser.steps, ser.values)), borderColor: withAlpha(c, 0.28),
        backgroundColor: withAlpha(c, 0.28), borderWidth: 1, hideInLegend: true, tooltip: true });
      out.push({ ...meta, kind: 'smoothed', label: name, data: positive(points(ser.steps, emaDebiased(ser.values, v.state.smooth))),
        borderColor: c, backgroundColor: c, borderWidth: 2.5 });
    } else {
      out.push({ ...meta, kind: 'line', label: name, data: positive(points(ser.steps, ser.values)), borderColor: c, backgroundColor: c,
        borderWidth: isGroup(pattern) ? 1.5 : 2.5, pointRadius: key === 'val_loss' && sparse ? 3 : 0,
        hideInLegend: isGroup(pattern) && i > 0, tooltip: true,
        legendText: isGroup(pattern) ? `${label(r)} (one line per head)` : undefined, legendColor: isGroup(pattern) ? col : undefined });
    }
  });
  return out;
}

function drawBox(v, b) {
  if (!v.alive) return;
  b.chart.data.datasets = v.runs.flatMap((r) => runDatasets(v, r, b.key));
  b.chart.options.scales.y.title = { display: true, text: keyName(b.key) };
  b.chart.update('none');
  const empty = !b.chart.data.datasets.length;
  b.el.classList.toggle('empty', empty);
  let msg = b.el.querySelector('.cmp-empty');
  if (empty && !msg) b.el.append(msg = h('p.small.muted.cmp-empty', {}, `No run here has recorded ${keyName(b.key)} yet.`));
  if (!empty && msg) msg.remove();
}

function fillSelect(v, b) {
  clear(b.select, metricOptions(v, b.key).map((k) => h('option', { value: k }, keyName(k))));
  b.select.value = b.key;
}
function syncRemovable(v) { for (const b of v.boxes) b.el.querySelector('.cmp-remove-chart').disabled = v.boxes.length <= 1; }

// One chart with its metric select, export links and remove button, appended to the grid.
function chartBox(v, key) {
  const n = ++v.boxSeq;
  const canvas = h('canvas', { id: `cmp-chart-${n}`, role: 'img', 'aria-label': `${keyName(key)} of the compared runs` });
  const select = h('select.cmp-metric', { id: `cmp-metric-${n}`, 'aria-label': `metric of chart ${n}` });
  const b = { key, canvas, select, chart: null, n };
  const remove = h('button.small.cmp-remove-chart', { type: 'button', 'aria-label': `remove chart ${n}`, title: 'remove this chart' }, '×');
  b.el = h('figure.chart-box.cmp-box', { dataset: { key }, id: `cmp-box-${n}` },
    h('figcaption', {}, select,
      chartExport(() => b.chart, `compare-${v.ids.join('-')}-${n}`, `chart ${n}`), remove),
    h('div.chart-canvas.tall', {}, canvas));
  fillSelect(v, b);
  select.addEventListener('change', async () => {
    b.key = select.value;
    b.el.dataset.key = b.key;
    canvas.setAttribute('aria-label', `${keyName(b.key)} of the compared runs`);
    v.chartsChanged();
    await ensureSeries(v, b.key);
    drawBox(v, b);
    announce(`chart ${n} shows ${keyName(b.key)}`);
  });
  remove.addEventListener('click', () => {
    if (v.boxes.length <= 1) return;
    const i = v.boxes.indexOf(b);
    b.chart?.destroy();
    b.el.remove();
    v.boxes.splice(i, 1);
    v.chartsChanged();
    (v.boxes[Math.min(i, v.boxes.length - 1)].select).focus();
    syncRemovable(v);
  });
  v.grid.append(b.el);
  // Made once its canvas is in the page, so Chart.js measures the real box.
  b.chart = lineChart(canvas, { xTitle: 'step', yTitle: '', logY: v.state.logY });
  return b;
}

// Smoothing, log scale and "Add a chart"; they act once `wire` is called (when there are runs to draw).
function chartControls(v) {
  const smoothIn = h('input#cmp-smooth', { type: 'range', min: 0, max: 0.99, step: 0.01, value: v.state.smooth, 'aria-describedby': 'cmp-smooth-val' });
  const smoothVal = h('output#cmp-smooth-val', {}, v.state.smooth.toFixed(2));
  const logIn = h('input#cmp-log', { type: 'checkbox', checked: v.state.logY });
  const addChart = h('button#cmp-add-chart', { type: 'button' }, 'Add a chart');
  const el = h('div.toolbar.chart-controls', { role: 'group', 'aria-label': 'chart controls' },
    h('label', { for: 'cmp-smooth' }, 'smoothing (EMA)'), smoothIn, smoothVal,
    h('label.check', {}, logIn, ' log-scale y'), addChart);
  return { el, wire: () => wireControls(v, { smoothIn, smoothVal, logIn, addChart }) };
}

function wireControls(v, { smoothIn, smoothVal, logIn, addChart }) {
  addChart.addEventListener('click', async () => {
    const shown = v.boxes.map((b) => b.key);
    const key = metricOptions(v).find((k) => !shown.includes(k)) || 'loss';
    const b = chartBox(v, key);
    v.boxes.push(b);
    v.chartsChanged();
    syncRemovable(v);
    await ensureSeries(v, key);
    drawBox(v, b);
    b.select.focus();
  });
  smoothIn.addEventListener('input', () => {
    v.state.smooth = Number(smoothIn.value);
    smoothVal.textContent = v.state.smooth.toFixed(2);
    v.writeUrl();
    v.redraw();
  });
  logIn.addEventListener('change', () => {
    v.state.logY = logIn.checked;
    for (const b of v.boxes) setAxisTypes(b.chart, { logY: v.state.logY });
    v.writeUrl();
    v.redraw();
  });
}

// --- the runs, their summaries and configs --------------------------------------------------------
// "Runs compared": a chip per run (its config keys that differ) and the select that adds one.
function runsCard(v) {
  const chips = h('ul.compare-runs#compare-runs');
  const addSel = h('select#compare-add', { 'aria-label': 'add a run to the comparison' }, h('option', { value: '' }, 'add a run…'));
  addSel.addEventListener('change', () => {
    const id = Number(addSel.value);
    if (id && !v.ids.includes(id)) location.hash = v.hrefFor([...v.ids, id]);
  });
  const el = h('section.card', { 'aria-labelledby': 'cmp-runs-title' },
    h('h3#cmp-runs-title', {}, 'Runs compared'),
    chips,
    h('div.toolbar', {}, addSel, h('span.small.muted', {}, 'or tick runs in the ', h('a', { href: '#/runs' }, 'runs list'), ' and press “Compare selected”.')));
  const chip = (r, diff) => h('li.compare-run.card', { dataset: { runId: r.id } },
    h('div.run-title', {},
      h('span.swatch', { style: { background: v.colors.get(r.id) }, 'aria-hidden': 'true' }), ' ',
      h('a', { href: `#/run/${r.id}` }, label(r)), ' ',
      h('span.pill.status-' + r.status, {}, r.status),
      h('button.small.cmp-remove-run', { type: 'button', 'aria-label': `remove run ${r.id} from the comparison`, title: 'remove from the comparison',
        onclick: () => { location.hash = v.hrefFor(v.ids.filter((x) => x !== r.id)); } }, '×')),
    h('div.small.muted', {}, `${r.variant} · `, r.experiment_id ? h('a', { href: `#/experiment/${r.experiment_id}` }, `experiment ${r.experiment_id}`) : 'no experiment',
      ` · step ${r.step || 0}/${r.total_steps}`),
    diff.length ? h('div.small.differs', { dataset: { keys: diff.join(',') } }, h('span.muted', {}, 'differs: '),
      diff.map((k, i) => [i ? ' · ' : '', h('span.nowrap', {}, h('span.diff-key', {}, k), ' ', fmtConfig(r.config[k]))]))
      : h('div.small.muted', {}, 'same config as the others'));
  return {
    el,
    render() {
      const diff = configDiff(v.runs.map((r) => r.config)).differ;
      keepFocus(chips, () => clear(chips, v.runs.map((r) => chip(r, diff))));
    },
    async fillAddSelect() {
      try {
        const d = await api('/api/runs?limit=500&sort=-id');
        if (!v.alive) return;
        const rest = d.runs.filter((r) => !v.ids.includes(r.id));
        clear(addSel, h('option', { value: '' }, rest.length ? 'add a run…' : 'no other runs'),
          rest.map((r) => h('option', { value: r.id }, `#${r.id} ${runName(r)} · ${r.variant} · ${r.status}`)));
      } catch { /* the list is a convenience */ }
    },
  };
}

function runHead(v) {
  return v.runs.map((r) => h('th', { scope: 'col', dataset: { runId: r.id } },
    h('span.swatch', { style: { background: v.colors.get(r.id) }, 'aria-hidden': 'true' }), ' ', label(r)));
}

function metricsTable(v, keys, id) {
  const stats = [['last', 'last'], ['min', 'min'], ['step_of_min', 'step of min']];
  const runs = v.runs;
  return h('div.table-scroll', {}, h(`table.table.compact.compare-table#${id}`, {},
    h('thead', {}, h('tr', {}, h('th', { scope: 'col' }, 'metric'), h('th', { scope: 'col' }, ''), runHead(v))),
    keys.map((k) => {
      const vals = (stat) => runs.map((r) => v.summaries.get(r.id)?.[k]?.[stat]);
      return h('tbody.metric-group', { dataset: { key: k } }, stats.map(([stat, text], si) => {
        const xs = vals(stat);
        const finite = xs.filter((x) => typeof x === 'number' && Number.isFinite(x));
        const best = LOWER_IS_BETTER.has(k) && stat !== 'step_of_min' && runs.length > 1 && finite.length > 1 ? Math.min(...finite) : null;
        return h('tr', { dataset: { stat } },
          si === 0 ? h('th', { scope: 'rowgroup', rowspan: 3 }, keyName(k), k !== keyName(k) ? h('div.small.muted', {}, k) : null) : null,
          h('th', { scope: 'row' }, text),
          xs.map((x) => h('td.num' + (best !== null && x === best ? '.best' : ''), {},
            x === undefined ? '–' : stat === 'step_of_min' ? String(x) : fmt(x, 5),
            best !== null && x === best ? h('span.sr-only', {}, ' (lowest)') : null)));
      }));
    })));
}

// "Final metrics": the main keys, and the per-head ones folded.
function metricsCard(v) {
  const box = h('div#compare-metrics-box');
  const el = h('section.card', { 'aria-labelledby': 'cmp-metrics-title' }, h('h3#cmp-metrics-title', {}, 'Final metrics'),
    h('p.small.muted', {}, 'Over every step (not the downsampled curves): the last value, the lowest and the step where it was reached. ',
      'The lowest loss of a row is marked.'), box);
  function render() {
    const keys = availableKeys(v).filter((k) => [...v.summaries.values()].some((s) => s[k]));
    const main = MAIN_KEYS.filter((k) => keys.includes(k));
    const heads = keys.filter((k) => !MAIN_KEYS.includes(k)).sort(byHead);
    const openHeads = box.querySelector('details')?.open || false;
    clear(box,
      main.length ? metricsTable(v, main, 'compare-metrics') : h('p.muted', {}, 'No metrics recorded yet.'),
      heads.length ? h('details.more#compare-metrics-heads', { open: openHeads },
        h('summary', {}, `τ, entropy and other keys per head (${heads.length})`), metricsTable(v, heads, 'compare-metrics-more')) : null);
  }
  return { el, render };
}

// "Configuration": the keys that differ, and the equal ones behind a toggle.
function configCard(v) {
  const box = h('div#compare-config-box');
  const el = h('section.card', { 'aria-labelledby': 'cmp-config-title' }, h('h3#cmp-config-title', {}, 'Configuration'), box);
  let showEqual = false;
  function render() {
    const { differ, equal } = configDiff(v.runs.map((r) => r.config), v.configOrder);
    const row = (k, differs) => h('tr' + (differs ? '.diff' : ''), { dataset: { key: k } },
      h('th', { scope: 'row' }, k, differs ? h('span.sr-only', {}, ' (differs)') : null),
      v.runs.map((r) => h('td.num', {}, fmtConfig(r.config[k]))));
    const toggle = h('button#compare-show-equal', { type: 'button', 'aria-expanded': String(showEqual), 'aria-controls': 'compare-config-equal',
      onclick: () => { showEqual = !showEqual; keepFocus(box, render); } },
    showEqual ? `Hide the ${equal.length} equal keys` : `Show the ${equal.length} equal keys`);
    keepFocus(box, () => clear(box,
      h('p.small', {}, differ.length ? `${differ.length} of ${differ.length + equal.length} keys differ (highlighted); ${equal.length} are the same in every run.`
        : `All ${equal.length} keys are the same in every run.`, ' ', equal.length ? toggle : null),
      h('div.table-scroll', {}, h('table.table.compact.compare-table#compare-config', {},
        h('thead', {}, h('tr', {}, h('th', { scope: 'col' }, 'key'), runHead(v))),
        h('tbody#compare-config-differ', {}, differ.map((k) => row(k, true))),
        h('tbody#compare-config-equal', { hidden: !showEqual }, equal.map((k) => row(k, false)))))));
  }
  return { el, render };
}

// Replicates of one variant of one experiment keep the variant's colour (so the variants stay apart)
// and are told apart by their dash.
function assignColors(v) {
  v.colors = runColors(v.runs);
  v.dashes = new Map();
  const groups = new Map();
  for (const r of v.runs) if (r.experiment_id) groups.set(`${r.experiment_id}/${r.variant}`, [...(groups.get(`${r.experiment_id}/${r.variant}`) || []), r]);
  for (const g of groups.values()) {
    if (g.length < 2) continue;
    g.sort((a, b) => (a.replicate ?? 0) - (b.replicate ?? 0)).forEach((r, i) => {
      v.colors.set(r.id, variantColor(r.variant));
      v.dashes.set(r.id, REPLICATE_DASH[i % REPLICATE_DASH.length]);
    });
  }
}

// --- loading --------------------------------------------------------------------------------------
async function loadRun(v, id) {
  try {
    const [{ run }, { summary }] = await Promise.all([api(`/api/runs/${id}`), api(`/api/runs/${id}/summary`)]);
    v.summaries.set(id, summary);
    return run;
  } catch (e) {
    if (e.status === 404) return { missing: id };
    throw e;
  }
}

// The runs, then the chart boxes the address names and their series.
async function load(v, renderAll) {
  try {
    const [got, doc] = await Promise.all([Promise.all(v.ids.map((id) => loadRun(v, id))), cached('/api/openapi.json').catch(() => null)]);
    if (!v.alive) return;
    v.configOrder = Object.keys(doc?.components?.schemas?.RunConfig?.properties || {});
    const missing = got.filter((r) => r.missing).map((r) => r.missing);
    v.runs = got.filter((r) => !r.missing);
    if (missing.length) {
      v.ids = v.runs.map((r) => r.id);
      v.writeUrl();
    }
    v.note.textContent = `${v.runs.length} run${v.runs.length === 1 ? '' : 's'}` +
      (missing.length ? ` (run ${missing.join(', ')} no longer exists)` : '') +
      (v.runs.some((r) => !TERMINAL.has(r.status)) ? ' · live: new points are added as the runs train.' : '.');
    if (!v.runs.length) return;
    if (!v.state.charts) {
      const keys = availableKeys(v);
      v.state.charts = DEFAULT_CHARTS.filter((k) => k === 'loss' || matchKeys(keys, k).length);
    }
    renderAll();
    clear(v.grid);
    v.boxes = v.state.charts.map((k) => chartBox(v, k));
    syncRemovable(v);
    v.writeUrl();
    await Promise.all([...new Set(v.state.charts)].map((p) => ensureSeries(v, p)));
    if (!v.alive) return;
    v.loaded = true;
    for (const b of v.boxes) { fillSelect(v, b); drawBox(v, b); }
  } catch (e) {
    v.note.textContent = `Could not load: ${e.message}`;
  }
}

// Run objects and summaries again when a run stops, and every few seconds while one trains (the series
// are kept current by the live stream); everything again when the server says events were missed.
function liveUpdates(v, renderAll) {
  async function refresh() {
    if (!v.alive || !v.loaded) return;
    try {
      const got = await Promise.all(v.runs.map((r) => loadRun(v, r.id)));
      if (!v.alive) return;
      v.runs = got.filter((r) => !r.missing);
      renderAll();
      v.redraw();
    } catch { /* the next event retries */ }
  }
  const refreshSoon = debounce(refresh, 400);
  const refreshLive = throttle(refresh, 3000);
  async function refetch() {
    if (!v.alive || !v.loaded) return;
    for (const d of v.data.values()) { d.fetched.clear(); d.s = {}; }
    await Promise.all([...new Set(v.boxes.map((b) => b.key))].map((p) => ensureSeries(v, p)));
    refresh();
  }
  return subscribe({
    metrics(d) {
      if (!v.loaded) return;
      const r = v.runs.find((x) => x.id === d.run_id);
      if (!r) return;
      r.step = d.step; r.total_steps = d.total_steps; r.status = 'running';
      if (appendLive(v, r, d)) v.redraw();
      refreshLive();
    },
    status(d) {
      const r = v.runs.find((x) => x.id === d.run_id);
      if (!r) return;
      Object.assign(r, { status: d.status, step: d.step, total_steps: d.total_steps });
      if (TERMINAL.has(d.status)) refreshSoon(); else refreshLive();
    },
    resync() { refetch(); },
  });
}

// A live step's values added to the run's series; true when a series grew.
function appendLive(v, r, d) {
  const s = v.data.get(r.id)?.s;
  let grew = false;
  for (const [k, x] of Object.entries(d.values || {})) {
    if (!s) break;
    if (!s[k]) {
      // A key this run had not recorded when its charts were fetched: start it if a chart asks for it.
      if (!v.boxes.some((b) => matchKeys([k], b.key).length)) continue;
      s[k] = { steps: [], values: [], wall_times: [] };
    }
    grew = appendAfter(s[k], d.step, x, d.wall_time) || grew;
  }
  return grew;
}

export function mount(root, q) {
  const v = compareModel(initialIds(q), q);
  const runsPart = runsCard(v);
  const metrics = metricsCard(v);
  const config = configCard(v);
  const controls = chartControls(v);
  clear(root,
    h('p.crumbs', {}, h('a', { href: '#/runs' }, '← all runs')),
    h('h2', {}, 'Compare runs'), v.note,
    runsPart.el, controls.el, v.grid, metrics.el, config.el);

  if (!v.ids.length) {
    v.note.textContent = 'No runs chosen yet: tick two or more runs in the runs list (first column) and press “Compare selected”, or add runs here.';
    runsPart.fillAddSelect();
    return () => { v.alive = false; };
  }
  if (!chartsAvailable()) { v.note.textContent = 'Chart.js did not load (static/vendor is built by make).'; return () => { v.alive = false; }; }

  controls.wire();
  const renderAll = () => {
    assignColors(v);
    runsPart.render();
    metrics.render();
    config.render();
    for (const b of v.boxes) fillSelect(v, b);
  };
  const unsub = liveUpdates(v, renderAll);
  const unTheme = onTheme(() => { if (!v.runs.length) return; renderAll(); for (const b of v.boxes) drawBox(v, b); });

  runsPart.fillAddSelect();
  load(v, renderAll);
  return () => { v.alive = false; unsub(); unTheme(); for (const b of v.boxes) b.chart?.destroy(); };
}
