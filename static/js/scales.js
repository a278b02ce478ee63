// Axis decisions kept free of the DOM so node can test them.

// Whether values are better read on a log axis: every finite one positive and the largest at least
// `ratio` times the smallest (two decades by default). A linear axis would flatten the small ones
// to zero (a RoPE pair's angle falls geometrically with the pair index: pairs 4–7 of a 16-wide head
// read 0 next to pair 0). Nulls and non-finite values are left out; fewer than two values: false.
export function spansDecades(values, ratio = 100) {
  let lo = Infinity, hi = -Infinity, n = 0;
  for (const v of values) {
    if (typeof v !== 'number' || !Number.isFinite(v)) continue;
    if (v <= 0) return false;
    n++;
    if (v < lo) lo = v;
    if (v > hi) hi = v;
  }
  return n >= 2 && hi / lo >= ratio;
}
