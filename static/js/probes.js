// The probe explorer: one panel per probe kind, its parameters as sliders and boxes built from
// /api/probe-kinds. Any change re-runs the probe (debounced; a stale answer is dropped) and redraws
// the summary, the charts the result suggests and its tables.
import { api, cached } from './api.js';
import { h, clear, fmt, debounce, downloadLink } from './dom.js';
import { chartFromHint } from './charts.js';
import { paramControl } from './paramcontrols.js';
import { rotorPanel } from './rotor.js';
import { onTheme } from './theme.js';

// The rotor is the dashboard's own; every other title comes from the probe registry.
const ROTOR_TITLE = 'RoPE pair, animated';
const MAX_ROWS = 200;

// A probe's summary split into figures (numbers, booleans — the server writes yes/no figures as JSON
// true/false —, short words: the bold value cells) and
// prose (sentences the probe adds, e.g. what its clock measures): [[key, text]] each.
export function summaryParts(summary) {
  const figures = [], prose = [];
  for (const [k, v] of Object.entries(summary || {})) {
    if (typeof v === 'boolean') figures.push([k, String(v)]);
    else if (typeof v === 'string' && (v.length > 24 || /\s\S+\s/.test(v))) prose.push([k, v]);
    else figures.push([k, fmt(v)]);
  }
  return { figures, prose };
}

// How the answer was had: computed (or measured) now in N ms, or read from the store, in the time
// this request took, with the time it took when it was first computed.
export function probeTiming(p, requestMs, timing) {
  if (p.cached) return `from the store in ${fmt(Math.max(1, Math.round(requestMs)))} ms (first computed in ${fmt(p.duration_ms, 3)} ms)`;
  return `${timing ? 'measured' : 'computed'} in ${fmt(p.duration_ms, 3)} ms`;
}

// The list of probe kinds, the rotor first, the current one marked.
function probeTabs(names, titles, current) {
  return h('ul', {}, names.map((n) => h('li', {}, h('a', {
    href: `#/probes/${n}`, id: `probe-tab-${n}`, 'aria-current': n === current ? 'page' : undefined,
  }, titles[n]))));
}

// The menu of trained runs for a probe that needs a model: filled from /api/runs (those with a
// checkpoint), the address's run chosen if it is one; then the probe runs.
function runSelect(params, schedule, run) {
  const runSel = h('select#probe-run', { 'aria-label': 'trained run' });
  runSel.addEventListener('change', schedule);
  api('/api/runs?limit=500&sort=-id').then(({ runs }) => {
    const usable = runs.filter((r) => r.checkpoint_step > 0);
    clear(runSel, usable.length ? usable.map((r) => h('option', { value: r.id }, `#${r.id} · step ${r.checkpoint_step} · ${r.variant} · ${r.name || r.variant + ' run'}`))
      : h('option', { value: '' }, 'no run with a checkpoint yet'));
    if (params.run && usable.some((r) => String(r.id) === String(params.run))) runSel.value = String(params.run);
    run();
  });
  return runSel;
}

// A kind's panel: its title, description, notes, the form of its parameters, and where results go.
function kindPanel(kind, ui, run) {
  const { controls, runSel, status, formErr, result } = ui;
  return [
    h('h3', {}, kind.title || kind.name),
    h('p', {}, kind.description),
    kind.name === 'attention_map' ? h('p.small', {}, 'The ', h('a', { href: '#/attention' }, 'Attention view'), ' draws these maps larger, with token labels.') : null,
    kind.timing ? h('p.small.muted.probe-timing-note', {}, 'Measured on the server each time it runs (never answered from the store): times depend on the machine and its load.') : null,
    h('form.probe-form', { onsubmit: (e) => { e.preventDefault(); run(); } },
      runSel ? h('div.param', {}, h('label', { for: 'probe-run' }, 'run'), runSel) : null,
      h('div.params', {}, controls.map((c) => c.el)),
      h('div.toolbar', {}, h('button', { type: 'submit' }, 'Run again'),
        h('button', { type: 'button', onclick: () => { controls.forEach((c) => c.set(kind.params.find((p) => p.name === c.name).default)); run(); } }, 'Defaults'),
        status, formErr)),
    result];
}

// The request body from the form, or null (with the reason in the status line) when it cannot be sent.
function probeBody(kind, ui) {
  const body = { kind: kind.name, params: {} };
  let bad = false;
  for (const c of ui.controls) {
    const v = c.get();
    c.setError(v.error);
    if (v.error) bad = true; else body.params[c.name] = v.value;
  }
  ui.formErr.textContent = '';
  if (bad) { ui.status.textContent = 'fix the marked parameter'; return null; }
  if (ui.runSel) {
    if (!ui.runSel.value) { ui.status.textContent = 'This probe needs a run with a checkpoint: train one first.'; return null; }
    body.run_id = Number(ui.runSel.value);
  }
  return body;
}

