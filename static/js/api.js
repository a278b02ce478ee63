// The REST API as promises. Every failure becomes an ApiError carrying the server's
// {"error":{"code","message","field"}} so forms can put the message next to the field.
// A server started with --token answers 401 to changes (and, with --private, to reads): the first
// 401 opens the sign-in dialog, the token is kept in this browser, and the request is sent again.

export class ApiError extends Error {
  constructor(status, code, message, field) {
    super(message);
    this.status = status;
    this.code = code;
    this.field = field || null;
  }
}

const TOKEN_KEY = 'attnlab.token';
export const getToken = () => localStorage.getItem(TOKEN_KEY) || '';
export function setToken(t) {
  if (t) localStorage.setItem(TOKEN_KEY, t); else localStorage.removeItem(TOKEN_KEY);
  for (const f of tokenListeners) f(!!t);
}
const tokenListeners = new Set();
export function onToken(f) { tokenListeners.add(f); f(!!getToken()); }

export function authHeaders() {
  const t = getToken();
  return t ? { Authorization: `Bearer ${t}` } : {};
}

// One dialog for however many requests were refused at once.
let asking = null;
function askToken(message) {
  if (asking) return asking;
  const dlg = document.getElementById('signin');
  if (!dlg || typeof dlg.showModal !== 'function') return Promise.resolve(null);
  asking = new Promise((resolve) => {
    const input = dlg.querySelector('input');
    dlg.querySelector('.signin-message').textContent = message;
    input.value = '';
    const done = (v) => { dlg.close(); dlg.removeEventListener('close', onClose); asking = null; resolve(v); };
    const onClose = () => { if (asking) { asking = null; resolve(null); } };
    dlg.addEventListener('close', onClose);
    dlg.querySelector('form').onsubmit = (e) => { e.preventDefault(); done(input.value.trim() || null); };
    dlg.querySelector('.signin-cancel').onclick = () => done(null);
    dlg.showModal();
    input.focus();
  });
  return asking;
}

export async function api(path, { method = 'GET', body, signal } = {}, retried = 0) {
  const opts = { method, headers: { Accept: 'application/json', ...authHeaders() }, signal };
  if (body !== undefined) {
    opts.headers['Content-Type'] = 'application/json';
    opts.body = JSON.stringify(body);
  }
  let res;
  try {
    res = await fetch(path, opts);
  } catch (e) {
    if (e.name === 'AbortError') throw e;
    throw new ApiError(0, 'network', `server unreachable (${e.message})`);
  }
  if (res.status === 401 && retried < 3) {
    const sent = opts.headers.Authorization;
    // Another request may have stored a good token while this one was in flight: try that first.
    if (getToken() && sent !== `Bearer ${getToken()}`) return api(path, { method, body, signal }, retried + 1);
    const token = await askToken(sent ? 'That token was refused. Enter the server’s token:' :
      'This server asks for a token (attnlabd --token). Enter it to continue:');
    if (token) {
      setToken(token);
      return api(path, { method, body, signal }, retried + 1);
    }
  }
  if (res.status === 204) return null;
  let data = null;
  const text = await res.text();
  if (text) {
    try { data = JSON.parse(text); } catch { data = null; }
  }
  if (!res.ok) {
    const err = data && data.error;
    throw new ApiError(res.status, err?.code || 'http', err?.message || `HTTP ${res.status}`, err?.field);
  }
  return data;
}

export const post = (path, body) => api(path, { method: 'POST', body: body === undefined ? {} : body });

// Cached documents that do not change while the server runs.
const once = new Map();
export function cached(path) {
  if (!once.has(path)) once.set(path, api(path).catch((e) => { once.delete(path); throw e; }));
  return once.get(path);
}
