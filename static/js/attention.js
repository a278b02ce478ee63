// Attention maps of a trained run: type a sentence, see every layer and head as a heat map with the
// tokens on both axes (row = the query token, column = the key it attends to).
import { api } from './api.js';
import { h, clear, fmt } from './dom.js';
import { heatmap } from './charts.js';
import { variantTag } from './runs.js';
import { onTheme } from './theme.js';
import { probeTiming } from './probes.js';

const SAMPLE = 'The cat sat on the mat because it was tired, and then it slept.';

function pieceLabel(p) { return p.replace(/\n/g, '↵').replace(/^ /, '') || '␣'; }

// The view's controls and the places its answers go: { runSel, text, maxTok, btn, rowScale, status, out, err, form }.
function attentionForm() {
  const v = {
    runSel: h('select#att-run'),
    text: h('textarea#att-text', { rows: 2 }),
    maxTok: h('input#att-max', { type: 'number', min: 1, max: 256, value: 32 }),
    btn: h('button.primary#att-show', { type: 'submit' }, 'Show attention'),
    rowScale: h('input#att-rowscale', { type: 'checkbox' }),
    status: h('p.muted#att-status', { 'aria-live': 'polite' }),
    out: h('div#att-out'),
    err: h('div.field-error', { role: 'alert' }),
  };
  v.text.value = localStorage.getItem('attnlab.attText') || SAMPLE;
  v.form = h('form.att-form', {},
    h('div.fields', {},
      h('div.field.run-field', {}, h('label', { for: 'att-run' }, 'run (with a checkpoint)'), v.runSel),
      h('div.field.wide', {}, h('label', { for: 'att-text' }, 'sentence'), v.text),
      h('div.field', {}, h('label', { for: 'att-max' }, 'max tokens'), v.maxTok)),
    h('div.toolbar', {}, v.btn, h('label.check', {}, v.rowScale, ' scale each row to its largest weight'), v.err));
  return v;
}

// The runs with a checkpoint into the menu (the address's run chosen, and shown, if it is one).
function loadRuns(v, params, show) {
  api('/api/runs?limit=500&sort=-id').then((d) => {
    if (!v.alive) return;
    const runs = v.runs = d.runs.filter((r) => r.checkpoint_step > 0);
    // The step first: a long run name must not push it out of the box.
    clear(v.runSel, runs.length ? runs.map((r) => h('option', { value: r.id }, `#${r.id} · step ${r.checkpoint_step} · ${r.variant} · ${r.name || r.variant + ' run'}`))
      : h('option', { value: '' }, 'no run with a checkpoint yet'));
    if (params.run && runs.some((r) => String(r.id) === String(params.run))) v.runSel.value = String(params.run);
    v.btn.disabled = !runs.length;
    if (!runs.length) v.status.textContent = 'Train a run first (Runs view): a map needs a checkpoint.';
    else if (params.run) show();
  }).catch((e) => { v.status.textContent = `Could not load runs: ${e.message}`; });
}

// One head's heat map with its τ, entropy and mean distance. col(name): the heads table's column.
function headFigure(v, row, col, table, pieces) {
  const L = row[col('layer')], H = row[col('head')];
  const matrix = table.rows.map((rr) => rr.slice(1).map(Number));
  return h('figure.card.att-head', { dataset: { layer: L, head: H } },
    h('figcaption', {}, h('strong', {}, `layer ${L} · head ${H}`),
      h('span.small.muted', {}, ` τ ${fmt(row[col('tau')], 3)} · entropy ${fmt(row[col('entropy_fraction')] * 100, 3)}% of uniform · mean distance ${fmt(row[col('mean_distance')], 3)}`)),
    heatmap(matrix, { rowLabels: pieces, colLabels: pieces, title: `layer ${L} head ${H}`, max: 1, rowScale: v.rowScale.checked,
      exportName: `run-${v.runSel.value}-attention-l${L}-h${H}` }));
}