// A probe kind shown in the view's panel: its form, re-run on every change (a stale answer dropped).
function showKind(v, kind) {
  const ui = {
    status: h('p.muted.probe-status', { 'aria-live': 'polite' }),
    result: h('div.probe-result#probe-result'),
    formErr: h('div.field-error', { role: 'alert' }),
    runSel: null,
  };
  // A timing kind measures the server for up to its budget: wait longer before re-measuring.
  const schedule = debounce(run, kind.timing ? 1000 : kind.params.some((p) => p.type === 'text') ? 500 : 200);
  ui.controls = kind.params.map((p) => paramControl(kind.name, p, schedule));
  if (kind.needs_model) ui.runSel = runSelect(v.params, schedule, run);
  clear(v.panel, ...kindPanel(kind, ui, run));
  let seq = 0;
  async function run() {
    if (!v.alive) return;
    const body = probeBody(kind, ui);
    if (!body) return;
    const my = ++seq;
    if (v.abort) v.abort.abort();
    v.abort = new AbortController();
    ui.status.textContent = 'running…';
    const t0 = performance.now();
    try {
      const res = await api('/api/probes', { method: 'POST', body, signal: v.abort.signal });
      if (!v.alive || my !== seq) return;
      const p = res.probe;
      ui.status.textContent = probeTiming(p, performance.now() - t0, kind.timing);
      renderResult(v, ui.result, p);
    } catch (e) {
      if (e.name === 'AbortError' || my !== seq) return;
      const name = e.field && e.field.startsWith('params.') ? e.field.slice(7) : null;
      const c = ui.controls.find((x) => x.name === name);
      if (c) c.setError(e.message); else ui.formErr.textContent = e.message;
      ui.status.textContent = 'the server refused these parameters';
    }
  }
  if (!kind.needs_model) run();
}

// A result's summary: the figures in bold, the prose beside them (null when there is none).
function resultSummary(r) {
  const { figures, prose } = summaryParts(r.summary);
  const summary = h('dl.summary', {}, figures.flatMap(([k, v]) => [h('dt', {}, k.replace(/_/g, ' ')),
    h('dd', { dataset: { key: k } }, v)]));
  const notes = prose.length ? h('dl.probe-notes', {}, prose.flatMap(([k, v]) => [h('dt', {}, k.replace(/_/g, ' ')),
    h('dd', { dataset: { key: k } }, v)])) : null;
  return [summary, notes];
}

// One table of a result, folded (open as it was, or the first one), its first MAX_ROWS rows shown.
function probeTable(probe, t, open) {
  const rows = t.rows.slice(0, MAX_ROWS);
  return h('details.probe-table', { open, id: `probe-table-${t.name}` },
    h('summary', {}, `table “${t.name}” · ${t.rows.length} rows`,
      ' · ', downloadLink(`/api/probes/${probe.id}/csv?table=${encodeURIComponent(t.name)}`, `${probe.kind}-${t.name}.csv`, 'CSV')),
    h('div.table-scroll', {}, h('table.table.compact', {},
      h('thead', {}, h('tr', {}, t.columns.map((c) => h('th', { scope: 'col' }, c)))),
      h('tbody', {}, rows.map((row) => h('tr', {}, row.map((v) => h('td.num', {}, fmt(v)))))))),
    t.rows.length > MAX_ROWS ? h('p.small.muted', {}, `first ${MAX_ROWS} rows shown; the CSV has them all`) : null);
}

// A probe's result drawn into el: summary, the charts it suggests, its tables.
function renderResult(v, el, probe) {
  destroyCharts(v);
  v.shown = { el, probe };
  const open = new Set([...el.querySelectorAll('details.probe-table')].filter((d) => d.open).map((d) => d.id));
  const r = probe.result;
  const figs = h('div.chart-grid');
  const byName = Object.fromEntries(r.tables.map((t) => [t.name, t]));
  clear(el, ...resultSummary(r), figs);
  for (const hint of r.charts || []) {
    const t = byName[hint.table];
    if (!t) continue;
    const { el: fig, chart } = chartFromHint(hint, t, `${probe.kind}-${hint.table}`);
    figs.append(fig);
    if (chart) v.charts.push(chart);
  }
  r.tables.forEach((t, i) => {
    el.append(probeTable(probe, t, open.size ? open.has(`probe-table-${t.name}`) : i === 0));
  });
}

function destroyCharts(v) { for (const c of v.charts) c.destroy(); v.charts = []; }

export function mount(root, params) {
  const list = h('nav.probe-list', { 'aria-label': 'probe kinds' });
  const panel = h('section.probe-panel.card#probe-panel', { 'aria-live': 'polite' });
  clear(root, h('h2', {}, 'Probes'), h('div.probe-layout', {}, list, panel));
  // The view's state; shown is the last result drawn, redrawn in the other theme's colours when the theme changes.
  const v = { params, panel, charts: [], alive: true, abort: null, shown: null };
  const unTheme = onTheme(() => { if (v.shown && v.shown.el.isConnected) renderResult(v, v.shown.el, v.shown.probe); });

  cached('/api/probe-kinds').then(({ kinds }) => {
    if (!v.alive) return;
    const titles = Object.fromEntries(kinds.map((k) => [k.name, k.title || k.name]));
    titles.rotor = ROTOR_TITLE;
    const names = ['rotor', ...kinds.map((k) => k.name)];
    const current = names.includes(params.kind) ? params.kind : 'rotor';
    clear(list, probeTabs(names, titles, current));
    if (current === 'rotor') {
      clear(panel, h('h3', {}, ROTOR_TITLE), rotorPanel());
    } else {
      showKind(v, kinds.find((k) => k.name === current));
    }
  }).catch((e) => clear(panel, h('p.field-error', {}, `Could not load probe kinds: ${e.message}`)));

  return () => { v.alive = false; unTheme(); if (v.abort) v.abort.abort(); destroyCharts(v); };
}
