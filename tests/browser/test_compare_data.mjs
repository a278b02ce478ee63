// The compare view's and the chart export's arithmetic (static/js/csv.js, configdiff.js and the run
// colours of colors.js), run by node without a browser. Prints PASS/FAIL per case; exits non-zero on
// failure.
import { csvField, toCsv, chartDataCsv, matrixCsv } from '../../static/js/csv.js';
import { configDiff, differingKeys, parseRunIds } from '../../static/js/configdiff.js';
import { runColors, variantColor } from '../../static/js/colors.js';

let failures = 0;
function test(name, fn) {
  try { fn(); console.log(`PASS ${name}`); } catch (e) { failures++; console.log(`FAIL ${name}: ${e.message}`); }
}
function assert(cond, msg) { if (!cond) throw new Error(msg); }
const eq = (a, b, what) => assert(JSON.stringify(a) === JSON.stringify(b), `${what}: got ${JSON.stringify(a)}, want ${JSON.stringify(b)}`);

test('csv fields: quotes only where needed, numbers with every digit, non-finite named', () => {
  eq(['a', 'a,b', 'say "hi"', 'two\nlines', 0.1 + 0.2, null, undefined, NaN, Infinity, -Infinity].map(csvField),
    ['a', '"a,b"', '"say ""hi"""', '"two\nlines"', '0.30000000000000004', '', '', 'NaN', 'inf', '-inf'], 'fields');
  eq(toCsv(['x', 'y'], [[1, 2]]), 'x,y\r\n1,2\r\n', 'CRLF lines');
});

test('line chart CSV: one row per x any series has, ascending, gaps left empty', () => {
  const data = { datasets: [
    { label: '#1 a', data: [{ x: 1, y: 5 }, { x: 2, y: 4 }, { x: 4, y: 3 }] },
    { label: '#2 b, log', data: [{ x: 2, y: 9 }, { x: 3, y: 8 }] },
  ] };
  eq(chartDataCsv(data, 'step'), 'step,#1 a,"#2 b, log"\r\n1,5,\r\n2,4,9\r\n3,,8\r\n4,3,\r\n', 'csv');
});

test('category chart CSV: one row per label', () => {
  const data = { labels: ['rope', 'dot'], datasets: [{ label: 'loss', data: [1.5, 2] }, { label: 'ppl', data: [4.5, null] }] };
  eq(chartDataCsv(data, 'variant'), 'variant,loss,ppl\r\nrope,1.5,4.5\r\ndot,2,\r\n', 'csv');
});

test('heat map CSV: row labels first, column labels as header', () => {
  eq(matrixCsv([[1, 0], [0.25, 0.75]], ['The', ' cat'], ['The', ' cat'], 'query/key'), 'query/key,The, cat\r\nThe,1,0\r\n cat,0.25,0.75\r\n', 'csv');
});

test('config diff: differing and equal keys, a missing key differs, schema order first', () => {
  const a = { attention: 'cosine_rope', tau_param: 'linear', lr: 0.0003, d_model: 16, tags: ['x'] };
  const b = { attention: 'cosine_rope', tau_param: 'log', lr: 0.0003, d_model: 16, tags: ['x'] };
  const c = { attention: 'cosine_rope', tau_param: 'linear', lr: 0.0003, tags: ['x'] };
  eq(configDiff([a, b]), { differ: ['tau_param'], equal: ['attention', 'd_model', 'lr', 'tags'] }, 'a vs b');
  eq(configDiff([a, c]).differ, ['d_model'], 'a vs c');
  eq(configDiff([a, b, c], ['tau_param', 'lr']), { differ: ['tau_param', 'd_model'], equal: ['lr', 'attention', 'tags'] }, 'ordered');
  eq(differingKeys([{ config: a }, { config: b }], ['tau_param']), [], 'shown keys left out');
  eq(differingKeys([{ config: a }]), [], 'one run has nothing to differ from');
});

test('run ids from the address: positive integers, duplicates and junk dropped, order kept', () => {
  eq(parseRunIds('7, 1,4,4 ,x,0,-3,2.5,'), [7, 1, 4], 'ids');
  eq(parseRunIds(undefined), [], 'none');
});

test('run colours: variant colour first, then colours no variant owns; every run apart', () => {
  const runs = [{ id: 1, variant: 'cosine_rope' }, { id: 2, variant: 'cosine_rope' }, { id: 3, variant: 'rope' }, { id: 4, variant: 'rope' },
    { id: 5, variant: 'dot' }];
  const c = runColors(runs);
  assert(c.get(1) === variantColor('cosine_rope') && c.get(3) === variantColor('rope') && c.get(5) === variantColor('dot'), 'first of a variant keeps its colour');
  assert(new Set(c.values()).size === runs.length, `colours repeat: ${[...c.values()]}`);
  const owned = ['rope', 'cosine_rope', 'dot', 'additive', 'untouched', 'pi', 'ntk', 'trained'].map(variantColor);
  assert(!owned.includes(c.get(2)) && !owned.includes(c.get(4)), `a second run took a variant's colour: ${c.get(2)}, ${c.get(4)}`);
  const many = Array.from({ length: 12 }, (_, i) => ({ id: i + 1, variant: 'rope' }));
  assert(runColors(many).size === 12, 'twelve runs get twelve entries');
});

process.exit(failures ? 1 : 0);
