// The dashboard's Nodes card in a real browser (Debian's chromium driven by playwright-core): two
// attnlabd nodes on one fresh PostgreSQL database of the suite's cluster ($ATTNLAB_TEST_PG, which
// tests/run.sh sets), the runs view of the first lists both, marks itself, shows a run the other node
// trains, and a node that stops turns "stopped". Any console error fails the case.
// Prints "PASS name" / "FAIL name: why" per case and exits non-zero on any failure.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ROOT, assert, step, api, waitFor, checkSetup, startFresh, launchBrowser, run, cleanups } from './support/harness.mjs';

const SERVER = process.env.ATTNLAB_TEST_PG;

// One node on the shared database and artifacts directory, with a data directory of its own.
const startNode = (db, artifacts, id, extra = []) => startFresh(`nodes-${id}`, ['--db', db, '--artifacts', artifacts, '--node-id', id,
  '--lease-timeout', '3', '--compute-threads', '1', ...extra], { urlTimeoutMs: 20000 });

async function main() {
  checkSetup();
  if (!SERVER) throw new Error('no PostgreSQL server for the tests ($ATTNLAB_TEST_PG; tests/run.sh starts one)');
  const name = `b_${Date.now().toString(36)}_${process.pid}`;
  const db = execFileSync(join(ROOT, 'tests/support/pg.sh'), ['createdb', SERVER, name]).toString().trim();
  const artifacts = mkdtempSync(join(tmpdir(), 'attnlab-nodes-artifacts-'));
  cleanups.push(() => rmSync(artifacts, { recursive: true, force: true }));
  const a = await startNode(db, artifacts, 'front', ['--role', 'api']);
  const b = await startNode(db, artifacts, 'trainer');
  const { page } = await launchBrowser(a.profile);
  await step('nodes_card_lists_both_nodes', async () => {
    await page.goto(`${a.base}/#/runs`);
    await page.waitForSelector('#nodes-table');
    await waitFor(async () => (await page.$$('#nodes-table tbody tr[data-node-id]')).length === 2, 'two node rows', 20000);
    const self = await page.textContent('#nodes-table tr[data-node-id="front"]');
    assert(self.includes('(this node)') && self.includes('api'), `the api node's row: ${self}`);
    const other = await page.textContent('#nodes-table tr[data-node-id="trainer"]');
    assert(other.includes('all') && other.includes('alive'), `the trainer's row: ${other}`);
    assert((await page.textContent('#nodes-note')).includes('2 of 2 nodes alive'), 'the note counts the live nodes');
  });
  await step('nodes_card_shows_the_run_a_node_trains', async () => {
    const id = (await api(a.base, '/api/runs', { method: 'POST',
      body: { name: 'shown', config: { corpus: 'small', n_layer: 1, n_head: 2, d_model: 32, seq_len: 32, batch: 4, steps: 1000000, threads: 1 } } })).run.id; // longer than the case waits; cancelled below
    await waitFor(async () => (await page.textContent('#nodes-table tr[data-node-id="trainer"]')).includes(`run ${id}`),
      'the trainer row to name the run', 20000);
    await fetch(`${a.base}/api/runs/${id}/cancel`, { method: 'POST' });
  });
  await step('a_stopped_node_shows_as_stopped', async () => {
    b.proc.kill('SIGTERM');
    await waitFor(async () => (await page.textContent('#nodes-table tr[data-node-id="trainer"]')).includes('stopped'),
      'the trainer row to say stopped', 20000);
  });
}

await run(main);
