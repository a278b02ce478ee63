// The replicates of an experiment in a real browser (Debian's chromium driven by playwright-core):
// starts attnlabd on a free port with an empty data directory, uploads a tiny byte corpus, runs
// rope against cosine_rope with 3 replicates each, and checks the experiment view: per variant a
// mean ± std band filled between its two edges (Chart.js fill '-1'), each replicate drawn faint,
// the mean equal to GET /api/experiments/{id}/series at every step, a τ band for the variant that
// learns τ only, the statistics and comparison tables showing the figures of /stats, the CSV link,
// classroom mode (larger type, one chart per row, no horizontal overflow), and the preset card
// (choosing attention-scale offers its 5 replicates; starting it tiny makes 4 variants' runs).
// Any console error fails the suite. Screenshots go to <build>/<mode>/artifacts/browser/replicates-*.png.
// Prints "PASS name" / "FAIL name: why" per case and exits non-zero on any failure.
import { join } from 'node:path';
import { ARTIFACTS, assert, step, api, waitFor, checkSetup, startFresh, launchBrowser, consoleErrors, run } from './support/harness.mjs';
const STEPS = 40, REPS = 3;
const TINY = { corpus: 'tinybytes', n_layer: 1, n_head: 2, d_model: 16, seq_len: 16, batch: 4, steps: STEPS, eval_every: 10,
  checkpoint_every: 0 };


// The datasets of band chart `id` (loss, val, tau, entropy) as plain data.
const bandState = (page, id) => page.evaluate((k) => {
  const c = window.Chart.getChart(document.querySelector(`#band-${k}`));
  if (!c) return null;
  return c.data.datasets.map((d) => ({ label: d.label, band: d.band, variant: d.variant, replicate: d.replicate, fill: d.fill,
    color: d.borderColor, xs: d.data.map((p) => p.x), ys: d.data.map((p) => p.y) }));
}, id);

// The page's number format (static/js/dom.js fmt): `digits` significant digits with trailing zeros
// kept, exponent form below 1e-3.
const fmtN = (v, digits) => {
  const a = Math.abs(v);
  if (a !== 0 && (a < 1e-3 || a >= 1e6)) return v.toExponential(Math.max(1, digits - 2));
  const p = v.toPrecision(digits);
  return p.includes('e') ? String(Number(p)) : p;
};
const fmt4 = (v) => fmtN(v, 4);

