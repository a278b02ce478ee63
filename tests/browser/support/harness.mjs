// What the browser suites share: where attnlabd, Chromium and the screenshots are; one case as a
// `step` that prints "PASS name" / "FAIL name: why" (a console error in the page during the case
// fails it); a real attnlabd on a free port with an empty data directory; the REST calls and the
// polling the set-ups use (waitForRun: until a run ends, as long as it makes progress); a headless
// Chromium whose page reports its console errors; and `run`, which runs a suite's main, cleans up
// whatever it registered and exits non-zero on any failure.
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createInterface } from 'node:readline';
import { chromium } from 'playwright-core';

export const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../../..');
export const ATTNLABD = process.env.ATTNLABD || join(ROOT, 'build/release/attnlabd');
export const CHROMIUM = process.env.CHROMIUM || '/usr/bin/chromium';
export const ARTIFACTS = join(dirname(ATTNLABD), 'artifacts', 'browser');

let failures = 0;
export const consoleErrors = [];
// Run last to first registered by `unshift`, in order by `push`; each may return a promise.
export const cleanups = [];

export async function step(name, fn) {
  const before = consoleErrors.length;
  try {
    await fn();
    if (consoleErrors.length > before) throw new Error(`console error: ${consoleErrors.slice(before).join(' | ')}`);
    console.log(`PASS ${name}`);
    return true;
  } catch (e) {
    failures++;
    console.log(`FAIL ${name}: ${String(e && e.message || e).split('\n')[0]}`);
    return false;
  }
}

export function assert(cond, msg) { if (!cond) throw new Error(msg); }
export const sameSet = (a, b) => a.length === b.length && [...a].sort().join() === [...b].sort().join();

// attnlabd on a free port over dataDir (static files from the tree); resolves to { proc, url }.
// urlTimeoutMs: how long it may take to print its URL (a node on PostgreSQL starts slower).
export function startServer(dataDir, extraArgs = [], { urlTimeoutMs = 15000 } = {}) {
  return new Promise((res, rej) => {
    const env = { ...process.env };
    delete env.ATTNLAB_TOKEN;
    const proc = spawn(ATTNLABD, ['--port', '0', '--data-dir', dataDir, '--static-dir', join(ROOT, 'static'), '--log-level', 'warn',
      ...extraArgs], { stdio: ['ignore', 'pipe', 'pipe'], env });
    let stderr = '';
    proc.stderr.on('data', (d) => { stderr += d; if (stderr.length > 20000) stderr = stderr.slice(-10000); });
    const timer = setTimeout(() => { proc.kill('SIGKILL'); rej(new Error(`attnlabd printed no URL within ${urlTimeoutMs / 1000} s`)); },
      urlTimeoutMs);
    const rl = createInterface({ input: proc.stdout });
    rl.once('line', (line) => {
      clearTimeout(timer);
      const m = /(http:\/\/\S+)/.exec(line);
      if (!m) { proc.kill('SIGKILL'); rej(new Error(`unexpected first line: ${line}`)); return; }
      res({ proc, url: m[1].replace(/\/$/, '') });
    });
    proc.once('exit', (code) => { clearTimeout(timer); rej(new Error(`attnlabd exited with ${code}: ${stderr.trim().split('\n').pop()}`)); });
  });
}

// JSON over REST; a non-2xx answer throws with its status and the start of its body.
export async function api(base, path, { method = 'GET', body, raw } = {}) {
  const r = await fetch(base + path, { method, body: raw ?? (body === undefined ? undefined : JSON.stringify(body)),
    headers: raw !== undefined ? { 'Content-Type': 'text/plain' } : body !== undefined ? { 'Content-Type': 'application/json' } : {} });
  const text = await r.text();
  assert(r.ok, `${method} ${path}: HTTP ${r.status} ${text.slice(0, 200)}`);
  return text ? JSON.parse(text) : null;
}

