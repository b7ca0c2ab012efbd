import { api, h } from '../dom.js';

/** The actors answering service discovery, refreshed every 5 s. */
export function fleetPage(main) {
  const body = h('tbody');
  const summary = h('p', { class: 'muted' });
  const load = () =>
    api('/api/fleet')
      .then((reply) => {
        const counts = {};
        for (const a of reply.actors) counts[a.name] = (counts[a.name] ?? 0) + 1;
        summary.textContent =
          Object.entries(counts)
            .map(([n, c]) => `${n} ×${c}`)
            .join(' · ') || 'no actors answered';
        body.replaceChildren(
          ...reply.actors.map((a) =>
            h(
              'tr',
              { 'data-actor': a.id },
              h('td', {}, a.name),
              h('td', { class: 'mono' }, a.id),
              h('td', {}, a.version),
              h(
                'td',
                { class: 'num' },
                a.load ? `${a.load.in_flight} now · ${a.load.total} ${a.load.unit}` : '',
              ),
              h(
                'td',
                { class: 'mono small' },
                Object.entries(a.metadata)
                  .map(([k, v]) => `${k}=${v}`)
                  .join(' '),
              ),
            ),
          ),
        );
      })
      .catch((e) => (summary.textContent = String(e)));
  main.append(
    h('h1', {}, 'Fleet'),
    summary,
    h(
      'table',
      {},
      h(
        'thead',
        {},
        h('tr', {}, ...['actor', 'id', 'version', 'load (seen)', 'metadata'].map((t) => h('th', {}, t))),
      ),
      body,
    ),
  );
  void load();
  const timer = setInterval(load, 5000);
  return () => clearInterval(timer);
}
