// The compare view, chart export, dark theme and phone layout in a real browser (Debian's chromium
// driven by playwright-core). Starts attnlabd on a free port with an empty data directory, uploads a
// tiny byte corpus so training takes about a second, trains three runs — two cosine_rope runs that
// differ only in tau_param and a dot run from an experiment — and then plays a user: ticks the runs
// in the list (by keyboard), opens "Compare selected", checks the overlaid datasets, the highlighted
// config keys, the final-metrics table against the API's summaries, changes a chart's metric and
// reloads the link, saves a chart as PNG and as CSV, switches themes under an emulated
// prefers-color-scheme, and lays the page out 390 px wide. Any console error fails the suite.
// Screenshots go to <build>/<mode>/artifacts/browser/compare-*.png.
// Prints "PASS name" / "FAIL name: why" per case and exits non-zero on any failure.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { ARTIFACTS, assert, sameSet, step, api, waitFor, checkSetup, startFresh, launchBrowser, consoleErrors, run } from './support/harness.mjs';
const STEPS = 60;
// One thread each: without it a lone run's share of the cores depends on what else is queued or
// running when it is admitted (README: --compute-threads), and threads would differ between A and B.
const TINY = { corpus: 'tinybytes', n_layer: 1, n_head: 2, d_model: 16, seq_len: 16, batch: 4, steps: STEPS, eval_every: 20,
  checkpoint_every: 0, threads: 1 };


// The datasets of the compare view's chart number `i` (0-based), as plain data.
const chartState = (page, i) => page.evaluate((k) => {
  const box = document.querySelectorAll('#compare-charts .cmp-box')[k];
  const c = box && window.Chart.getChart(box.querySelector('canvas'));
  if (!c) return null;
  return {
    key: box.dataset.key,
    select: box.querySelector('select').value,
    tickColor: c.scales.x.options.ticks.color,
    gridColor: c.scales.y.options.grid.color,
    datasets: c.data.datasets.map((d) => ({ label: d.label, runId: d.runId, metricKey: d.metricKey, kind: d.kind,
      color: d.borderColor, n: d.data.length, xs: d.data.map((p) => p.x), ys: d.data.map((p) => p.y) })),
  };
}, i);

const drawn = (st) => (st ? st.datasets.filter((d) => d.kind !== 'raw') : []);

