// Charts as SVG files. A canvas records nothing of what was drawn on it, so the chart is drawn once
// more onto a recorder: an object with the drawing calls of a 2D canvas context (paths, rectangles,
// arcs, text, transforms, clipping, save/restore, dashes, alpha) that writes each stroke, fill and
// text as an SVG element instead of pixels. Chart.js draws through its canvas's context, so for the
// length of one chart.draw() that context's calls are pointed at a recorder (own properties that
// shadow the prototype's, removed afterwards) and the chart is then drawn again for real. Our heat
// maps call their painter with a recorder directly. Kept free of Chart.js so node can test it.
import { h } from './dom.js';

const esc = (s) => String(s).replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');
const r3 = (v) => (Math.abs(v) < 1e-9 ? 0 : Math.round(v * 1000) / 1000);

// A canvas colour as SVG paint and opacity: rgba()/hsla() become their opaque form plus an opacity
// (SVG 1.1 viewers do not read alpha inside the colour); gradients and patterns (objects) paint nothing.
export function svgPaint(c) {
  if (typeof c !== 'string') return { paint: 'none', opacity: 1 };
  const m = /^(rgb|hsl)a\(\s*([^,]+),\s*([^,]+),\s*([^,]+),\s*([\d.]+%?)\s*\)$/i.exec(c.trim());
  if (m) {
    const a = m[5].endsWith('%') ? Number(m[5].slice(0, -1)) / 100 : Number(m[5]);
    return { paint: `${m[1].toLowerCase()}(${m[2]}, ${m[3]}, ${m[4]})`, opacity: Number.isFinite(a) ? a : 1 };
  }
  return { paint: c, opacity: 1 };
}

const ANCHOR = { start: 'start', left: 'start', center: 'middle', right: 'end', end: 'end' };
const BASELINE = { top: 'text-before-edge', hanging: 'hanging', middle: 'central', bottom: 'text-after-edge', ideographic: 'ideographic' };
const STYLE_KEYS = ['fillStyle', 'strokeStyle', 'lineWidth', 'lineCap', 'lineJoin', 'miterLimit', 'lineDashOffset', 'globalAlpha',
  'font', 'textAlign', 'textBaseline', 'globalCompositeOperation', 'direction', 'imageSmoothingEnabled', 'shadowBlur', 'shadowColor',
  'shadowOffsetX', 'shadowOffsetY', 'filter', 'letterSpacing', 'fontKerning', 'textRendering', 'wordSpacing', 'fontStretch',
  'fontVariantCaps', 'imageSmoothingQuality'];
const METHODS = ['save', 'restore', 'beginPath', 'closePath', 'moveTo', 'lineTo', 'bezierCurveTo', 'quadraticCurveTo', 'arc', 'arcTo',
  'ellipse', 'rect', 'roundRect', 'fill', 'stroke', 'clip', 'fillRect', 'strokeRect', 'clearRect', 'fillText', 'strokeText', 'measureText',
  'translate', 'rotate', 'scale', 'transform', 'setTransform', 'resetTransform', 'getTransform', 'setLineDash', 'getLineDash',
  'drawImage', 'createLinearGradient', 'createRadialGradient', 'createConicGradient', 'createPattern', 'isPointInPath', 'isPointInStroke',
  'putImageData', 'getImageData', 'createImageData', 'drawFocusIfNeeded', 'reset'];

function multiply(m, n) { // m · n, both [a, b, c, d, e, f]
  return [m[0] * n[0] + m[2] * n[1], m[1] * n[0] + m[3] * n[1], m[0] * n[2] + m[2] * n[3], m[1] * n[2] + m[3] * n[3],
    m[0] * n[4] + m[2] * n[5] + m[4], m[1] * n[4] + m[3] * n[5] + m[5]];
}

// A 2D-context look-alike that writes SVG. width, height: the drawing's size in CSS pixels;
// measure: a real 2D context for measureText (text widths decide Chart.js's layout), or null.
export class SvgRecorder {
  constructor(width, height, measure = null) {
    this.width = width;
    this.height = height;
    this.measurer = measure;
    this.out = [];
    this.defs = [];
    this.clipSeq = 0;
    this.path = [];
    this.cx = 0; this.cy = 0;      // current point, untransformed
    this.st = { fillStyle: '#000', strokeStyle: '#000', lineWidth: 1, lineCap: 'butt', lineJoin: 'miter', miterLimit: 10, lineDashOffset: 0,
      globalAlpha: 1, font: '10px sans-serif', textAlign: 'start', textBaseline: 'alphabetic', globalCompositeOperation: 'source-over',
      direction: 'ltr', dash: [], m: [1, 0, 0, 1, 0, 0], clip: null };
    this.stack = [];
    for (const k of STYLE_KEYS) {
      if (k in this) continue;
      Object.defineProperty(this, k, { get: () => this.st[k], set: (v) => { this.st[k] = v; }, enumerable: true });
    }
  }

