// Chart.js (loaded as a classic script from /vendor) for lines and bars, plus a canvas heat map of
// our own, since Chart.js has none. Charts are built with parsing off and animation off: live
// training appends points many times a second and must stay cheap.
// Every chart can be saved: PNG from Chart.js's toBase64Image(), SVG by drawing it once more onto a
// recorder (svgexport.js), CSV built from its datasets.
import { h, fmt } from './dom.js';
import { seriesColor, withAlpha, headShade } from './colors.js';
import { cssVar } from './theme.js';
import { chartDataCsv, matrixCsv } from './csv.js';
import { makeLink, safeName, svgUrl, chartToSvg, SvgRecorder } from './svgexport.js';
import { spansDecades } from './scales.js';

const Chart = window.Chart;

export function chartsAvailable() { return !!Chart; }

// Text, grid and background colours come from the theme's CSS variables (style.css), read again on
// every theme change; type size from classroom mode.
export function applyChartTheme(classroom = document.body.classList.contains('classroom')) {
  if (!Chart) return;
  Chart.defaults.font.size = classroom ? 18 : 12;
  const fg = cssVar('--chart-fg', '#1d1f24'), grid = cssVar('--chart-grid', 'rgba(0,0,0,0.1)');
  Chart.defaults.color = fg;
  Chart.defaults.borderColor = grid;
  // A drawn chart has written its resolved scale options (colours included) into its own config,
  // so the defaults no longer reach it: set its axes' colours directly.
  for (const c of Object.values(Chart.instances)) {
    for (const sc of Object.values(c.config?.options?.scales || {})) {
      if (sc.ticks) sc.ticks.color = fg;
      if (sc.title) sc.title.color = fg;
      if (sc.grid) sc.grid.color = grid;
      if (sc.border) sc.border.color = grid;
    }
    c.update('none');
  }
}

// Paints the card colour under each chart, so a saved PNG looks as it does on the page (a canvas is
// otherwise transparent, and dark-theme text on a transparent PNG vanishes in a light viewer).
if (Chart) {
  Chart.register({
    id: 'attnlabBackground',
    beforeDraw(chart) {
      const { ctx, width, height } = chart;
      ctx.save();
      ctx.globalCompositeOperation = 'destination-over';
      ctx.fillStyle = cssVar('--card', '#fff');
      ctx.fillRect(0, 0, width, height);
      ctx.restore();
    },
  });
}

const csvUrl = (text) => URL.createObjectURL(new Blob([text], { type: 'text/csv;charset=utf-8' }));

// PNG, SVG and CSV links for a Chart.js chart. getChart: the chart, or a function returning it (views
// make their boxes before their charts). what: words for the aria labels ("loss chart").
export function chartExport(getChart, name, what = 'chart') {
  const chart = () => (typeof getChart === 'function' ? getChart() : getChart);
  const file = safeName(name);
  return h('span.export-links', {},
    makeLink('PNG', `${file}.png`, `download the ${what} as PNG`, () => chart()?.toBase64Image('image/png', 1)),
    makeLink('SVG', `${file}.svg`, `download the ${what} as SVG`, () => { const c = chart(); return c ? svgUrl(chartToSvg(c)) : null; }),
    makeLink('CSV', `${file}.csv`, `download the ${what}'s data as CSV`, () => {
      const c = chart();
      if (!c) return null;
      const xTitle = c.options?.scales?.x?.title?.text || 'x';
      return csvUrl(chartDataCsv(c.data, xTitle));
    }));
}

function axis(title, type, extra = {}) {
  return { type, title: { display: !!title, text: title }, ...extra };
}

