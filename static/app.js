// attnlab dashboard shell: server health and the runs list, from the REST API.
const $ = (sel) => document.querySelector(sel);

async function api(path) {
  const res = await fetch(path, { headers: { Accept: 'application/json' } });
  const body = await res.json();
  if (!res.ok) throw new Error(body?.error?.message || `HTTP ${res.status}`);
  return body;
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

function cell(text) {
  const td = document.createElement('td');
  td.textContent = text;
  return td;
}

async function showRuns() {
  const tbody = $('#runs tbody');
  const { runs } = await api('/api/runs');
  if (!runs.length) return;
  tbody.replaceChildren(...runs.map((r) => {
    const tr = document.createElement('tr');
    tr.append(cell(r.id), cell(r.name), cell(r.variant), cell(r.status), cell(`${r.step}/${r.total_steps}`));
    return tr;
  }));
}

$('#chart-status').textContent = window.Chart ? `Chart.js ${window.Chart.version} loaded from /vendor` : 'Chart.js missing';
showHealth();
showRuns().catch((e) => { $('#runs tbody').innerHTML = ''; console.warn(e); });
setInterval(showHealth, 10000);