  // transforms
  pt(x, y) { const m = this.st.m; return [m[0] * x + m[2] * y + m[4], m[1] * x + m[3] * y + m[5]]; }
  scaleFactor() { const m = this.st.m; return Math.sqrt(Math.abs(m[0] * m[3] - m[1] * m[2])) || 1; }
  save() { this.stack.push({ ...this.st, dash: [...this.st.dash], m: [...this.st.m] }); }
  restore() { if (this.stack.length) this.st = this.stack.pop(); }
  translate(x, y) { this.st.m = multiply(this.st.m, [1, 0, 0, 1, x, y]); }
  scale(x, y) { this.st.m = multiply(this.st.m, [x, 0, 0, y, 0, 0]); }
  rotate(a) { const c = Math.cos(a), s = Math.sin(a); this.st.m = multiply(this.st.m, [c, s, -s, c, 0, 0]); }
  transform(a, b, c, d, e, f) { this.st.m = multiply(this.st.m, [a, b, c, d, e, f]); }
  setTransform(a, b, c, d, e, f) {
    if (a && typeof a === 'object') ({ a, b, c, d, e, f } = a);
    this.st.m = a === undefined ? [1, 0, 0, 1, 0, 0] : [a, b, c, d, e, f];
  }
  resetTransform() { this.st.m = [1, 0, 0, 1, 0, 0]; }
  getTransform() { const [a, b, c, d, e, f] = this.st.m; return { a, b, c, d, e, f, is2D: true, isIdentity: a === 1 && !b && !c && d === 1 && !e && !f }; }
  setLineDash(d) { this.st.dash = Array.isArray(d) ? d.filter((x) => Number.isFinite(x) && x >= 0) : []; }
  getLineDash() { return [...this.st.dash]; }

  // paths, kept in page coordinates (transformed as they are added)
  beginPath() { this.path = []; }
  closePath() { if (this.path.length) this.path.push('Z'); }
  moveTo(x, y) { const [a, b] = this.pt(x, y); this.path.push(`M${r3(a)} ${r3(b)}`); this.cx = x; this.cy = y; }
  lineTo(x, y) {
    if (!this.path.length) { this.moveTo(x, y); return; }
    const [a, b] = this.pt(x, y); this.path.push(`L${r3(a)} ${r3(b)}`); this.cx = x; this.cy = y;
  }
  bezierCurveTo(x1, y1, x2, y2, x, y) {
    if (!this.path.length) this.moveTo(x1, y1);
    const p = [this.pt(x1, y1), this.pt(x2, y2), this.pt(x, y)].flat().map(r3);
    this.path.push(`C${p.join(' ')}`); this.cx = x; this.cy = y;
  }
  quadraticCurveTo(x1, y1, x, y) {
    if (!this.path.length) this.moveTo(x1, y1);
    const p = [this.pt(x1, y1), this.pt(x, y)].flat().map(r3);
    this.path.push(`Q${p.join(' ')}`); this.cx = x; this.cy = y;
  }
  // Arcs and ellipses as short line segments: exact enough at screen size, and right under any transform.
  ellipse(x, y, rx, ry, rot, a0, a1, ccw = false) {
    let sweep = a1 - a0;
    if (!ccw && sweep < 0) sweep = sweep % (2 * Math.PI) + 2 * Math.PI;
    if (ccw && sweep > 0) sweep = sweep % (2 * Math.PI) - 2 * Math.PI;
    if (!ccw && a1 - a0 >= 2 * Math.PI) sweep = 2 * Math.PI;
    if (ccw && a0 - a1 >= 2 * Math.PI) sweep = -2 * Math.PI;
    const r = Math.max(rx, ry) * this.scaleFactor();
    const n = Math.max(4, Math.min(96, Math.ceil((Math.abs(sweep) * Math.max(r, 1)) / 3)));
    const cr = Math.cos(rot), sr = Math.sin(rot);
    for (let i = 0; i <= n; i++) {
      const t = a0 + (sweep * i) / n;
      const px = rx * Math.cos(t), py = ry * Math.sin(t);
      const X = x + px * cr - py * sr, Y = y + px * sr + py * cr;
      if (i === 0 && this.path.length) this.lineTo(X, Y); else if (i === 0) this.moveTo(X, Y); else this.lineTo(X, Y);
    }
  }
  arc(x, y, r, a0, a1, ccw = false) { this.ellipse(x, y, r, r, 0, a0, a1, ccw); }
  arcTo(x1, y1) { this.lineTo(x1, y1); }
  rect(x, y, w, hh) { this.moveTo(x, y); this.lineTo(x + w, y); this.lineTo(x + w, y + hh); this.lineTo(x, y + hh); this.closePath(); this.moveTo(x, y); }
  roundRect(x, y, w, hh) { this.rect(x, y, w, hh); }

