import { h } from './dom.js';
import { runsPage } from './pages/runs.js';
import { runPage } from './pages/run.js';
import { toolsPage } from './pages/tools.js';
import { fleetPage } from './pages/fleet.js';
import { submitPage } from './pages/submit.js';

const main = document.getElementById('main');
let cleanup = () => {};

/** Hash routes: #/runs, #/runs/<id>, #/submit, #/tools, #/fleet. */
function route() {
  cleanup();
  cleanup = () => {};
  main.replaceChildren();
  const [page, ...rest] = location.hash.replace(/^#\/?/, '').split('?')[0].split('/');
  const id = rest.length > 0 ? decodeURIComponent(rest.join('/')) : undefined;
  for (const a of document.querySelectorAll('[data-nav]'))
    a.classList.toggle('active', a.dataset.nav === (page || 'runs'));
  const render =
    page === 'runs' && id
      ? () => runPage(main, id)
      : page === 'tools'
        ? () => toolsPage(main)
        : page === 'fleet'
          ? () => fleetPage(main)
          : page === 'submit'
            ? () => submitPage(main)
            : () => runsPage(main);
  try {
    cleanup = render() ?? (() => {});
  } catch (error) {
    main.append(h('p', { class: 'error' }, String(error)));
  }
}

/** Marks the header's live indicator from an EventSource's state. */
export function watchLive(source) {
  const live = document.getElementById('live');
  const set = (text, cls) => {
    live.textContent = text;
    live.className = `live ${cls}`;
  };
  source.addEventListener('open', () => set('live', 'on'));
  source.addEventListener('error', () => set('reconnecting', 'off'));
}

window.addEventListener('hashchange', route);
route();