async function main() {
  checkSetup();
  const { base, profile } = await startFresh('replicates');

  let expId, stats;
  const setup = await step(`set-up: rope vs cosine_rope, ${REPS} replicates each, trained`, async () => {
    const text = Array.from({ length: 300 }, (_, i) => `line ${i}: the quick brown fox jumps over the lazy dog.`).join('\n');
    await api(base, '/api/corpora?name=tinybytes&encoding=bytes', { method: 'POST', raw: text });
    await waitFor(async () => (await api(base, '/api/corpora/tinybytes')).corpus.status === 'ready', 'the corpus to be tokenized', 20000);
    const exp = await api(base, '/api/experiments', { method: 'POST', body: { name: 'reps', replicates: REPS, base: { ...TINY, seed: 11 },
      variants: [{ name: 'rope', config: { attention: 'rope' } }, { name: 'cosine_rope', config: { attention: 'cosine_rope' } }] } });
    expId = exp.experiment.id;
    assert(exp.runs.length === 2 * REPS, `${exp.runs.length} runs`);
    await waitFor(async () => {
      const { runs } = await api(base, `/api/runs?experiment=${expId}&limit=50`);
      const failed = runs.find((r) => r.status === 'failed');
      if (failed) throw new Error(`run ${failed.id} failed: ${failed.error}`);
      return runs.length === 2 * REPS && runs.every((r) => r.status === 'succeeded');
    }, 'the runs to succeed', 180000, 300);
    stats = (await api(base, `/api/experiments/${expId}/stats`)).stats;
  });
  if (!setup) return;

  const { page } = await launchBrowser(profile);
  const shot = (name) => page.screenshot({ path: join(ARTIFACTS, `replicates-${name}.png`), fullPage: true });

  await step('experiment view: a mean ± std band per variant, filled between its edges, each replicate faint', async () => {
    await page.goto(`${base}/#/experiment/${expId}`);
    await page.waitForSelector('#replicates:not([hidden])');
    // no smoothing, so the drawn mean is the server's mean at every step
    await page.evaluate(() => { const s = document.querySelector('#smooth'); s.value = '0'; s.dispatchEvent(new Event('input')); });
    const series = (await api(base, `/api/experiments/${expId}/series?key=loss&max_points=1000`)).variants;
    // The smoothing change redraws the charts: wait for the unsmoothed drawing (a first one may still
    // be the smoothed one), then check it in detail.
    const unsmoothed = (d) => d && d.filter((x) => x.band === 'mean').length === 2 && ['rope', 'cosine_rope'].every((v) => {
      const mean = d.find((x) => x.variant === v && x.band === 'mean'), want = series.find((b) => b.variant === v);
      return mean && want && mean.ys.length === want.mean.length && mean.ys.every((y, i) => Math.abs(y - want.mean[i]) <= 1e-12 * Math.abs(want.mean[i]));
    });
    let ds = null;
    try {
      ds = await waitFor(async () => { const d = await bandState(page, 'loss'); return unsmoothed(d) ? d : null; }, 'the unsmoothed mean curves', 10000);
    } catch { ds = await bandState(page, 'loss'); } // the checks below say what differs
    for (const v of ['rope', 'cosine_rope']) {
      const mine = ds.filter((d) => d.variant === v);
      const faint = mine.filter((d) => d.replicate !== undefined);
      assert(faint.length === REPS && new Set(faint.map((d) => d.replicate)).size === REPS, `${v}: ${faint.length} faint replicate curves`);
      assert(faint.every((d) => d.xs.length === STEPS), `${v}: a replicate curve lacks steps`);
      const lo = mine.findIndex((d) => d.band === 'lo'), hi = mine.findIndex((d) => d.band === 'hi');
      assert(lo >= 0 && hi === lo + 1 && mine[hi].fill === '-1', `${v}: the band's upper edge does not fill down to the lower (${lo}, ${hi})`);
      const mean = mine.find((d) => d.band === 'mean'), want = series.find((b) => b.variant === v);
      assert(mean.xs.join() === want.steps.join(), `${v}: mean drawn at other steps`);
      assert(mean.ys.every((y, i) => Math.abs(y - want.mean[i]) <= 1e-12 * Math.abs(want.mean[i])), `${v}: drawn mean differs from /series`);
      assert(mine[lo].ys.every((y, i) => Math.abs(y - (want.mean[i] - want.std[i])) <= 1e-9), `${v}: lower edge is not mean − std`);
      assert(faint.every((d) => d.color !== mean.color), `${v}: replicates are not faint`);
    }
    const tau = await bandState(page, 'tau');
    assert(tau.some((d) => d.variant === 'cosine_rope' && d.band === 'mean') && !tau.some((d) => d.variant === 'rope'),
      `τ band: ${[...new Set(tau.map((d) => d.variant))]}`);
    await shot('experiment');
  });

  await step('statistics table: per variant the figures of /stats; comparison: paired differences and p-values', async () => {
    const cells = await page.$$eval('#stats-table tbody tr', (rows) => rows.map((r) => ({ metric: r.dataset.metric,
      cells: [...r.querySelectorAll('td')].map((td) => ({ variant: td.dataset.variant, text: td.textContent })) })));
    const metricsShown = cells.map((c) => c.metric);
    assert(metricsShown.includes('final_train_loss') && metricsShown.includes('tau_drift'), `rows: ${metricsShown}`);
    for (const v of stats.variants) {
      for (const [m, s] of Object.entries(v.metrics)) {
        const cell = cells.find((c) => c.metric === m)?.cells.find((c) => c.variant === v.name);
        assert(cell, `no cell for ${v.name} ${m}`);
        assert(cell.text.includes(fmt4(s.mean)), `${v.name} ${m}: "${cell.text}" lacks the mean ${fmt4(s.mean)}`);
        assert(cell.text.includes('95 % CI') && cell.text.includes(fmt4(s.ci[0])) && cell.text.includes(fmt4(s.ci[1])),
          `${v.name} ${m}: "${cell.text}" lacks the interval ${s.ci}`);
      }
    }
    const rows = await page.$$eval('#comparison-table tbody tr', (rs) => rs.map((r) => ({ metric: r.dataset.metric, a: r.dataset.a, b: r.dataset.b,
      text: [...r.children].map((c) => c.textContent) })));
    assert(rows.length === stats.comparisons.length && rows.length === 4, `${rows.length} comparison rows`);
    for (const c of stats.comparisons) {
      const r = rows.find((x) => x.metric === c.metric);
      assert(r && r.a === 'rope' && r.b === 'cosine_rope', `row of ${c.metric}`);
      assert(r.text[3].includes(fmt4(c.mean_diff)), `${c.metric}: difference "${r.text[3]}" vs ${c.mean_diff}`);
      const p = c.p < 1e-4 ? c.p.toExponential(1) : fmtN(c.p, 2);
      assert(r.text[5] === p, `${c.metric}: p "${r.text[5]}" vs ${p}`);
    }
    const href = await page.$eval('#replicate-stats a[download$="stats.csv"]', (a) => a.getAttribute('href'));
    assert(href === `/api/experiments/${expId}/stats.csv`, `CSV link ${href}`);
  });

  await step('the whole experiment downloads as one JSON bundle and one CSV of every point', async () => {
    await page.goto(`${base}/#/experiment/${expId}`);
    await page.waitForSelector('#bundle-links a');
    const links = await page.$$eval('#bundle-links a', (as) => as.map((a) => ({ href: a.getAttribute('href'), download: a.download })));
    assert(links.length === 2 && links[0].href === `/api/experiments/${expId}/bundle` && links[1].href === `/api/experiments/${expId}/bundle.csv`,
      `bundle links: ${JSON.stringify(links)}`);
    const bundle = await page.evaluate(async (u) => (await fetch(u)).json(), links[0].href);
    assert(bundle.runs.length === 2 * REPS && bundle.runs.every((r) => r.config && r.summary && r.series && r.series.loss),
      `the bundle has ${bundle.runs.length} runs, not each with config, summary and a loss series`);
    const csv = await page.evaluate(async (u) => (await fetch(u)).text(), links[1].href + '?keys=loss');
    const rows = csv.trim().split('\n');
    assert(rows[0].startsWith('run_id,name,variant,replicate,seed,status,') && rows[0].endsWith(',key,step,value,wall_time'), `CSV header ${rows[0]}`);
    assert(rows.length - 1 === 2 * REPS * STEPS, `the CSV has ${rows.length - 1} loss rows, not ${2 * REPS * STEPS}`);
  });

  await step('classroom mode: larger type, one chart per row, nothing wider than the screen', async () => {
    const before = await page.$eval('#stats-table', (t) => parseFloat(getComputedStyle(t).fontSize));
    await page.click('#classroom');
    await page.waitForFunction(() => document.body.classList.contains('classroom'));
    // the view is drawn again for the new type size
    await page.waitForSelector('#stats-table');
    await page.waitForTimeout(300);
    const m = await page.evaluate(() => ({ font: parseFloat(getComputedStyle(document.querySelector('#stats-table')).fontSize),
      sw: document.documentElement.scrollWidth, vw: window.innerWidth,
      boxes: [...document.querySelectorAll('#replicates .chart-box')].filter((b) => !b.hidden).map((b) => Math.round(b.getBoundingClientRect().left)) }));
    assert(m.font > before * 1.2, `table type ${before}px -> ${m.font}px`);
    assert(m.sw <= m.vw, `page ${m.sw}px wide in a ${m.vw}px window`);
    assert(m.boxes.length >= 3 && m.boxes.every((l) => l === m.boxes[0]), `band charts not one per row: ${m.boxes}`);
    await shot('classroom');
    await page.click('#classroom');
    await page.waitForFunction(() => !document.body.classList.contains('classroom'));
  });

  await step('preset card: attention-scale offers 5 replicates; started tiny with 1 it makes 4 runs', async () => {
    await page.goto(`${base}/#/runs`);
    await page.waitForSelector('#preset-name option[value="attention-scale"]', { state: 'attached' });
    await page.selectOption('#preset-name', 'attention-scale');
    assert(await page.inputValue('#preset-replicates') === '5', 'replicates not taken from the preset');
    const detail = await page.textContent('#preset-detail');
    assert(/5 replicates/.test(detail) && /20 runs/.test(detail), `detail: ${detail}`);
    assert(await page.isChecked('#preset-tiny'), 'tiny not offered without the default corpus');
    await page.fill('#preset-replicates', '1');
    await page.click('#reproduce');
    await page.waitForURL(/#\/experiment\/\d+/);
    const id = Number(/#\/experiment\/(\d+)/.exec(page.url())[1]);
    const e = await api(base, `/api/experiments/${id}`);
    try {
      assert(e.experiment.preset === 'attention-scale' && e.experiment.replicates === 1 && e.runs.length === 4, JSON.stringify(e.experiment));
      const tiny = (await api(base, '/api/presets')).presets.find((p) => p.name === 'attention-scale').tiny;
      assert(e.runs.every((r) => r.config.corpus === tiny.corpus && r.config.steps === tiny.steps), 'not the tiny overrides');
    } finally {
      for (const r of e.runs) await fetch(`${base}/api/runs/${r.id}/cancel`, { method: 'POST' }).catch(() => {});
    }
  });

  await step('no console errors', async () => {
    assert(consoleErrors.length === 0, consoleErrors.join(' | '));
  });
}

await run(main);
