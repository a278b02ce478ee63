// The nodes sharing this service's database (GET /api/nodes): id, role, capacity, the runs each
// trains and how long ago it was last heard from. With the embedded SQLite store there is one.
import { api } from './api.js';
import { h, clear, fmtDuration } from './dom.js';

const REFRESH_MS = 5000;

function nodeRow(n, self) {
  const running = (n.running || []).map((id, i) => [i ? ', ' : '', h('a', { href: `#/runs/${id}` }, `run ${id}`)]);
  return h('tr', { dataset: { nodeId: n.id } },
    h('td', {}, n.id, n.id === self ? h('span.muted', {}, ' (this node)') : null),
    h('td', {}, n.host || ''),
    h('td', {}, n.role),
    h('td.num', {}, String(n.capacity)),
    h('td', {}, running.length ? running : h('span.muted', {}, 'idle')),
    h('td', {}, n.alive ? h('span.status.status-running', {}, 'alive') : h('span.status.status-failed', {}, n.stopped_at ? 'stopped' : 'silent')),
    h('td.num', { title: new Date(n.last_heartbeat * 1000).toISOString() }, `${fmtDuration(Math.max(0, n.heartbeat_age_s))} ago`));
}

// A card that lists the nodes and refreshes itself; stop() ends the refreshing.
export function nodesCard() {
  const body = h('tbody');
  const note = h('p.muted#nodes-note');
  const card = h('section.card#nodes', { 'aria-labelledby': 'nodes-title' },
    h('h3#nodes-title', {}, 'Nodes'), note,
    h('div.table-scroll', {}, h('table.table#nodes-table', {},
      h('thead', {}, h('tr', {}, ['node', 'host', 'role', 'capacity', 'training', 'state', 'last heard'].map((c) => h('th', { scope: 'col' }, c)))),
      body)));
  let timer = null;
  async function refresh() {
    try {
      const r = await api('/api/nodes');
      note.textContent = r.shared
        ? `${r.nodes.filter((n) => n.alive).length} of ${r.nodes.length} nodes alive, sharing one PostgreSQL database: a run trains on whichever node has room.`
        : 'One node with the embedded SQLite store.';
      clear(body, r.nodes.length ? r.nodes.map((n) => nodeRow(n, r.self)) : h('tr.empty', {}, h('td', { colspan: 7 }, 'No nodes recorded.')));
    } catch (err) {
      clear(body, h('tr.empty', {}, h('td.field-error', { colspan: 7 }, `Could not load the nodes: ${err.message}`)));
    }
  }
  refresh();
  timer = setInterval(refresh, REFRESH_MS);
  return { el: card, stop: () => clearInterval(timer) };
}