// A line chart over numeric x. opts: xTitle, yTitle, logX, logY, legend (default true).
export function lineChart(canvas, opts = {}) {
  return new Chart(canvas, {
    type: 'line',
    data: { datasets: [] },
    options: {
      parsing: false,
      normalized: true,
      animation: false,
      responsive: true,
      maintainAspectRatio: false,
      spanGaps: true,
      interaction: { mode: 'nearest', axis: 'x', intersect: false },
      elements: { point: { radius: 0, hitRadius: 6 }, line: { borderWidth: 2 } },
      scales: {
        x: axis(opts.xTitle, opts.logX ? 'logarithmic' : 'linear'),
        y: axis(opts.yTitle, opts.logY ? 'logarithmic' : 'linear'),
      },
      plugins: {
        legend: { display: opts.legend !== false,
          // An entry standing for a group of lines (legendGroup: every replicate or head of a variant)
          // shows or hides the whole group.
          onClick: (e, item, legend) => {
            const chart = legend.chart, sets = chart.data.datasets, g = sets[item.datasetIndex]?.legendGroup;
            const show = !chart.isDatasetVisible(item.datasetIndex);
            sets.forEach((d, i) => { if (i === item.datasetIndex || (g && d.legendGroup === g)) chart.setDatasetVisibility(i, show); });
            chart.update();
          },
          labels: { boxWidth: 14,
          filter: (item, data) => !data.datasets[item.datasetIndex].hideInLegend,
          // legendText / legendColor: one legend entry standing for several lines (one per head).
          generateLabels: (chart) => Chart.defaults.plugins.legend.labels.generateLabels(chart).map((l) => {
            const d = chart.data.datasets[l.datasetIndex] || {};
            const out = d.legendText ? { ...l, text: d.legendText } : l;
            return d.legendColor ? { ...out, fillStyle: d.legendColor, strokeStyle: d.legendColor } : out;
          }) } },
        tooltip: {
          filter: (item) => !item.dataset.hideInLegend || item.dataset.tooltip,
          callbacks: { label: (c) => `${c.dataset.label}: ${fmt(c.parsed.y)}` },
        },
        title: { display: !!opts.title, text: opts.title },
      },
    },
  });
}

export function setAxisTypes(chart, { logX, logY }) {
  if (logX !== undefined) chart.options.scales.x.type = logX ? 'logarithmic' : 'linear';
  if (logY !== undefined) chart.options.scales.y.type = logY ? 'logarithmic' : 'linear';
}

// A chart drawn from a probe result's hint {table, type, x, y, title, log_x, log_y, reference, y_line}:
// log_x / log_y put that axis on a log scale (values that are not positive are left out), reference
// names the y column the others are read against (drawn dashed in the text colour, "(reference)" in
// the legend), y_line adds a dashed horizontal line at that y (e.g. a ratio of 1).
export function chartFromHint(hint, table, fileName = hint.table) {
  const xi = table.columns.indexOf(hint.x);
  const caption = h('figcaption', {}, h('span', {}, hint.title || hint.table));
  const wrap = h('figure.chart-box', {}, caption);
  if (hint.type === 'heatmap') {
    wrap.append(heatmapFromTable(table, { title: hint.title || hint.table, exportName: fileName }));
    return { el: wrap, chart: null };
  }
  let chart;
  caption.append(' ', chartExport(() => chart, fileName, `${hint.title || hint.table} chart`));
  const canvas = h('canvas', { role: 'img', 'aria-label': hint.title || hint.table });
  wrap.append(h('div.chart-canvas', {}, canvas));
  const ys = hint.y.filter((c) => table.columns.includes(c));
  const categorical = table.rows.some((r) => typeof r[xi] === 'string');
  // Values spread over decades go on a log axis even when the hint did not ask for one: on a linear
  // axis the small ones all read 0. The caption says so.
  const yValues = ys.filter((c) => c !== hint.reference).flatMap((c) => { const i = table.columns.indexOf(c); return table.rows.map((r) => r[i]); });
  const autoLog = !hint.log_y && spansDecades(yValues);
  if (autoLog) caption.firstChild.append(h('span.small.muted.auto-log', {}, ' (log scale: the values span several decades)'));
  const t = { hint, table, xi, ys, autoLog };
  chart = hint.type === 'bar' || categorical ? hintBarChart(canvas, t, categorical) : hintLineChart(canvas, t);
  return { el: wrap, chart };
}

