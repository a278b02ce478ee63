// One live stream on /api/events for the whole page; views subscribe and unsubscribe as they come
// and go. Without a token the browser's EventSource does the work (it reconnects by itself and
// sends Last-Event-ID, so a dropped connection loses nothing). EventSource cannot send an
// Authorization header, so once a token is stored (a server run with --token --private refuses
// unauthenticated reads) the stream is read with fetch instead, with the same resume rule.
// When the server says "resync" (we fell too far behind) every subscriber refetches over REST.
import { authHeaders, getToken, onToken } from './api.js';

const subs = new Set();
const stateListeners = new Set();
let connected = false;
let source = null;      // EventSource, or {close()} for the fetch reader
let started = false;

function dispatch(type, raw) {
  let data = {};
  if (type !== 'resync') {
    try { data = JSON.parse(raw); } catch { return; }
  }
  for (const s of [...subs]) {
    try { s[type]?.(data); } catch (e) { console.warn('live subscriber failed', e); }
  }
}

function setConnected(v) {
  if (connected === v) return;
  connected = v;
  for (const f of stateListeners) f(v);
}

function openEventSource() {
  const es = new EventSource('/api/events');
  es.addEventListener('open', () => setConnected(true));
  es.addEventListener('error', () => setConnected(es.readyState === EventSource.OPEN));
  for (const type of ['metrics', 'status', 'follow', 'resync']) es.addEventListener(type, (ev) => dispatch(type, ev.data));
  return es;
}

// text/event-stream over fetch: the fields we use (event, data, id), comments ignored.
function openFetchStream() {
  let closed = false;
  let ctrl = null;
  let lastId = null;
  (async () => {
    while (!closed) {
      ctrl = new AbortController();
      try {
        const headers = { Accept: 'text/event-stream', ...authHeaders() };
        if (lastId) headers['Last-Event-ID'] = lastId;
        const res = await fetch('/api/events', { headers, signal: ctrl.signal });
        if (!res.ok || !res.body) throw new Error(`HTTP ${res.status}`);
        setConnected(true);
        const reader = res.body.getReader();
        const dec = new TextDecoder();
        let buf = '';
        let ev = { type: 'message', data: [] };
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          buf += dec.decode(value, { stream: true });
          let nl;
          while ((nl = buf.indexOf('\n')) >= 0) {
            let line = buf.slice(0, nl);
            buf = buf.slice(nl + 1);
            if (line.endsWith('\r')) line = line.slice(0, -1);
            if (line === '') {
              if (ev.data.length) dispatch(ev.type, ev.data.join('\n'));
              ev = { type: 'message', data: [] };
            } else if (line[0] !== ':') {
              const i = line.indexOf(':');
              const field = i < 0 ? line : line.slice(0, i);
              let val = i < 0 ? '' : line.slice(i + 1);
              if (val[0] === ' ') val = val.slice(1);
              if (field === 'event') ev.type = val;
              else if (field === 'data') ev.data.push(val);
              else if (field === 'id') lastId = val;
            }
          }
        }
      } catch { /* dropped or refused: wait and try again */ }
      setConnected(false);
      if (!closed) await new Promise((r) => setTimeout(r, 2000));
    }
  })();
  return { close() { closed = true; if (ctrl) ctrl.abort(); } };
}

function open() {
  if (started) return;
  started = true;
  onToken(() => {
    if (source) source.close();
    setConnected(false);
    source = getToken() ? openFetchStream() : openEventSource();
  });
}

// handlers: {metrics(data), status(data), follow(data), resync()}; returns the unsubscribe function.
export function subscribe(handlers) {
  open();
  subs.add(handlers);
  return () => subs.delete(handlers);
}

// The page opens the stream at start so the header can say whether live updates are flowing, whichever view is shown.
export function onConnection(f) { open(); stateListeners.add(f); f(connected); return () => stateListeners.delete(f); }
export function isConnected() { return connected; }
