// Presenter mode in a real browser: a presenter page in Classroom mode presses Present and shows a
// join code; a follower page (another browser profile, as a student's screen) opens #/follow/<code>,
// lands on the page the presenter shows (read late, GET /api/follow/{code}), and then changes with
// every page the presenter opens — measured from the presenter's change to the follower's new view
// in its DOM, each under the 1 s — including a probe page of a trained run, whose yes/no
// figures the follower shows as true/false; "stop" ends following.
// Prints "PASS name" / "FAIL name: why" per case and exits non-zero on any failure.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { assert, step, api, waitFor, waitForRun, checkSetup, startFresh, launchBrowser, run, cleanups, ARTIFACTS } from './support/harness.mjs';

const TARGET_MS = 1000;

// The follower's view once it shows `hash`: its location and the view mounted for it.
const shows = (page, hash, selector) => page.waitForFunction(([h, sel]) => location.hash === h && document.querySelector(sel),
  [hash, selector], { polling: 'raf', timeout: 10000 });

async function main() {
  checkSetup();
  const { base, profile } = await startFresh('follow', ['--compute-threads', '1']);
  const profile2 = mkdtempSync(join(tmpdir(), 'attnlab-follow-student-'));
  cleanups.push(() => rmSync(profile2, { recursive: true, force: true }));
  const { page: teacher } = await launchBrowser(profile, { viewport: { width: 1920, height: 1080 } });
  const { page: student } = await launchBrowser(profile2, { viewport: { width: 1280, height: 800 } });
  const runId = (await api(base, '/api/runs', { method: 'POST', body: { name: 'followed', config: { corpus: 'small', n_layer: 1,
    n_head: 2, d_model: 32, seq_len: 32, batch: 4, steps: 4, threads: 1, attention: 'cosine_rope' } } })).run.id;
  let code = null;

  await step('classroom mode shows a join code once the presenter presses Present', async () => {
    await teacher.goto(`${base}/#/runs`);
    assert(await teacher.locator('#present').isHidden(), 'Present shows outside Classroom mode');
    await teacher.click('#classroom');
    await teacher.click('#present');
    const text = await waitFor(async () => { const t = await teacher.textContent('#join'); return /^join: [A-Z2-9]{6}$/.test(t) ? t : null; },
      'the join code', 10000, 50);
    code = text.slice(6);
    assert((await teacher.getAttribute('#join', 'title')).includes(`/#/follow/${code}`), 'the code names the follow address');
    await teacher.locator('header.topbar').screenshot({ path: join(ARTIFACTS, 'follow-presenter-header.png') });
  });

  await step('a late follower lands on the page the presenter shows', async () => {
    await teacher.evaluate(() => { location.hash = '#/probes/pair_turns'; });
    await waitFor(async () => (await api(base, `/api/follow/${code}`)).follow.hash === '#/probes/pair_turns', 'the presenter\'s page sent', 10000, 50);
    await student.goto(`${base}/#/follow/${code.toLowerCase()}`);
    await shows(student, '#/probes/pair_turns', '.probe-form');
    assert((await student.textContent('#following .following-code')) === code, 'the header says whom it follows');
  });

  await waitForRun(base, runId);
  await step(`the follower changes within ${TARGET_MS} ms of the presenter, page after page`, async () => {
    const pages = [['#/runs', '#view table'], [`#/run/${runId}`, '#view canvas'], ['#/compare', '#view form, #view select'],
      ['#/probes/rope_invariance', '.probe-form'], ['#/attention', '#view select']];
    const times = [];
    for (const [hash, sel] of pages) {
      const t0 = Date.now();
      await teacher.evaluate((h) => { location.hash = h; }, hash);
      await shows(student, hash, sel);
      times.push(Date.now() - t0);
    }
    console.log(`# follower latency (ms): ${times.join(', ')}`);
    const worst = Math.max(...times);
    assert(worst <= TARGET_MS, `slowest change ${worst} ms (${times.join(', ')} ms) > ${TARGET_MS} ms`);
  });

  await step('the follower sees the presenter\'s probe of a run, yes/no figures as true/false', async () => {
    const hash = `#/probes/topk_prediction?run=${runId}`;
    const t0 = Date.now();
    await teacher.evaluate((h) => { location.hash = h; }, hash);
    await shows(student, hash, '.probe-form');
    const dt = Date.now() - t0;
    assert(dt <= TARGET_MS, `${dt} ms`);
    await student.waitForSelector('#probe-result dl.summary dd[data-key="rope"]');
    const dd = await student.$$eval('#probe-result dl.summary dd', (d) => Object.fromEntries(d.map((x) => [x.dataset.key, x.textContent])));
    for (const k of ['truncated', 'rope', 'cosine_attention', 'after_rotation_is_the_score'])
      assert(dd[k] === 'true' || dd[k] === 'false', `${k}: ${dd[k]}`);
    assert(dd.cosine_attention === 'true' && dd.rope === 'true', JSON.stringify(dd));
    await student.screenshot({ path: join(ARTIFACTS, 'follow-student.png') });
  });

  await step('stop following: the follower stays where it is', async () => {
    await student.click('#following button');
    assert(await student.locator('#following').isHidden(), 'still says following');
    const before = await student.evaluate(() => location.hash);
    // a stream of the student's own sees the presenter's next change arrive: the page has had it too
    await student.evaluate(() => new Promise((opened) => {
      const es = new EventSource('/api/events');
      window.nextFollow = new Promise((seen) => es.addEventListener('follow', (e) => {
        if (JSON.parse(e.data).hash === '#/compare') { es.close(); seen(); }
      }));
      es.addEventListener('open', opened);
    }));
    await teacher.evaluate(() => { location.hash = '#/compare'; });
    await student.evaluate(() => window.nextFollow.then(() => new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)))));
    assert(await student.evaluate(() => location.hash) === before, 'it followed after stop');
  });
}

run(main);
