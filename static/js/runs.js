// The Runs view: every run and experiment with live progress, filters and sorting, the form that
// starts a run or an experiment, and the one-click reproduction of the blog experiment.
import { api, post, cached } from './api.js';
import { h, clear, fmt, fmtConfig, fmtDuration, fmtTime, debounce, frameThrottle, announce, keepFocus } from './dom.js';
import { variantColor } from './colors.js';
import { schemaFields, fieldFromPath } from './schemaform.js';
import { subscribe } from './live.js';
import { differingKeys } from './configdiff.js';
import { nodesCard } from './nodes.js';
import { measuredSpeed, estimateText, VOCAB } from './estimate.js';
import { corpusUploadCard } from './upload.js';

// A classroom-speed version of the preset: the built-in corpus and a model that trains in about a
// minute on a laptop, same two variants, same seed and data order.
const STATUSES = ['queued', 'running', 'succeeded', 'failed', 'cancelled', 'interrupted'];
const ACTIVE = new Set(['queued', 'running']);

// The table's columns, in order: the ones a reader comes for (name, variant, status and the losses)
// first, so that the config columns after them never push them off the screen. `optional`: the
// column chooser can hide it (remembered by the browser); the others are always shown.
const COLUMNS = [
  { key: 'id', label: 'id', get: (r) => r.id, optional: true },
  { key: 'name', label: 'name', get: (r) => runName(r).toLowerCase() },
  { key: 'variant', label: 'variant', get: (r) => r.variant },
  { key: 'status', label: 'status', get: (r) => STATUSES.indexOf(r.status) * 1e9 + (r.step || 0) },
  // Sorted by the server (GET /api/runs?sort=loss): every run, not only the page loaded here.
  { key: 'loss', label: 'loss last / min', api: 'loss', get: (r) => r.last?.loss?.last ?? Infinity },
  { key: 'val_loss', label: 'val loss last / min', api: 'val_loss', get: (r) => r.last?.val_loss?.last ?? Infinity },
  { key: 'tau', label: 'final τ range', get: (r) => r.last?.tau?.min ?? Infinity },
  { key: 'config', label: 'config', get: (r) => r.config.d_model * 1e4 + r.config.n_layer, optional: true },
  { key: 'tags', label: 'tags', get: (r) => (r.tags || []).join(','), optional: true },
  { key: 'created', label: 'created', get: (r) => r.created_at, optional: true },
];

// Which optional columns are shown, and whether the differing config keys get columns of their own
// (after the config column) or a line in the config cell: the reader's choice, kept by the browser.
const COLUMNS_KEY = 'attnlab.runsColumns';
const COLUMN_DEFAULTS = { id: true, config: true, diffs: true, tags: true, created: true };
export function loadColumnChoice() {
  try { return { ...COLUMN_DEFAULTS, ...JSON.parse(localStorage.getItem(COLUMNS_KEY) || '{}') }; } catch { return { ...COLUMN_DEFAULTS }; }
}
function saveColumnChoice(c) { try { localStorage.setItem(COLUMNS_KEY, JSON.stringify(c)); } catch { /* private mode */ } }

// A run's or variant's name that wraps only between words: at spaces, and after the commas and
// slashes that join a sweep's key=value pairs ("sweep/lr=0.001,tau_param=log"); a word (hyphens and
// underscores included) is never split over two lines.
export function nameWords(text) {
  const out = [];
  for (const w of String(text).split(/(\s+)/)) {
    if (w === '') continue;
    if (/^\s+$/.test(w)) { out.push(' '); continue; }
    w.split(/(?<=[,/;])/).forEach((piece, i) => { if (i) out.push(h('wbr')); out.push(h('span.word', {}, piece)); });
  }
  return out;
}

function lossText(r, key = 'loss') {
  const loss = r.last?.[key];
  return loss ? `${fmt(loss.last)} / ${fmt(loss.min)}` : '–';
}

// The server's orders by a run's series (final value, or minimum), for the sort select.
const API_SORTS = [['', 'order: the table’s'], ['loss', 'final loss ↑'], ['-loss', 'final loss ↓'], ['min_loss', 'min loss ↑'],
  ['-min_loss', 'min loss ↓'], ['val_loss', 'final val loss ↑'], ['-val_loss', 'final val loss ↓'],
  ['min_val_loss', 'min val loss ↑'], ['-min_val_loss', 'min val loss ↓']];

// The keys configSummary shows for every run; the card adds the others that differ among the runs.
const SUMMARY_KEYS = ['n_layer', 'n_head', 'd_model', 'seq_len', 'batch', 'lr', 'precision', 'corpus'];
const MAX_DIFFS = 6;

// The summary line of a run's config; the keys that differ among the listed runs get columns of
// their own (the first MAX_DIFFS), the rest are named here.
function configSummary(c, diffKeys = [], asColumns = MAX_DIFFS) {
  const rest = diffKeys.slice(asColumns);
  return [h('span.nowrap', {}, `L${c.n_layer} H${c.n_head} d${c.d_model} T${c.seq_len} B${c.batch}`), ' ',
    h('span.nowrap', {}, `lr ${fmtConfig(c.lr)} · ${c.precision || 'fp32'} · ${c.corpus}`),
    rest.length ? h('div.differs.small', { dataset: { keys: rest.join(',') } },
      rest.map((k, i) => [i ? ' · ' : '', h('span.nowrap', {}, h('span.diff-key', {}, k), ' ', fmtConfig(c[k]))])) : null];
}

// Orders config values: numbers by value, anything else as text, absent ones last.
function configOrder(x, y) {
  if (x === undefined || x === null) return y === undefined || y === null ? 0 : 1;
  if (y === undefined || y === null) return -1;
  if (typeof x === 'number' && typeof y === 'number') return x - y;
  return String(x) < String(y) ? -1 : String(x) > String(y) ? 1 : 0;
}

