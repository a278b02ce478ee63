// Sweeps and the runs list's server-side orders and filters in a real browser (Debian's chromium
// driven by playwright-core). Starts attnlabd on a free port with an empty data directory and a tiny
// byte corpus, then plays a user: builds a two-key sweep (lr x tau_param) in the new-experiment
// form, checks the four runs the server made, waits for them to train, reads the experiment view's
// parallel-coordinates chart (one line per run across lr and tau_param ending in its final
// validation loss, coloured by it), sorts the runs list by final and minimum loss through its
// column headers and select (the order the API gives), filters it by a config key, and sees the
// server's refusal of a bad value. Any console error (but the 422s asked for) fails the suite.
// Screenshots go to <build>/<mode>/artifacts/browser/sweeps-*.png.
// Prints "PASS name" / "FAIL name: why" per case and exits non-zero on any failure.
import { join } from 'node:path';
import { ARTIFACTS, assert, step, api, waitFor, checkSetup, startFresh, launchBrowser, run } from './support/harness.mjs';
const STEPS = 40;
const TINY = { corpus: 'tinybytes', n_layer: 1, n_head: 2, d_model: 16, seq_len: 16, batch: 4, steps: STEPS, eval_every: 10,
  checkpoint_every: 0 };



async function main() {
  checkSetup();
  const { base, profile } = await startFresh('sweeps');

  const setup = await step('set-up: a byte corpus', async () => {
    const text = Array.from({ length: 300 }, (_, i) => `line ${i}: the quick brown fox jumps over the lazy dog.`).join('\n');
    await api(base, '/api/corpora?name=tinybytes&encoding=bytes', { method: 'POST', raw: text });
    await waitFor(async () => (await api(base, '/api/corpora/tinybytes')).corpus.status === 'ready', 'the corpus to be tokenized', 20000);
  });
  if (!setup) return;

  const { page } = await launchBrowser(profile, { viewport: { width: 1400, height: 900 },
    ignore: /^Failed to load resource: the server responded with a status of 422\b/ });
  const shot = (name) => page.screenshot({ path: join(ARTIFACTS, `sweeps-${name}.png`), fullPage: true });

  let expId = null, runs = [];
  const built = await step('new-experiment form builds a two-key sweep and the server makes its four runs', async () => {
    await page.goto(base + '/#/runs');
    await page.waitForSelector('#start-form #cfg-n_head');
    await page.check('#start-form input[name="mode"][value="experiment"]');
    assert(!(await page.$eval('#grid', (e) => e.disabled)), 'the sweep fieldset is still disabled in experiment mode');
    await page.fill('#cfg-corpus', 'tinybytes');
    for (const [k, v] of Object.entries(TINY)) if (k !== 'corpus') await page.fill(`#cfg-${k}`, String(v));
    await page.selectOption('#cfg-attention', 'cosine_rope');
    await page.fill('#run-name', 'lr-by-tau');
    await page.click('#grid-add');
    await page.click('#grid-add');
    const rows = await page.$$('#grid-rows .grid-row');
    assert(rows.length === 2, `${rows.length} sweep rows after two clicks`);
    await page.selectOption('#grid-rows .grid-row:nth-child(1) .grid-key', 'lr');
    await page.fill('#grid-rows .grid-row:nth-child(1) .grid-values', '0.003, 0.0003');
    await page.selectOption('#grid-rows .grid-row:nth-child(2) .grid-key', 'tau_param');
    await page.fill('#grid-rows .grid-row:nth-child(2) .grid-values', 'linear,log');
    const count = await page.textContent('#grid-count');
    assert(/4 variants × 1 = 4 runs/.test(count), `the form counts: "${count}"`);
    await shot('form');
    await page.click('#start-submit');
    await page.waitForURL(/#\/experiment\/\d+/);
    expId = Number(/experiment\/(\d+)/.exec(page.url())[1]);
    const d = await api(base, `/api/experiments/${expId}`);
    const names = d.runs.map((r) => r.variant);
    const want = ['lr=0.003,tau_param=linear', 'lr=0.003,tau_param=log', 'lr=0.0003,tau_param=linear', 'lr=0.0003,tau_param=log'];
    assert(JSON.stringify(names) === JSON.stringify(want), `variants ${names}`);
    assert(d.runs.every((r) => r.config.attention === 'cosine_rope' && r.config.steps === STEPS), 'the base config did not reach the runs');
    await waitFor(async () => {
      const e = await api(base, `/api/experiments/${expId}`);
      const failed = e.runs.find((r) => r.status === 'failed');
      if (failed) throw new Error(`run ${failed.id} failed: ${failed.error}`);
      runs = e.runs;
      return e.runs.every((r) => r.status === 'succeeded');
    }, 'four runs to succeed', 120000, 300);
  });
  if (!built) return;

  await step('experiment view: parallel coordinates of lr and tau_param against the final validation loss', async () => {
    await page.goto(base + `/#/experiment/${expId}`);
    let shown = '';
    const st = await waitFor(() => page.evaluate(() => {
      const box = document.querySelector('#box-parcoords');
      const c = box && !box.hidden && window.Chart.getChart(document.querySelector('#chart-parcoords'));
      if (!c || c.data.datasets.length < 4) return null;
      return { labels: c.data.labels, datasets: c.data.datasets.map((d) => ({ runId: d.runId, raw: d.raw, data: d.data, color: d.borderColor, final: d.finalValLoss })) };
    }).then((s) => {
      // The view may have drawn while it still followed the runs live (it was open since the
      // submit): wait until it shows every run's final validation loss as the API has it; a view
      // that never catches up fails the wait with the figures it shows.
      if (!s) return null;
      shown = s.datasets.map((d) => `${d.runId}:${d.final}`).join(' ');
      return runs.every((r) => s.datasets.some((d) => d.runId === r.id && d.final === r.last.val_loss.last)) ? s : null;
    }), () => `the parallel-coordinates chart with the final val_loss of every run (API ${runs.map((r) => `${r.id}:${r.last.val_loss.last}`).join(' ')}, shown ${shown})`, 20000);
    assert(JSON.stringify(st.labels) === JSON.stringify(['lr', 'tau_param', 'final val_loss']), `axes ${st.labels}`);
    for (const r of runs) {
      const d = st.datasets.find((x) => x.runId === r.id);
      assert(d, `no line for run ${r.id}`);
      assert(d.final === r.last.val_loss.last, `run ${r.id}: final val_loss ${d.final}, API ${r.last.val_loss.last}`);
      assert(d.raw[0] === r.config.lr && d.raw[1] === r.config.tau_param, `run ${r.id}: raw ${d.raw}`);
      assert(d.data.every((y) => y >= 0 && y <= 1), `run ${r.id}: positions ${d.data}`);
      // lr 0.0003 at the bottom of its axis, 0.003 at the top; linear below log.
      assert(d.data[0] === (r.config.lr > 0.001 ? 1 : 0) && d.data[1] === (r.config.tau_param === 'log' ? 1 : 0), `run ${r.id}: ${d.data}`);
    }
    const byLoss = [...st.datasets].sort((a, b) => a.final - b.final);
    assert(byLoss[0].data[2] === 0 && byLoss[3].data[2] === 1, 'the lowest and highest final losses are not the ends of the last axis');
    assert(byLoss[0].color !== byLoss[3].color, 'the best and the worst run share a colour');
    // the axes say what they hold: the chart as drawn (its SVG) names tau_param's categories and
    // lr's range at its ends
    const svg = await page.evaluate(async () => {
      const a = document.querySelector('#box-parcoords a[download$=".svg"]');
      a.addEventListener('click', (e) => e.preventDefault(), { once: true });
      a.click();
      const doc = new DOMParser().parseFromString(await (await fetch(a.href)).text(), 'image/svg+xml');
      return [...doc.querySelectorAll('text')].map((t) => t.textContent);
    });
    for (const t of ['linear', 'log', '3e-4', '0.003']) assert(svg.includes(t), `no axis label "${t}" among ${svg.join(' | ')}`);
    await shot('parcoords');
  });

  const tableIds = () => page.$$eval('#runs-table tbody tr[data-run-id]', (trs) => trs.map((t) => Number(t.dataset.runId)));
  const apiIds = async (q) => (await api(base, `/api/runs?limit=500&${q}`)).runs.map((r) => r.id);
  const waitOrder = async (q, what) => {
    const want = await apiIds(q);
    await waitFor(async () => JSON.stringify(await tableIds()) === JSON.stringify(want), `${what}: order ${want}`, 10000);
  };

  await step('runs list sorts by final validation loss (header, both ways) and minimum loss (select), in the API order', async () => {
    await page.goto(base + '/#/runs');
    await page.waitForSelector(`#runs-table tr[data-run-id="${runs[0].id}"]`);
    await page.click('#runs-table th[data-col="val_loss"] button');
    await waitOrder('sort=val_loss', 'ascending final val_loss');
    assert(await page.getAttribute('#runs-table th[data-col="val_loss"]', 'aria-sort') === 'ascending', 'the header does not say ascending');
    const vals = await page.$$eval('#runs-table tbody tr .cell-val-loss', (tds) => tds.map((t) => Number(t.textContent.split('/')[0])));
    assert(vals.every((v, i) => i === 0 || v >= vals[i - 1] - 1e-3), `shown final val losses not ascending: ${vals}`);
    await page.click('#runs-table th[data-col="val_loss"] button');
    await waitOrder('sort=-val_loss', 'descending final val_loss');
    assert(await page.inputValue('#runs-sort') === '-val_loss', 'the select does not follow the header');
    await page.selectOption('#runs-sort', 'min_loss');
    await waitOrder('sort=min_loss', 'ascending minimum loss');
    assert(await page.getAttribute('#runs-table th[data-col="loss"]', 'aria-sort') === 'ascending', 'the loss header is not marked');
    await page.click('#runs-table th[data-col="id"] button');
    await waitFor(async () => { const ids = await tableIds(); return ids.length === 4 && ids.every((v, i) => i === 0 || v > ids[i - 1]); }, 'ascending ids again');
    await shot('sorted');
  });

  await step('runs list filters by a config key on the server; a bad value shows its refusal', async () => {
    await page.selectOption('#runs-config-key', 'tau_param');
    await page.fill('#runs-config-value', 'log');
    await page.dispatchEvent('#runs-config-value', 'change');
    const want = runs.filter((r) => r.config.tau_param === 'log').map((r) => r.id).sort((a, b) => a - b);
    await waitFor(async () => JSON.stringify(await tableIds()) === JSON.stringify(want), `only the log runs ${want}`, 10000);
    await page.selectOption('#runs-sort', '-min_val_loss');
    await waitOrder('sort=-min_val_loss&config.tau_param=log', 'filtered and sorted');
    await page.selectOption('#runs-config-key', 'lr');
    await page.fill('#runs-config-value', 'fast');
    await page.dispatchEvent('#runs-config-value', 'change');
    await page.waitForFunction(() => /config\.lr/.test(document.querySelector('#runs-config-error').textContent));
    assert((await tableIds()).length === 0, 'rows shown for a refused filter');
    await page.fill('#runs-config-value', '');
    await page.dispatchEvent('#runs-config-value', 'change');
    await waitFor(async () => (await tableIds()).length === 4, 'every run again');
    assert(await page.textContent('#runs-config-error') === '', 'the refusal stays after the filter is cleared');
  });
}

await run(main);
