// The dashboard as a research instrument (issue 25), in a real browser (Debian's chromium driven by
// playwright-core). Starts attnlabd on a free port with an empty data directory, uploads a tiny byte
// corpus and trains, over the API: one run with a checkpoint, rope against cosine_rope with 3
// replicates each, and four runs that differ in six config keys under long sweep-style names. Then
// checks, at 1400 × 900 unless said:
// - the experiment view leads with its answer (the final validation loss per variant with its
//   interval, the paired gap as a forest plot with the zero line, a sentence that says whether the
//   interval excludes zero), then the bands in one colour per variant, then the detail charts; no
//   chart's legend is taller than its plot, one legend entry per variant; the run cards come last;
// - the runs table keeps name, variant, status, loss, val loss and τ on screen at 1400 px and on a
//   1920-px projector in classroom mode, wraps names between words only, and remembers the columns
//   chosen;
// - the single run's entropy chart draws its heads in distinct hues; the attention map's run menu
//   shows the checkpoint's step whole; probe summaries say true/false, keep prose out of the bold
//   figures and say how long a stored answer took to read; configs say lr 3e-4 everywhere; the
//   context-extension angle chart is on a log axis; a time estimate before starting (none before
//   anything was measured);
// - every chart exports as SVG (Chart.js charts, heat maps, the forest plot) and a corpus uploads
//   from the page with its progress.
// Any console error fails the suite. Screenshots go to <build>/<mode>/artifacts/browser/instrument-*.png.
// Prints "PASS name" / "FAIL name: why" per case and exits non-zero on any failure.
import { join } from 'node:path';
import { ARTIFACTS, assert, step, api, waitFor, waitForRun, checkSetup, startFresh, launchBrowser, run } from './support/harness.mjs';

const TINY = { corpus: 'tinybytes', n_layer: 2, n_head: 4, d_model: 16, seq_len: 16, batch: 4, steps: 40, eval_every: 10, checkpoint_every: 0 };
const REPS = 3;
// Long enough (several hundred milliseconds) for its wall time to be a measurement of this machine.
const SOLO = { ...TINY, steps: 1000, eval_every: 100, seed: 5 };
const SOLO_NAME = 'a run with a rather long name, so the menu has to make room';
// Four runs that differ in six keys, named the way a sweep names its variants.
const VARIED = [
  ['sweep/lr=0.001,tau_param=linear,weight_decay=0.01', { lr: 0.001 }],
  ['sweep/lr=0.0003,tau_param=log,weight_decay=0', { tau_param: 'log', weight_decay: 0 }],
  ['sweep/lr=0.0003,rope_base=500,beta2=0.99', { rope_base: 500, beta2: 0.99 }],
  ['sweep/lr=0.0003,scale_lr_mult=2', { scale_lr_mult: 2 }],
];
const CORE = ['name', 'variant', 'status', 'loss', 'val_loss', 'tau'];

// The page's number format (static/js/dom.js fmt): `digits` significant digits, trailing zeros kept.
const fmtN = (v, digits = 4) => {
  if (Number.isInteger(v)) return String(v);
  const a = Math.abs(v);
  if (a !== 0 && (a < 1e-3 || a >= 1e6)) return v.toExponential(Math.max(1, digits - 2));
  const p = v.toPrecision(digits);
  return p.includes('e') ? String(Number(p)) : p;
};

// Every Chart.js chart drawn on the page: its canvas id, legend and plot boxes and legend entries.
const chartBoxes = (page) => page.evaluate(() => Object.values(window.Chart.instances)
  .filter((c) => c.canvas.offsetParent !== null)
  .map((c) => ({ id: c.canvas.id, legend: c.legend && c.options.plugins.legend.display !== false ? c.legend.height : 0,
    plot: c.chartArea.bottom - c.chartArea.top, items: (c.legend?.legendItems || []).map((i) => i.text) })));

// Follows an export link without downloading: the link's own handler makes the file's URL, then the
// text behind it is read.
const exportText = (page, selector) => page.evaluate(async (sel) => {
  const a = document.querySelector(sel);
  if (!a) return null;
  a.addEventListener('click', (e) => e.preventDefault(), { once: true });
  a.click();
  return (await fetch(a.href)).text();
}, selector);

// An SVG document parsed in the page: whether it parses, its element counts and its text.
const svgFacts = (page, text) => page.evaluate((t) => {
  const doc = new DOMParser().parseFromString(t, 'image/svg+xml');
  const bad = doc.querySelector('parsererror');
  const count = (s) => doc.querySelectorAll(s).length;
  return { ok: !bad && doc.documentElement.nodeName === 'svg', paths: count('path'), texts: count('text'), rects: count('rect'),
    strokes: [...doc.querySelectorAll('path[stroke]')].map((p) => p.getAttribute('stroke').toLowerCase()),
    text: [...doc.querySelectorAll('text')].map((x) => x.textContent).join(' | '),
    width: Number(doc.documentElement.getAttribute('width')) };
}, text);