// Polls fn until it gives a truthy value; `what` names the wait in the error (a string, or a function
// called at the time-out so it can say what was seen last).
export async function waitFor(fn, what, timeoutMs = 30000, everyMs = 200) {
  const t0 = Date.now();
  while (Date.now() - t0 < timeoutMs) {
    const v = await fn();
    if (v) return v;
    await new Promise((r) => setTimeout(r, everyMs));
  }
  throw new Error(`timed out waiting for ${typeof what === 'function' ? what() : what}`);
}

// Resolves to a run once it has ended (GET /api/runs/{id}), however long it trains: it throws only
// when the run's step stays the same for stallMs (a stuck run), not after a fixed time that a slow
// or loaded machine may need.
export async function waitForRun(base, id, { stallMs = 30000, everyMs = 250 } = {}) {
  let step = null, since = Date.now();
  for (;;) {
    const { run } = await api(base, `/api/runs/${id}`);
    if (['succeeded', 'failed', 'cancelled', 'interrupted'].includes(run.status)) return run;
    if (run.step !== step) { step = run.step; since = Date.now(); }
    else if (Date.now() - since > stallMs) throw new Error(`run ${id} stayed at step ${step} (${run.status}) for ${stallMs / 1000} s`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}

// Exits with a FAIL line unless attnlabd, the vendored Chart.js and Chromium are there.
export function checkSetup() {
  const missing = !existsSync(ATTNLABD) ? `no attnlabd at ${ATTNLABD} (make build first)`
    : !existsSync(join(ROOT, 'static/vendor/chart.umd.min.js')) ? 'static/vendor/chart.umd.min.js is missing (make build copies it)'
      : !existsSync(CHROMIUM) ? `no browser at ${CHROMIUM} (scripts/deps.sh --test installs chromium)` : '';
  if (missing) { console.log(`FAIL setup: ${missing}`); process.exit(1); }
  mkdirSync(ARTIFACTS, { recursive: true });
}

// A fresh data directory and browser profile (removed at the end) and attnlabd over the first;
// resolves to { base, dataDir, profile, proc }. The server is stopped (TERM, then KILL) at the end.
// opts: startServer's.
export async function startFresh(name, extraArgs = [], opts = {}) {
  const dataDir = mkdtempSync(join(tmpdir(), `attnlab-${name}-data-`));
  const profile = mkdtempSync(join(tmpdir(), `attnlab-${name}-profile-`));
  cleanups.push(() => rmSync(dataDir, { recursive: true, force: true }), () => rmSync(profile, { recursive: true, force: true }));
  const srv = await startServer(dataDir, extraArgs, opts);
  srv.proc.removeAllListeners('exit');
  cleanups.unshift(() => new Promise((r) => {
    if (srv.proc.exitCode !== null) return r();
    srv.proc.once('exit', r);
    srv.proc.kill('SIGTERM');
    setTimeout(() => { srv.proc.kill('SIGKILL'); r(); }, 5000);
  }));
  return { base: srv.url, dataDir, profile, proc: srv.proc };
}

// Headless Chromium on profile; its page's console errors go to consoleErrors. Closed at the end.
// ignore: console errors matching it are expected (a refusal the page shows on purpose).
export async function launchBrowser(profile, { viewport = { width: 1280, height: 800 }, acceptDownloads = false, ignore = null } = {}) {
  const ctx = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    viewport,
    acceptDownloads,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-quic', '--no-first-run',
      '--disable-component-update', '--disable-sync'],
  });
  cleanups.unshift(() => ctx.close());
  const page = ctx.pages()[0] || await ctx.newPage();
  page.setDefaultTimeout(20000);
  page.on('console', (m) => { if (m.type() === 'error' && !(ignore && ignore.test(m.text()))) consoleErrors.push(m.text()); });
  page.on('pageerror', (e) => consoleErrors.push(`page error: ${e.message}`));
  return { ctx, page };
}

// Runs main, then every cleanup; exits 1 if any case failed (or main threw).
export async function run(main) {
  try {
    await main();
  } catch (e) {
    failures++;
    console.log(`FAIL setup: ${String(e && e.message || e).split('\n')[0]}`);
  } finally {
    for (const f of cleanups) { try { await f(); } catch { /* best effort */ } }
  }
  console.log(`browser artefacts in ${ARTIFACTS}`);
  process.exit(failures ? 1 : 0);
}
