// The dashboard in a real browser (Debian's chromium driven by playwright-core): starts attnlabd on a
// free port with an empty data directory and plays a user — loads the page, sends an invalid form
// and reads the field error, starts a tiny run and watches its loss chart grow live, moves a probe
// slider, draws sparse_cost's log-log chart for small N, opens the finished run's attention map,
// reproduces the blog preset on a tiny config and cancels it, turns on classroom type. Any console error fails the suite. Screenshots of each view
// go to <build>/<mode>/artifacts/browser/ next to the binary under test.
// Prints "PASS name" / "FAIL name: why" per case and exits non-zero on any failure.
import { join } from 'node:path';
import { ARTIFACTS, assert, step, api, waitFor, waitForRun, checkSetup, startFresh, launchBrowser, run, consoleErrors } from './support/harness.mjs';

const TINY = { corpus: 'small', n_layer: 1, n_head: 2, d_model: 32, seq_len: 32, batch: 4, steps: 300, eval_every: 50, checkpoint_every: 100 };
// Runs that must be seen training are longer than any case waits and are cancelled at a step the case
// has seen: nothing depends on how fast the machine trains.
const LONG = 1000000;

const lossPoints = (page) => page.evaluate(() => {
  const c = window.Chart && window.Chart.getChart(document.querySelector('#chart-loss'));
  if (!c) return -1;
  const ds = c.data.datasets.find((d) => d.series === 'loss_smoothed');
  return ds ? ds.data.length : 0;
});