// A probe hint's bars over its x categories, one dataset per y column. t: { hint, table, xi, ys, autoLog }.
function hintBarChart(canvas, { hint, table, xi, ys, autoLog }, categorical) {
  return new Chart(canvas, {
    type: 'bar',
    data: {
      labels: table.rows.map((r) => fmt(r[xi])),
      datasets: ys.map((c, i) => {
        const yi = table.columns.indexOf(c);
        const col = seriesColor(c, i);
        // One series over named categories (strategies, variants): each bar takes its category's colour.
        const perBar = ys.length === 1 && categorical ? table.rows.map((r, k) => seriesColor(String(r[xi]), k)) : null;
        return { label: c, data: table.rows.map((r) => r[yi]), backgroundColor: perBar ? perBar.map((x) => withAlpha(x, 0.8)) : withAlpha(col, 0.8),
          borderColor: perBar || col };
      }),
    },
    options: {
      animation: false, responsive: true, maintainAspectRatio: false,
      scales: { x: axis(hint.x, 'category'), y: axis('', autoLog ? 'logarithmic' : 'linear') },
      plugins: { tooltip: { callbacks: { label: (c) => `${c.dataset.label}: ${fmt(c.parsed.y)}` } } },
    },
  });
}

// A probe hint's lines: per y column one line per group (when x repeats), the reference column dashed
// in the text colour, the hint's y_line as a dashed horizontal line over the x range.
function hintLineChart(canvas, { hint, table, xi, ys, autoLog }) {
  const logX = !!hint.log_x, logY = !!hint.log_y || autoLog;
  const chart = lineChart(canvas, { xTitle: hint.x, logX, logY });
  const gi = groupColumn(table, xi, ys);
  const groups = gi < 0 ? [null] : [...new Set(table.rows.map((r) => r[gi]))];
  const refColor = cssVar('--chart-fg', '#1d1f24');
  const colors = columnColors(ys.filter((c) => c !== hint.reference));
  chart.data.datasets = ys.flatMap((c) => groups.map((g, k) => {
    const yi = table.columns.indexOf(c);
    const ref = c === hint.reference;
    const col = ref ? refColor : headShade(colors.get(c), k, groups.length);
    const pts = table.rows
      .filter((r) => gi < 0 || r[gi] === g)
      .map((r) => ({ x: Number(r[xi]), y: r[yi] === null ? null : Number(r[yi]) }))
      .filter((p) => Number.isFinite(p.x) && (!logX || p.x > 0))
      .map((p) => (logY && !(p.y > 0) ? { x: p.x, y: null } : p))
      .sort((a, b) => a.x - b.x);
    const label = gi < 0 ? c : `${c}, ${table.columns[gi]} ${fmt(g)}`;
    return { label: ref ? `${label} (reference)` : label, data: pts, borderColor: col, backgroundColor: col,
      borderDash: ref ? [6, 4] : undefined, reference: ref || undefined,
      pointRadius: pts.length <= 40 ? 3 : 0, hideInLegend: k > 0, tooltip: true,
      legendText: gi < 0 ? undefined : `${c} (one line per ${table.columns[gi]})` };
  }));
  if (Number.isFinite(hint.y_line) && (!logY || hint.y_line > 0)) {
    const xs = chart.data.datasets.flatMap((d) => d.data.map((p) => p.x));
    if (xs.length) {
      chart.data.datasets.push({ label: `${fmt(hint.y_line)} (reference)`, data: [{ x: Math.min(...xs), y: hint.y_line },
        { x: Math.max(...xs), y: hint.y_line }], borderColor: refColor, backgroundColor: refColor, borderDash: [6, 4],
      borderWidth: 1, pointRadius: 0, reference: true, tooltip: false });
    }
  }
  chart.update('none');
  return chart;
}

// The colour of each y column of a probe chart, from its name (seriesColor), so that a column keeps
// its colour in every chart that draws it: the position only breaks ties for names that say nothing
// (it counts the reference column out, which is drawn in the text colour). Columns that get the same
// colour (one predictor at several k: window_k8, window_k32) are shades of it, in their order.
function columnColors(cols) {
  const base = cols.map((c, i) => seriesColor(c, i));
  const out = new Map();
  cols.forEach((c, i) => {
    const same = base.map((b, j) => (b === base[i] ? j : -1)).filter((j) => j >= 0);
    out.set(c, headShade(base[i], same.indexOf(i), same.length));
  });
  return out;
}