// A config value for people (dom.js): kept exported here for the views that import it from runs.js.
export { fmtConfig };

// Runs ticked for comparison, kept for this browser tab while moving between views.
const SELECT_KEY = 'attnlab.compare';
const selected = new Set((() => {
  try { return JSON.parse(sessionStorage.getItem(SELECT_KEY) || '[]').filter(Number.isInteger); } catch { return []; }
})());
function saveSelection() { try { sessionStorage.setItem(SELECT_KEY, JSON.stringify([...selected])); } catch { /* ignore */ } }
export function compareSelection() { return [...selected]; }
export function compareHref(ids) { return `#/compare?runs=${ids.join(',')}`; }

// Runs may be created without a name; the page still needs something to call them.
export function runName(r) { return r.name || `${r.variant} run ${r.id}`; }

export function progressCell(r) {
  const frac = r.total_steps ? Math.min(1, (r.step || 0) / r.total_steps) : 0;
  const eta = r.status === 'running' && r.eta_s != null ? ` · ETA ${fmtDuration(r.eta_s)}` : '';
  return h('div.status-cell', {},
    h('span.pill.status-' + r.status, {}, r.status),
    h('div.progress', { role: 'progressbar', 'aria-valuemin': 0, 'aria-valuemax': r.total_steps, 'aria-valuenow': r.step || 0,
      'aria-label': `run ${r.id} progress` }, h('div.bar', { style: { width: `${(frac * 100).toFixed(1)}%` } })),
    h('span.muted.small', {}, `${r.step || 0}/${r.total_steps}${eta}`),
    r.error ? h('div.field-error', {}, r.error) : null);
}

export function variantTag(name) {
  return h('span.variant', {}, h('span.swatch', { style: { background: variantColor(name) }, 'aria-hidden': 'true' }), name);
}

async function act(kind, r, after) {
  try {
    if (kind === 'delete') {
      if (!window.confirm(`Delete run ${r.id} “${runName(r)}” with its metrics and checkpoints?`)) return;
      await api(`/api/runs/${r.id}`, { method: 'DELETE' });
    } else {
      await post(`/api/runs/${r.id}/${kind}`);
    }
    announce(`run ${r.id}: ${kind} done`);
  } catch (e) {
    window.alert(`${kind} failed: ${e.message}`);
    after('error');
    return;
  }
  after(kind);
}

export function runActions(r, after) {
  const out = [];
  if (ACTIVE.has(r.status)) out.push(h('button.small', { type: 'button', onclick: () => act('cancel', r, after), 'aria-label': `cancel run ${r.id}` }, 'Cancel'));
  if (r.status === 'cancelled' || r.status === 'interrupted') out.push(h('button.small', { type: 'button', onclick: () => act('resume', r, after), 'aria-label': `resume run ${r.id}` }, 'Resume'));
  if (!ACTIVE.has(r.status)) out.push(h('button.small.danger', { type: 'button', onclick: () => act('delete', r, after), 'aria-label': `delete run ${r.id}` }, 'Delete'));
  return out;
}

// The time estimates shown before starting (estimate.js): this machine's recent speed, measured on
// the runs the list shows, and each corpus's vocabulary; the preset card and the form redraw theirs
// when either changes.
const estimates = { speed: null, corpora: new Map(), listeners: new Set() };
const vocabOf = (name) => {
  const c = estimates.corpora.get(name);
  return (c && (c.vocab || VOCAB[c.tokenizer])) || VOCAB.gpt2;
};
function setEstimateInputs({ runs, corpora }) {
  if (corpora) estimates.corpora = new Map(corpora.map((c) => [c.name, c]));
  if (runs) estimates.speed = measuredSpeed(runs, vocabOf);
  for (const f of estimates.listeners) f();
}
function onEstimate(f) { estimates.listeners.add(f); return () => estimates.listeners.delete(f); }
// "about 3 min at this machine's recent speed (2 runs)", or '' when nothing has been measured.
const estimateFor = (configs) => estimateText(configs, vocabOf, estimates.speed);

// What every part of the Runs view reads: the runs and experiments last loaded, the order, filters
// and columns chosen, the runs shown; `render` and `refresh` are the view's (set by mount).
function runsModel() {
  return {
    runs: [],
    experiments: [],
    sort: { key: 'id', dir: -1 },        // sort.api: the server's order (API_SORTS), kept as it came
    filters: { text: '', status: '', variant: '' },
    configFilter: { key: '', value: '' }, // sent as config.KEY=VALUE: the server filters
    columnChoice: loadColumnChoice(),
    shownNow: [],
    diffCols: [],                         // the differing config keys that have a column now
    loadedApi: false,                     // the list last loaded was in a server order
    alive: true,
    render: () => {},
    refresh: () => {},
  };
}

// A table order after a server order needs the default list again.
function reorder(m) { if (m.loadedApi) m.refresh(); else m.render(); }