  // painting
  attrsCommon() {
    return this.st.clip ? ` clip-path="url(#${this.st.clip})"` : '';
  }
  fill(a, b) {
    const rule = typeof a === 'string' ? a : typeof b === 'string' ? b : 'nonzero';
    if (!this.path.length) return;
    const { paint, opacity } = svgPaint(this.st.fillStyle);
    if (paint === 'none') return;
    const op = opacity * this.st.globalAlpha;
    this.out.push(`<path d="${this.path.join('')}" fill="${esc(paint)}"${op < 1 ? ` fill-opacity="${r3(op)}"` : ''}${rule === 'evenodd' ? ' fill-rule="evenodd"' : ''}${this.attrsCommon()}/>`);
  }
  stroke() {
    if (!this.path.length) return;
    const { paint, opacity } = svgPaint(this.st.strokeStyle);
    if (paint === 'none' || !(this.st.lineWidth > 0)) return;
    const k = this.scaleFactor(), op = opacity * this.st.globalAlpha;
    const dash = this.st.dash.length ? ` stroke-dasharray="${this.st.dash.map((d) => r3(d * k)).join(' ')}"${this.st.lineDashOffset ? ` stroke-dashoffset="${r3(this.st.lineDashOffset * k)}"` : ''}` : '';
    this.out.push(`<path d="${this.path.join('')}" fill="none" stroke="${esc(paint)}" stroke-width="${r3(this.st.lineWidth * k)}"` +
      `${op < 1 ? ` stroke-opacity="${r3(op)}"` : ''}${this.st.lineCap !== 'butt' ? ` stroke-linecap="${this.st.lineCap}"` : ''}` +
      `${this.st.lineJoin !== 'miter' ? ` stroke-linejoin="${this.st.lineJoin}"` : ''}${dash}${this.attrsCommon()}/>`);
  }
  clip() {
    const id = `clip${++this.clipSeq}`;
    const outer = this.st.clip ? ` clip-path="url(#${this.st.clip})"` : '';
    this.defs.push(`<clipPath id="${id}"${outer}><path d="${this.path.join('') || 'M0 0'}"/></clipPath>`);
    this.st.clip = id;
  }
  fillRect(x, y, w, hh) { const p = this.path; this.beginPath(); this.rect(x, y, w, hh); this.fill(); this.path = p; }
  strokeRect(x, y, w, hh) { const p = this.path; this.beginPath(); this.rect(x, y, w, hh); this.stroke(); this.path = p; }
  clearRect() { /* the drawing starts empty; the chart paints its own background */ }
  text(s, x, y, mode) {
    const style = mode === 'fill' ? this.st.fillStyle : this.st.strokeStyle;
    const { paint, opacity } = svgPaint(style);
    if (paint === 'none' || s === undefined || s === null || s === '') return;
    const op = opacity * this.st.globalAlpha;
    const m = this.st.m.map(r3);
    const ident = m[0] === 1 && m[1] === 0 && m[2] === 0 && m[3] === 1;
    const pos = ident ? ` x="${r3(x + m[4])}" y="${r3(y + m[5])}"` : ` x="${r3(x)}" y="${r3(y)}" transform="matrix(${m.join(' ')})"`;
    const anchor = ANCHOR[this.st.textAlign] || 'start', base = BASELINE[this.st.textBaseline];
    const paintAttr = mode === 'fill' ? `fill="${esc(paint)}"${op < 1 ? ` fill-opacity="${r3(op)}"` : ''}`
      : `fill="none" stroke="${esc(paint)}" stroke-width="${r3(this.st.lineWidth)}"`;
    this.out.push(`<text${pos} style="font: ${esc(this.st.font)}; white-space: pre"${anchor !== 'start' ? ` text-anchor="${anchor}"` : ''}` +
      `${base ? ` dominant-baseline="${base}"` : ''} ${paintAttr}${this.attrsCommon()}>${esc(s)}</text>`);
  }
  fillText(s, x, y) { this.text(s, x, y, 'fill'); }
  strokeText(s, x, y) { this.text(s, x, y, 'stroke'); }
  measureText(s) {
    if (this.measurer) { this.measurer.font = this.st.font; return this.measurer.measureText(s); }
    const px = Number((/(\d+(?:\.\d+)?)px/.exec(this.st.font) || [])[1]) || 10;
    return { width: String(s).length * px * 0.55, actualBoundingBoxAscent: px * 0.8, actualBoundingBoxDescent: px * 0.2 };
  }

