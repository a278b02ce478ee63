// One colour per attention variant (and per probe series that names one), the same in every chart,
// table swatch and legend. Picked from the Okabe–Ito palette so they stay apart for colour-blind
// viewers and on washed-out projectors. On the dark theme the few that would vanish on a dark
// background (black, dark grey, the dark blue, purple and brown) are swapped for lighter versions of
// the same hue; every other colour is the same in both themes, so a variant keeps its colour.
import { isDark } from './theme.js';

const FIXED = {
  rope: '#0072B2',
  rotary: '#0072B2',
  cosine_rope: '#D55E00',
  // the attention-scale preset's variants and the learned-scale row
  cosine_rope_no_wd: '#E69F00',
  cosine_log_scale_10: '#CC79A7',
  cosine_rope_scale: '#CC79A7',
  dot: '#009E73',
  additive: '#CC79A7',
  untouched: '#555555',
  pi: '#E69F00',
  interpolation: '#E69F00',
  ntk: '#56B4E9',
  yarn: '#D55E00',
  trained: '#000000',
  // the sparse-attention predictors (sparse_cost's and sparse_attention's columns, "window_k8"): one
  // colour each in every chart of a probe, whatever other columns a chart has; dense is the exact
  // attention the others are read against
  dense: '#555555',
  window: '#0072B2',
  lsh: '#CC79A7',
  hamming: '#E69F00',
  topk: '#009E73',
  unrotated: '#D55E00',
};
const CYCLE = ['#0072B2', '#D55E00', '#009E73', '#CC79A7', '#E69F00', '#56B4E9', '#7B4EA3', '#000000', '#8C564B', '#7F7F7F'];

const DARK = {
  '#0072B2': '#3D9BE0',
  '#000000': '#E8E8E8',
  '#555555': '#B0B0B0',
  '#7B4EA3': '#A98BD8',
  '#8C564B': '#C0907F',
};

// A palette colour as drawn on the current theme.
export function themed(hex) { return (isDark() && DARK[String(hex).toUpperCase()]) || hex; }

function hash(s) {
  let x = 2166136261;
  for (let i = 0; i < s.length; i++) { x ^= s.charCodeAt(i); x = Math.imul(x, 16777619); }
  return x >>> 0;
}

export function variantColor(name) {
  if (!name) return themed(CYCLE[7]);
  if (FIXED[name]) return themed(FIXED[name]);
  // "<task>.<attention>" (the positional-precision preset): the attention's colour
  const tail = String(name).split('.').pop();
  if (FIXED[tail]) return themed(FIXED[tail]);
  return themed(CYCLE[hash(name) % CYCLE.length]);
}

// Colours for runs drawn together (the compare view): each run takes its variant's colour, unless an
// earlier run of the list already has it (two rope runs with different settings); then it takes a
// palette colour that no variant owns (purple, brown, grey) and, those spent, one that no run of the
// list uses, so every run stays apart and a colour never claims a variant it is not.
export function runColors(runs) {
  const out = new Map();
  const up = (c) => c.toUpperCase();
  const variantHex = (v) => up(!v ? CYCLE[7] : FIXED[v] || CYCLE[hash(v) % CYCLE.length]);
  const owned = new Set(Object.values(FIXED).map(up));
  const reserved = new Set(runs.map((r) => variantHex(r.variant)));
  const spare = [...CYCLE.map(up).filter((c) => !owned.has(c)), ...CYCLE.map(up).filter((c) => owned.has(c))];
  const taken = new Set();
  for (const r of runs) {
    let hex = variantHex(r.variant);
    if (taken.has(hex)) {
      hex = spare.find((c) => !taken.has(c) && !reserved.has(c)) || spare.find((c) => !taken.has(c)) || spare[out.size % spare.length];
    }
    taken.add(hex);
    out.set(r.id, themed(hex));
  }
  return out;
}

// For probe columns such as "angle_ntk" or "entropy_cos_tau_0.1": a known variant inside the name wins
// (a key of several words named whole, the shortest when they nest; else a word of the name),
// otherwise the column's position in its chart.
export function seriesColor(column, index) {
  const parts = column.toLowerCase().split(/[_\s]+/);
  const whole = Object.keys(FIXED).filter((k) => k.includes('_') && column.includes(k)).sort((a, b) => a.length - b.length)[0];
  if (whole) return themed(FIXED[whole]);
  for (const p of parts) if (FIXED[p] && p !== 'trained') return themed(FIXED[p]);
  if (parts.includes('trained')) return themed(FIXED.trained);
  return themed(CYCLE[index % CYCLE.length]);
}

export function withAlpha(hex, a) {
  const n = parseInt(hex.slice(1), 16);
  return `rgba(${(n >> 16) & 255}, ${(n >> 8) & 255}, ${n & 255}, ${a})`;
}

// Heads of one variant: the same hue, lighter or darker per head so the variant stays recognisable.
export function headShade(hex, i, n) {
  if (n <= 1) return hex;
  const t = (i / (n - 1)) * 0.7 - 0.35; // -0.35 .. +0.35
  const c = parseInt(hex.slice(1), 16);
  const ch = [(c >> 16) & 255, (c >> 8) & 255, c & 255].map((v) =>
    Math.round(t < 0 ? v * (1 + t) : v + (255 - v) * t));
  return '#' + ch.map((v) => v.toString(16).padStart(2, '0')).join('');
}