// The filters (text, status, variant, config key = value) and the server's sort select.
function runsFilters(m) {
  const textFilter = h('input#runs-filter', { type: 'search', placeholder: 'name or tag', 'aria-label': 'filter runs by name or tag',
    oninput: (e) => { m.filters.text = e.target.value.trim().toLowerCase(); m.render(); } });
  const statusFilter = h('select#runs-status', { 'aria-label': 'filter runs by status',
    onchange: (e) => { m.filters.status = e.target.value; m.render(); } },
  h('option', { value: '' }, 'any status'), STATUSES.map((s) => h('option', { value: s }, s)));
  const variantFilter = h('select#runs-variant', { 'aria-label': 'filter runs by variant',
    onchange: (e) => { m.filters.variant = e.target.value; m.render(); } }, h('option', { value: '' }, 'any variant'));
  const sortSel = h('select#runs-sort', { 'aria-label': 'sort runs by a loss (the server sorts)',
    onchange: (e) => { m.sort = e.target.value ? { api: e.target.value } : { key: 'id', dir: -1 }; m.refresh(); } },
  API_SORTS.map(([v, label]) => h('option', { value: v }, label)));
  const cfgKey = h('select#runs-config-key', { 'aria-label': 'filter runs by a config key' }, h('option', { value: '' }, 'any config'));
  const cfgValue = h('input#runs-config-value', { type: 'text', placeholder: 'value', 'aria-label': 'the config value to keep', size: 10 });
  const cfgError = h('span.field-error#runs-config-error', { role: 'alert' });
  const applyConfig = () => { m.configFilter.key = cfgKey.value; m.configFilter.value = cfgValue.value.trim(); m.refresh(); };
  cfgKey.addEventListener('change', applyConfig);
  cfgValue.addEventListener('change', applyConfig);
  cached('/api/openapi.json').then((doc) => {
    const keys = Object.keys(doc.components.schemas.RunConfig.properties).sort();
    cfgKey.append(...keys.map((k) => h('option', { value: k }, k)));
  }).catch(() => { /* the filter stays at "any config" */ });
  return {
    els: [textFilter, statusFilter, variantFilter, sortSel, cfgKey, cfgValue, cfgError],
    sortSel,
    setRefusal(text) { cfgError.textContent = text; },
    syncVariants() { // the variants of the runs loaded, the choice kept while it is one of them
      const variants = [...new Set(m.runs.map((r) => r.variant))].sort();
      const cur = variantFilter.value;
      clear(variantFilter, h('option', { value: '' }, 'any variant'), variants.map((v) => h('option', { value: v }, v)));
      variantFilter.value = variants.includes(cur) ? cur : '';
    },
  };
}

// "Compare selected (n)" and "Clear selection".
function compareButtons(m) {
  const compareBtn = h('button#compare-selected', { type: 'button', onclick: () => { location.hash = compareHref([...selected]); } });
  const clearBtn = h('button#compare-clear', { type: 'button', onclick: () => { selected.clear(); saveSelection(); m.render(); } }, 'Clear selection');
  function sync() {
    // Runs deleted meanwhile leave the selection.
    if (m.runs.length) for (const id of [...selected]) if (!m.runs.some((r) => r.id === id)) selected.delete(id);
    saveSelection();
    compareBtn.textContent = `Compare selected (${selected.size})`;
    compareBtn.disabled = selected.size < 2;
    compareBtn.title = selected.size < 2 ? 'tick two or more runs in the first column' : '';
    clearBtn.hidden = selected.size === 0;
  }
  return { els: [compareBtn, clearBtn], sync };
}

// The columns shown, in order; 'diffs' stands for the differing keys' columns (after config).
function shownColumns(m) {
  const out = [];
  for (const c of COLUMNS) {
    if (!c.optional || m.columnChoice[c.key]) out.push(c);
    if (c.key === 'config' && m.columnChoice.diffs) out.push({ key: 'diffs' });
  }
  return out;
}

// The header cell of a column: a button that sorts by it (a loss column by the server's order).
function columnHead(m, c, sortSel) {
  // A loss column is active for its final and its minimum order alike.
  const { sort } = m;
  const apiKey = sort.api?.replace(/^-/, '').replace(/^min_/, '');
  const active = c.api ? apiKey === c.api : !sort.api && sort.key === c.key;
  const dir = sort.api ? (sort.api.startsWith('-') ? -1 : 1) : sort.dir;
  return h('th', { scope: 'col', dataset: { col: c.key }, 'aria-sort': active ? (dir > 0 ? 'ascending' : 'descending') : 'none' },
    h('button.sort', { type: 'button', 'aria-label': `sort by ${c.label}`, onclick: () => {
      if (c.api) {
        m.sort = { api: active && dir > 0 ? `-${sort.api.replace(/^-/, '')}` : c.api };
        sortSel.value = m.sort.api;
        m.refresh();
      } else {
        m.sort = { key: c.key, dir: active ? -sort.dir : 1 };
        sortSel.value = '';
        reorder(m);
      }
    } }, c.label, active ? (dir > 0 ? ' ▲' : ' ▼') : ''));
}

// The header cell of a differing config key's column.
function diffHead(m, k, sortSel) {
  const active = !m.sort.api && m.sort.key === `config.${k}`;
  return h('th.diff-col', { scope: 'col', dataset: { diffKey: k }, title: `config key ${k}: differs among the listed runs`,
    'aria-sort': active ? (m.sort.dir > 0 ? 'ascending' : 'descending') : 'none' },
    h('button.sort', { type: 'button', 'aria-label': `sort by ${k}`, onclick: () => {
      m.sort = { key: `config.${k}`, dir: active ? -m.sort.dir : 1 };
      sortSel.value = '';
      reorder(m);
    } }, h('span.diff-key', {}, k), active ? (m.sort.dir > 0 ? ' ▲' : ' ▼') : ''));
}

function renderHead(m, thead, sortSel) {
  const all = m.shownNow.length > 0 && m.shownNow.every((r) => selected.has(r.id));
  const some = m.shownNow.some((r) => selected.has(r.id));
  const allBox = h('input#runs-select-all', { type: 'checkbox', checked: all, 'aria-label': 'select every shown run for comparison',
    onchange: (e) => { for (const r of m.shownNow) { if (e.target.checked) selected.add(r.id); else selected.delete(r.id); } m.render(); } });
  allBox.indeterminate = some && !all;
  keepFocus(thead, () => clear(thead, h('tr', {}, h('th.select', { scope: 'col' }, allBox),
    shownColumns(m).flatMap((c) => [c.key === 'diffs' ? m.diffCols.map((k) => diffHead(m, k, sortSel)) : columnHead(m, c, sortSel)]),
    h('th', { scope: 'col' }, 'actions'))));
}

