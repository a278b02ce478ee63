// The REST API as promises. Every failure becomes an ApiError carrying the server's
// {"error":{"code","message","field"}} so forms can put the message next to the field.

export class ApiError extends Error {
  constructor(status, code, message, field) {
    super(message);
    this.status = status;
    this.code = code;
    this.field = field || null;
  }
}

export async function api(path, { method = 'GET', body, signal } = {}) {
  const opts = { method, headers: { Accept: 'application/json' }, signal };
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
