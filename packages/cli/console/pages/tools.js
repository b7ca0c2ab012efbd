import { api, h } from '../dom.js';

/** The catalog: every tool with its exposure and serving workers; the search box uses the catalog's search. */
export function toolsPage(main) {
  const search = h('input', { type: 'search', name: 'q', placeholder: 'search tools (catalog bm25 search)' });
  const body = h('tbody');
  const error = h('p', { class: 'error' });
  let seq = 0;
  const load = () => {
    const mine = ++seq;
    const q = search.value.trim();
    api(`/api/tools${q ? `?q=${encodeURIComponent(q)}` : ''}`)
      .then((reply) => {
        if (mine !== seq) return;
        error.textContent = '';
        body.replaceChildren(
          ...reply.tools.map((t) =>
            h(
              'tr',
              { 'data-tool': t.name },
              h('td', { class: 'mono' }, t.name),
              h('td', {}, h('span', { class: `badge exposure-${t.loading}` }, t.loading)),
              h('td', { class: 'num' }, t.workers),
              h('td', {}, t.description),
              h('td', { class: 'num' }, t.score === undefined ? '' : t.score.toFixed(2)),
            ),
          ),
        );
      })
      .catch((e) => (error.textContent = String(e)));
  };
  let timer;
  search.addEventListener('input', () => {
    clearTimeout(timer);
    timer = setTimeout(load, 150);
  });
  main.append(
    h('h1', {}, 'Tools'),
    h('div', { class: 'filters' }, search),
    error,
    h(
      'table',
      {},
      h(
        'thead',
        {},
        h('tr', {}, ...['tool', 'exposure', 'workers', 'description', 'score'].map((t) => h('th', {}, t))),
      ),
      body,
    ),
  );
  load();
  return () => clearTimeout(timer);
}