// When x repeats (a grid of offsets × shifts), the rows hold several curves: find the column that
// tells them apart so each becomes its own line instead of one zig-zag.
function groupColumn(table, xi, ys) {
  const xs = table.rows.map((r) => r[xi]);
  if (new Set(xs).size === xs.length) return -1;
  for (let g = 0; g < table.columns.length; g++) {
    if (g === xi || ys.includes(table.columns[g])) continue;
    const keys = new Set(table.rows.map((r) => `${r[g]}|${r[xi]}`));
    const n = new Set(table.rows.map((r) => r[g])).size;
    if (keys.size === table.rows.length && n <= 16) return g;
  }
  return -1;
}

const cutLabel = (s) => (s.length > 10 ? s.slice(0, 9) + '…' : s);

// A heat map's geometry: label margins measured in its font, cell size from its shape, its size in
// CSS pixels; ctx0 is the measuring context (the SVG recorder's too).
function heatmapLayout(matrix, rowLabels, colLabels) {
  const n = matrix.length, m = n ? matrix[0].length : 0;
  const classroom = document.body.classList.contains('classroom');
  const font = classroom ? 16 : 11;
  const ctx0 = document.createElement('canvas').getContext('2d');
  ctx0.font = `${font}px system-ui, sans-serif`;
  const rl = rowLabels || [], cl = colLabels || [];
  const left = rl.length ? Math.ceil(Math.max(...rl.map((s) => ctx0.measureText(cutLabel(s)).width))) + 8 : 4;
  const top = cl.length ? Math.ceil(Math.max(...cl.map((s) => ctx0.measureText(cutLabel(s)).width))) + 8 : 4;
  const cell = Math.max(classroom ? 16 : 10, Math.min(classroom ? 40 : 28, Math.floor(520 / Math.max(n, m, 1))));
  return { n, m, font, ctx0, rl, cl, left, top, cell, W: left + cell * m + 4, H: top + cell * n + 4 };
}

// Draws the map on a 2D context (the canvas, or an SVG recorder for the SVG file). o: { matrix, vmax,
// rowScale, masked, fg, bg }.
function paintHeatmap(ctx, g, o) {
  const { n, m, left, top, cell, rl, cl, W, H } = g, { matrix } = o;
  ctx.fillStyle = o.bg; // painted, so a saved PNG keeps the page's background
  ctx.fillRect(0, 0, W, H);
  for (let i = 0; i < n; i++) {
    // rowScale: each query's largest weight is full colour, so later rows (spread over many keys) stay visible.
    const rmax = o.rowScale ? Math.max(...matrix[i]) || 1 : o.vmax;
    for (let j = 0; j < m; j++) {
      const t = Math.max(0, Math.min(1, matrix[i][j] / rmax));
      // white → dark blue; masked (future) cells stay a light grey so causality is visible
      ctx.fillStyle = j > i && matrix[i][j] === 0 && n === m ? o.masked : `rgb(${Math.round(255 - 247 * t)}, ${Math.round(255 - 207 * t)}, ${Math.round(255 - 148 * t)})`;
      ctx.fillRect(left + j * cell, top + i * cell, cell - (cell > 12 ? 1 : 0), cell - (cell > 12 ? 1 : 0));
    }
  }
  ctx.fillStyle = o.fg;
  ctx.font = `${g.font}px system-ui, sans-serif`;
  ctx.textBaseline = 'middle';
  ctx.textAlign = 'right';
  rl.forEach((s, i) => ctx.fillText(cutLabel(s), left - 4, top + i * cell + cell / 2));
  cl.forEach((s, j) => {
    ctx.save();
    ctx.translate(left + j * cell + cell / 2, top - 4);
    ctx.rotate(-Math.PI / 2);
    ctx.textAlign = 'left';
    ctx.fillText(cutLabel(s), 0, 0);
    ctx.restore();
  });
}