// Hue in degrees of a #rrggbb colour (null for greys).
function hue(hex) {
  const n = parseInt(String(hex).slice(1), 16);
  const [r, g, b] = [(n >> 16) & 255, (n >> 8) & 255, n & 255].map((x) => x / 255);
  const max = Math.max(r, g, b), min = Math.min(r, g, b), d = max - min;
  if (d < 0.08) return null;
  const hh = max === r ? ((g - b) / d) % 6 : max === g ? (b - r) / d + 2 : (r - g) / d + 4;
  return (hh * 60 + 360) % 360;
}

async function main() {
  checkSetup();
  const { base, profile } = await startFresh('instrument');
  const { page } = await launchBrowser(profile, { viewport: { width: 1400, height: 900 } });
  const shot = (name, opts = {}) => page.screenshot({ path: join(ARTIFACTS, `instrument-${name}.png`), fullPage: true, ...opts });

  await step('before anything was measured here, no time estimate is shown', async () => {
    await page.goto(`${base}/#/runs`);
    await page.waitForSelector('#start-form #cfg-steps');
    await page.waitForFunction(() => document.querySelector('#preset-detail').textContent.length > 0);
    const texts = await page.$$eval('#start-estimate, #preset-estimate', (els) => els.map((e) => e.textContent));
    assert(texts.length === 2 && texts.every((t) => t === ''), `estimates shown with nothing measured: ${JSON.stringify(texts)}`);
  });

  let soloId, expId, stats, expRuns, freshId;
  const variedIds = [];
  const setup = await step(`set-up: a run with a checkpoint, rope vs cosine_rope ${REPS} replicates each, four runs differing in six keys`, async () => {
    const text = Array.from({ length: 300 }, (_, i) => `line ${i}: the quick brown fox jumps over the lazy dog.`).join('\n');
    await api(base, '/api/corpora?name=tinybytes&encoding=bytes', { method: 'POST', raw: text });
    await waitFor(async () => (await api(base, '/api/corpora/tinybytes')).corpus.status === 'ready', 'the corpus to be tokenized', 20000);
    soloId = (await api(base, '/api/runs', { method: 'POST', body: { name: SOLO_NAME, config: { ...SOLO, attention: 'cosine_rope' } } })).run.id;
    // one step from its initialisation: attention all but uniform
    freshId = (await api(base, '/api/runs', { method: 'POST', body: { name: 'one step', config: { ...TINY, steps: 1, eval_every: 0 } } })).run.id;
    const exp = await api(base, '/api/experiments', { method: 'POST', body: { name: 'rope vs cosine', replicates: REPS, base: { ...TINY, seed: 11 },
      variants: [{ name: 'rope', config: { attention: 'rope' } }, { name: 'cosine_rope', config: { attention: 'cosine_rope' } }] } });
    expId = exp.experiment.id;
    expRuns = exp.runs;
    for (const [name, cfg] of VARIED) {
      variedIds.push((await api(base, '/api/runs', { method: 'POST', body: { name, config: { ...TINY, n_layer: 1, steps: 20, attention: 'cosine_rope', ...cfg } } })).run.id);
    }
    for (const id of [soloId, freshId, ...exp.runs.map((r) => r.id), ...variedIds]) {
      const r = await waitForRun(base, id);
      assert(r.status === 'succeeded', `run ${id} ended ${r.status}: ${r.error || ''}`);
    }
    stats = (await api(base, `/api/experiments/${expId}/stats`)).stats;
  });
  if (!setup) return;

  await step('experiment view leads with the answer: final val loss per variant with its interval, the paired gap as a forest plot, one sentence', async () => {
    await page.goto(`${base}/#/experiment/${expId}`);
    await page.waitForSelector('#exp-answer:not([hidden]) #forest-plot');
    await page.waitForSelector('#replicates:not([hidden])');
    // first on the page: the answer's top is on the first screen, above the bands and every detail chart
    const order = await page.evaluate(() => ['#exp-answer', '#replicates', '#chart-loss', '#replicate-stats', '#exp-runs']
      .map((s) => document.querySelector(s).getBoundingClientRect().top + window.scrollY));
    assert(order[0] < 900 && order.every((y, i) => i === 0 || y > order[i - 1]), `answer, bands, details, tables, runs at ${order.map(Math.round)}`);
    assert(!(await page.$eval('#exp-runs', (d) => d.open)), 'the run cards of a replicated experiment are not folded');
    for (const v of stats.variants) {
      const m = v.metrics.final_val_loss;
      const row = await page.$eval(`#answer-table tr[data-variant="${v.name}"]`, (tr) => ({ mean: tr.querySelector('.answer-mean').textContent,
        ci: tr.querySelector('.answer-ci').textContent }));
      assert(row.mean === fmtN(m.mean), `${v.name}: mean "${row.mean}" vs ${m.mean}`);
      assert(row.ci === `${fmtN(m.ci[0])} – ${fmtN(m.ci[1])}`, `${v.name}: interval "${row.ci}" vs ${m.ci}`);
    }
    const c = stats.comparisons.find((x) => x.metric === 'final_val_loss');
    const plot = await page.evaluate(() => {
      const svg = document.querySelector('#forest-plot');
      const rows = [...svg.querySelectorAll('.forest-row')];
      const zero = svg.querySelector('.zero-line');
      return { rows: rows.map((g) => ({ a: g.dataset.a, b: g.dataset.b, dots: g.querySelectorAll('.pair').length,
        ci: [...g.querySelectorAll('.ci')].map((l) => [Number(l.getAttribute('x1')), Number(l.getAttribute('x2'))]),
        mean: Number(g.querySelector('.mean').getAttribute('x')) + 5 })), zero: zero ? Number(zero.getAttribute('x1')) : null };
    });
    assert(plot.rows.length === 1 && plot.rows[0].a === c.a && plot.rows[0].b === c.b, `forest rows ${JSON.stringify(plot.rows)}`);
    assert(plot.rows[0].dots === REPS, `${plot.rows[0].dots} paired dots`);
    assert(plot.zero !== null, 'no zero line');
    // the interval bar crosses the zero line exactly when the API's interval includes 0
    const [x1, x2] = plot.rows[0].ci[0];
    const crosses = x1 <= plot.zero && plot.zero <= x2, includes = c.ci[0] <= 0 && 0 <= c.ci[1];
    assert(crosses === includes, `bar ${x1}..${x2} vs zero ${plot.zero}; API interval ${c.ci}`);
    assert((plot.rows[0].mean - plot.zero) * c.mean_diff > 0 || c.mean_diff === 0, 'the mean is on the wrong side of zero');
    const sentence = await page.textContent('#answer-sentence');
    assert(sentence.includes(includes ? 'includes zero' : 'excludes zero'), `sentence: ${sentence}`);
    await shot('experiment-top', { fullPage: false });
    await shot('experiment');
  });

  await step('experiment view: one colour per variant in the bands, replicates thin lines of it; no legend taller than its plot, one entry per variant', async () => {
    const bands = await page.evaluate(() => window.Chart.getChart(document.querySelector('#band-loss')).data.datasets
      .map((d) => ({ variant: d.variant, color: String(d.borderColor), width: d.borderWidth, replicate: d.replicate, band: d.band })));
    for (const v of ['rope', 'cosine_rope']) {
      const mine = bands.filter((d) => d.variant === v);
      const rgb = (c) => (/rgba?\((\d+),\s*(\d+),\s*(\d+)/.exec(c) || []).slice(1, 4).join() || (() => { const n = parseInt(c.slice(1), 16); return [(n >> 16) & 255, (n >> 8) & 255, n & 255].join(); })();
      const mean = mine.find((d) => d.band === 'mean');
      assert(mine.every((d) => rgb(d.color) === rgb(mean.color)), `${v}: colours ${[...new Set(mine.map((d) => d.color))]}`);
      const reps = mine.filter((d) => d.replicate !== undefined);
      assert(reps.length === REPS && reps.every((d) => d.width < mean.width), `${v}: ${reps.length} thin replicate lines`);
    }
    const boxes = await chartBoxes(page);
    assert(boxes.length >= 8, `${boxes.length} charts drawn`);
    const tall = boxes.filter((b) => b.legend > b.plot);
    assert(!tall.length, `legend taller than the plot: ${tall.map((b) => `${b.id} ${Math.round(b.legend)} > ${Math.round(b.plot)}`).join(', ')}`);
    for (const id of ['chart-loss', 'chart-tau', 'chart-entropy', 'chart-tokens', 'chart-grad']) {
      const b = boxes.find((x) => x.id === id);
      const perVariant = b.items.filter((t) => /^(rope|cosine_rope)\b/.test(t));
      assert(perVariant.length <= 4 && perVariant.every((t) => !/ r\d/.test(t)), `${id} legend: ${b.items.join(' | ')}`);
    }
    // per-head detail is still there, for the tooltip
    const heads = await page.evaluate(() => window.Chart.getChart(document.querySelector('#chart-entropy')).data.datasets.filter((d) => d.tooltip).length);
    assert(heads >= 2 * REPS * 8 - 2, `${heads} per-head lines kept for the tooltip`);
  });

  await step('classroom mode: the experiment says what to look for, with its own entropy figures', async () => {
    assert(await page.$eval('#look-for', (e) => e.hidden), 'a note shown outside classroom mode for an experiment without a preset');
    await page.click('#classroom');
    await page.waitForSelector('#look-for:not([hidden]) #look-for-entropy');
    const text = await page.textContent('#look-for-entropy');
    assert(/Now: rope [\d.]+ %, cosine_rope [\d.]+ %/.test(text), `entropy note: ${text}`);
    await page.click('#classroom');
    await page.waitForSelector('#look-for[hidden]', { state: 'attached' });
  });

  await step('SVG export: a Chart.js chart, the forest plot and the canvas still drawn after', async () => {
    // the view was mounted again by the classroom toggle: wait for the loss chart to be laid out and drawn
    await page.waitForFunction(() => {
      const c = window.Chart.getChart(document.querySelector('#chart-loss'));
      return c && c.width > 0 && c.chartArea && c.chartArea.bottom > c.chartArea.top && c.data.datasets.some((d) => !d.hideInLegend && d.data.length);
    });
    const svg = await exportText(page, '#box-loss a[download$=".svg"]');
    assert(svg && svg.startsWith('<?xml'), `no SVG: ${String(svg).slice(0, 80)}`);
    const f = await svgFacts(page, svg);
    const chart = await page.evaluate(() => {
      const c = window.Chart.getChart(document.querySelector('#chart-loss'));
      return { width: c.width, own: Object.getOwnPropertyNames(c.ctx).length,
        colors: [...new Set(c.data.datasets.filter((d) => !d.hideInLegend).map((d) => String(d.borderColor).toLowerCase()))] };
    });
    assert(f.ok, 'the SVG does not parse');
    assert(f.width === chart.width, `SVG width ${f.width} vs chart ${chart.width}`);
    assert(chart.colors.every((c) => f.strokes.includes(c)), `line colours ${chart.colors} not among the SVG's strokes`);
    assert(f.text.includes('cross-entropy (nats)') && f.text.includes('step') && /rope \(train\)/.test(f.text), `SVG text: ${f.text.slice(0, 200)}`);
    assert(chart.own === 0, `the chart's context kept ${chart.own} recorder properties`);
    const forest = await svgFacts(page, await exportText(page, '#exp-answer a[download$=".svg"]'));
    assert(forest.ok && forest.texts > 3 && forest.text.includes(`${stats.comparisons[0].a} − ${stats.comparisons[0].b}`), `forest SVG: ${forest.text.slice(0, 120)}`);
    // every chart box offers SVG besides PNG and CSV
    const missing = await page.$$eval('figure.chart-box', (fs) => fs.filter((f) => !f.hidden && f.querySelector('a[download$=".png"]') && !f.querySelector('a[download$=".svg"]')).map((f) => f.id));
    assert(!missing.length, `charts without SVG: ${missing}`);
  });

  await step('compare view of replicates: each variant keeps its colour, its replicates told apart by their dash', async () => {
    await page.goto(`${base}/#/compare?runs=${expRuns.map((r) => r.id).join(',')}&charts=val_loss`);
    const ds = await waitFor(() => page.evaluate(() => {
      const c = Object.values(window.Chart.instances).find((x) => x.canvas.id.startsWith('cmp-chart-'));
      return c && c.data.datasets.length >= 6 ? c.data.datasets.map((d) => ({ runId: d.runId, color: String(d.borderColor).toLowerCase(), dash: JSON.stringify(d.borderDash || []) })) : null;
    }), 'the compare chart');
    for (const v of ['rope', 'cosine_rope']) {
      const mine = ds.filter((d) => expRuns.find((r) => r.id === d.runId).variant === v);
      assert(mine.length === REPS && new Set(mine.map((d) => d.color)).size === 1, `${v}: colours ${mine.map((d) => d.color)}`);
      assert(new Set(mine.map((d) => d.dash)).size === REPS, `${v}: dashes ${mine.map((d) => d.dash)}`);
    }
    assert(new Set(ds.map((d) => d.color)).size === 2, 'the two variants share a colour');
  });

  await step('runs table: name, variant, status, loss, val loss and τ on screen at 1400 px; names break between words only; differing keys after them', async () => {
    await page.goto(`${base}/#/runs`);
    await page.waitForSelector(`#runs-table tr[data-run-id="${variedIds[0]}"]`);
    const diffs = await page.$$eval('#runs-table th.diff-col', (t) => t.map((x) => x.dataset.diffKey));
    assert(diffs.length >= 6, `differing-key columns: ${diffs}`);
    const onScreen = async () => page.evaluate((core) => {
      const box = document.querySelector('#runs-table').closest('.table-scroll').getBoundingClientRect();
      return core.map((k) => { const r = document.querySelector(`#runs-table th[data-col="${k}"]`).getBoundingClientRect(); return [k, r.left >= box.left - 1 && r.right <= box.right + 1 && r.right <= window.innerWidth]; });
    }, CORE);
    const seen = await onScreen();
    assert(seen.every(([, ok]) => ok), `off screen: ${seen.filter(([, ok]) => !ok).map(([k]) => k)}`);
    // a word (a key=value pair, hyphens and underscores included) lies on one line
    const split = await page.evaluate(() => {
      const bad = [];
      for (const a of document.querySelectorAll('#runs-table a.run-name')) {
        const text = a.textContent;
        for (const m of text.matchAll(/[^\s,/]+/g)) {
          let node = null, off = 0, start = m.index;
          const walker = document.createTreeWalker(a, NodeFilter.SHOW_TEXT);
          let seen = 0;
          while ((node = walker.nextNode())) { if (seen + node.length > start) { off = start - seen; break; } seen += node.length; }
          if (!node || off + m[0].length > node.length) continue;
          const range = document.createRange();
          range.setStart(node, off); range.setEnd(node, off + m[0].length);
          const tops = new Set([...range.getClientRects()].map((r) => Math.round(r.top)));
          if (tops.size > 1) bad.push(m[0]);
        }
      }
      return bad;
    });
    assert(!split.length, `words split over two lines: ${split.slice(0, 5)}`);
    await shot('runs-1400', { fullPage: false });
  });

  await step('runs table: the column chooser hides a column and remembers it across a reload', async () => {
    await page.click('#runs-columns > summary');
    await page.uncheck('#runs-columns input[data-column="tags"]');
    await page.uncheck('#runs-columns input[data-column="diffs"]');
    await page.waitForFunction(() => !document.querySelector('#runs-table th[data-col="tags"]') && !document.querySelector('#runs-table th.diff-col'));
    // the differing keys move into the config cell
    const inline = await page.$eval(`#runs-table tr[data-run-id="${variedIds[2]}"] .cell-config .differs`, (e) => e.textContent);
    assert(inline.includes('rope_base 500') && inline.includes('beta2 0.99'), `config cell: ${inline}`);
    await page.reload();
    await page.waitForSelector(`#runs-table tr[data-run-id="${variedIds[0]}"]`);
    assert(!(await page.$('#runs-table th[data-col="tags"]')) && !(await page.$('#runs-table th.diff-col')), 'the choice was not remembered');
    await page.click('#runs-columns > summary');
    await page.check('#runs-columns input[data-column="tags"]');
    await page.check('#runs-columns input[data-column="diffs"]');
    await page.waitForSelector('#runs-table th[data-col="tags"]');
  });

  await step('configs say lr 3e-4 wherever a config is shown (table, run card, compare), never 0.00029999999999999997', async () => {
    const cell = await page.$eval(`#runs-table tr[data-run-id="${soloId}"] .cell-config`, (e) => e.textContent);
    assert(cell.includes('lr 3e-4'), `runs table: ${cell}`);
    await page.goto(`${base}/#/run/${soloId}`);
    await page.waitForSelector(`.run-header[data-run-id="${soloId}"] .hdr-live`);
    const card = await page.textContent(`.run-header[data-run-id="${soloId}"]`);
    assert(card.includes('lr 3e-4'), `run card: ${card}`);
    await page.goto(`${base}/#/compare?runs=${soloId},${variedIds[0]}`);
    await page.waitForSelector('#compare-config-differ tr[data-key="lr"]');
    const cmp = await page.$$eval('#compare-config-differ tr[data-key="lr"] td', (t) => t.map((x) => x.textContent));
    assert(cmp.join() === '3e-4,0.001', `compare lr cells ${cmp}`);
    for (const hash of ['#/runs', `#/experiment/${expId}`, `#/run/${soloId}`]) {
      await page.goto(`${base}/${hash}`);
      await page.waitForLoadState('networkidle');
      const body = await page.textContent('body');
      assert(!/0\.000299999/.test(body) && !/3\.0+e-4/.test(body), `${hash} shows a long lr`);
    }
  });

  await step('single run: the entropy chart draws each head in its own hue, each layer its own dash', async () => {
    await page.goto(`${base}/#/run/${soloId}`);
    await page.waitForFunction(() => { const c = window.Chart.getChart(document.querySelector('#chart-entropy')); return c && c.data.datasets.length >= 8; });
    const ds = await page.evaluate(() => window.Chart.getChart(document.querySelector('#chart-entropy')).data.datasets
      .map((d) => ({ label: d.label, color: d.borderColor, dash: JSON.stringify(d.borderDash || []) })));
    // as τ's chart: head H of every layer one hue (4 heads, 4 hues far apart), layer L one dash
    const hues = ds.map((d) => hue(d.color));
    const byHead = new Map();
    ds.forEach((d, i) => { const H = /H(\d+)$/.exec(d.label)[1]; byHead.set(H, [...(byHead.get(H) || []), hues[i]]); });
    const headHues = [...byHead.values()].map((v) => v[0]);
    assert(ds.length === 8 && byHead.size === 4 && headHues.every((x) => x !== null), `${ds.length} lines, ${byHead.size} heads: ${ds.map((d) => d.color)}`);
    assert([...byHead.values()].every((v) => v.every((x) => x === v[0])), 'a head changes hue between layers');
    const gap = Math.min(...headHues.flatMap((a, i) => headHues.slice(i + 1).map((b) => Math.min(Math.abs(a - b), 360 - Math.abs(a - b)))));
    assert(gap >= 20, `two heads' hues only ${Math.round(gap)}° apart: ${headHues.map(Math.round)}`);
    const dashes = new Set(ds.map((d) => d.dash));
    assert(dashes.size === 2 && new Set(ds.map((d) => `${d.color} ${d.dash}`)).size === 8, `layers in ${dashes.size} dash patterns`);
    const boxes = await chartBoxes(page);
    const tall = boxes.filter((b) => b.legend > b.plot);
    assert(!tall.length, `legend taller than the plot: ${tall.map((b) => b.id)}`);
  });

  await step('attention map: the run menu shows the checkpoint\'s step whole; its heat maps export as SVG', async () => {
    await page.goto(`${base}/#/attention?run=${soloId}`);
    await page.waitForSelector('#att-out canvas.heatmap');
    const fit = await page.evaluate(() => {
      const sel = document.querySelector('#att-run');
      const text = sel.options[sel.selectedIndex].textContent;
      const ctx = document.createElement('canvas').getContext('2d');
      ctx.font = getComputedStyle(sel).font;
      return { text, need: ctx.measureText(text).width, have: sel.clientWidth };
    });
    const run = (await api(base, `/api/runs/${soloId}`)).run;
    assert(fit.text.includes(`step ${run.checkpoint_step}`), `option "${fit.text}"`);
    assert(fit.need + 24 <= fit.have, `the menu (${fit.have} px) cuts "${fit.text}" (${Math.round(fit.need)} px)`);
    const status = await page.textContent('#att-status');
    assert(/computed in [\d.]+ ms|from the store in \d+ ms \(first computed in [\d.]+ ms\)/.test(status), `status: ${status}`);
    const svg = await svgFacts(page, await exportText(page, '#att-out figure.att-head a[download$=".svg"]'));
    const [n, m] = await page.$eval('#att-out canvas.heatmap', (c) => [Number(c.dataset.rows), Number(c.dataset.cols)]);
    assert(svg.ok && svg.paths >= n * m, `heat map SVG: ${svg.paths} cells for ${n}×${m}`);
    await page.locator('#att-run').screenshot({ path: join(ARTIFACTS, 'instrument-attention-menu.png') });
    // a note on uniform attention exactly when every head is near uniform: the one-step run's are
    const uniformNote = async () => {
      const fr = await page.$$eval('#att-out figure.att-head figcaption', (f) => f.map((x) => Number(/entropy ([\d.]+)% of uniform/.exec(x.textContent)[1])));
      return { all: fr.every((x) => x >= 95), note: !!(await page.$('#att-uniform')) };
    };
    const solo = await uniformNote();
    assert(solo.all === solo.note, `solo run: uniform ${solo.all}, note ${solo.note}`);
    await page.goto(`${base}/#/attention?run=${freshId}`);
    await page.waitForFunction((id) => document.querySelector('#att-run').value === String(id) && document.querySelector('#att-out figure.att-head'), freshId);
    await page.waitForSelector('#att-uniform');
    const fresh = await uniformNote();
    assert(fresh.all && fresh.note, `one-step run: ${JSON.stringify(fresh)}`);
  });

  await step('probe summary: booleans as true/false, prose outside the bold figures, a stored answer timed as read', async () => {
    await page.goto(`${base}/#/probes/topk_prediction?run=${soloId}`);
    await page.waitForSelector('#probe-result dl.summary dd');
    await page.waitForFunction(() => /computed in|from the store/.test(document.querySelector('.probe-status').textContent));
    const dd = await page.$$eval('#probe-result dl.summary dd', (d) => d.map((x) => ({ key: x.dataset.key, text: x.textContent, weight: Number(getComputedStyle(x).fontWeight) })));
    const probe = (await api(base, '/api/probes?kind=topk_prediction')).probes?.[0];
    for (const k of ['truncated', 'rope', 'cosine_attention']) {
      const cell = dd.find((x) => x.key === k);
      assert(cell && (cell.text === 'true' || cell.text === 'false'), `${k}: ${JSON.stringify(cell)}`);
    }
    const prose = dd.filter((x) => x.weight >= 600 && / \S+ \S+ /.test(x.text));
    assert(!prose.length, `prose in bold cells: ${prose.map((x) => x.key)}`);
    const notes = await page.$$eval('#probe-result dl.probe-notes dd', (d) => d.map((x) => ({ key: x.dataset.key, weight: Number(getComputedStyle(x).fontWeight) })));
    assert(notes.length >= 1 && notes.every((x) => x.weight < 600), `notes ${JSON.stringify(notes)} (probe ${probe ? probe.id : '?'})`);
    // the same parameters again: answered from the store, said so with this request's time and the first one's
    await page.click('.probe-form button[type="submit"]');
    const status = await waitFor(async () => { const t = await page.textContent('.probe-status'); return /from the store/.test(t) ? t : null; }, 'a stored answer', 10000);
    const m = /from the store in (\d+) ms \(first computed in ([\d.]+) ms\)/.exec(status);
    assert(m, `status: ${status}`);
    await page.locator('#probe-result').screenshot({ path: join(ARTIFACTS, 'instrument-probe-summary.png') });
  });

  await step('context extension: the pair-angle chart goes on a log axis, where its values span decades', async () => {
    await page.goto(`${base}/#/probes/context_extension`);
    const info = await waitFor(() => page.evaluate(() => {
      const c = Object.values(window.Chart.instances).find((x) => x.data.datasets.some((d) => d.label === 'angle_trained'));
      if (!c) return null;
      const ys = c.data.datasets.filter((d) => d.label.startsWith('angle_')).flatMap((d) => d.data.map((p) => p.y)).filter((y) => y > 0);
      return { type: c.options.scales.y.type, ratio: Math.max(...ys) / Math.min(...ys),
        note: !!c.canvas.closest('figure').querySelector('.auto-log') };
    }), 'the pair-angle chart');
    assert(info.ratio >= 100, `the angles span only ${info.ratio}×`);
    assert(info.type === 'logarithmic' && info.note, `y axis ${info.type}, note ${info.note}`);
  });

  await step('a time estimate before starting, from this machine\'s measured speed: what estimate.js makes of the runs the API lists, for the form\'s and the preset\'s configs', async () => {
    await page.goto(`${base}/#/runs`);
    await page.waitForSelector('#start-form #cfg-steps');
    // The page's figures are estimate.js's over the runs as the API lists them: computed here the
    // same way, whatever this machine's speed.
    const { measuredSpeed, estimateText, VOCAB } = await import('../../static/js/estimate.js');
    const [{ runs: listed }, { corpora }, doc, { presets }] = await Promise.all(['/api/runs?limit=500&sort=-id', '/api/corpora', '/api/openapi.json', '/api/presets'].map((p) => api(base, p)));
    const vocabOf = (name) => { const c = corpora.find((x) => x.name === name); return (c && (c.vocab || VOCAB[c.tokenizer])) || VOCAB.gpt2; };
    const speed = measuredSpeed(listed, vocabOf);
    assert(speed && speed.samples.some((x) => x.id === soloId), `the ${SOLO.steps}-step run is not a measurement: ${JSON.stringify(speed)}`);
    const defaults = Object.fromEntries(Object.entries(doc.components.schemas.RunConfig.properties).filter(([, p]) => p.default !== undefined).map(([k, p]) => [k, p.default]));
    const run = (await api(base, `/api/runs/${soloId}`)).run;
    const took = run.finished_at - run.started_at;
    // the solo run's config with steps for about 100 minutes of this machine's work
    const planned = { corpus: 'tinybytes', n_layer: SOLO.n_layer, n_head: SOLO.n_head, d_model: SOLO.d_model, seq_len: SOLO.seq_len, batch: SOLO.batch,
      eval_every: SOLO.eval_every, steps: Math.round(SOLO.steps * 6000 / took) };
    for (const [k, v] of Object.entries(planned)) await page.fill(`#cfg-${k}`, String(v));
    const want = estimateText([{ ...defaults, ...planned }], vocabOf, speed);
    assert(/^about .* at this machine's recent speed$/.test(want), `estimate.js says "${want}"`);
    let shown = '';
    const shows = (t) => async () => (shown = await page.textContent('#start-estimate')) === t;
    await waitFor(shows(want), () => `"${want}" (shown "${shown}")`, 10000);
    await page.check('#start-form input[value="experiment"]');
    await page.fill('#exp-replicates', '2');
    const variants = await page.$$eval('.variants input[type="checkbox"]:checked', (b) => b.map((x) => x.value));
    const wantExp = estimateText(variants.flatMap((v) => [0, 1].map(() => ({ ...defaults, ...planned, attention: v }))), vocabOf, speed);
    assert(wantExp.endsWith(`(${2 * variants.length} runs)`), `estimate.js says "${wantExp}"`);
    await waitFor(shows(wantExp), () => `"${wantExp}" (shown "${shown}")`, 10000);
    // the preset: its base with its classroom overrides, one run per variant
    const p = presets.find((x) => x.name === 'seed-blog');
    const wantPreset = estimateText(p.variants.map((v) => ({ ...p.base, ...p.tiny, ...(v.config || {}) })), vocabOf, speed);
    assert(await page.textContent('#preset-estimate') === wantPreset, `preset: "${await page.textContent('#preset-estimate')}" vs "${wantPreset}"`);
    // the tiny box says what the preset's own classroom overrides are, not a fixed text
    const what = await page.textContent('#preset-tiny-what');
    assert(what.includes(`${p.tiny.steps} steps`) && what.includes(`corpus “${p.tiny.corpus}”`), `tiny: "${what}" for ${JSON.stringify(p.tiny)}`);
  });

  await step('corpus upload from the page: a text file, its progress, then ready and offered to the form', async () => {
    const text = Array.from({ length: 6000 }, (_, i) => `Call me Ishmael, line ${i}. Some years ago, never mind how long precisely.`).join('\n');
    await page.setInputFiles('#corpus-file', { name: 'Moby Bytes.txt', mimeType: 'text/plain', buffer: Buffer.from(text) });
    assert(await page.inputValue('#corpus-name') === 'moby-bytes', `name proposed: ${await page.inputValue('#corpus-name')}`);
    await page.selectOption('#corpus-encoding', 'bytes');
    await page.click('#corpus-upload');
    await page.waitForFunction(() => /is ready/.test(document.querySelector('#corpus-status').textContent), null, { timeout: 30000 });
    const bar = await page.$eval('#corpus-progress', (p) => ({ loaded: Number(p.dataset.loaded), value: p.value, max: p.max }));
    assert(bar.loaded === Buffer.byteLength(text) && bar.value === bar.max, `progress ${JSON.stringify(bar)}`);
    const c = (await api(base, '/api/corpora/moby-bytes')).corpus;
    assert(c.status === 'ready' && c.tokenizer === 'bytes' && c.bytes === Buffer.byteLength(text), `corpus ${JSON.stringify(c)}`);
    assert(await page.$('#corpora-table tr[data-corpus="moby-bytes"][data-status="ready"]'), 'not listed as ready');
    assert(await page.$('#cfg-corpus-list option[value="moby-bytes"]'), 'not offered to the form');
  });

  await step('runs table on a 1920-px projector in classroom mode: the losses still on screen', async () => {
    await page.setViewportSize({ width: 1920, height: 1080 });
    await page.goto(`${base}/#/runs`);
    await page.click('#classroom');
    await page.waitForSelector(`#runs-table tr[data-run-id="${variedIds[0]}"]`);
    const seen = await page.evaluate((core) => {
      const box = document.querySelector('#runs-table').closest('.table-scroll').getBoundingClientRect();
      return core.map((k) => { const r = document.querySelector(`#runs-table th[data-col="${k}"]`).getBoundingClientRect(); return [k, r.right <= box.right + 1 && r.right <= window.innerWidth]; });
    }, CORE);
    assert(seen.every(([, ok]) => ok), `off screen: ${seen.filter(([, ok]) => !ok).map(([k]) => k)}`);
    await shot('runs-classroom-1920', { fullPage: false });
    await page.click('#classroom');
  });
}

run(main);
