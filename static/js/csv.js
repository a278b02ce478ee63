// CSV from what a chart draws, kept free of the DOM so node can test it. RFC 4180: comma separated,
// CRLF line ends, a field quoted when it holds a comma, a quote or a line break (quotes doubled).
// Numbers are written with every digit JavaScript keeps (String(v)), not as the page rounds them.

export function csvField(v) {
  if (v === null || v === undefined) return '';
  if (typeof v === 'number') return Number.isFinite(v) ? String(v) : (Number.isNaN(v) ? 'NaN' : v > 0 ? 'inf' : '-inf');
  const s = String(v);
  return /[",\r\n]/.test(s) ? `"${s.replace(/"/g, '""')}"` : s;
}

export function toCsv(header, rows) {
  return [header, ...rows].map((r) => r.map(csvField).join(',')).join('\r\n') + '\r\n';
}

// data: a Chart.js data object. Category charts (data.labels set, values in data[i]) give one row per
// label; line charts ({x, y} points) one row per x that any series has, in ascending order, with an
// empty field where a series has no point at that x. One column per dataset, named by its label.
export function chartDataCsv(data, xLabel = 'x') {
  const sets = (data.datasets || []).filter((d) => Array.isArray(d.data));
  const names = sets.map((d, i) => d.label || `series ${i + 1}`);
  if (Array.isArray(data.labels) && data.labels.length) {
    const rows = data.labels.map((l, i) => [l, ...sets.map((d) => {
      const v = d.data[i];
      return v !== null && typeof v === 'object' ? v.y : v;
    })]);
    return toCsv([xLabel, ...names], rows);
  }
  const xs = new Set();
  const maps = sets.map((d) => {
    const m = new Map();
    for (const p of d.data) {
      if (!p || typeof p !== 'object' || !Number.isFinite(p.x)) continue;
      if (!m.has(p.x)) m.set(p.x, p.y);
      xs.add(p.x);
    }
    return m;
  });
  const rows = [...xs].sort((a, b) => a - b).map((x) => [x, ...maps.map((m) => (m.has(x) ? m.get(x) : null))]);
  return toCsv([xLabel, ...names], rows);
}

// A matrix with row and column labels (a heat map) as CSV: first column the row label.
export function matrixCsv(matrix, rowLabels = [], colLabels = [], corner = '') {
  const m = matrix.length ? matrix[0].length : 0;
  const header = [corner, ...Array.from({ length: m }, (_, j) => colLabels[j] ?? String(j))];
  return toCsv(header, matrix.map((r, i) => [rowLabels[i] ?? String(i), ...r]));
}
