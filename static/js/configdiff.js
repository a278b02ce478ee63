// Which config keys differ among runs, kept free of the DOM so node can test it. Two values are equal
// when their JSON is (numbers compare as numbers, so 0.1 read twice is equal; a key one run lacks
// differs from any value another has).

const same = (a, b) => JSON.stringify(a === undefined ? null : a) === JSON.stringify(b === undefined ? null : b);

// configs: an array of config objects. Returns { differ: [keys], equal: [keys] }, each sorted by
// `order` first (keys it lists, in its order) and then by name.
export function configDiff(configs, order = []) {
  const keys = new Set();
  for (const c of configs) for (const k of Object.keys(c || {})) keys.add(k);
  const rank = (k) => { const i = order.indexOf(k); return i < 0 ? order.length : i; };
  const sorted = [...keys].sort((a, b) => rank(a) - rank(b) || (a < b ? -1 : a > b ? 1 : 0));
  const differ = [], equal = [];
  for (const k of sorted) {
    const first = (configs[0] || {})[k];
    (configs.every((c) => same((c || {})[k], first)) ? equal : differ).push(k);
  }
  return { differ, equal };
}

// The keys that tell these runs apart, leaving out those the caller already shows for every run
// (e.g. the L/H/d summary, or attention when it is the variant name). Empty for fewer than two runs.
export function differingKeys(runs, shown = []) {
  if (runs.length < 2) return [];
  const { differ } = configDiff(runs.map((r) => r.config || {}));
  return differ.filter((k) => !shown.includes(k));
}

// "1,4,7" (or "1, 4,4 ,x") -> [1, 4, 7]: positive integers, first occurrence kept, order kept.
export function parseRunIds(text) {
  const out = [];
  for (const part of String(text || '').split(',')) {
    const t = part.trim();
    if (!/^\d+$/.test(t)) continue;
    const n = Number(t);
    if (n > 0 && !out.includes(n)) out.push(n);
  }
  return out;
}