function matches(m, r) {
  const { filters } = m;
  if (filters.status && r.status !== filters.status) return false;
  if (filters.variant && r.variant !== filters.variant) return false;
  if (filters.text) {
    const hay = [runName(r), ...(r.tags || []), String(r.id)].join(' ').toLowerCase();
    if (!hay.includes(filters.text)) return false;
  }
  return true;
}

// The runs that pass the filters, in the table's order (or the server's, as loaded).
function shownRuns(m) {
  const { sort } = m;
  const byConfig = sort.key?.startsWith('config.') ? sort.key.slice(7) : null;
  const col = COLUMNS.find((c) => c.key === sort.key);
  return sort.api ? m.runs.filter((r) => matches(m, r)) : m.runs.filter((r) => matches(m, r)).sort((a, b) => {
    if (byConfig) return configOrder(a.config[byConfig], b.config[byConfig]) * sort.dir || b.id - a.id;
    const x = col.get(a), y = col.get(b);
    return (x < y ? -1 : x > y ? 1 : 0) * sort.dir || b.id - a.id;
  });
}

// The cells of one run's row, by column key.
function runCells(m, r, diffKeys) {
  const { columnChoice } = m;
  const link = r.experiment_id ? `#/experiment/${r.experiment_id}?run=${r.id}` : `#/run/${r.id}`;
  const tau = r.last?.tau;
  const diffsInline = !columnChoice.diffs ? diffKeys : [];
  return {
    id: () => h('td', {}, r.id),
    name: () => h('td.cell-name', {}, h('a.run-name', { href: `#/run/${r.id}` }, nameWords(runName(r))),
      r.experiment_id ? h('div.small', {}, h('a', { href: link }, `experiment ${r.experiment_id}`),
        r.replicate > 0 || m.experiments.find((e) => e.id === r.experiment_id)?.replicates > 1 ? h('span.muted.replicate', {}, ` · replicate ${r.replicate}`) : null) : null,
      // no config column and the differing keys not in columns: they go under the name
      !columnChoice.config && diffsInline.length ? configSummary(r.config, diffsInline, 0).slice(3) : null),
    variant: () => h('td.cell-variant', {}, h('span.variant.wraps', {}, h('span.swatch', { style: { background: variantColor(r.variant) }, 'aria-hidden': 'true' }),
      h('span', {}, nameWords(r.variant)))),
    status: () => h('td.cell-status', {}, progressCell(r)),
    loss: () => h('td.num.cell-loss', {}, lossText(r)),
    val_loss: () => h('td.num.cell-val-loss', {}, lossText(r, 'val_loss')),
    tau: () => h('td.num.cell-tau', {}, tau ? `${fmt(tau.min, 4)} – ${fmt(tau.max, 4)}` : '–'),
    config: () => h('td.small.cell-config', {}, configSummary(r.config, diffKeys, columnChoice.diffs ? MAX_DIFFS : 0)),
    diffs: () => m.diffCols.map((k) => h('td.small.num.cell-diff', { dataset: { key: k } }, fmtConfig(r.config[k]))),
    tags: () => h('td', {}, (r.tags || []).map((t) => h('span.tag', {}, t))),
    created: () => h('td.small', {}, fmtTime(r.created_at)),
  };
}

// "All runs": the table with its head, its rows and the count of runs shown.
function runsTable(m, { sortSel, syncCompare }) {
  const tbody = h('tbody');
  const thead = h('thead');
  const table = h('table.table#runs-table', { 'aria-describedby': 'runs-count' }, thead, tbody);
  const count = h('p.muted#runs-count', { 'aria-live': 'polite' });
  const head = () => renderHead(m, thead, sortSel);
  const row = (r, diffKeys) => {
    const box = h('input.compare-pick', { type: 'checkbox', checked: selected.has(r.id), 'aria-label': `select run ${r.id} for comparison`,
      onchange: (e) => { if (e.target.checked) selected.add(r.id); else selected.delete(r.id); syncCompare(); head(); } });
    const cell = runCells(m, r, diffKeys);
    return h('tr', { dataset: { runId: r.id, status: r.status } },
      h('td.select', {}, box),
      shownColumns(m).map((c) => cell[c.key]()),
      h('td.actions', {}, runActions(r, () => m.refresh())));
  };
  function renderRows(shown, diffKeys) {
    keepFocus(table, () => clear(tbody, shown.length ? shown.map((r) => row(r, diffKeys)) : h('tr.empty', {}, h('td', { colspan: shownColumns(m).length + m.diffCols.length + 2 },
      m.runs.length || m.configFilter.key ? 'No run matches the filters.' : 'No runs yet: start one below, or reproduce the blog experiment.'))));
    count.textContent = `${shown.length} of ${m.runs.length} runs`;
  }
  const failed = (err) => clear(tbody, h('tr.empty', {}, h('td.field-error', { colspan: COLUMNS.length + 2 }, `Could not load runs: ${err.message}`)));
  return { table, tbody, count, renderHead: head, renderRows, failed };
}

// "Experiments": one row per experiment, its runs' statuses and a link comparing them.
function experimentsTable(m) {
  const body = h('tbody');
  const el = h('section.card', { 'aria-labelledby': 'exp-list-title' },
    h('h3#exp-list-title', {}, 'Experiments'),
    h('div.table-scroll', {}, h('table.table#experiments-table', {},
      h('thead', {}, h('tr', {}, ['id', 'name', 'preset', 'runs', 'created'].map((c) => h('th', { scope: 'col' }, c)))), body)));
  const row = (e) => {
    const rs = m.runs.filter((r) => r.experiment_id === e.id);
    return h('tr', { dataset: { experimentId: e.id } },
      h('td', {}, e.id),
      h('td', {}, h('a', { href: `#/experiment/${e.id}` }, e.name),
        rs.length > 1 ? h('div.small', {}, h('a', { href: compareHref(rs.map((r) => r.id)), 'aria-label': `compare the runs of experiment ${e.id}` }, 'compare')) : null),
      h('td', {}, e.preset || '–'),
      h('td', {}, e.replicates > 1 ? h('div.small.muted', {}, `${e.replicates} replicates per variant`) : null,
        rs.map((r) => h('div.small', {}, variantTag(r.variant), e.replicates > 1 ? ` r${r.replicate}` : '', ' ', h('span.pill.status-' + r.status, {}, r.status),
          ` ${r.step}/${r.total_steps}`, r.last?.loss ? ` · loss ${fmt(r.last.loss.last)}` : ''))),
      h('td.small', {}, fmtTime(e.created_at)));
  };
  return { el, render: () => clear(body, m.experiments.length ? m.experiments.map(row) : h('tr.empty', {}, h('td', { colspan: 5 }, 'No experiments yet.'))) };
}

