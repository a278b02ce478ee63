// Form fields generated from an OpenAPI object schema (the API's RunConfig), so bounds, enums and
// defaults shown on the page are the ones the server enforces. The same schema drives a client-side
// check; whatever slips past it (cross-field rules such as "n_head must divide d_model") comes back
// from the server as a 422 with a field name and is shown under that field.
import { h } from './dom.js';

// Fields shown first, in this order; the rest go under "More settings".
const PRIMARY = ['attention', 'corpus', 'n_layer', 'n_head', 'd_model', 'seq_len', 'batch', 'steps', 'lr',
  'eval_every', 'checkpoint_every', 'seed'];

function labelFor(name) { return name.replace(/_/g, ' '); }

function boundsText(p) {
  const parts = [];
  if (p.enum) return '';
  if (p.minimum !== undefined) parts.push(`${p.exclusiveMinimum ? '>' : '≥'} ${p.minimum}`);
  if (p.maximum !== undefined) parts.push(`≤ ${p.maximum}`);
  return parts.join(', ');
}

// Validates one value against its property schema; returns a message or null.
export function checkValue(name, p, raw) {
  if (raw === '' || raw === undefined) return null; // empty: the server's default
  if (p.type === 'integer' || p.type === 'number') {
    const v = Number(raw);
    if (!Number.isFinite(v)) return `${name} must be a number`;
    if (p.type === 'integer' && !Number.isInteger(v)) return `${name} must be a whole number`;
    if (p.minimum !== undefined && (p.exclusiveMinimum ? v <= p.minimum : v < p.minimum))
      return `${name} must be ${p.exclusiveMinimum ? '>' : '>='} ${p.minimum}`;
    if (p.maximum !== undefined && v > p.maximum) return `${name} must be <= ${p.maximum}`;
  } else if (p.type === 'string') {
    if (p.enum && !p.enum.includes(raw)) return `${name} must be one of ${p.enum.join(', ')}`;
    if (p.pattern && !new RegExp(p.pattern).test(raw)) return `${name} must match ${p.pattern}`;
  }
  return null;
}

// The control of one field: a menu for an enum, a checkbox for a boolean, a number box within the
// bounds, else a text box (tied to its list of choices when it has one); set to the initial value.
function fieldInput(name, p, id, initial, list) {
  let input;
  if (p.enum) {
    input = h('select', { id, name }, p.enum.map((v) => h('option', { value: v }, v)));
    if (initial !== undefined) input.value = initial;
  } else if (p.type === 'boolean') {
    input = h('input', { id, name, type: 'checkbox' });
    input.checked = initial === undefined ? false : !!initial;
  } else if (p.type === 'integer' || p.type === 'number') {
    input = h('input', { id, name, type: 'number', inputmode: p.type === 'integer' ? 'numeric' : 'decimal',
      step: p.type === 'integer' ? 1 : 'any', min: p.minimum, max: p.maximum,
      placeholder: p.default === undefined ? 'auto' : String(p.default) });
    if (initial !== undefined) input.value = String(initial);
  } else {
    input = h('input', { id, name, type: 'text', placeholder: p.default ?? '', list: list ? `${id}-list` : undefined,
      pattern: p.pattern });
    if (initial !== undefined) input.value = String(initial);
  }
  input.dataset.field = name;
  return input;
}

// One field's row: label, control, its choices, help (description, bounds, default) and error line.
function fieldRow(name, p, opts) {
  const id = `cfg-${name}`;
  const initial = opts.values && name in opts.values ? opts.values[name] : p.default;
  const input = fieldInput(name, p, id, initial, opts.choices?.[name]);
  const err = h('div.field-error', { id: `${id}-error`, role: 'alert', 'aria-live': 'polite' });
  input.setAttribute('aria-describedby', `${id}-help ${id}-error`);
  const help = [p.description, boundsText(p), p.default !== undefined && !p.enum && p.type !== 'boolean' ? `default ${p.type === 'string' ? `“${p.default}”` : p.default}` : '']
    .filter(Boolean).join(' · ');
  const row = h('div.field', { dataset: { field: name } },
    h('label', { for: id }, labelFor(name)),
    input,
    opts.choices?.[name] ? h('datalist', { id: `${id}-list` }, opts.choices[name].map((v) => h('option', { value: v }))) : null,
    h('div.help.muted', { id: `${id}-help` }, help),
    err);
  return { row, input, err };
}

// Values that differ from an empty field; numbers as numbers. Fields left empty are omitted so the
// server applies its own default (tau_init's depends on the head size).
function formValues(inputs, props) {
  const out = {};
  for (const [name, input] of inputs) {
    const p = props[name];
    if (p.type === 'boolean') { out[name] = input.checked; continue; }
    const raw = input.value.trim();
    if (raw === '') continue;
    out[name] = p.type === 'integer' || p.type === 'number' ? Number(raw) : raw;
  }
  return out;
}

function applyValues(inputs, v) {
  for (const [name, val] of Object.entries(v)) {
    const input = inputs.get(name);
    if (!input) continue;
    if (input.type === 'checkbox') input.checked = !!val; else input.value = String(val);
  }
}

// schema: the RunConfig object schema. opts.values: initial values overriding defaults;
// opts.choices: {field: [values]} to offer a list (e.g. corpus names) next to free text.
export function schemaFields(schema, opts = {}) {
  const props = schema.properties || {};
  const names = Object.keys(props);
  const order = [...PRIMARY.filter((n) => props[n]), ...names.filter((n) => !PRIMARY.includes(n))];
  const inputs = new Map();
  const errors = new Map();
  const primary = h('div.fields');
  const more = h('div.fields');

  for (const name of order) {
    const { row, input, err } = fieldRow(name, props[name], opts);
    inputs.set(name, input);
    errors.set(name, err);
    (PRIMARY.includes(name) ? primary : more).append(row);
    input.addEventListener('input', () => setError(name, null));
  }

  function setError(name, msg) {
    const err = errors.get(name);
    if (!err) return false;
    err.textContent = msg || '';
    const input = inputs.get(name);
    if (msg) input.setAttribute('aria-invalid', 'true'); else input.removeAttribute('aria-invalid');
    if (msg && !more.contains(input)) return true;
    if (msg) more.closest('details')?.setAttribute('open', '');
    return true;
  }

  function validate() {
    let first = null;
    for (const [name, input] of inputs) {
      if (props[name].type === 'boolean') continue;
      const msg = checkValue(name, props[name], input.value.trim());
      setError(name, msg);
      if (msg && !first) first = input;
    }
    return first;
  }

  function clearErrors() { for (const name of inputs.keys()) setError(name, null); }

  const el = h('div.schema-form', {}, primary,
    h('details.more', {}, h('summary', {}, `More settings (${more.children.length})`), more));
  return { el, values: () => formValues(inputs, props), validate, setError, clearErrors, setValues: (v) => applyValues(inputs, v), inputs };
}

// Maps the server's field path to our field name: "config.n_head", "base.n_head",
// "variants[1].config.n_head" all mean n_head.
export function fieldFromPath(path) {
  if (!path) return null;
  const m = /(?:^|\.)(?:config|base|overrides)\.([a-z0-9_]+)$/.exec(path) || /^([a-z0-9_]+)$/.exec(path);
  return m ? m[1] : null;
}
