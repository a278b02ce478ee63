// `attnlabd tokenize` against the npm package gpt-3-encoder, run on the same inputs here.
// Prints PASS/FAIL lines for tests/run.sh. ATTNLABD names the binary (set by tests/run.sh).
import { spawnSync } from 'node:child_process';
import { createRequire } from 'node:module';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

const require = createRequire(import.meta.url);
const enc = require(path.join(process.cwd(), 'node_modules/gpt-3-encoder'));
const bin = process.env.ATTNLABD || 'build/release/attnlabd';
let failed = 0;

function run(args, input) {
  const [cmd, ...pre] = bin.split(' ');
  return spawnSync(cmd, [...pre, 'tokenize', ...args], { input, maxBuffer: 1 << 28 });
}
function test(name, fn) {
  try {
    const why = fn();
    if (why) { failed++; console.log(`FAIL ${name}: ${why}`); } else console.log(`PASS ${name}`);
  } catch (e) { failed++; console.log(`FAIL ${name}: ${e.message.split('\n')[0]}`); }
}
const same = (a, b) => a.length === b.length && a.every((x, i) => x === b[i]);

const tricky = "Hello  world!\n\n  It's 2024: caf\u00e9, \u4e2d\u6587, \ud55c\uad6d\uc5b4 \ud83d\ude00\tcode(x) { return 'a'; }  \n" +
  "<|endoftext|> don't 'S  \u00a0 \u3000x 1,000,000\r\n";

test('encode_matches_npm', () => {
  const r = run([], Buffer.from(tricky));
  if (r.status !== 0) return `exit ${r.status}: ${r.stderr}`;
  const got = JSON.parse(r.stdout.toString());
  const want = enc.encode(tricky);
  return same(got, want) ? null : `ids ${JSON.stringify(got.slice(0, 12))}... vs ${JSON.stringify(want.slice(0, 12))}...`;
});

test('decode_round_trip', () => {
  const ids = enc.encode(tricky);
  const r = run(['--decode'], Buffer.from(JSON.stringify(ids)));
  if (r.status !== 0) return `exit ${r.status}: ${r.stderr}`;
  return r.stdout.toString() === tricky ? null : 'decoded text differs';
});

test('invalid_utf8_is_byte_level', () => {
  const input = Buffer.from([0x61, 0xff, 0x62, 0x20, 0xc0, 0xaf, 0xe4, 0xb8, 0x0a, 0xed, 0xa0, 0x80]);
  const r = run([], input);
  if (r.status !== 0) return `exit ${r.status}: ${r.stderr}`;
  const ids = JSON.parse(r.stdout.toString());
  if (ids.length < 9) return `only ${ids.length} ids`;
  const back = run(['--decode'], Buffer.from(JSON.stringify(ids)));
  return back.status === 0 && Buffer.compare(back.stdout, input) === 0 ? null : 'bytes do not round-trip';
});

test('bytes_encoding', () => {
  const input = Buffer.from('h\u00e9\n', 'utf8');
  const r = run(['--encoding', 'bytes'], input);
  if (r.status !== 0) return `exit ${r.status}: ${r.stderr}`;
  const ids = JSON.parse(r.stdout.toString());
  return same(ids, [...input]) ? null : JSON.stringify(ids);
});

test('docs_to_u16', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'attnlab-tok-'));
  const out = path.join(dir, 't.u16');
  const docs = ['First document.\n', 'Second one, with  spaces ', ''];
  const r = run(['--docs', '--u16', out, '--doc-counts', path.join(dir, 'c')], Buffer.from(docs.join('\0') + '\0'));
  try {
    if (r.status !== 0) return `exit ${r.status}: ${r.stderr}`;
    const buf = fs.readFileSync(out);
    const got = []; for (let i = 0; i < buf.length; i += 2) got.push(buf.readUInt16LE(i));
    const want = docs.flatMap(d => [...enc.encode(d), 50256]);
    const counts = fs.readFileSync(path.join(dir, 'c'), 'utf8').trim().split('\n').map(Number);
    if (!same(counts, docs.map(d => enc.encode(d).length + 1))) return `counts ${counts}`;
    const summary = JSON.parse(r.stdout.toString());
    if (summary.tokens !== want.length || summary.documents !== 3) return `summary ${r.stdout}`;
    return same(got, want) ? null : 'u16 ids differ';
  } finally { fs.rmSync(dir, { recursive: true, force: true }); }
});

test('large_input_threads_match_npm', () => {
  // about 600 KB of mixed text: encoded on several threads by the command
  const words = ['the', 'The', ' ', '  ', '\n', "it's", '42', '3.5', 'na\u00efve', '\u4e2d\u6587', '\ud83d\ude00', '{', '}', ';', 'x_1'];
  let s = '', seed = 12345;
  while (s.length < 600000) { seed = (seed * 1103515245 + 12345) & 0x7fffffff; s += words[seed % words.length] + (seed & 8 ? ' ' : ''); }
  const r = run(['--threads', '2'], Buffer.from(s));
  if (r.status !== 0) return `exit ${r.status}: ${r.stderr}`;
  const got = JSON.parse(r.stdout.toString());
  const want = [];
  // the package is quadratic on one long text: feed it pieces cut at safe points
  const isSpace = c => c === 32 || (c >= 9 && c <= 13);
  for (let from = 0; from < s.length;) {
    let i = from + 2000;
    while (i < s.length && !(isSpace(s.charCodeAt(i)) && s.charCodeAt(i - 1) < 128 && !isSpace(s.charCodeAt(i - 1)))) i++;
    for (const x of enc.encode(s.slice(from, i))) want.push(x);
    from = i;
  }
  return same(got, want) ? null : `${got.length} ids vs ${want.length}`;
});

test('usage_errors', () => {
  let r = run(['--bogus'], Buffer.from(''));
  if (r.status !== 2) return `bad flag: exit ${r.status}`;
  r = run(['--encoding', 'utf9'], Buffer.from(''));
  if (r.status !== 2) return `bad encoding: exit ${r.status}`;
  r = run(['--decode'], Buffer.from('[15496, 50257]'));
  if (r.status !== 1 || !/50257/.test(r.stderr.toString())) return `bad id: exit ${r.status} ${r.stderr}`;
  r = run(['--decode'], Buffer.from('not json'));
  if (r.status !== 1) return `bad json: exit ${r.status}`;
  return null;
});

process.exit(failed ? 1 : 0);
