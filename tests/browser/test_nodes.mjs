// The dashboard's Nodes card in a real browser (Debian's chromium driven by playwright-core): two
// attnlabd nodes on one fresh PostgreSQL database of the suite's cluster ($ATTNLAB_TEST_PG, which
// tests/run.sh sets), the runs view of the first lists both, marks itself, shows a run the other node
// trains, and a node that stops turns "stopped". Any console error fails the case.
// Prints "PASS name" / "FAIL name: why" per case and exits non-zero on any failure.
import { spawn, execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createInterface } from 'node:readline';
import { chromium } from 'playwright-core';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const ATTNLABD = process.env.ATTNLABD || join(ROOT, 'build/release/attnlabd');
const CHROMIUM = process.env.CHROMIUM || '/usr/bin/chromium';
const SERVER = process.env.ATTNLAB_TEST_PG;

let failures = 0;
const consoleErrors = [];
const procs = [];

function assert(cond, msg) { if (!cond) throw new Error(msg); }

async function step(name, fn) {
  const before = consoleErrors.length;
  try {
    await fn();
    if (consoleErrors.length > before) throw new Error(`console error: ${consoleErrors.slice(before).join(' | ')}`);
    console.log(`PASS ${name}`);
  } catch (e) {
    failures++;
    console.log(`FAIL ${name}: ${String(e && e.message || e).split('\n')[0]}`);
  }
}

function startNode(db, artifacts, id, extra = []) {
  const dataDir = mkdtempSync(join(tmpdir(), `attnlab-nodes-${id}-`));
  return new Promise((res, rej) => {
    const env = { ...process.env };
    delete env.ATTNLAB_TOKEN;
    const proc = spawn(ATTNLABD, ['--port', '0', '--data-dir', dataDir, '--static-dir', join(ROOT, 'static'), '--log-level', 'warn',
      '--db', db, '--artifacts', artifacts, '--node-id', id, '--lease-timeout', '3', '--compute-threads', '1', ...extra],
    { stdio: ['ignore', 'pipe', 'pipe'], env });
    procs.push({ proc, dataDir });
    let stderr = '';
    proc.stderr.on('data', (d) => { stderr += d; if (stderr.length > 20000) stderr = stderr.slice(-10000); });
    const timer = setTimeout(() => { proc.kill('SIGKILL'); rej(new Error('attnlabd printed no URL within 20 s')); }, 20000);
    createInterface({ input: proc.stdout }).once('line', (line) => {
      clearTimeout(timer);
      const m = /(http:\/\/\S+)/.exec(line);
      if (!m) { proc.kill('SIGKILL'); rej(new Error(`unexpected first line: ${line}`)); return; }
      res({ proc, url: m[1].replace(/\/$/, '') });
    });
    proc.once('exit', (code) => { clearTimeout(timer); rej(new Error(`attnlabd exited with ${code}: ${stderr.trim().split('\n').pop()}`)); });
  });
}

async function waitFor(fn, what, timeoutMs = 30000, everyMs = 200) {
  const t0 = Date.now();
  while (Date.now() - t0 < timeoutMs) {
    const v = await fn();
    if (v) return v;
    await new Promise((r) => setTimeout(r, everyMs));
  }
  throw new Error(`timed out waiting for ${what}`);
}

async function main() {
  if (!SERVER) {
    console.log('FAIL nodes_card: no PostgreSQL server for the tests ($ATTNLAB_TEST_PG)');
    process.exit(1);
  }
  const name = `b_${Date.now().toString(36)}_${process.pid}`;
  const db = execFileSync(join(ROOT, 'tests/support/pg.sh'), ['createdb', SERVER, name]).toString().trim();
  const artifacts = mkdtempSync(join(tmpdir(), 'attnlab-nodes-artifacts-'));
  const a = await startNode(db, artifacts, 'front', ['--role', 'api']);
  const b = await startNode(db, artifacts, 'trainer');
  const browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'] });
  const page = await browser.newPage();
  page.on('console', (m) => { if (m.type() === 'error') consoleErrors.push(m.text()); });
  page.on('pageerror', (e) => consoleErrors.push(String(e)));
  try {
    await step('nodes_card_lists_both_nodes', async () => {
      await page.goto(`${a.url}/#/runs`);
      await page.waitForSelector('#nodes-table');
      await waitFor(async () => (await page.$$('#nodes-table tbody tr[data-node-id]')).length === 2, 'two node rows', 20000);
      const self = await page.textContent('#nodes-table tr[data-node-id="front"]');
      assert(self.includes('(this node)') && self.includes('api'), `the api node's row: ${self}`);
      const other = await page.textContent('#nodes-table tr[data-node-id="trainer"]');
      assert(other.includes('all') && other.includes('alive'), `the trainer's row: ${other}`);
      assert((await page.textContent('#nodes-note')).includes('2 of 2 nodes alive'), 'the note counts the live nodes');
    });
    await step('nodes_card_shows_the_run_a_node_trains', async () => {
      const r = await fetch(`${a.url}/api/runs`, { method: 'POST', headers: { 'Content-Type': 'application/json' },
        body: JSON.stringify({ name: 'shown', config: { corpus: 'small', n_layer: 1, n_head: 2, d_model: 32, seq_len: 32, batch: 4, steps: 3000, threads: 1 } }) });
      assert(r.status === 201, `POST /api/runs: ${r.status}`);
      const id = (await r.json()).run.id;
      await waitFor(async () => (await page.textContent('#nodes-table tr[data-node-id="trainer"]')).includes(`run ${id}`),
        'the trainer row to name the run', 20000);
      await fetch(`${a.url}/api/runs/${id}/cancel`, { method: 'POST' });
    });
    await step('a_stopped_node_shows_as_stopped', async () => {
      b.proc.kill('SIGTERM');
      await waitFor(async () => (await page.textContent('#nodes-table tr[data-node-id="trainer"]')).includes('stopped'),
        'the trainer row to say stopped', 20000);
    });
  } finally {
    await browser.close();
    for (const { proc, dataDir } of procs) { proc.kill('SIGKILL'); rmSync(dataDir, { recursive: true, force: true }); }
    rmSync(artifacts, { recursive: true, force: true });
  }
  process.exit(failures ? 1 : 0);
}

main().catch((e) => { console.log(`FAIL test_nodes_mjs: ${e.message}`); for (const { proc } of procs) proc.kill('SIGKILL'); process.exit(1); });