// The column chooser: the optional columns, and the differing keys as columns or as a line.
function columnChooser(m) {
  const CHOOSABLE = [['id', 'id'], ['config', 'config summary'], ['diffs', 'differing config keys as columns (else a line under the config)'],
    ['tags', 'tags'], ['created', 'created']];
  return h('details.column-chooser#runs-columns', {},
    h('summary', {}, 'Columns'),
    h('div.column-list', { role: 'group', 'aria-label': 'columns shown in the runs table' },
      h('p.small.muted', {}, 'Always shown: name, variant, status, loss, val loss, τ.'),
      CHOOSABLE.map(([k, text]) => h('label.check', {}, h('input', { type: 'checkbox', checked: m.columnChoice[k], dataset: { column: k },
        onchange: (e) => { m.columnChoice[k] = e.target.checked; saveColumnChoice(m.columnChoice); m.render(); } }), ' ', text))));
}

// The runs (in the order and with the config filter chosen) and the experiments, from the server.
async function loadRuns(m, { table, filters }) {
  if (!m.alive) return;
  try {
    const q = new URLSearchParams({ limit: '500', sort: m.sort.api || '-id' });
    if (m.configFilter.key && m.configFilter.value) q.set(`config.${m.configFilter.key}`, m.configFilter.value);
    let r, refusal = '';
    try {
      r = await api(`/api/runs?${q}`);
    } catch (err) {
      if (err.status !== 422) throw err;
      refusal = err.message; // a value the key does not take: the server says why
      r = { runs: [] };
    }
    const e = await api('/api/experiments');
    if (!m.alive) return;
    m.loadedApi = !!m.sort.api;
    m.runs = r.runs;
    setEstimateInputs({ runs: m.runs });
    m.experiments = e.experiments;
    m.render();
    filters.setRefusal(refusal); // after the rows, so a refusal never stands next to rows it refused
  } catch (err) {
    table.failed(err);
  }
}

// Live progress: a row whose run reported a step has its progress and loss cells replaced in place,
// once per frame; a run not in the table, or a change of status, loads the list again.
function liveRows(m, tbody) {
  const refreshSoon = debounce(() => m.refresh(), 300);
  const redraw = frameThrottle(() => m.render());
  const liveCells = new Set();
  const cellsSoon = frameThrottle(() => {
    for (const r of liveCells) {
      const tr = tbody.querySelector(`tr[data-run-id="${r.id}"]`);
      if (!tr) continue;
      clear(tr.querySelector('.cell-status'), progressCell(r));
      tr.querySelector('.cell-loss').textContent = lossText(r);
      tr.querySelector('.cell-val-loss').textContent = lossText(r, 'val_loss');
    }
    liveCells.clear();
  });
  return subscribe({
    metrics(d) {
      const r = m.runs.find((x) => x.id === d.run_id);
      if (!r) { refreshSoon(); return; }
      r.step = d.step; r.total_steps = d.total_steps; r.eta_s = d.eta_s; r.status = 'running';
      if (d.values && d.values.loss !== undefined) {
        const l = r.last.loss || { last: d.values.loss, min: d.values.loss };
        r.last = { ...r.last, loss: { last: d.values.loss, min: Math.min(l.min, d.values.loss) } };
      }
      const tr = tbody.querySelector(`tr[data-run-id="${r.id}"]`);
      if (tr) liveCells.add(r); else redraw();
      cellsSoon();
    },
    status() { refreshSoon(); },
    resync() { m.refresh(); },
  });
}

// The corpus upload card; a corpus that becomes ready joins the estimates and the form's suggestions.
function uploadCard() {
  const upload = corpusUploadCard({ onReady: (corpora) => {
    setEstimateInputs({ corpora });
    // the form's corpus suggestions gain the new one
    const dl = document.getElementById('cfg-corpus-list');
    if (dl) clear(dl, corpora.filter((c) => c.status === 'ready').map((c) => h('option', { value: c.name })));
  } });
  api('/api/corpora').then((c) => setEstimateInputs({ corpora: c.corpora })).catch(() => { /* estimates assume GPT-2's vocabulary */ });
  return upload;
}

const gotoStart = () => h('button#goto-start', { type: 'button', onclick: () => {
  const f = document.getElementById('start');
  f.scrollIntoView({ behavior: 'smooth', block: 'start' });
  f.querySelector('input, select')?.focus({ preventScroll: true });
} }, 'New run or experiment ↓');