async function main() {
  checkSetup();
  const { base, profile } = await startFresh('compare');

  // Three finished runs: A and B differ only in tau_param; C is the dot variant of an experiment.
  let A, B, C, summaries;
  const setup = await step('set-up: a byte corpus and three tiny runs, trained', async () => {
    const text = Array.from({ length: 300 }, (_, i) => `line ${i}: the quick brown fox jumps over the lazy dog.`).join('\n');
    await api(base, '/api/corpora?name=tinybytes&encoding=bytes', { method: 'POST', raw: text });
    await waitFor(async () => (await api(base, '/api/corpora/tinybytes')).corpus.status === 'ready', 'the corpus to be tokenized', 20000);
    A = (await api(base, '/api/runs', { method: 'POST', body: { name: 'tau-linear', config: { ...TINY, attention: 'cosine_rope', tau_param: 'linear' } } })).run.id;
    B = (await api(base, '/api/runs', { method: 'POST', body: { name: 'tau-log', config: { ...TINY, attention: 'cosine_rope', tau_param: 'log' } } })).run.id;
    const exp = await api(base, '/api/experiments', { method: 'POST', body: { name: 'dots', base: { ...TINY }, variants: [{ name: 'dot', config: { attention: 'dot' } }] } });
    C = exp.runs[0].id;
    await waitFor(async () => {
      const { runs } = await api(base, '/api/runs?limit=50');
      const failed = runs.find((r) => r.status === 'failed');
      if (failed) throw new Error(`run ${failed.id} failed: ${failed.error}`);
      return runs.length === 3 && runs.every((r) => r.status === 'succeeded');
    }, 'three runs to succeed', 120000, 300);
    summaries = {};
    for (const id of [A, B, C]) summaries[id] = (await api(base, `/api/runs/${id}/summary`)).summary;
    assert(summaries[A].loss.count === STEPS, `run ${A} has ${summaries[A].loss.count} loss points`);
  });
  if (!setup) return;

  const { ctx, page } = await launchBrowser(profile, { acceptDownloads: true });
  const shot = (name) => page.screenshot({ path: join(ARTIFACTS, `compare-${name}.png`), fullPage: true });
  const cdp = await ctx.newCDPSession(page);
  const emulate = (scheme) => cdp.send('Emulation.setEmulatedMedia', { features: [{ name: 'prefers-color-scheme', value: scheme }] });
  await emulate('light');

  await step('runs list: the config keys that differ get columns of their own, so the two tau_param runs are told apart', async () => {
    await page.goto(base + '/#/runs');
    await page.waitForSelector(`#runs-table tr[data-run-id="${C}"]`);
    const cols = () => page.$$eval('#runs-table th.diff-col', (ths) => ths.map((t) => t.dataset.diffKey));
    const cell = (id, k) => page.$eval(`#runs-table tr[data-run-id="${id}"] td.cell-diff[data-key="${k}"]`, (e) => e.textContent.trim());
    const keys = await cols();
    assert(keys.includes('tau_param'), `differing-key columns: ${JSON.stringify(keys)}`);
    assert(await cell(A, 'tau_param') === 'linear' && await cell(B, 'tau_param') === 'log',
      `tau_param cells: "${await cell(A, 'tau_param')}" / "${await cell(B, 'tau_param')}"`);
    // Every row has a cell under every differing-key column.
    const widths = await page.$$eval('#runs-table tbody tr', (trs) => trs.map((tr) => tr.querySelectorAll('td').length));
    const heads = await page.$$eval('#runs-table thead th', (ths) => ths.length);
    assert(widths.every((w) => w === heads), `rows of ${JSON.stringify(widths)} cells under ${heads} headers`);
    // Filtered down to the two cosine_rope runs, tau_param is the one key that differs.
    await page.selectOption('#runs-variant', 'cosine_rope');
    await waitFor(async () => JSON.stringify(await cols()) === '["tau_param"]', 'tau_param to be the only differing column', 5000);
    // Its header sorts by it: linear before log, then the other way.
    const order = () => page.$$eval('#runs-table tbody tr', (trs) => trs.map((tr) => Number(tr.dataset.runId)));
    await page.click('#runs-table th.diff-col[data-diff-key="tau_param"] button');
    assert(JSON.stringify(await order()) === JSON.stringify([A, B]), `ascending tau_param order ${JSON.stringify(await order())}`);
    await page.click('#runs-table th.diff-col[data-diff-key="tau_param"] button');
    assert(JSON.stringify(await order()) === JSON.stringify([B, A]), `descending tau_param order ${JSON.stringify(await order())}`);
    await page.selectOption('#runs-variant', '');
    await shot('runs');
  });

  await step('tick three runs (keyboard and mouse) and open Compare selected', async () => {
    assert(await page.isDisabled('#compare-selected'), 'Compare is enabled with nothing ticked');
    await page.focus(`[aria-label="select run ${A} for comparison"]`);
    await page.keyboard.press('Space');
    await page.check(`[aria-label="select run ${B} for comparison"]`);
    await page.check(`[aria-label="select run ${C} for comparison"]`);
    assert((await page.textContent('#compare-selected')).includes('(3)'), 'the button does not count three runs');
    await page.click('#compare-selected');
    await page.waitForURL(/#\/compare\?runs=/);
    const ids = /runs=([\d,]+)/.exec(decodeURIComponent(page.url()))[1].split(',').map(Number);
    assert(sameSet(ids, [A, B, C]), `address names runs ${ids}`);
  });

  await step('compare view overlays every run: loss, validation loss, τ per head', async () => {
    await page.waitForFunction(() => document.querySelectorAll('#compare-charts .cmp-box').length >= 3);
    const loss = await waitFor(async () => { const s = await chartState(page, 0); return s && drawn(s).length === 3 ? s : null; }, 'three loss curves', 15000);
    assert(loss.key === 'loss', `first chart shows ${loss.key}`);
    assert(sameSet(drawn(loss).map((d) => d.runId), [A, B, C]), `loss curves of runs ${drawn(loss).map((d) => d.runId)}`);
    for (const d of loss.datasets) {
      assert(d.n === STEPS && d.xs.every((x, i) => x === i + 1), `${d.label}: ${d.n} points, not steps 1..${STEPS}`);
    }
    const raw = loss.datasets.filter((d) => d.kind === 'raw');
    assert(raw.length === 3, `faint raw curves: ${raw.length}`);
    assert(new Set(drawn(loss).map((d) => d.color)).size === 3, `runs share a colour: ${drawn(loss).map((d) => d.color)}`);
    const val = await chartState(page, 1);
    assert(val.key === 'val_loss' && sameSet(val.datasets.map((d) => d.runId), [A, B, C]), `second chart: ${val.key} of ${val.datasets.map((d) => d.runId)}`);
    assert(val.datasets.every((d) => d.n === STEPS / TINY.eval_every), `validation points: ${val.datasets.map((d) => d.n)}`);
    const tau = await chartState(page, 2);
    // dot attention has no learned τ: only A and B, one line per head.
    assert(tau.key === 'tau.*', `third chart: ${tau.key}`);
    assert(tau.datasets.length === 2 * TINY.n_head * TINY.n_layer && sameSet([...new Set(tau.datasets.map((d) => d.runId))], [A, B]),
      `τ datasets: ${tau.datasets.map((d) => `${d.runId}:${d.metricKey}`)}`);
    // The summary's last loss is the last raw point of the curve (60 points, nothing downsampled).
    const rawA = raw.find((d) => d.runId === A);
    assert(rawA.ys[STEPS - 1] === summaries[A].loss.last, `last loss ${rawA.ys[STEPS - 1]} vs summary ${summaries[A].loss.last}`);
    // Each run card names what differs.
    const chipKeys = await page.$eval(`#compare-runs li[data-run-id="${A}"] .differs`, (e) => e.dataset.keys);
    assert(sameSet(chipKeys.split(','), ['attention', 'tau_param']), `run card differs by "${chipKeys}"`);
    await shot('light');
  });

  await step('config table: differing keys highlighted, equal ones folded away and shown on request', async () => {
    const differ = await page.$$eval('#compare-config-differ tr', (t) => t.map((r) => ({ key: r.dataset.key, diff: r.classList.contains('diff'),
      bg: getComputedStyle(r.querySelector('td')).backgroundColor })));
    assert(sameSet(differ.map((d) => d.key), ['attention', 'tau_param']), `differing keys ${differ.map((d) => d.key)}`);
    assert(differ.every((d) => d.diff && d.bg !== 'rgba(0, 0, 0, 0)'), `differing rows not highlighted: ${JSON.stringify(differ)}`);
    const cells = await page.$$eval('#compare-config-differ tr[data-key="tau_param"] td', (t) => t.map((x) => x.textContent));
    assert(cells.includes('linear') && cells.includes('log'), `tau_param cells ${cells}`);
    assert(!(await page.isVisible('#compare-config-equal')), 'equal keys are not folded away');
    await page.click('#compare-show-equal');
    await page.waitForSelector('#compare-config-equal tr[data-key="d_model"]', { state: 'visible' });
    assert(await page.getAttribute('#compare-show-equal', 'aria-expanded') === 'true', 'toggle does not say it is expanded');
    const equalRowDiff = await page.$eval('#compare-config-equal tr[data-key="d_model"]', (r) => r.classList.contains('diff'));
    assert(!equalRowDiff, 'an equal key is marked as differing');
    // Only the two cosine_rope runs: tau_param is the one differing key.
    await page.goto(`${base}/#/compare?runs=${A},${B}`);
    await page.waitForSelector('#compare-config-differ');
    const keys = await page.$$eval('#compare-config-differ tr', (t) => t.map((r) => r.dataset.key));
    assert(keys.length === 1 && keys[0] === 'tau_param', `A vs B differ in ${keys}`);
  });

  await step('final metrics: last, min and step of min side by side, equal to the API summaries', async () => {
    await page.goto(`${base}/#/compare?runs=${A},${B},${C}`);
    await page.waitForSelector('#compare-metrics tbody[data-key="loss"]');
    const heads = await page.$$eval('#compare-metrics thead th[data-run-id]', (t) => t.map((x) => Number(x.dataset.runId)));
    assert(heads.join() === [A, B, C].join(), `columns ${heads}`);
    for (const key of ['loss', 'val_loss', 'grad_norm']) {
      for (const stat of ['last', 'min', 'step_of_min']) {
        const cells = await page.$$eval(`#compare-metrics tbody[data-key="${key}"] tr[data-stat="${stat}"] td`, (t) => t.map((x) => x.firstChild.textContent));
        assert(cells.length === 3, `${key} ${stat}: ${cells.length} cells`);
        heads.forEach((id, i) => {
          const want = summaries[id][key][stat];
          const got = Number(cells[i]);
          const ok = stat === 'step_of_min' ? got === want : Math.abs(got - want) <= 1e-4 * Math.abs(want);
          assert(ok, `${key} ${stat} of run ${id}: page ${cells[i]}, API ${want}`);
        });
      }
    }
    const best = await page.$$eval('#compare-metrics tbody[data-key="loss"] tr[data-stat="min"] td', (t) => t.map((x) => x.classList.contains('best')));
    const lowest = heads.map((id) => summaries[id].loss.min);
    const bestIdx = lowest.indexOf(Math.min(...lowest));
    assert(best.filter(Boolean).length === 1 && best[bestIdx], `lowest loss marked at ${best} (lowest is run ${heads[bestIdx]})`);
  });

  await step('metric chooser and the link: grad_norm chosen, the reloaded address draws the same view', async () => {
    await page.selectOption('#compare-charts .cmp-box:nth-child(1) select', 'grad_norm');
    await waitFor(async () => { const s = await chartState(page, 0); return s && drawn(s).length === 3 && drawn(s).every((d) => d.metricKey === 'grad_norm'); }, 'gradient norm curves', 10000);
    await page.click('#cmp-add-chart');
    await page.waitForFunction(() => document.querySelectorAll('#compare-charts .cmp-box').length === 4);
    await page.selectOption('#compare-charts .cmp-box:nth-child(4) select', 'entropy.*');
    await page.fill('#cmp-smooth', '0');
    await page.check('#cmp-log');
    const url = page.url();
    assert(/charts=grad_norm,val_loss,tau\.\*,entropy\.\*/.test(decodeURIComponent(url)) && /smooth=0(&|$)/.test(url) && /log=1/.test(url),
      `address does not hold the view: ${url}`);
    const before = [];
    for (let i = 0; i < 4; i++) before.push(await chartState(page, i));
    await page.goto('about:blank');
    await page.goto(url);
    await page.waitForFunction(() => document.querySelectorAll('#compare-charts .cmp-box').length === 4);
    for (let i = 0; i < 4; i++) {
      const after = await waitFor(async () => { const s = await chartState(page, i); return s && s.datasets.length === before[i].datasets.length ? s : null; },
        `chart ${i + 1} after reload`, 10000).catch(() => null);
      assert(after && after.key === before[i].key && after.select === before[i].key, `chart ${i + 1}: ${after?.key} vs ${before[i].key}`);
      assert(JSON.stringify(after.datasets.map((d) => [d.label, d.ys])) === JSON.stringify(before[i].datasets.map((d) => [d.label, d.ys])),
        `chart ${i + 1} differs after reload`);
    }
    assert(await page.inputValue('#cmp-smooth') === '0' && await page.isChecked('#cmp-log'), 'smoothing or log scale lost on reload');
    assert(await page.evaluate(() => window.Chart.getChart(document.querySelector('#compare-charts canvas')).options.scales.y.type) === 'logarithmic',
      'log scale not applied after reload');
  });

  await step('export: a chart as PNG (data:image/png) and its datasets as CSV', async () => {
    const png = '#compare-charts .cmp-box:nth-child(1) a[download$=".png"]';
    const [dl] = await Promise.all([page.waitForEvent('download'), page.click(png)]);
    const href = await page.getAttribute(png, 'href');
    assert(href.startsWith('data:image/png;base64,'), `PNG link is ${href.slice(0, 40)}`);
    assert(dl.suggestedFilename().endsWith('.png'), `PNG file named ${dl.suggestedFilename()}`);
    const bytes = readFileSync(await dl.path());
    assert(bytes.subarray(0, 8).equals(Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a])) && bytes.length > 2000, `not a PNG (${bytes.length} bytes)`);
    // The PNG has the card's background painted in (not transparent): its first pixel is opaque.
    const opaque = await page.evaluate(async (u) => {
      const img = new Image();
      img.src = u;
      await img.decode();
      const c = document.createElement('canvas');
      c.width = img.width; c.height = img.height;
      const g = c.getContext('2d');
      g.drawImage(img, 0, 0);
      return g.getImageData(1, 1, 1, 1).data[3];
    }, href);
    assert(opaque === 255, `PNG background alpha ${opaque}`);

    const csvSel = '#compare-charts .cmp-box:nth-child(1) a[download$=".csv"]';
    const [dl2] = await Promise.all([page.waitForEvent('download'), page.click(csvSel)]);
    assert(dl2.suggestedFilename().endsWith('.csv'), `CSV file named ${dl2.suggestedFilename()}`);
    const lines = readFileSync(await dl2.path(), 'utf8').trim().split(/\r\n/);
    const st = await chartState(page, 0);
    const header = lines[0].split(',');
    assert(header[0] === 'step' && header.length === st.datasets.length + 1, `CSV header ${lines[0]}`);
    assert(st.datasets.every((d, i) => header[i + 1] === d.label), `CSV columns ${header.slice(1)} vs ${st.datasets.map((d) => d.label)}`);
    assert(lines.length === STEPS + 1, `CSV has ${lines.length - 1} rows, want ${STEPS}`);
    const row = lines[STEPS].split(',');
    assert(Number(row[0]) === STEPS && st.datasets.every((d, i) => Number(row[i + 1]) === d.ys[STEPS - 1]), `last CSV row ${row} vs the chart`);

    // The run view's charts have the same links.
    await page.goto(`${base}/#/run/${A}`);
    await page.waitForFunction(() => {
      const c = window.Chart && window.Chart.getChart(document.querySelector('#chart-loss'));
      return c && c.data.datasets.some((d) => d.data.length > 0);
    });
    const [dl3] = await Promise.all([page.waitForEvent('download'), page.click('#box-loss a[download$=".png"]')]);
    assert((await page.getAttribute('#box-loss a[download$=".png"]', 'href')).startsWith('data:image/png'), 'run view PNG link');
    assert(dl3.suggestedFilename() === `run-${A}-loss.png`, `run view PNG named ${dl3.suggestedFilename()}`);
  });

  await step('dark theme: follows prefers-color-scheme, the toggle overrides it and is remembered, charts recolour', async () => {
    const cmpUrl = `${base}/#/compare?runs=${A},${B},${C}`;
    await page.goto(cmpUrl);
    await page.evaluate(() => localStorage.removeItem('attnlab.theme'));
    await page.reload();
    await waitFor(async () => drawn(await chartState(page, 0)).length === 3, 'charts', 10000);
    const look = () => page.evaluate(() => {
      const c = window.Chart.getChart(document.querySelector('#compare-charts canvas'));
      const v = (n) => getComputedStyle(document.documentElement).getPropertyValue(n).trim();
      return { bg: getComputedStyle(document.body).backgroundColor, card: getComputedStyle(document.querySelector('.card')).backgroundColor,
        fg: v('--chart-fg'), tick: c.scales.x.options.ticks.color, legend: c.legend.options.labels.color,
        pressed: document.querySelector('#theme').getAttribute('aria-pressed'), stored: localStorage.getItem('attnlab.theme'),
        colors: c.data.datasets.filter((d) => d.kind !== 'raw').map((d) => d.borderColor) };
    });
    const light = await look();
    await emulate('dark');
    await page.waitForFunction((bg) => getComputedStyle(document.body).backgroundColor !== bg, light.bg);
    const dark = await waitFor(async () => { const l = await look(); return l.tick === l.fg ? l : null; }, 'chart ticks to take the dark colour', 5000);
    assert(dark.bg !== light.bg && dark.card !== light.card, `background stayed ${dark.bg}`);
    assert(dark.fg !== light.fg && dark.tick === dark.fg && dark.legend === dark.fg, `chart text ${dark.tick}/${dark.legend}, theme ${dark.fg}`);
    assert(dark.pressed === 'true' && dark.stored === null, `system dark: pressed ${dark.pressed}, stored ${dark.stored}`);
    assert(new Set(dark.colors).size === 3, `dark run colours not distinct: ${dark.colors}`);
    const lum = (c) => { const m = /#(..)(..)(..)/.exec(c); return m ? (parseInt(m[1], 16) + parseInt(m[2], 16) + parseInt(m[3], 16)) / 3 : 255; };
    assert(dark.colors.every((c) => lum(c) > 60), `a run colour is too dark for the dark theme: ${dark.colors}`);
    await shot('dark');
    // The toggle: light on a dark system, stored, kept over a reload.
    await page.click('#theme');
    await page.waitForFunction((bg) => getComputedStyle(document.body).backgroundColor === bg, light.bg);
    let l = await waitFor(async () => { const x = await look(); return x.tick === light.fg ? x : null; }, 'chart ticks back to the light colour', 5000);
    assert(l.stored === 'light' && l.pressed === 'false', `after the toggle: stored ${l.stored}, pressed ${l.pressed}`);
    await page.reload();
    await page.waitForSelector('#compare-charts canvas');
    assert((await look()).bg === light.bg, 'the stored choice was not kept over a reload');
    // Pressed again it matches the system, so the page follows the system again.
    await page.click('#theme');
    await page.waitForFunction((bg) => getComputedStyle(document.body).backgroundColor !== bg, light.bg);
    l = await look();
    assert(l.stored === null && l.pressed === 'true', `back to the system: stored ${l.stored}`);
    await emulate('light');
    await page.waitForFunction((bg) => getComputedStyle(document.body).backgroundColor === bg, light.bg);
    // Keyboard: the toggle is a focusable button with its state announced.
    await page.focus('#theme');
    await page.keyboard.press('Enter');
    await page.waitForFunction(() => document.querySelector('#theme').getAttribute('aria-pressed') === 'true');
    assert(await page.evaluate(() => localStorage.getItem('attnlab.theme')) === 'dark', 'dark chosen on a light system is not stored');
  });

  await step('390-px phone: charts stacked, nothing wider than the screen (dark and light)', async () => {
    await page.setViewportSize({ width: 390, height: 844 });
    for (const [hash, wait] of [[`#/compare?runs=${A},${B},${C}`, '#compare-metrics'], ['#/runs', `#runs-table tr[data-run-id="${A}"]`],
      [`#/experiment/${(await api(base, `/api/runs/${C}`)).run.experiment_id}`, '.run-header'], [`#/run/${A}`, '#chart-loss']]) {
      await page.goto(`${base}/${hash}`);
      await page.waitForSelector(wait);
      await page.waitForTimeout(300);
      const m = await page.evaluate(() => ({ sw: document.documentElement.scrollWidth,
        // boxes a run has no data for (the task accuracy, the tau spread of a fixed scale) are hidden: not laid out
        boxes: [...document.querySelectorAll('.chart-box')].filter((b) => b.getClientRects().length)
          .map((b) => { const r = b.getBoundingClientRect(); return [Math.round(r.left), Math.round(r.right)]; }) }));
      assert(m.sw <= 390, `${hash}: the page is ${m.sw}px wide`);
      assert(m.boxes.every(([l, r]) => r <= 390 && l === m.boxes[0][0]), `${hash}: charts not stacked within the screen: ${JSON.stringify(m.boxes)}`);
      if (hash.startsWith('#/compare')) await shot('phone-dark');
    }
    await page.click('#theme');
    await page.goto(`${base}/#/compare?runs=${A},${B},${C}`);
    await page.waitForSelector('#compare-metrics');
    assert(await page.evaluate(() => document.documentElement.scrollWidth) <= 390, 'light compare view overflows 390 px');
    await shot('phone');
    await page.setViewportSize({ width: 1280, height: 800 });
  });

  await step('a run still training gains points in the compare view without a reload, then stops', async () => {
    const D = (await api(base, '/api/runs', { method: 'POST', body: { name: 'long', config: { ...TINY, attention: 'rope', steps: 100000, eval_every: 0 } } })).run.id;
    try {
      await waitFor(async () => (await api(base, `/api/runs/${D}`)).run.step > 5, 'the long run to start', 30000);
      await page.goto(`${base}/#/compare?runs=${A},${D}&charts=loss`);
      await page.evaluate(() => { window.__sameDocument = true; });
      const count = async () => { const s = await chartState(page, 0); return s ? (drawn(s).find((d) => d.runId === D)?.n ?? 0) : 0; };
      const n0 = await waitFor(count, 'the long run\'s curve', 15000);
      const n1 = await waitFor(async () => { const n = await count(); return n >= n0 + 20 ? n : 0; }, `live points after ${n0}`, 30000);
      assert(await page.evaluate(() => window.__sameDocument === true), 'the page reloaded');
      const xs = drawn(await chartState(page, 0)).find((d) => d.runId === D).xs;
      assert(xs.every((x, i) => !i || x > xs[i - 1]), 'live steps out of order or repeated');
      assert(n1 > n0, 'no live points');
      await api(base, `/api/runs/${D}/cancel`, { method: 'POST' });
      await page.waitForSelector(`#compare-runs li[data-run-id="${D}"] .pill.status-cancelled`, { timeout: 30000 });
    } finally {
      await fetch(`${base}/api/runs/${D}/cancel`, { method: 'POST' }).catch(() => {});
    }
  });

  await step('no console errors', async () => {
    assert(consoleErrors.length === 0, consoleErrors.join(' | '));
  });
}

await run(main);
