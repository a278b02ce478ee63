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

// opts.onReady(corpora): called with the corpus list whenever an upload has become ready.
export function corpusUploadCard(opts = {}) {
  const name = h('input#corpus-name', { type: 'text', placeholder: 'e.g. moby-bytes', pattern: NAME_RE.source, 'aria-describedby': 'corpus-name-help' });
  const encoding = h('select#corpus-encoding', {}, h('option', { value: 'bytes' }, 'bytes (vocabulary 256)'),
    h('option', { value: 'gpt2' }, 'gpt2 (vocabulary 50257)'));
  const file = h('input#corpus-file', { type: 'file', accept: '.txt,text/plain' });
  const text = h('textarea#corpus-text', { rows: 3, placeholder: 'or paste text here' });
  const btn = h('button.primary#corpus-upload', { type: 'submit' }, 'Upload');
  const bar = h('progress#corpus-progress', { max: 1, value: 0, hidden: true, 'aria-label': 'upload progress' });
  const status = h('span.small#corpus-status', { 'aria-live': 'polite' });
  const err = h('div.field-error#corpus-error', { role: 'alert' });
  const list = h('tbody');
  let alive = true, timer = null;

  file.addEventListener('change', () => {
    const f = file.files[0];
    if (f && !name.value.trim()) name.value = f.name.replace(/\.[^.]*$/, '').toLowerCase().replace(/[^a-z0-9_-]+/g, '-').slice(0, 40);
  });

  async function showList() {
    try {
      const { corpora } = await api('/api/corpora');
      if (!alive) return null;
      clear(list, corpora.map((c) => h('tr', { dataset: { corpus: c.name, status: c.status } },
        h('td', {}, c.name), h('td', {}, c.tokenizer || ''), h('td.num', {}, bytesText(c.bytes)),
        h('td.num', {}, c.tokens ? fmt(c.tokens) : '–'), h('td', {}, h('span.pill.status-' + (c.status === 'ready' ? 'succeeded' : c.status === 'failed' ? 'failed' : 'running'), {}, c.status),
          c.error ? h('div.field-error', {}, c.error) : null))));
      return corpora;
    } catch { return null; }
  }

  // Until the server has tokenized the upload: ready, or failed with its reason.
  function follow(corpusName) {
    clearTimeout(timer);
    const tick = async () => {
      if (!alive) return;
      try {
        const { corpus } = await api(`/api/corpora/${encodeURIComponent(corpusName)}`);
        if (corpus.status === 'ready') {
          status.textContent = `“${corpus.name}” is ready: ${fmt(corpus.tokens)} tokens; choose it as the corpus of a run above.`;
          const corpora = await showList();
          if (corpora && opts.onReady) opts.onReady(corpora);
          return;
        }
        if (corpus.status === 'failed') { status.textContent = ''; err.textContent = `The server could not use it: ${corpus.error}`; showList(); return; }
        status.textContent = `uploaded; the server is tokenizing “${corpus.name}”…`;
      } catch (e) { err.textContent = e.message; return; }
      timer = setTimeout(tick, 400);
    };
    tick();
  }

  const form = h('form#corpus-form', { novalidate: true, onsubmit: async (ev) => {
    ev.preventDefault();
    err.textContent = '';
    const n = name.value.trim();
    const f = file.files[0];
    const body = f || (text.value ? new Blob([text.value], { type: 'text/plain' }) : null);
    if (!NAME_RE.test(n)) { err.textContent = 'A name of 1 to 40 characters: a-z, 0-9, “_” and “-”.'; name.focus(); return; }
    if (!body || !body.size) { err.textContent = 'Choose a text file or paste some text.'; file.focus(); return; }
    btn.disabled = true;
    bar.hidden = false;
    bar.value = 0;
    status.textContent = `uploading ${bytesText(body.size)}…`;
    try {
      await uploadWithProgress(`/api/corpora?name=${encodeURIComponent(n)}&encoding=${encodeURIComponent(encoding.value)}`, body, (loaded, total) => {
        bar.max = total; bar.value = loaded;
        bar.dataset.loaded = String(loaded);
        status.textContent = `uploading: ${bytesText(loaded)} of ${bytesText(total)} (${Math.round((100 * loaded) / total)} %)`;
      });
      bar.max = 1; bar.value = 1;
      follow(n);
    } catch (e) {
      status.textContent = '';
      err.textContent = e.message;
    } finally {
      btn.disabled = false;
    }
  } },
  h('div.fields', {},
    h('div.field', {}, h('label', { for: 'corpus-name' }, 'name'), name,
      h('div.help.muted#corpus-name-help', {}, '1–40 of a-z, 0-9, _ and -; a run names it as its corpus')),
    h('div.field', {}, h('label', { for: 'corpus-encoding' }, 'tokens'), encoding),
    h('div.field', {}, h('label', { for: 'corpus-file' }, 'text file'), file),
    h('div.field.wide', {}, h('label', { for: 'corpus-text' }, 'text'), text)),
  h('div.toolbar', {}, btn, bar, status, err));

  const el = h('section.card#corpora', { 'aria-labelledby': 'corpora-title' },
    h('h3#corpora-title', {}, 'Corpora'),
    h('p.small.muted', {}, 'Upload plain text to train on: bytes for the quick byte-level recipes (any language, a vocabulary of 256), gpt2 for GPT-2 tokens.'),
    form,
    h('div.table-scroll', {}, h('table.table.compact#corpora-table', {},
      h('thead', {}, h('tr', {}, ['name', 'tokens of', 'size', 'tokens', 'status'].map((c) => h('th', { scope: 'col' }, c)))), list)));
  showList();
  return { el, stop: () => { alive = false; clearTimeout(timer); } };
}