export function mount(root) {
  const m = runsModel();
  const filters = runsFilters(m);
  const compare = compareButtons(m);
  const table = runsTable(m, { sortSel: filters.sortSel, syncCompare: compare.sync });
  const exps = experimentsTable(m);
  m.render = () => {
    const shown = shownRuns(m);
    m.shownNow = shown;
    // What tells the shown runs apart beyond the summary line (attention too, where a variant's
    // name is not its attention): the first few get columns.
    const diffKeys = differingKeys(shown, [...SUMMARY_KEYS, ...(shown.every((r) => r.variant === r.config.attention) ? ['attention'] : [])]);
    m.diffCols = m.columnChoice.diffs ? diffKeys.slice(0, MAX_DIFFS) : [];
    compare.sync();
    table.renderHead();
    table.renderRows(shown, diffKeys);
    filters.syncVariants();
    exps.render();
  };
  m.refresh = () => loadRuns(m, { table, filters });
  const unsub = liveRows(m, table.tbody);
  const chooser = columnChooser(m);
  const form = startForm(m.refresh);
  const preset = presetCard();
  const upload = uploadCard();
  const nodes = nodesCard();
  clear(root,
    h('h2', {}, 'Runs'),
    h('div.cards', {}, preset),
    h('section.card', { 'aria-labelledby': 'runs-list-title' },
      h('h3#runs-list-title', {}, 'All runs'),
      h('div.toolbar', {}, filters.els, table.count, compare.els, h('span.spacer'), chooser, gotoStart()),
      h('div.table-scroll', {}, table.table)),
    exps.el,
    nodes.el,
    upload.el,
    form);
  table.renderHead();
  m.refresh();
  return () => { m.alive = false; unsub(); nodes.stop(); upload.stop(); for (const f of [...estimates.listeners]) estimates.listeners.delete(f); };
}

// A preset's own classroom overrides (the server's `tiny`), or null for a preset without them.
const overridesOf = (p) => (p && p.tiny) || null;

// What the preset card says of a preset, full-size or tiny, with n replicates: its plan, its button,
// what the classroom version changes (from the preset's own overrides) and the time estimate.
function presetTexts(p, tiny, n) {
  const o = overridesOf(p) || {};
  const cfg = { ...p.base, ...(tiny ? o : {}) };
  const configs = p.variants.flatMap((v) => Array.from({ length: n }, () => ({ ...cfg, ...(v.config || {}) })));
  return {
    detail: `${p.variants.map((v) => v.name).join(' vs ')} · ` +
      `L${cfg.n_layer} H${cfg.n_head} d${cfg.d_model} T${cfg.seq_len} B${cfg.batch} · ${cfg.steps} steps · corpus “${cfg.corpus}” · ` +
      (n > 1 ? `${n} replicates (seeds ${cfg.seed}–${cfg.seed + n - 1}), ${n * p.variants.length} runs` : `seed ${cfg.seed}`),
    button: p.name === 'seed-blog' ? 'Reproduce the blog experiment' : `Start “${p.name}”`,
    tinyWhat: !overridesOf(p) ? '(this preset has no classroom version)' : `(classroom speed: ${[o.corpus ? `corpus “${o.corpus}”` : null, o.d_model ? `L${o.n_layer ?? cfg.n_layer} d${o.d_model}` : null,
      o.steps ? `${o.steps} steps` : null].filter(Boolean).join(', ') || 'the preset’s own overrides'})`,
    estimate: estimateFor(configs),
  };
}

// The presets (GET /api/presets): the blog's experiment and the questions it leaves (replicates,
// the attention scale), each startable full-size or classroom-sized (the preset's own `tiny`
// overrides; the tiny box is off for a preset without them), with its replicate count.
function presetCard() {
  const tiny = h('input#preset-tiny', { type: 'checkbox', checked: true });
  const choice = h('select#preset-name', { 'aria-label': 'preset' });
  const reps = h('input#preset-replicates', { type: 'number', min: 1, max: 32, step: 1, value: 1, 'aria-describedby': 'preset-replicates-help' });
  const desc = h('p.muted', {}, 'Loading the presets…');
  const detail = h('div.small.muted#preset-detail');
  const estimate = h('span.small.estimate#preset-estimate', { 'aria-live': 'polite' });
  const tinyWhat = h('span#preset-tiny-what', {}, '(classroom speed)');
  const err = h('div.field-error', { role: 'alert' });
  const btn = h('button.primary#reproduce', { type: 'button' }, 'Reproduce the blog experiment');
  let presets = [], presetObj = null;
  const describe = () => {
    if (!presetObj) return;
    tiny.disabled = !overridesOf(presetObj);
    if (tiny.disabled) tiny.checked = false;
    const t = presetTexts(presetObj, tiny.checked, Number(reps.value) || 1);
    desc.textContent = presetObj.description;
    detail.textContent = t.detail;
    btn.textContent = t.button;
    tinyWhat.textContent = t.tinyWhat;
    estimate.textContent = t.estimate;
  };
  onEstimate(describe);
  const pick = () => {
    presetObj = presets.find((x) => x.name === choice.value) || presets[0];
    reps.value = String(presetObj?.replicates || 1);
    describe();
  };
  tiny.addEventListener('change', describe);
  reps.addEventListener('input', describe);
  choice.addEventListener('change', pick);
  Promise.all([api('/api/presets'), api('/api/corpora').catch(() => ({ corpora: [] }))]).then(([p, c]) => {
    presets = p.presets || [];
    if (!presets.length) { desc.textContent = 'This server has no presets.'; btn.disabled = true; return; }
    clear(choice, presets.map((x) => h('option', { value: x.name }, x.name)));
    choice.value = presets.some((x) => x.name === 'seed-blog') ? 'seed-blog' : presets[0].name;
    pick();
    const base = presets[0].base || {};
    const hasDefault = c.corpora.some((x) => x.name === (base.corpus || 'default') && x.status === 'ready');
    if (!hasDefault) {
      tiny.checked = true;
      err.textContent = '';
      desc.after(h('p.small.muted', {}, `The full-size presets need the “${base.corpus}” corpus (run “make corpus”); the tiny versions use the built-in one.`));
    }
    describe();
  }).catch((e) => { desc.textContent = `Could not load presets: ${e.message}`; });
  btn.addEventListener('click', async () => {
    if (!presetObj) return;
    const n = Number(reps.value);
    if (!Number.isInteger(n) || n < 1 || n > 32) { err.textContent = 'Replicates must be a whole number from 1 to 32.'; reps.focus(); return; }
    btn.disabled = true;
    err.textContent = '';
    try {
      const body = { preset: presetObj.name, replicates: n };
      if (tiny.checked && overridesOf(presetObj)) { body.overrides = { ...overridesOf(presetObj) }; body.name = `${presetObj.name} (tiny)`; body.tags = ['tiny']; }
      const res = await post('/api/experiments', body);
      location.hash = `#/experiment/${res.experiment.id}`;
    } catch (e) {
      err.textContent = e.message;
    } finally {
      btn.disabled = false;
    }
  });
  return h('section.card.preset', { 'aria-labelledby': 'preset-title' },
    h('h3#preset-title', {}, 'The blog experiment and its questions'),
    h('div.toolbar', {}, h('label', { for: 'preset-name' }, 'preset'), choice,
      h('label', { for: 'preset-replicates' }, 'replicates'), reps,
      h('span.small.muted#preset-replicates-help', {}, 'runs per variant, seeds seed, seed+1, …; 3 or more give error bars')),
    desc, detail,
    h('div.toolbar', {}, btn, h('label.check', {}, tiny, ' tiny ', tinyWhat), estimate), err);
}