// The readout of the cell under the pointer, or moved to with the arrow keys once focused.
function heatmapReadout(canvas, g, matrix) {
  const { n, m, rl, cl, left, top, cell } = g;
  const readout = h('div.readout.muted', { 'aria-live': 'polite' }, 'point at a cell (or focus and use the arrow keys)');
  const show = (i, j) => {
    if (i < 0 || j < 0 || i >= n || j >= m) return;
    readout.textContent = `query ${i}${rl[i] ? ` “${rl[i]}”` : ''} → key ${j}${cl[j] ? ` “${cl[j]}”` : ''}: ${fmt(matrix[i][j], 3)}`;
  };
  canvas.addEventListener('mousemove', (ev) => {
    const r = canvas.getBoundingClientRect();
    show(Math.floor((ev.clientY - r.top - top) / cell), Math.floor((ev.clientX - r.left - left) / cell));
  });
  let cur = [0, 0];
  canvas.addEventListener('keydown', (ev) => {
    const d = { ArrowUp: [-1, 0], ArrowDown: [1, 0], ArrowLeft: [0, -1], ArrowRight: [0, 1] }[ev.key];
    if (!d) return;
    ev.preventDefault();
    cur = [Math.max(0, Math.min(n - 1, cur[0] + d[0])), Math.max(0, Math.min(m - 1, cur[1] + d[1]))];
    show(cur[0], cur[1]);
  });
  return readout;
}

// PNG, SVG (the map painted once more onto a recorder) and CSV links for a heat map.
function heatmapLinks(canvas, g, o, title, exportName) {
  return h('div.toolbar.small', {},
    makeLink('PNG', `${safeName(exportName)}.png`, `download the ${title || 'heat map'} as PNG`, () => canvas.toDataURL('image/png')),
    makeLink('SVG', `${safeName(exportName)}.svg`, `download the ${title || 'heat map'} as SVG`, () => {
      const rec = new SvgRecorder(g.W, g.H, g.ctx0);
      paintHeatmap(rec, g, o);
      return svgUrl(rec.toSvg());
    }),
    makeLink('CSV', `${safeName(exportName)}.csv`, `download the ${title || 'heat map'}'s data as CSV`,
      () => csvUrl(matrixCsv(o.matrix, g.rl, g.cl, 'query/key'))));
}

// A heat map on a canvas: rows are queries, columns keys, labels optional (token pieces).
// Returns a <div> holding the canvas and a live readout of the cell under the pointer or focus.
// exportName: when set, PNG and CSV links for the map are added under it.
export function heatmap(matrix, { rowLabels, colLabels, title, max, rowScale, exportName } = {}) {
  const g = heatmapLayout(matrix, rowLabels, colLabels);
  const { n, m, W, H } = g;
  const dpr = window.devicePixelRatio || 1;
  const canvas = h('canvas.heatmap', { width: Math.round(W * dpr), height: Math.round(H * dpr), tabindex: 0, role: 'img',
    'aria-label': `${title || 'heat map'}: ${n} by ${m}` });
  canvas.style.width = `${W}px`;
  canvas.style.height = `${H}px`;
  canvas.dataset.rows = String(n);
  canvas.dataset.cols = String(m);
  const o = { matrix, rowScale, masked: cssVar('--masked', '#eee'), fg: cssVar('--fg', '#1d1f24'), bg: cssVar('--card', '#fff') };
  let vmax = max;
  if (vmax === undefined) { vmax = 0; for (const r of matrix) for (const v of r) if (v > vmax) vmax = v; }
  if (!(vmax > 0)) vmax = 1;
  o.vmax = vmax;
  const ctx = canvas.getContext('2d');
  ctx.scale(dpr, dpr);
  paintHeatmap(ctx, g, o);
  const readout = heatmapReadout(canvas, g, matrix);
  const links = exportName ? heatmapLinks(canvas, g, o, title, exportName) : null;
  return h('div.heatmap-wrap', {}, h('div.heatmap-scroll', {}, canvas), readout, links);
}

// Probe heat map tables have a first column naming the row and the rest as values.
function heatmapFromTable(table, opts) {
  const matrix = table.rows.map((r) => r.slice(1).map(Number));
  return heatmap(matrix, { ...opts, colLabels: table.columns.slice(1), rowLabels: table.rows.map((r) => String(r[0])) });
}
