// Corpus upload from the browser: a text file (or pasted text) sent to POST /api/corpora?name=…&
// encoding=bytes|gpt2 with its progress (XMLHttpRequest's upload events: fetch has none), then the
// server's tokenizing followed until the corpus is ready or failed. The corpora already here are
// listed with their size and status.
import { api, authHeaders } from './api.js';
import { h, clear, fmt } from './dom.js';

const NAME_RE = /^[a-z0-9_-]{1,40}$/; // the server's rule for corpus names

function bytesText(n) {
  if (!(n >= 0)) return '';
  if (n < 1024) return `${n} B`;
  if (n < 1024 ** 2) return `${fmt(n / 1024, 3)} KiB`;
  return `${fmt(n / 1024 ** 2, 3)} MiB`;
}

// Sends body (a Blob or string) with progress; resolves to the parsed answer or rejects with the
// server's message. onProgress(loaded, total).
export function uploadWithProgress(url, body, onProgress) {
  return new Promise((resolve, reject) => {
    const xhr = new XMLHttpRequest();
    xhr.open('POST', url);
    xhr.setRequestHeader('Content-Type', 'text/plain; charset=utf-8');
    for (const [k, v] of Object.entries(authHeaders())) xhr.setRequestHeader(k, v);
    xhr.upload.addEventListener('progress', (e) => { if (e.lengthComputable) onProgress(e.loaded, e.total); });
    xhr.addEventListener('load', () => {
      let data = null;
      try { data = JSON.parse(xhr.responseText); } catch { /* not JSON */ }
      if (xhr.status >= 200 && xhr.status < 300) resolve(data);
      else reject(Object.assign(new Error(data?.error?.message || `HTTP ${xhr.status}`), { status: xhr.status, field: data?.error?.field }));
    });
    xhr.addEventListener('error', () => reject(new Error('the upload was interrupted (server unreachable)')));
    xhr.addEventListener('abort', () => reject(new Error('upload cancelled')));
    xhr.send(body);
  });
}

// The card's controls and state: { name, encoding, file, text, btn, bar, status, err, list, alive, timer }.
function uploadControls() {
  const u = {
    name: h('input#corpus-name', { type: 'text', placeholder: 'e.g. moby-bytes', pattern: NAME_RE.source, 'aria-describedby': 'corpus-name-help' }),
    encoding: h('select#corpus-encoding', {}, h('option', { value: 'bytes' }, 'bytes (vocabulary 256)'),
      h('option', { value: 'gpt2' }, 'gpt2 (vocabulary 50257)')),
    file: h('input#corpus-file', { type: 'file', accept: '.txt,text/plain' }),
    text: h('textarea#corpus-text', { rows: 3, placeholder: 'or paste text here' }),
    btn: h('button.primary#corpus-upload', { type: 'submit' }, 'Upload'),
    bar: h('progress#corpus-progress', { max: 1, value: 0, hidden: true, 'aria-label': 'upload progress' }),
    status: h('span.small#corpus-status', { 'aria-live': 'polite' }),
    err: h('div.field-error#corpus-error', { role: 'alert' }),
    list: h('tbody'),
    alive: true,
    timer: null,
  };
  u.file.addEventListener('change', () => {
    const f = u.file.files[0];
    if (f && !u.name.value.trim()) u.name.value = f.name.replace(/\.[^.]*$/, '').toLowerCase().replace(/[^a-z0-9_-]+/g, '-').slice(0, 40);
  });
  return u;
}

function corpusRow(c) {
  return h('tr', { dataset: { corpus: c.name, status: c.status } },
    h('td', {}, c.name), h('td', {}, c.tokenizer || ''), h('td.num', {}, bytesText(c.bytes)),
    h('td.num', {}, c.tokens ? fmt(c.tokens) : '–'), h('td', {}, h('span.pill.status-' + (c.status === 'ready' ? 'succeeded' : c.status === 'failed' ? 'failed' : 'running'), {}, c.status),
      c.error ? h('div.field-error', {}, c.error) : null));
}

// The corpora here into the table; resolves to them (null when gone or unreachable).
async function showList(u) {
  try {
    const { corpora } = await api('/api/corpora');
    if (!u.alive) return null;
    clear(u.list, corpora.map(corpusRow));
    return corpora;
  } catch { return null; }
}