// What uniform attention means, when every head shows it (an untrained or tiny model); else null.
function uniformNote(fracs) {
  const uniform = fracs.length && fracs.every((f) => f >= 0.95);
  return uniform ? h('p.card.look-for#att-uniform', {}, h('strong', {}, 'Uniform attention. '),
    `Every head spreads its weight almost evenly (${fmt(Math.min(...fracs) * 100, 3)} % of uniform entropy or more): each query looks at all the keys before it alike, `,
    'so each row of a map fades as it gets longer. The model has not learned where to look yet: train longer, or on a byte-level corpus, to see heads specialise.') : null;
}

// An attention_map probe drawn: the status line, the run, the tokens and a heat map per head.
function renderAttention(v, probe) {
  v.lastProbe = probe;
  const r = probe.result;
  const t = Object.fromEntries(r.tables.map((x) => [x.name, x]));
  const pieces = t.tokens.rows.map((row) => pieceLabel(String(row[t.tokens.columns.indexOf('piece')])));
  const heads = t.heads;
  const col = (name) => heads.columns.indexOf(name);
  const run = v.runs.find((x) => String(x.id) === v.runSel.value);
  v.status.textContent = `${r.summary.n_tokens} tokens${r.summary.truncated ? ' (text cut at max tokens)' : ''} · ` +
    `${r.summary.n_layer} layers × ${r.summary.n_head} heads · ${probeTiming(probe, probe.requestMs ?? 0, false)}`;
  const grid = h('div.att-grid');
  for (const row of heads.rows) {
    const table = t[`attention_l${row[col('layer')]}_h${row[col('head')]}`];
    if (table) grid.append(headFigure(v, row, col, table, pieces));
  }
  const fracs = heads.rows.map((row) => Number(row[col('entropy_fraction')])).filter(Number.isFinite);
  clear(v.out,
    run ? h('p', {}, variantTag(run.variant), ` run #${run.id} ${run.name}, checkpoint at step ${run.checkpoint_step}`) : null,
    uniformNote(fracs),
    h('p.tokens', { 'aria-label': 'tokens' }, pieces.map((p, i) => h('span.token', { title: `token ${i}` }, p))),
    grid);
}

export function mount(root, params) {
  const v = attentionForm();
  v.alive = true;
  v.runs = [];
  v.lastProbe = null;
  v.rowScale.addEventListener('change', () => { if (v.lastProbe) renderAttention(v, v.lastProbe); });
  clear(root, h('h2', {}, 'Attention map'),
    h('p.muted', {}, 'Each square is one head: row = the query token, column = the key it attends to; darker = more weight. ' +
      'The model is causal, so nothing lies right of the diagonal.'),
    h('section.card', {}, v.form), v.status, v.out);
  loadRuns(v, params, show);
  v.form.addEventListener('submit', (e) => { e.preventDefault(); show(); });

  let seq = 0;
  async function show() {
    v.err.textContent = '';
    if (!v.runSel.value) return;
    const my = ++seq; // a slower earlier answer must not replace a later one
    localStorage.setItem('attnlab.attText', v.text.value);
    v.status.textContent = 'computing…';
    try {
      const t0 = performance.now();
      const res = await api('/api/probes', { method: 'POST', body: { kind: 'attention_map', run_id: Number(v.runSel.value),
        params: { text: v.text.value, max_tokens: Number(v.maxTok.value) } } });
      if (!v.alive || my !== seq) return;
      res.probe.requestMs = performance.now() - t0;
      renderAttention(v, res.probe);
    } catch (e) {
      if (my !== seq) return;
      v.err.textContent = e.message;
      v.status.textContent = '';
    }
  }
  // Labels and masked cells are drawn in the theme's colours: draw the maps again when it changes.
  const unTheme = onTheme(() => { if (v.lastProbe) renderAttention(v, v.lastProbe); });
  return () => { v.alive = false; unTheme(); };
}