async function main() {
  checkSetup();
  const { base, profile } = await startFresh('browser');
  // A 422 is the API's designed answer to an invalid field, which the page shows next to that
  // field; chromium still logs every non-2xx fetch as "Failed to load resource". Only that exact
  // message is let through; any other error, including other statuses, fails the suite.
  const { ctx, page } = await launchBrowser(profile, { viewport: { width: 1280, height: 720 },
    ignore: /^Failed to load resource: the server responded with a status of 422\b/ });
  const shot = (name) => page.screenshot({ path: join(ARTIFACTS, `${name}.png`), fullPage: true });
  const metricRequests = [];
  page.on('request', (req) => { if (/\/api\/runs\/\d+\/metrics(\?|$)/.test(req.url())) metricRequests.push(req.url()); });

  await step('runs view loads with health, empty table and the schema form', async () => {
    await page.goto(base + '/');
    await page.waitForSelector('#health.ok');
    await page.waitForSelector('#runs-table tr.empty');
    await page.waitForSelector('#start-form #cfg-n_head');
    // The form mirrors the API schema: bounds and defaults come from components.schemas.RunConfig.
    const doc = await api(base, '/api/openapi.json');
    const p = doc.components.schemas.RunConfig.properties;
    const attrs = await page.$eval('#cfg-n_head', (e) => ({ min: e.min, max: e.max, value: e.value }));
    assert(attrs.min === String(p.n_head.minimum) && attrs.max === String(p.n_head.maximum), `n_head bounds ${attrs.min}..${attrs.max}`);
    const fields = await page.$$eval('#start-form [data-field]', (els) => els.map((e) => e.dataset.field).filter((v, i, a) => a.indexOf(v) === i));
    const missing = Object.keys(p).filter((k) => !fields.includes(k));
    assert(!missing.length, `form lacks ${missing.join(', ')}`);
    await shot('runs');
  });

  const fill = async (values) => { for (const [k, v] of Object.entries(values)) await page.fill(`#cfg-${k}`, String(v)); };

  await step('invalid form: bound checked in the page, cross-field rule shown from the server', async () => {
    await fill({ ...TINY, n_layer: 0 });
    await page.click('#start-submit');
    await page.waitForFunction(() => document.querySelector('#cfg-n_layer-error').textContent.includes('>='));
    await fill({ n_layer: 1, n_head: 3, d_model: 32 });
    await page.click('#start-submit');
    await page.waitForFunction(() => /divide/.test(document.querySelector('#cfg-n_head-error').textContent));
    assert(await page.getAttribute('#cfg-n_head', 'aria-invalid') === 'true', 'n_head not marked invalid');
    assert((await api(base, '/api/runs')).total === 0, 'a run was created from an invalid form');
    assert(new URL(page.url()).hash.startsWith('#/runs') || new URL(page.url()).hash === '', 'left the runs view');
    await page.locator('#start').screenshot({ path: join(ARTIFACTS, 'form-error.png') });
  });

  let runId = null, runSteps = 0;
  await step('start a tiny run from the form and watch its loss chart grow live', async () => {
    await fill({ ...TINY, steps: LONG });
    await page.click('#start-submit');
    await page.waitForURL(/#\/run\/\d+$/);
    runId = Number(/#\/run\/(\d+)/.exec(page.url())[1]);
    await page.evaluate(() => { window.__sameDocument = true; });
    await page.waitForFunction(() => {
      const c = window.Chart && window.Chart.getChart(document.querySelector('#chart-loss'));
      return c && c.data.datasets.some((d) => d.series === 'loss_smoothed' && d.data.length > 0);
    }, null, { timeout: 30000 });
    const n1 = await lossPoints(page);
    const n2 = await waitFor(async () => { const n = await lossPoints(page); return n >= n1 + 5 ? n : 0; }, 'more loss points', 30000);
    assert(await page.evaluate(() => window.__sameDocument === true), 'the page reloaded');
    // Seen growing live: the run is stopped there (its checkpoint stays for the attention map).
    await api(base, `/api/runs/${runId}/cancel`, { method: 'POST' });
    const done = await waitForRun(base, runId);
    assert(done.status === 'cancelled', `the run ended ${done.status}: ${done.error || ''}`);
    runSteps = done.step;
    await page.waitForSelector('.run-header .pill.status-cancelled');
    // Every step once: fetched points and live points merged without gaps or duplicates.
    const n = await waitFor(async () => { const k = await lossPoints(page); return k === runSteps ? k : 0; }, `${runSteps} loss points`, 10000).catch(async () => lossPoints(page));
    assert(n === runSteps, `loss chart has ${n} points after ${runSteps} steps (saw ${n1} then ${n2} while training)`);
    const steps = await page.evaluate(() => window.Chart.getChart(document.querySelector('#chart-loss')).data.datasets
      .find((d) => d.series === 'loss_smoothed').data.map((p) => p.x));
    assert(steps.every((x, i) => x === i + 1), 'loss steps are not 1..N in order');
    assert(metricRequests.length > 0 && metricRequests.every((u) => /[?&]max_points=\d+/.test(u)), `series fetched without max_points: ${metricRequests}`);
    await shot('run');
  });

  await step('run view controls: smoothing never hides raw, log scale, wall-time axis, CSV link', async () => {
    assert(runId, 'no run from the previous case');
    const get = () => page.evaluate(() => {
      const c = window.Chart.getChart(document.querySelector('#chart-loss'));
      const raw = c.data.datasets.find((d) => d.label.endsWith(' raw'));
      const sm = c.data.datasets.find((d) => d.series === 'loss_smoothed');
      return { raw: raw.data.map((p) => p.y), sm: sm.data.map((p) => p.y), x: sm.data.map((p) => p.x), y: c.options.scales.y.type };
    });
    const smoothedIs = (same) => page.waitForFunction((want) => {
      const c = window.Chart.getChart(document.querySelector('#chart-loss'));
      const raw = c.data.datasets.find((d) => d.label.endsWith(' raw')).data;
      const sm = c.data.datasets.find((d) => d.series === 'loss_smoothed').data;
      return raw.length === sm.length && raw.length > 0 && raw.every((p, i) => p.y === sm[i].y) === want;
    }, same, { timeout: 5000 }).catch(() => { throw new Error(`smoothed series ${same ? 'differs from' : 'equals'} the raw one`); });
    await page.fill('#smooth', '0');
    await smoothedIs(true);
    await page.fill('#smooth', '0.95');
    await smoothedIs(false);
    let s = await get();
    assert(s.raw.length === runSteps, `raw series hidden or cut: ${s.raw.length} points`);
    assert(Math.abs(s.sm[0] - s.raw[0]) < 1e-12, 'debiased EMA must start at the first raw value');
    await page.check('#log-y');
    assert((await get()).y === 'logarithmic', 'log toggle did not switch the axis');
    await page.selectOption('#x-axis', 'wall');
    await page.waitForFunction(() => window.Chart.getChart(document.querySelector('#chart-loss')).data.datasets[0].data.some((p, i) => p.x !== i + 1));
    s = await get();
    assert(s.x[0] >= 0 && s.x[s.x.length - 1] < 600 && s.x[s.x.length - 1] !== runSteps, `wall-time axis looks like steps: ${s.x.slice(-1)}`);
    const href = await page.getAttribute(`.run-header[data-run-id="${runId}"] a[download]`, 'href');
    const csv = await (await fetch(base + href)).text();
    assert(csv.startsWith('step,') && csv.trim().split('\n').length === runSteps + 1, 'CSV link does not give one row per step');
    await page.selectOption('#x-axis', 'step');
    await page.uncheck('#log-y');
  });

  await step('probe panel: a slider re-runs the probe and the table changes', async () => {
    await page.goto(base + '/#/probes/rope_invariance');
    const rows = '#probe-table-gap_scores tbody';
    await page.waitForSelector(`${rows} tr`);
    const before = await page.textContent(rows);
    // Keyboard only: focus the gap slider and step it.
    await page.focus('#p-rope_invariance-gap-range');
    for (let i = 0; i < 40; i++) await page.keyboard.press('ArrowRight');
    const gap = await page.inputValue('#p-rope_invariance-gap');
    assert(gap !== '2', 'the number box did not follow the slider');
    await page.waitForFunction(([sel, old]) => document.querySelector(sel) && document.querySelector(sel).textContent !== old, [rows, before]);
    const canvases = await page.$$eval('#probe-result canvas', (cs) => cs.filter((c) => window.Chart.getChart(c)).length);
    assert(canvases >= 2, `expected the probe's charts, found ${canvases}`);
    await shot('probes');
  });

  await step('probe panel: an invalid parameter shows the server error next to it', async () => {
    await page.fill('#p-rope_invariance-d', '3');
    await page.waitForFunction(() => /even/.test(document.querySelector('#p-rope_invariance-d-error').textContent));
    await page.fill('#p-rope_invariance-d', '64');
    await page.waitForFunction(() => document.querySelector('#p-rope_invariance-d-error').textContent === '');
  });

  await step('context extension, √d_k saturation and the animated rotary pair', async () => {
    await page.click('#probe-tab-context_extension');
    await page.waitForSelector('#probe-table-strategies tbody tr', { state: 'attached' });
    await page.click('#probe-table-strategies summary');
    const strategies = await page.$$eval('#probe-table-strategies tbody tr td:first-child', (t) => t.map((x) => x.textContent));
    for (const s of ['untouched', 'position_interpolation', 'ntk', 'yarn']) assert(strategies.some((x) => x.toLowerCase().includes(s)), `no ${s} row`);
    await page.click('#probe-tab-scaling');
    await page.waitForSelector('#probe-table-scaling tbody tr', { state: 'attached' });
    await page.click('#probe-tab-rotor');
    await page.waitForSelector('#rotor');
    const r1 = await page.textContent('.rotor-readout');
    await page.fill('#rotor-gap', '9');
    await page.waitForFunction((old) => document.querySelector('.rotor-readout').textContent !== old, r1);
    assert((await page.textContent('.rotor-readout')).includes('gap·θ'), 'rotor readout lacks the angle');
    await shot('rotor');
  });

  await step('sparse_cost: time per query against dense on a log-log chart, dense as the reference', async () => {
    await page.goto(base + '/#/probes/sparse_cost');
    await page.waitForSelector('.probe-timing-note');
    // Small N and a short budget: the chart must follow the request, not the defaults' first run.
    await page.fill('#p-sparse_cost-ns', '16, 64, 256');
    await page.fill('#p-sparse_cost-ks', '8');
    await page.fill('#p-sparse_cost-min_ms', '0.1');
    await page.fill('#p-sparse_cost-budget_ms', '2000');
    const rows = '#probe-table-us_per_query tbody tr';
    await page.waitForFunction((sel) => document.querySelectorAll(sel).length === 3
      && [...document.querySelectorAll(sel)].map((r) => r.cells[0].textContent).join(' ') === '16 64 256', rows, { timeout: 30000 });
    const chart = await page.evaluate(() => {
      const c = [...document.querySelectorAll('#probe-result canvas')].map((x) => window.Chart.getChart(x))
        .find((x) => x && x.data.datasets.some((d) => d.label === 'dense (reference)'));
      if (!c) return null;
      return { x: c.options.scales.x.type, y: c.options.scales.y.type,
        labels: c.data.datasets.map((d) => d.label), dashed: c.data.datasets.filter((d) => d.borderDash).map((d) => d.label),
        points: c.data.datasets.map((d) => d.data.filter((p) => p.y > 0).length) };
    });
    assert(chart, 'no chart with dense as the reference');
    assert(chart.x === 'logarithmic' && chart.y === 'logarithmic', `axes ${chart.x} / ${chart.y}, wanted log-log`);
    for (const l of ['window_k8', 'lsh_k8', 'hamming_k8', 'topk_k8']) assert(chart.labels.includes(l), `no ${l} line: ${chart.labels}`);
    assert(chart.dashed.length === 1 && chart.dashed[0] === 'dense (reference)', `dashed lines: ${chart.dashed}`);
    assert(chart.points.every((n) => n === 3), `points per line: ${chart.points}`);
    // The ratio chart has its line at 1, and the status says the result was measured, not stored.
    const ratio = await page.evaluate(() => [...document.querySelectorAll('#probe-result canvas')].map((x) => window.Chart.getChart(x))
      .some((c) => c && c.data.datasets.some((d) => d.reference && d.data.every((p) => p.y === 1))));
    assert(ratio, 'no ratio chart with a reference line at 1');
    // Each predictor has one colour in both charts (times and ratios), and the lines of a chart differ.
    const colours = await page.evaluate(() => [...document.querySelectorAll('#probe-result canvas')].map((x) => window.Chart.getChart(x))
      .filter((c) => c && c.data.datasets.some((d) => /_k8$/.test(d.label)))
      .map((c) => c.data.datasets.filter((d) => !d.reference).map((d) => [d.label, String(d.borderColor).toLowerCase()])));
    assert(colours.length === 2, `${colours.length} charts with the predictors' lines, wanted 2`);
    const [times, ratios] = colours.map((pairs) => new Map(pairs));
    const shared = [...times.keys()].filter((l) => ratios.has(l));
    assert(shared.length === 4, `lines in both charts: ${shared}`);
    const differ = shared.filter((l) => times.get(l) !== ratios.get(l));
    assert(!differ.length, `colour differs between the charts: ${differ.map((l) => `${l} ${times.get(l)} / ${ratios.get(l)}`).join(', ')}`);
    for (const m of [times, ratios]) assert(new Set(m.values()).size === m.size, `two lines of a chart share a colour: ${[...m]}`);
    assert(/^measured in/.test(await page.textContent('.probe-status')), 'status does not say measured');
    assert(await page.textContent('#probe-result dl.summary').then((t) => /crossover N window k8/.test(t)), 'no crossover in the summary');
    await shot('probe-sparse-cost');
  });

  await step('attention map of the finished run', async () => {
    assert(runId, 'no run from the earlier case');
    await page.goto(`${base}/#/attention?run=${runId}`);
    await page.fill('#att-text', 'The whale swam under the ship.');
    await page.click('#att-show');
    await page.waitForFunction(() => [...document.querySelectorAll('.tokens .token')].some((t) => t.textContent === 'whale'));
    await page.waitForFunction(() => document.querySelectorAll('.att-head canvas.heatmap').length === 2);
    const dims = await page.$$eval('.att-head canvas.heatmap', (cs) => cs.map((c) => [Number(c.dataset.rows), Number(c.dataset.cols)]));
    const tokens = await page.$$eval('.tokens .token', (t) => t.map((x) => x.textContent));
    assert(tokens.includes('whale'), `token labels: ${tokens.join('|')}`);
    assert(dims.every(([r, c]) => r === tokens.length && c === tokens.length), `heat maps ${JSON.stringify(dims)} for ${tokens.length} tokens`);
    await shot('attention');
  });

  await step('reproduce the blog experiment (tiny), watch both variants, cancel them', async () => {
    await page.goto(base + '/#/runs');
    await page.waitForSelector('#reproduce');
    assert(await page.isChecked('#preset-tiny'), 'tiny is not offered by default without the default corpus');
    // The page sends the preset's tiny overrides (GET /api/presets); on their way the runs are made longer
    // than the case waits, so that they are still training when it looks, whatever the machine.
    let sent = null;
    await page.route('**/api/experiments', async (route) => {
      const req = route.request();
      if (req.method() !== 'POST') return route.continue();
      sent = JSON.parse(req.postData());
      await route.continue({ postData: JSON.stringify({ ...sent, overrides: { ...sent.overrides, steps: LONG } }) });
    });
    await page.click('#reproduce');
    await page.waitForURL(/#\/experiment\/\d+/);
    await page.unroute('**/api/experiments');
    const presets = await api(base, '/api/presets');
    const want = (presets.presets || presets).find((p) => p.name === 'seed-blog').tiny;
    assert(sent && sent.overrides && sent.overrides.corpus === want.corpus && sent.overrides.steps === want.steps, `tiny overrides not sent: ${JSON.stringify(sent)} (the preset's: ${JSON.stringify(want)})`);
    await page.waitForFunction(() => document.querySelectorAll('.run-header').length === 2);
    const variants = await page.$$eval('.run-header .variant', (v) => v.map((x) => x.textContent.trim()).sort());
    assert(JSON.stringify(variants) === '["cosine_rope","rope"]', `variants ${variants}`);
    const expId = Number(/#\/experiment\/(\d+)/.exec(page.url())[1]);
    const exp = await api(base, `/api/experiments/${expId}`);
    assert(exp.runs.every((r) => r.config.corpus === want.corpus && r.config.steps === LONG), 'tiny overrides not applied');
    await page.waitForFunction(() => {
      const c = window.Chart.getChart(document.querySelector('#chart-loss'));
      return c && c.data.datasets.some((d) => d.data.length > 3);
    }, null, { timeout: 30000 });
    await shot('experiment');
    // Keyboard: focus stays on a header's Cancel button while live steps redraw the header, and
    // Enter presses it.
    const [first, second] = exp.runs;
    const label = `cancel run ${second.id}`;
    await page.focus(`[aria-label="${label}"]`);
    const before = await lossPoints(page);
    await waitFor(async () => (await page.evaluate(() => {
      const c = window.Chart.getChart(document.querySelector('#chart-loss'));
      return Math.max(...c.data.datasets.map((d) => d.data.length));
    })) > Math.max(before, 0) + 3, 'more live points', 30000);
    assert(await page.evaluate(() => document.activeElement && document.activeElement.getAttribute('aria-label')) === label,
      'keyboard focus was lost while live points arrived');
    await page.keyboard.press('Enter');
    const btn = page.locator(`.run-header[data-run-id="${first.id}"] button`, { hasText: 'Cancel' });
    if (await btn.count()) await btn.click();
    await waitFor(async () => {
      const e = await api(base, `/api/experiments/${expId}`);
      return e.runs.every((r) => !['queued', 'running'].includes(r.status));
    }, 'both runs to stop', 30000);
    await page.waitForFunction(() => [...document.querySelectorAll('.run-header .pill')].every((p) => !/running|queued/.test(p.textContent)));
  });

  await step('resume a cancelled run, cancel it again, then delete it from the runs list', async () => {
    const { runs } = await api(base, '/api/runs?status=cancelled');
    const r = runs.find((x) => x.checkpoint_step > 0) || runs[0];
    assert(r, 'no cancelled run from the previous case');
    await page.goto(`${base}/#/run/${r.id}`);
    await page.click(`[aria-label="resume run ${r.id}"]`);
    await page.waitForSelector(`.run-header[data-run-id="${r.id}"] .pill.status-running, .run-header[data-run-id="${r.id}"] .pill.status-queued`);
    await page.click(`[aria-label="cancel run ${r.id}"]`);
    await waitFor(async () => (await api(base, `/api/runs/${r.id}`)).run.status === 'cancelled', 'the run to be cancelled again', 30000);
    await page.goto(`${base}/#/runs`);
    await page.waitForSelector(`#runs-table tr[data-run-id="${r.id}"]`);
    // Filter and sort: only cosine_rope rows, then ascending ids.
    await page.selectOption('#runs-variant', 'cosine_rope');
    const shown = await page.$$eval('#runs-table tbody tr[data-run-id]', (t) => t.map((x) => x.querySelector('.variant').textContent.trim()));
    assert(shown.length > 0 && shown.every((v) => v === 'cosine_rope'), `variant filter shows ${shown}`);
    await page.selectOption('#runs-variant', '');
    await page.click('button[aria-label="sort by id"]');
    const ids = await page.$$eval('#runs-table tbody tr[data-run-id]', (t) => t.map((x) => Number(x.dataset.runId)));
    assert(ids.length >= 3 && ids.every((v, i) => !i || v > ids[i - 1]), `ids not ascending after sorting: ${ids}`);
    page.once('dialog', (d) => d.accept());
    await page.click(`[aria-label="delete run ${r.id}"]`);
    await page.waitForSelector(`#runs-table tr[data-run-id="${r.id}"]`, { state: 'detached' });
    const gone = await fetch(`${base}/api/runs/${r.id}`);
    assert(gone.status === 404, `deleted run answers ${gone.status}`);
  });

  await step('classroom type on a 1280×720 screen', async () => {
    await page.goto(base + '/#/runs');
    await page.waitForSelector('#runs-table tbody tr[data-run-id]');
    const size = () => page.evaluate(() => parseFloat(getComputedStyle(document.body).fontSize));
    const s0 = await size();
    await page.click('#classroom');
    const s1 = await size();
    assert(s1 >= s0 * 1.3, `classroom font ${s1}px vs ${s0}px`);
    const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
    assert(overflow <= 0, `page is ${overflow}px wider than the 1280px window`);
    await page.screenshot({ path: join(ARTIFACTS, 'classroom.png') });
    await page.click('#classroom');
  });

  await step('a server with --token --private: sign in from the page, then reads, changes and the live stream work', async () => {
    const tsrv = await startFresh('browser-token', ['--token', 's3cret-t0ken', '--private']);
    const p2 = await ctx.newPage();
    const errors = [];
    // 401s are this case's subject; anything else is an error.
    p2.on('console', (m) => { if (m.type() === 'error' && !/status of 401\b/.test(m.text())) errors.push(m.text()); });
    p2.on('pageerror', (e) => errors.push(e.message));
    try {
      await p2.goto(tsrv.base + '/#/runs');
      await p2.waitForSelector('#signin[open]');
      await p2.fill('#signin-token', 'wrong');
      await p2.click('#signin button[type="submit"]');
      await p2.waitForFunction(() => document.querySelector('#signin').open && /refused/.test(document.querySelector('.signin-message').textContent));
      await p2.fill('#signin-token', 's3cret-t0ken');
      await p2.click('#signin button[type="submit"]');
      await p2.waitForSelector('#runs-table tr.empty');
      await p2.waitForSelector('#start-form #cfg-n_head');
      await p2.waitForFunction(() => document.querySelector('#live').textContent === 'live');
      assert(await p2.isVisible('#signout'), 'no way to forget the token');
      await p2.fill('#cfg-corpus', 'small');
      // Longer than the case waits, training when the view opens whatever the machine; cancelled below.
      for (const [k, v] of Object.entries({ ...TINY, steps: LONG, checkpoint_every: 0 })) await p2.fill(`#cfg-${k}`, String(v));
      await p2.click('#start-submit');
      await p2.waitForURL(/#\/run\/\d+$/);
      const id = Number(/#\/run\/(\d+)/.exec(p2.url())[1]);
      // The series is fetched once (an authorised read); only the live stream makes the chart grow
      // after that. Not a count of points: steps trained before the view subscribed reach it late.
      await p2.waitForFunction(() => {
        const c = window.Chart.getChart(document.querySelector('#chart-loss'));
        return c && c.data.datasets.some((d) => d.series === 'loss_smoothed' && d.data.length > 0);
      }, null, { timeout: 30000 });
      const n1 = await lossPoints(p2);
      await waitFor(async () => (await lossPoints(p2)) > n1, `live loss points after the first ${n1}`, 60000);
      await p2.screenshot({ path: join(ARTIFACTS, 'token.png') });
      // A change with the token from the page: cancel the run, and its status comes back.
      await p2.click(`[aria-label="cancel run ${id}"]`);
      await p2.waitForSelector(`.run-header[data-run-id="${id}"] .pill.status-cancelled`, { timeout: 30000 });
      assert(!errors.length, errors.join(' | '));
    } finally {
      await p2.close();
    }
  });

  await step('no console errors', async () => {
    assert(consoleErrors.length === 0, consoleErrors.join(' | '));
  });
}

await run(main);