// Until the server has tokenized the upload: ready, or failed with its reason.
function follow(u, corpusName, opts) {
  clearTimeout(u.timer);
  const tick = async () => {
    if (!u.alive) return;
    try {
      const { corpus } = await api(`/api/corpora/${encodeURIComponent(corpusName)}`);
      if (corpus.status === 'ready') {
        u.status.textContent = `“${corpus.name}” is ready: ${fmt(corpus.tokens)} tokens; choose it as the corpus of a run above.`;
        const corpora = await showList(u);
        if (corpora && opts.onReady) opts.onReady(corpora);
        return;
      }
      if (corpus.status === 'failed') { u.status.textContent = ''; u.err.textContent = `The server could not use it: ${corpus.error}`; showList(u); return; }
      u.status.textContent = `uploaded; the server is tokenizing “${corpus.name}”…`;
    } catch (e) { u.err.textContent = e.message; return; }
    u.timer = setTimeout(tick, 400);
  };
  tick();
}

// The form's submit: check the name and the text, send it with its progress, then follow it.
async function submitUpload(u, ev, opts) {
  ev.preventDefault();
  u.err.textContent = '';
  const n = u.name.value.trim();
  const f = u.file.files[0];
  const body = f || (u.text.value ? new Blob([u.text.value], { type: 'text/plain' }) : null);
  if (!NAME_RE.test(n)) { u.err.textContent = 'A name of 1 to 40 characters: a-z, 0-9, “_” and “-”.'; u.name.focus(); return; }
  if (!body || !body.size) { u.err.textContent = 'Choose a text file or paste some text.'; u.file.focus(); return; }
  const { bar, status } = u;
  u.btn.disabled = true;
  bar.hidden = false;
  bar.value = 0;
  status.textContent = `uploading ${bytesText(body.size)}…`;
  try {
    await uploadWithProgress(`/api/corpora?name=${encodeURIComponent(n)}&encoding=${encodeURIComponent(u.encoding.value)}`, body, (loaded, total) => {
      bar.max = total; bar.value = loaded;
      bar.dataset.loaded = String(loaded);
      status.textContent = `uploading: ${bytesText(loaded)} of ${bytesText(total)} (${Math.round((100 * loaded) / total)} %)`;
    });
    bar.max = 1; bar.value = 1;
    follow(u, n, opts);
  } catch (e) {
    status.textContent = '';
    u.err.textContent = e.message;
  } finally {
    u.btn.disabled = false;
  }
}

function uploadForm(u, opts) {
  return h('form#corpus-form', { novalidate: true, onsubmit: (ev) => submitUpload(u, ev, opts) },
    h('div.fields', {},
      h('div.field', {}, h('label', { for: 'corpus-name' }, 'name'), u.name,
        h('div.help.muted#corpus-name-help', {}, '1–40 of a-z, 0-9, _ and -; a run names it as its corpus')),
      h('div.field', {}, h('label', { for: 'corpus-encoding' }, 'tokens'), u.encoding),
      h('div.field', {}, h('label', { for: 'corpus-file' }, 'text file'), u.file),
      h('div.field.wide', {}, h('label', { for: 'corpus-text' }, 'text'), u.text)),
    h('div.toolbar', {}, u.btn, u.bar, u.status, u.err));
}

// opts.onReady(corpora): called with the corpus list whenever an upload has become ready.
export function corpusUploadCard(opts = {}) {
  const u = uploadControls();
  const el = h('section.card#corpora', { 'aria-labelledby': 'corpora-title' },
    h('h3#corpora-title', {}, 'Corpora'),
    h('p.small.muted', {}, 'Upload plain text to train on: bytes for the quick byte-level recipes (any language, a vocabulary of 256), gpt2 for GPT-2 tokens.'),
    uploadForm(u, opts),
    h('div.table-scroll', {}, h('table.table.compact#corpora-table', {},
      h('thead', {}, h('tr', {}, ['name', 'tokens of', 'size', 'tokens', 'status'].map((c) => h('th', { scope: 'col' }, c)))), u.list)));
  showList(u);
  return { el, stop: () => { u.alive = false; clearTimeout(u.timer); } };
}
