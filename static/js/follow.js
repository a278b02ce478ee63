// Presenter mode: students' screens follow the teacher's. In Classroom mode the header has a
// Present button: it asks the server for a short join code (POST /api/follow) and shows it; from
// then on every page the presenter opens is sent (PUT /api/follow/{code} with the code's token)
// and the server broadcasts it as a `follow` event on the live stream. A student opens
// #/follow/<code>: the page reads what the presenter shows now (GET /api/follow/{code}) and goes
// there, then goes wherever each `follow` event of that code says, until "stop following".
// Both roles last for the browser tab (sessionStorage), across reloads.
import { api, authHeaders, ApiError } from './api.js';
import { $ } from './dom.js';
import { subscribe, onConnection } from './live.js';

const PRESENT_KEY = 'attnlab.present'; // {code, token}
const FOLLOW_KEY = 'attnlab.follow';   // code

let presenting = null;
let following = null;
let lastSeq = -1;
let inFlight = false, again = false;

function load() {
  try { presenting = JSON.parse(sessionStorage.getItem(PRESENT_KEY) || 'null'); } catch { presenting = null; }
  following = sessionStorage.getItem(FOLLOW_KEY) || null;
}

// What the presenter's page shows: its hash, and the run and probe in it (null when none).
export function pageState(hash) {
  const [path, query = ''] = hash.replace(/^#/, '').split('?');
  const q = new URLSearchParams(query);
  const run = /^\/run\/(\d+)$/.exec(path)?.[1] ?? (/^\d+$/.test(q.get('run') || '') ? q.get('run') : null);
  const probe = /^\/probes\/([a-z_]+)$/.exec(path)?.[1] ?? null;
  return { hash, run: run ? Number(run) : null, probe };
}

function showHeader() {
  const classroom = document.body.classList.contains('classroom');
  const btn = $('#present'), join = $('#join'), fol = $('#following');
  if (!btn) return;
  btn.hidden = !classroom && !presenting;
  btn.setAttribute('aria-pressed', String(!!presenting));
  btn.textContent = presenting ? 'Stop presenting' : 'Present';
  join.hidden = !presenting;
  if (presenting) {
    join.dataset.code = presenting.code;
    join.textContent = `join: ${presenting.code}`;
    join.title = `students open ${location.origin}/#/follow/${presenting.code}`;
  }
  fol.hidden = !following;
  if (following) {
    fol.dataset.code = following;
    fol.querySelector('.following-code').textContent = following;
  }
}

// Sends the presenter's page; a change while one is on its way is sent after it (the last wins).
async function send() {
  if (!presenting) return;
  if (inFlight) { again = true; return; }
  inFlight = true;
  try {
    do {
      again = false;
      const state = pageState(location.hash || '#/runs');
      if (state.hash.startsWith('#/follow')) continue;
      const res = await fetch(`/api/follow/${presenting.code}`, {
        method: 'PUT',
        headers: { 'Content-Type': 'application/json', Accept: 'application/json', 'X-Follow-Token': presenting.token,
          ...authHeaders() },
        body: JSON.stringify(state),
      });
      if (res.status === 404 || res.status === 403) { stopPresenting(); break; } // expired, or the server restarted
    } while (again && presenting);
  } catch (e) {
    console.warn('presenter update failed', e);
  } finally {
    inFlight = false;
  }
}

export async function startPresenting() {
  const r = await api('/api/follow', { method: 'POST' });
  presenting = { code: r.follow.code, token: r.follow.token };
  sessionStorage.setItem(PRESENT_KEY, JSON.stringify(presenting));
  showHeader();
  send();
}

export function stopPresenting() {
  presenting = null;
  sessionStorage.removeItem(PRESENT_KEY);
  showHeader();
}

// A follower: goes where the presenter is, once per change.
function apply(state) {
  if (!following || !state || String(state.code).toUpperCase() !== following || !(state.seq > lastSeq)) return;
  lastSeq = state.seq;
  if (state.hash && state.hash.startsWith('#/') && !state.hash.startsWith('#/follow') && location.hash !== state.hash)
    location.hash = state.hash;
}

async function refresh() {
  if (!following) return;
  const code = following;
  try {
    apply((await api(`/api/follow/${code}`)).follow);
  } catch (e) {
    if (e instanceof ApiError && e.status === 404 && following === code) {
      const note = $('#follow-note');
      if (note) note.textContent = `No presenter has the code ${code} (or it has expired).`;
      stopFollowing();
    }
  }
}

export function stopFollowing() {
  following = null;
  lastSeq = -1;
  sessionStorage.removeItem(FOLLOW_KEY);
  showHeader();
}

// The #/follow/<code> view: joins, then leaves for the presenter's page as soon as it is known.
export function mountFollow(root, code) {
  following = code.toUpperCase();
  lastSeq = -1;
  sessionStorage.setItem(FOLLOW_KEY, following);
  const p = document.createElement('p');
  p.id = 'follow-note';
  p.textContent = `Following ${following}: waiting for the presenter's page…`;
  root.append(p);
  showHeader();
  refresh();
  return null;
}

// Called by the router after each page change, and when Classroom mode is switched.
export function pageChanged() { showHeader(); send(); }

export function init() {
  load();
  $('#present')?.addEventListener('click', () => {
    if (presenting) stopPresenting();
    else startPresenting().catch((e) => console.warn('presenter mode failed', e));
  });
  $('#following button')?.addEventListener('click', stopFollowing);
  subscribe({ follow: apply, resync: refresh });
  onConnection((up) => { if (up) refresh(); }); // changes missed while the stream was down
  showHeader();
}
