// attnlab dashboard: a hash router over five views (and #/follow/<code>, presenter mode: js/follow.js), the server health pill, the live-stream
// indicator, the classroom (large type) toggle and the dark-theme toggle. Each view module exports mount(root, params),
// which returns its own clean-up (charts, stream subscriptions).
import { api, onToken, setToken } from './js/api.js';
import { $, $$ } from './js/dom.js';
import { applyChartTheme } from './js/charts.js';
import { onConnection } from './js/live.js';
import { currentTheme, storedTheme, toggleTheme, onTheme } from './js/theme.js';
import * as runs from './js/runs.js';
import * as runview from './js/runview.js';
import * as probes from './js/probes.js';
import * as attention from './js/attention.js';
import * as compare from './js/compare.js';
import * as follow from './js/follow.js';

const ROUTES = [
  [/^\/runs$/, 'runs', () => runs.mount],
  [/^\/run\/(\d+)$/, 'runs', (m) => (root, q) => runview.mount(root, { kind: 'run', id: m[1], ...q })],
  [/^\/experiment\/(\d+)$/, 'runs', (m) => (root, q) => runview.mount(root, { kind: 'experiment', id: m[1], ...q })],
  [/^\/probes(?:\/([a-z_]+))?$/, 'probes', (m) => (root, q) => probes.mount(root, { kind: m[1], ...q })],
  [/^\/attention$/, 'attention', () => attention.mount],
  [/^\/compare$/, 'compare', () => compare.mount],
  [/^\/follow\/([A-Za-z0-9]{6})$/, 'runs', (m) => (root) => follow.mountFollow(root, m[1])],
];

let unmount = null;

function route() {
  const raw = location.hash.replace(/^#/, '') || '/runs';
  const [path, query = ''] = raw.split('?');
  const q = Object.fromEntries(new URLSearchParams(query));
  let found = ROUTES.find(([re]) => re.test(path));
  if (!found) { location.replace('#/runs'); return; }
  const [re, nav, make] = found;
  if (unmount) { try { unmount(); } catch (e) { console.warn(e); } }
  const root = $('#view');
  root.replaceChildren();
  for (const a of $$('.nav a')) a.setAttribute('aria-current', a.dataset.nav === nav ? 'page' : 'false');
  unmount = make(re.exec(path))(root, q) || null;
  document.title = `attnlab · ${nav}`;
  root.focus({ preventScroll: true });
  window.scrollTo(0, 0);
  follow.pageChanged(); // a presenter's followers go here too
}

async function showHealth() {
  const el = $('#health');
  try {
    const h = await api('/api/health');
    el.textContent = `${h.status} · v${h.version} · db ${h.db}`;
    el.className = 'pill ' + (h.status === 'ok' ? 'ok' : 'bad');
  } catch (e) {
    el.textContent = `unreachable: ${e.message}`;
    el.className = 'pill bad';
  }
}

function setClassroom(on) {
  document.body.classList.toggle('classroom', on);
  $('#classroom').setAttribute('aria-pressed', String(on));
  localStorage.setItem('attnlab.classroom', on ? '1' : '0');
  applyChartTheme(on);
  follow.pageChanged(); // the Present button shows in Classroom mode
}

$('#classroom').addEventListener('click', () => {
  setClassroom(!document.body.classList.contains('classroom'));
  route(); // heat maps and canvases size their type when drawn
});
follow.init();
setClassroom(localStorage.getItem('attnlab.classroom') === '1');

// Dark theme: follows the system until pressed (see js/theme.js). Views recolour their own charts
// and canvases on the same notification; Chart.js's text and grid colours are set here.
function showTheme() {
  const dark = currentTheme() === 'dark';
  const b = $('#theme');
  b.setAttribute('aria-pressed', String(dark));
  b.title = storedTheme() ? `${dark ? 'dark' : 'light'} theme chosen here; press to switch` :
    `following the system (${dark ? 'dark' : 'light'}); press to switch`;
  applyChartTheme();
}
$('#theme').addEventListener('click', toggleTheme);
onTheme(showTheme);
showTheme();
let everConnected = false;
onConnection((up) => {
  const el = $('#live');
  everConnected = everConnected || up;
  el.textContent = up ? 'live' : everConnected ? 'live: reconnecting' : 'live: connecting';
  el.className = 'pill ' + (up ? 'ok' : 'warn');
});
onToken((has) => { $('#signout').hidden = !has; });
$('#signout').addEventListener('click', () => { setToken(''); route(); });
window.addEventListener('hashchange', route);
showHealth();
setInterval(showHealth, 15000);
route();
