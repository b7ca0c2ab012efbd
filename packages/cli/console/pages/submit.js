import { api, h } from '../dom.js';

/** A form that submits a RunRequest and opens the run's page. */
export function submitPage(main) {
  const field = (label, input) => h('label', {}, h('span', {}, label), input);
  const task = h('textarea', {
    name: 'task',
    rows: 3,
    required: true,
    placeholder: 'what should the agent do?',
  });
  const provider = h(
    'select',
    { name: 'provider' },
    ...['', 'openai', 'anthropic', 'openai-compatible', 'scripted'].map((p) =>
      h('option', { value: p }, p || 'default'),
    ),
  );
  const model = h('input', { name: 'model', placeholder: 'default' });
  const tools = h('input', { name: 'tools', placeholder: 'e.g. math,crypto (default: all)' });
  const tenant = h('input', { name: 'tenant', placeholder: 'default' });
  const session = h('input', { name: 'session', placeholder: 'none' });
  const error = h('p', { class: 'error' });
  const button = h('button', { type: 'submit' }, 'Submit run');
  const form = h(
    'form',
    { class: 'submit' },
    field('Task', task),
    field('Provider', provider),
    field('Model', model),
    field('Tools', tools),
    field('Tenant', tenant),
    field('Session', session),
    button,
    error,
  );
  form.addEventListener('submit', (e) => {
    e.preventDefault();
    const list = tools.value
      .split(',')
      .map((s) => s.trim())
      .filter(Boolean);
    const identity =
      tenant.value || session.value
        ? { tenant: tenant.value || 'default', ...(session.value ? { session: session.value } : {}) }
        : undefined;
    const request = {
      task: task.value,
      ...(provider.value ? { provider: provider.value } : {}),
      ...(model.value ? { model: model.value } : {}),
      ...(list.length ? { tools: list } : {}),
      ...(identity ? { identity } : {}),
    };
    button.disabled = true;
    api('/api/runs', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(request),
    })
      .then((r) => (location.hash = `#/runs/${encodeURIComponent(r.run_id)}`))
      .catch((err) => {
        error.textContent = String(err);
        button.disabled = false;
      });
  });
  main.append(h('h1', {}, 'Submit a run'), form);
}