// The experiment's variants (ticked: those that take positions from rotation, not a learned table)
// and its replicate count; `chosen` lists the ticked ones.
function variantsFieldset(schema, attentionKinds) {
  const learnedPositions = new Set(attentionKinds.kinds.filter((k) => k.learned_positions).map((k) => k.name));
  const boxes = (schema.properties.attention?.enum || []).map((v) =>
    h('label.check', {}, h('input', { type: 'checkbox', value: v, checked: !learnedPositions.has(v), dataset: { variant: v } }), ' ', variantTag(v)));
  const reps = h('input#exp-replicates', { type: 'number', min: 1, max: 32, step: 1, value: 1 });
  const el = h('fieldset.variants', { disabled: true },
    h('legend', {}, 'Variants compared (same seed and data order; the “attention” field above is ignored)'), boxes,
    h('label.check', { for: 'exp-replicates' }, 'replicates per variant '), reps,
    h('span.small.muted', {}, 'seeds seed, seed+1, …, shared by the variants'));
  const chosen = () => boxes.map((l) => l.querySelector('input')).filter((i) => i.checked).map((i) => i.value);
  return { el, reps, chosen };
}

// A sweep value typed by its key's schema type; throws on a value of the wrong type.
function sweepValue(schema, key, t) {
  const type = schema.properties[key]?.type;
  if (type === 'integer' || type === 'number') {
    const n = Number(t);
    if (!Number.isFinite(n) || (type === 'integer' && !Number.isInteger(n))) throw new Error(`${key}: “${t}” is not ${type === 'integer' ? 'an integer' : 'a number'}`);
    return n;
  }
  if (type === 'boolean') {
    if (t !== 'true' && t !== 'false') throw new Error(`${key}: “${t}” is not true or false`);
    return t === 'true';
  }
  return t;
}

// A sweep: keys with several values each; the experiment runs their product (it replaces the variants
// ticked above). `value` is the grid as the API takes it, {key: [typed values]}; null for no key;
// it throws on a bad value.
function sweepFieldset(schema, reps) {
  const keyNames = Object.keys(schema.properties).sort();
  const rows = h('div#grid-rows');
  const count = h('span.small.muted#grid-count', { 'aria-live': 'polite' });
  const value = () => {
    const out = {};
    for (const row of rows.querySelectorAll('.grid-row')) {
      const key = row.querySelector('.grid-key').value;
      const texts = row.querySelector('.grid-values').value.split(',').map((t) => t.trim()).filter(Boolean);
      if (!key || !texts.length) continue;
      out[key] = texts.map((t) => sweepValue(schema, key, t));
    }
    return Object.keys(out).length ? out : null;
  };
  const sync = () => {
    let g = null;
    try { g = value(); } catch { /* shown on submit */ }
    const n = g ? Object.values(g).reduce((a, v) => a * v.length, 1) : 0;
    const r = Number(reps.value) || 1;
    count.textContent = g ? `${n} variant${n === 1 ? '' : 's'} × ${r} = ${n * r} runs (at most 256); the ticked variants are not used` : '';
  };
  const gridRow = (key = '', values = '') => {
    const sel = h('select.grid-key', { 'aria-label': 'config key to sweep' }, h('option', { value: '' }, 'key…'),
      keyNames.map((k) => h('option', { value: k }, k)));
    sel.value = key;
    const vals = h('input.grid-values', { type: 'text', placeholder: 'values, comma separated', value: values, 'aria-label': 'values to sweep' });
    const row = h('div.toolbar.grid-row', {}, sel, vals,
      h('button.small', { type: 'button', 'aria-label': 'remove this key', onclick: () => { row.remove(); sync(); } }, 'Remove'));
    sel.addEventListener('change', sync);
    vals.addEventListener('input', sync);
    return row;
  };
  reps.addEventListener('input', sync);
  const el = h('fieldset.grid#grid', { disabled: true },
    h('legend', {}, 'Sweep (optional): every combination of these values'), rows,
    h('div.toolbar', {}, h('button.small#grid-add', { type: 'button', onclick: () => { const r = gridRow(); rows.append(r); r.querySelector('select').focus(); sync(); } }, 'Add a key'), count));
  return { el, value };
}

// The configs the form would start (defaults filled in), for the time estimate.
function plannedConfigs(f) {
  const base = Object.fromEntries(Object.entries(f.schema.properties).filter(([, p]) => p.default !== undefined).map(([k, p]) => [k, p.default]));
  const cfg = { ...base, ...f.fields.values() };
  const reps = f.modeExp.checked ? Math.max(1, Number(f.variants.reps.value) || 1) : 1;
  if (!f.modeExp.checked) return [cfg];
  let grid = null;
  try { grid = f.sweep.value(); } catch { return []; }
  let combos = [{}];
  if (grid) for (const [k, vals] of Object.entries(grid)) combos = combos.flatMap((c) => vals.map((v) => ({ ...c, [k]: v })));
  else combos = f.variants.chosen().map((v) => ({ attention: v }));
  return combos.flatMap((c) => Array.from({ length: reps }, () => ({ ...cfg, ...c })));
}

