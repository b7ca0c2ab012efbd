import { api, badge, h, time } from '../dom.js';
import { watchLive } from '../app.js';

const STATUSES = [
  '',
  'accepted',
  'queued',
  'running',
  'done',
  'failed',
  'cancelled',
  'timeout',
  'stuck',
  'budget_exhausted',
];

/** The tenant filter: any tenant, each tenant seen in the runs, and the one the URL asks for. */
function tenantOptions(select, runs, wanted) {
  const names = new Set([...runs.values()].map((r) => r.tenant).filter(Boolean));
  if (wanted) names.add(wanted);
  const current = [...select.options].map((o) => o.value).slice(1);
  const sorted = [...names].sort();
  if (sorted.join('\n') === current.join('\n')) return;
  select.replaceChildren(
    h('option', { value: '' }, 'any tenant'),
    ...sorted.map((t) => h('option', { value: t }, t)),
  );
  select.value = wanted;
}

/** Keeps the filters in the URL (#/runs?tenant=acme&status=done), so a filtered list can be linked and reloaded. */
function keepInUrl(filters) {
  const query = new URLSearchParams();
  for (const [key, el] of Object.entries(filters)) if (el.value) query.set(key, el.value);
  const text = query.toString();
  history.replaceState(null, '', `#/runs${text ? `?${text}` : ''}`);
}

/** The live list of runs with filters; returns a cleanup function. */
export function runsPage(main) {
  const runs = new Map();
  const params = new URLSearchParams(location.hash.split('?')[1] ?? '');
  const status = h(
    'select',
    { name: 'status', 'aria-label': 'status' },
    ...STATUSES.map((s) => h('option', { value: s }, s || 'any status')),
  );
  const tenant = h('select', { name: 'tenant', 'aria-label': 'tenant' });
  const session = h('input', { name: 'session', placeholder: 'session' });
  const search = h('input', { name: 'q', type: 'search', placeholder: 'search by run id' });
  status.value = params.get('status') ?? '';
  tenantOptions(tenant, runs, params.get('tenant') ?? '');
  const body = h('tbody');
  const empty = h('p', { class: 'muted' }, 'No runs yet. Submit one.');
  const render = () => {
    tenantOptions(tenant, runs, tenant.value);
    const q = search.value.trim().toLowerCase();
    const rows = [...runs.values()]
      .filter(
        (r) =>
          (!status.value || r.status === status.value) &&
          (!tenant.value || r.tenant === tenant.value) &&
          (!session.value || r.session === session.value) &&
          (!q || r.run_id.toLowerCase().includes(q)),
      )
      .sort((a, b) => (b.accepted_at ?? b.updated_at).localeCompare(a.accepted_at ?? a.updated_at));
    body.replaceChildren(
      ...rows.map((r) =>
        h(
          'tr',
          { 'data-run-id': r.run_id },
          h('td', {}, h('a', { href: `#/runs/${encodeURIComponent(r.run_id)}`, class: 'mono' }, r.run_id)),
          h(
            'td',
            {},
            badge(r.status),
            ...(r.status === 'queued' && r.queue_position
              ? [h('span', { class: 'position' }, ` #${r.queue_position}`)]
              : []),
          ),
          h('td', { class: 'task' }, r.task),
          h('td', { class: 'tenant' }, r.tenant ?? ''),
          h('td', {}, r.session ?? ''),
          h('td', { class: 'num' }, r.iterations),
          h('td', { class: 'num' }, r.tool_calls),
          h('td', {}, time(r.updated_at)),
        ),
      ),
    );
    empty.hidden = rows.length > 0;
  };
  for (const input of [status, tenant, session, search]) input.addEventListener('input', render);
  for (const select of [status, tenant])
    select.addEventListener('change', () => keepInUrl({ tenant, status }));
  main.append(
    h('h1', {}, 'Runs'),
    h('div', { class: 'filters' }, status, tenant, session, search),
    h(
      'table',
      { class: 'runs' },
      h(
        'thead',
        {},
        h(
          'tr',
          {},
          ...['run', 'status', 'task', 'tenant', 'session', 'turns', 'tool calls', 'updated'].map((t) =>
            h('th', {}, t),
          ),
        ),
      ),
      body,
    ),
    empty,
  );
  api('/api/runs')
    .then((reply) => {
      for (const r of reply.runs) if (!runs.has(r.run_id)) runs.set(r.run_id, r);
      render();
    })
    .catch((error) => main.append(h('p', { class: 'error' }, String(error))));
  const source = new EventSource('/api/stream');
  watchLive(source);
  source.addEventListener('run', (e) => {
    const r = JSON.parse(e.data);
    runs.set(r.run_id, r);
    render();
  });
  return () => source.close();
}
