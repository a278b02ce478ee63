import { authHeaders, getToken } from './api.js';

// Tiny DOM helpers shared by the views. Text always goes through textContent, never innerHTML,
// because run names, tags and token pieces come from users and models.

export const $ = (sel, root = document) => root.querySelector(sel);
export const $$ = (sel, root = document) => [...root.querySelectorAll(sel)];

// h('div.card#id', {attrs}, ...children): a compact element builder.
export function h(spec, attrs = {}, ...children) {
  const m = /^([a-z0-9-]+)?((?:[.#][\w-]+)*)$/i.exec(spec);
  const el = document.createElement((m && m[1]) || 'div');
  if (m && m[2]) {
    for (const part of m[2].match(/[.#][\w-]+/g) || []) {
      if (part[0] === '.') el.classList.add(part.slice(1)); else el.id = part.slice(1);
    }
  }
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith('on') && typeof v === 'function') el.addEventListener(k.slice(2), v);
    else if (k === 'dataset') Object.assign(el.dataset, v);
    else if (k === 'style' && typeof v === 'object') Object.assign(el.style, v);
    else if (k in el && typeof v !== 'string') el[k] = v;
    else el.setAttribute(k, v === true ? '' : String(v));
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of children.flat(Infinity)) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
}

export function clear(el, ...children) { el.replaceChildren(); append(el, children); return el; }

// Numbers for people: `digits` significant digits, exponent form for the very small and very large.
// Trailing zeros are kept ("6.800", not "6.8"), so a figure is always written to the same precision
// and two cards showing 6.79996 and 6.7994 read "6.800" and "6.799", not "6.8" and "6.799".
export function fmt(v, digits = 4) {
  if (v === null || v === undefined || v === '') return '–';
  if (typeof v !== 'number') return String(v);
  if (!Number.isFinite(v)) return String(v);
  if (Number.isInteger(v) && Math.abs(v) < 1e9) return String(v);
  const a = Math.abs(v);
  if (a !== 0 && (a < 1e-3 || a >= 1e6)) return v.toExponential(Math.max(1, digits - 2));
  const p = v.toPrecision(digits);
  return p.includes('e') ? String(Number(p)) : p; // 12345.6 to 4 digits: "12350", not "1.235e+4"
}

// A config value for people (learning rates, ratios, names): numbers to at most six significant
// digits with nothing after the last one that counts (lr 3e-4, not 0.00029999999999999997 or
// 3.0000e-4), booleans and strings as they are.
export function fmtConfig(v) {
  if (v === undefined || v === null) return '–';
  if (typeof v !== 'number') return String(v);
  if (!Number.isFinite(v) || (Number.isInteger(v) && Math.abs(v) < 1e9)) return String(v);
  const r = Number(v.toPrecision(6));
  const a = Math.abs(r);
  return a !== 0 && (a < 1e-3 || a >= 1e6) ? r.toExponential().replace('e+', 'e') : String(r);
}

export function fmtDuration(s) {
  if (s === null || s === undefined || !Number.isFinite(s)) return '';
  s = Math.max(0, Math.round(s));
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m ${String(s % 60).padStart(2, '0')}s`;
  return `${Math.floor(s / 3600)}h ${String(Math.floor((s % 3600) / 60)).padStart(2, '0')}m`;
}

export function fmtTime(unix) {
  if (!unix) return '';
  const d = new Date(unix * 1000);
  return d.toLocaleString(undefined, { month: 'short', day: 'numeric', hour: '2-digit', minute: '2-digit' });
}

// Calls fn at most once per animation frame however often it is asked; live streams can deliver
// dozens of events per second and the charts only need to redraw at screen rate.
export function frameThrottle(fn) {
  let pending = false;
  return () => {
    if (pending) return;
    pending = true;
    requestAnimationFrame(() => { pending = false; fn(); });
  };
}

// At most one call per `ms`, the last request always honoured (trailing call).
export function throttle(fn, ms) {
  let last = 0, timer = null;
  return () => {
    if (timer) return;
    const wait = Math.max(0, last + ms - performance.now());
    timer = setTimeout(() => { timer = null; last = performance.now(); fn(); }, wait);
  };
}

export function debounce(fn, ms) {
  let t = null;
  return (...args) => { clearTimeout(t); t = setTimeout(() => fn(...args), ms); };
}

export function announce(text) {
  const el = document.getElementById('announcer');
  if (el) el.textContent = text;
}

// Re-renders inside root without losing keyboard focus: the focused control is found again by its
// id or aria-label (buttons in tables and headers carry one naming their run).
export function keepFocus(root, render) {
  const a = document.activeElement;
  const inside = a && root.contains(a) && a !== root;
  const key = inside ? (a.id ? `#${CSS.escape(a.id)}` : a.getAttribute('aria-label') ? `[aria-label="${CSS.escape(a.getAttribute('aria-label'))}"]` : null) : null;
  render();
  if (key) root.querySelector(key)?.focus();
}

// A download link that also works when reads need the token: a plain <a download> cannot send an
// Authorization header, so with a token the file is fetched and handed over as a blob.
export function downloadLink(href, filename, label, cls = 'a') {
  const a = h(cls, { href, download: filename }, label);
  a.addEventListener('click', async (ev) => {
    if (!getToken()) return;
    ev.preventDefault();
    const res = await fetch(href, { headers: authHeaders() });
    if (!res.ok) { window.alert(`download failed: HTTP ${res.status}`); return; }
    const url = URL.createObjectURL(await res.blob());
    const tmp = h('a', { href: url, download: filename });
    document.body.append(tmp);
    tmp.click();
    tmp.remove();
    setTimeout(() => URL.revokeObjectURL(url), 10000);
  });
  return a;
}