  // what a chart does not use, or cannot be written as SVG here
  drawImage() {}
  createLinearGradient() { return { addColorStop() {} }; }
  createRadialGradient() { return { addColorStop() {} }; }
  createConicGradient() { return { addColorStop() {} }; }
  createPattern() { return null; }
  isPointInPath() { return false; }
  isPointInStroke() { return false; }
  putImageData() {}
  getImageData(x, y, w, hh) { return { width: w, height: hh, data: new Uint8ClampedArray(Math.max(0, w * hh * 4)) }; }
  createImageData(w, hh) { return { width: w, height: hh, data: new Uint8ClampedArray(Math.max(0, w * hh * 4)) }; }
  drawFocusIfNeeded() {}
  reset() { this.out = []; this.defs = []; this.path = []; this.stack = []; }

  toSvg() {
    return `<?xml version="1.0" encoding="UTF-8"?>\n<svg xmlns="http://www.w3.org/2000/svg" width="${r3(this.width)}" height="${r3(this.height)}" ` +
      `viewBox="0 0 ${r3(this.width)} ${r3(this.height)}">\n${this.defs.length ? `<defs>${this.defs.join('')}</defs>\n` : ''}${this.out.join('\n')}\n</svg>\n`;
  }
}

// Points a real 2D context at a recorder for the length of fn(); returns what fn returned.
export function recordInto(ctx, rec, fn) {
  const own = [];
  try {
    for (const k of METHODS) {
      if (typeof rec[k] !== 'function') continue;
      Object.defineProperty(ctx, k, { value: rec[k].bind(rec), configurable: true, writable: true });
      own.push(k);
    }
    for (const k of STYLE_KEYS) {
      Object.defineProperty(ctx, k, { get: () => rec.st[k], set: (v) => { rec.st[k] = v; }, configurable: true });
      own.push(k);
    }
    return fn();
  } finally {
    for (const k of own) delete ctx[k];
  }
}

// A Chart.js chart as an SVG document (a string), drawn at its size on the page.
export function chartToSvg(chart) {
  const ctx = chart.ctx;
  const measure = document.createElement('canvas').getContext('2d');
  const rec = new SvgRecorder(chart.width, chart.height, measure);
  try {
    recordInto(ctx, rec, () => chart.draw());
  } finally {
    chart.draw(); // the canvas again as it was
  }
  return rec.toSvg();
}

// An inline <svg> of the page as a standalone document: currentColor resolved to the text colour it
// has on the page, on the card's background.
export function inlineSvgDocument(svg) {
  const copy = svg.cloneNode(true);
  const cs = getComputedStyle(svg);
  copy.setAttribute('xmlns', 'http://www.w3.org/2000/svg');
  copy.setAttribute('color', cs.color);
  const vb = (copy.getAttribute('viewBox') || '').split(/\s+/).map(Number);
  if (vb.length === 4) {
    copy.setAttribute('width', String(vb[2]));
    copy.setAttribute('height', String(vb[3]));
    const bg = document.createElementNS('http://www.w3.org/2000/svg', 'rect');
    for (const [k, v] of Object.entries({ x: vb[0], y: vb[1], width: vb[2], height: vb[3] })) bg.setAttribute(k, String(v));
    let el = svg, fill = 'transparent';
    while (el && el.nodeType === 1) {
      const c = getComputedStyle(el).backgroundColor;
      if (c && c !== 'transparent' && !/rgba\(.*,\s*0\)$/.test(c)) { fill = c; break; }
      el = el.parentElement;
    }
    bg.setAttribute('fill', fill);
    copy.insertBefore(bg, copy.firstChild);
  }
  return `<?xml version="1.0" encoding="UTF-8"?>\n${new XMLSerializer().serializeToString(copy)}\n`;
}

// A download link whose file is made when it is pressed: make() returns a URL (data: or blob:) that
// becomes the link's href just before the browser follows it.
export function makeLink(text, filename, label, make) {
  const a = h('a.button.small.export', { href: '#', download: filename, 'aria-label': label, title: label }, text);
  let blobUrl = null;
  a.addEventListener('click', (ev) => {
    let url = null;
    try { url = make(); } catch (e) { console.warn('export failed', e); }
    if (!url) { ev.preventDefault(); return; }
    if (blobUrl && blobUrl !== url) URL.revokeObjectURL(blobUrl);
    if (url.startsWith('blob:')) blobUrl = url;
    a.href = url;
  });
  return a;
}

export const svgUrl = (text) => URL.createObjectURL(new Blob([text], { type: 'image/svg+xml;charset=utf-8' }));
export const safeName = (s) => String(s).replace(/[^\w.-]+/g, '_').replace(/^_+|_+$/g, '') || 'chart';

// An SVG link for an inline <svg> (getSvg returns it).
export function svgExportLink(getSvg, name, what) {
  return h('span.export-links', {}, makeLink('SVG', `${safeName(name)}.svg`, `download the ${what} as SVG`, () => {
    const el = getSvg();
    return el ? svgUrl(inlineSvgDocument(el)) : null;
  }));
}
