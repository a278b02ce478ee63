// One EventSource on /api/events for the whole page; views subscribe and unsubscribe as they come and
// go. The browser reconnects by itself and sends Last-Event-ID, so a dropped connection loses nothing;
// when the server says "resync" (we fell too far behind) every subscriber refetches over REST.

const subs = new Set();
let source = null;
const stateListeners = new Set();
let connected = false;

function dispatch(type, data) {
  for (const s of [...subs]) {
    try { s[type]?.(data); } catch (e) { console.warn('live subscriber failed', e); }
  }
}

function setConnected(v) {
  if (connected === v) return;
  connected = v;
  for (const f of stateListeners) f(v);
}

function open() {
  if (source) return;
  source = new EventSource('/api/events');
  source.addEventListener('open', () => setConnected(true));
  source.addEventListener('error', () => setConnected(source && source.readyState === EventSource.OPEN));
  for (const type of ['metrics', 'status']) {
    source.addEventListener(type, (ev) => {
      let data;
      try { data = JSON.parse(ev.data); } catch { return; }
      dispatch(type, data);
    });
  }
  source.addEventListener('resync', () => dispatch('resync', {}));
}

// handlers: {metrics(data), status(data), resync()}; returns the unsubscribe function.
export function subscribe(handlers) {
  open();
  subs.add(handlers);
  return () => subs.delete(handlers);
}

// The page opens the stream at start so the header can say whether live updates are flowing, whichever view is shown.
export function onConnection(f) { open(); stateListeners.add(f); f(connected); return () => stateListeners.delete(f); }
export function isConnected() { return connected; }