// Posts what the form says (a run, an experiment of variants, or a sweep) and opens it; a refusal is
// shown under the field it names.
async function submitStart(f, onCreated) {
  f.err.textContent = '';
  f.fields.clearErrors();
  const bad = f.fields.validate();
  if (bad) { bad.focus(); f.err.textContent = 'Please correct the marked field.'; return; }
  const config = f.fields.values();
  const tagList = f.tags.value.split(',').map((t) => t.trim()).filter(Boolean);
  const name = f.name.value.trim() || undefined;
  f.submit.disabled = true;
  try {
    let grid = null;
    if (f.modeExp.checked) {
      try { grid = f.sweep.value(); } catch (e) { f.err.textContent = e.message; return; }
    }
    if (f.modeExp.checked && grid) {
      const res = await post('/api/experiments', { name, tags: tagList, base: config, replicates: Number(f.variants.reps.value) || 1, grid });
      location.hash = `#/experiment/${res.experiment.id}`;
    } else if (f.modeExp.checked) {
      const chosen = f.variants.chosen();
      if (chosen.length < 1) { f.err.textContent = 'Pick at least one variant.'; return; }
      delete config.attention;
      const res = await post('/api/experiments', { name, tags: tagList, base: config,
        replicates: Number(f.variants.reps.value) || 1, variants: chosen.map((v) => ({ name: v, config: { attention: v } })) });
      location.hash = `#/experiment/${res.experiment.id}`;
    } else {
      const res = await post('/api/runs', { name, tags: tagList, note: f.note.value, config });
      onCreated();
      location.hash = `#/run/${res.run.id}`;
    }
  } catch (e) {
    const field = fieldFromPath(e.field);
    if (field && f.fields.setError(field, e.message)) {
      f.fields.inputs.get(field).focus();
      f.err.textContent = `The server refused the ${field} field.`;
    } else {
      f.err.textContent = e.message;
    }
  } finally {
    f.submit.disabled = false;
  }
}

// The form itself, from the run schema, the ready corpora and the attention kinds.
function startFormBody(schema, corpora, attentionKinds, onCreated) {
  const names = corpora.filter((c) => c.status === 'ready').map((c) => c.name);
  const f = {
    schema,
    fields: schemaFields(schema, { values: names.includes('default') ? {} : { corpus: names[0] || 'small' }, choices: { corpus: names } }),
    name: h('input#run-name', { type: 'text', placeholder: 'optional' }),
    tags: h('input#run-tags', { type: 'text', placeholder: 'comma separated' }),
    note: h('input#run-note', { type: 'text', placeholder: 'optional' }),
    modeExp: h('input', { type: 'radio', name: 'mode', value: 'experiment' }),
    variants: variantsFieldset(schema, attentionKinds),
    err: h('div.field-error#start-error', { role: 'alert' }),
    submit: h('button.primary#start-submit', { type: 'submit' }, 'Start'),
  };
  f.sweep = sweepFieldset(schema, f.variants.reps);
  const modeRun = h('input', { type: 'radio', name: 'mode', value: 'run', checked: true });
  const estimate = h('span.small.estimate#start-estimate', { 'aria-live': 'polite' });
  const syncEstimate = () => {
    let text = '';
    try { text = estimateFor(plannedConfigs(f)); } catch { /* a field mid-edit */ }
    estimate.textContent = text;
  };
  onEstimate(syncEstimate);
  const syncMode = () => {
    f.variants.el.disabled = !f.modeExp.checked;
    f.sweep.el.disabled = !f.modeExp.checked;
    f.submit.textContent = f.modeExp.checked ? 'Start experiment' : 'Start run';
  };
  modeRun.addEventListener('change', syncMode);
  f.modeExp.addEventListener('change', syncMode);
  const form = h('form#start-form', { novalidate: true },
    h('div.fields', {},
      h('div.field', {}, h('label', { for: 'run-name' }, 'name'), f.name),
      h('div.field', {}, h('label', { for: 'run-tags' }, 'tags'), f.tags),
      h('div.field', {}, h('label', { for: 'run-note' }, 'note'), f.note)),
    h('fieldset.mode', {}, h('legend', {}, 'Start'),
      h('label.check', {}, modeRun, ' one run'), h('label.check', {}, f.modeExp, ' an experiment')),
    f.variants.el,
    f.sweep.el,
    f.fields.el,
    h('div.toolbar', {}, f.submit, estimate, f.err));
  form.addEventListener('input', syncEstimate);
  form.addEventListener('change', syncEstimate);
  syncMode();
  syncEstimate();
  form.addEventListener('submit', (ev) => { ev.preventDefault(); submitStart(f, onCreated); });
  return form;
}

function startForm(onCreated) {
  const section = h('section.card#start', { 'aria-labelledby': 'start-title' }, h('h3#start-title', {}, 'Start a run or an experiment'),
    h('p.muted', {}, 'Loading the configuration schema…'));
  Promise.all([cached('/api/openapi.json'), api('/api/corpora').catch(() => ({ corpora: [] })),
    cached('/api/attention-kinds').catch(() => ({ kinds: [] }))]).then(([doc, corp, attentionKinds]) => {
    const form = startFormBody(doc.components.schemas.RunConfig, corp.corpora, attentionKinds, onCreated);
    clear(section, h('h3#start-title', {}, 'Start a run or an experiment'),
      h('p.muted', {}, 'Fields, bounds and defaults come from the API’s run schema; leave a field empty for the server’s default.'), form);
  }).catch((e) => { section.append(h('p.field-error', {}, `Could not load the schema: ${e.message}`)); });
  return section;
}
