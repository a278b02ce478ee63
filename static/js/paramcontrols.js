// Inputs for probe parameters, built from /api/probe-kinds: a slider with a number box for scalars
// (logarithmic when the range spans orders of magnitude), text for lists and vectors, a menu for
// choices. Each control reports its parsed value and can show the server's error for it.
import { h } from './dom.js';

const STEPS = 1000;

function sliderMap(p) {
  const isInt = p.type === 'int';
  const min = p.min ?? 0, max = p.max ?? 100;
  const logScale = max > 0 && max / Math.max(min, isInt ? 1 : 1e-3) > 200;
  const even = /\beven\b/.test(p.help || '');
  const snap = (v) => {
    if (isInt) { v = Math.round(v); if (even) v = Math.max(min, 2 * Math.round(v / 2)); }
    return Math.min(max, Math.max(min, v));
  };
  if (!logScale) {
    return { toPos: (v) => Math.round(((v - min) / (max - min || 1)) * STEPS), toVal: (pos) => snap(min + (pos / STEPS) * (max - min)), snap };
  }
  const lo = Math.max(min, isInt ? 1 : Math.min(1e-3, max / 1e6));
  const L = Math.log(lo), R = Math.log(max);
  return {
    toPos: (v) => (v <= 0 && min <= 0 ? 0 : Math.round(((Math.log(Math.max(v, lo)) - L) / (R - L)) * STEPS)),
    toVal: (pos) => (pos === 0 && min <= 0 ? min : snap(isInt ? Math.round(Math.exp(L + (pos / STEPS) * (R - L))) : Number(Math.exp(L + (pos / STEPS) * (R - L)).toPrecision(3)))),
    snap,
  };
}

function parseList(text, isInt) {
  const parts = text.split(/[\s,;]+/).filter(Boolean);
  const out = parts.map(Number);
  if (out.some((v) => !Number.isFinite(v) || (isInt && !Number.isInteger(v)))) return { error: `write ${isInt ? 'whole ' : ''}numbers separated by commas` };
  return { value: out };
}

// Returns {el, get(): {value}|{error}, set(v), setError(msg), name}; onChange is called after each edit.
export function paramControl(kind, p, onChange) {
  const id = `p-${kind}-${p.name}`;
  const err = h('div.field-error', { id: `${id}-error`, role: 'alert', 'aria-live': 'polite' });
  const help = h('div.help.muted', { id: `${id}-help` }, [p.help, p.min !== undefined && p.max !== undefined && p.type !== 'choice' && p.type !== 'text'
    ? `${p.min} … ${p.max}` : ''].filter(Boolean).join(' · '));
  const describedby = `${id}-help ${id}-error`;
  let get, set, input;
  const changed = () => { err.textContent = ''; onChange(); };

  if (p.type === 'int' || p.type === 'number') {
    const map = sliderMap(p);
    const range = h('input.slider', { type: 'range', id: `${id}-range`, min: 0, max: STEPS, step: 1, 'aria-label': `${p.name} slider`,
      'aria-describedby': describedby, dataset: { param: p.name } });
    input = h('input.num', { type: 'number', id, min: p.min, max: p.max, step: p.type === 'int' ? 1 : 'any', 'aria-describedby': describedby,
      dataset: { param: p.name } });
    set = (v) => { input.value = String(v); range.value = String(map.toPos(Number(v))); range.setAttribute('aria-valuetext', String(v)); };
    get = () => {
      const v = Number(input.value);
      if (input.value.trim() === '' || !Number.isFinite(v)) return { error: `${p.name} must be a number` };
      if (p.type === 'int' && !Number.isInteger(v)) return { error: `${p.name} must be a whole number` };
      return { value: v };
    };
    range.addEventListener('input', () => {
      const v = map.toVal(Number(range.value));
      input.value = String(v);
      range.setAttribute('aria-valuetext', String(v));
      changed();
    });
    input.addEventListener('input', () => { const v = Number(input.value); if (Number.isFinite(v)) range.value = String(map.toPos(v)); changed(); });
    set(p.default);
    return { name: p.name, get, set, setError: (m) => { err.textContent = m || ''; }, el: h('div.param', { dataset: { param: p.name } },
      h('label', { for: id }, p.name), h('div.param-inputs', {}, range, input), help, err) };
  }
  if (p.type === 'choice') {
    input = h('select', { id, 'aria-describedby': describedby, dataset: { param: p.name } }, p.choices.map((c) => h('option', { value: c }, c)));
    input.value = p.default;
    input.addEventListener('change', changed);
    get = () => ({ value: input.value });
    set = (v) => { input.value = v; };
  } else if (p.type === 'text') {
    input = h('textarea', { id, rows: 3, 'aria-describedby': describedby, dataset: { param: p.name } });
    input.value = p.default ?? '';
    input.addEventListener('input', changed);
    get = () => ({ value: input.value });
    set = (v) => { input.value = v; };
  } else { // int_list, number_list, vector
    const isInt = p.type === 'int_list';
    input = h('input', { type: 'text', id, 'aria-describedby': describedby, dataset: { param: p.name },
      placeholder: p.type === 'vector' ? 'empty: random' : '' });
    input.value = Array.isArray(p.default) ? p.default.join(', ') : '';
    input.addEventListener('input', changed);
    get = () => {
      if (p.type === 'vector' && input.value.trim() === '') return { value: null };
      return parseList(input.value, isInt);
    };
    set = (v) => { input.value = Array.isArray(v) ? v.join(', ') : v == null ? '' : String(v); };
  }
  return { name: p.name, get, set, setError: (m) => { err.textContent = m || ''; }, el: h('div.param', { dataset: { param: p.name } },
    h('label', { for: id }, p.name), input, help, err) };
}
