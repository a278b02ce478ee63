// Reference encoder for the tokenizer bench: node ref_encode.js DOCS OUT.u16
// Encodes each NUL-terminated document with the npm package gpt-3-encoder, appends
// <|endoftext|> (50256), writes little-endian uint16 ids and prints its throughput.
// The package's encode() grows its result with Array.concat, which is quadratic in a long
// text, so each document is fed in pieces of about 2000 characters cut where a non-space ASCII
// character meets ASCII whitespace (no pre-token straddles such a cut, so the ids are the same).
const fs = require('fs');
const path = require('path');
const enc = require(path.join(process.cwd(), 'node_modules/gpt-3-encoder'));
const raw = fs.readFileSync(process.argv[2]);
const docs = [];
for (let start = 0, i = 0; i < raw.length; i++)
  if (raw[i] === 0) { docs.push(raw.subarray(start, i).toString('utf8')); start = i + 1; }
const t0 = process.hrtime.bigint();
const out = [];
const isSpace = c => c === 32 || (c >= 9 && c <= 13);
function* pieces(s) {
  let from = 0;
  while (from < s.length) {
    let i = Math.max(from + 2000, 1);
    while (i < s.length && !(isSpace(s.charCodeAt(i)) && s.charCodeAt(i - 1) < 128 && !isSpace(s.charCodeAt(i - 1)))) i++;
    yield s.slice(from, i);
    from = i;
  }
}
for (const d of docs) {
  for (const p of pieces(d)) for (const x of enc.encode(p)) out.push(x);
  out.push(50256);
}
const dt = Number(process.hrtime.bigint() - t0) / 1e9;
const buf = Buffer.alloc(out.length * 2);
out.forEach((x, i) => buf.writeUInt16LE(x, i * 2));
fs.writeFileSync(process.argv[3], buf);
console.log(`reference (npm gpt-3-encoder, node ${process.version}): ${out.length} tokens in ${dt.toFixed(2)} s = ${(out.length / dt / 1e6).toFixed(2)}M tokens/s`);
console.log(`RESULT reference_tokens_per_s ${Math.round(out.length / dt)}`);
