import { api, badge, h, json, time } from '../dom.js';
import { watchLive } from '../app.js';

const FINAL = new Set(['run.completed', 'run.failed']);
/** Statuses of a run that can still be cancelled; every other status is terminal. */
const LIVE = new Set(['unknown', 'accepted', 'running']);

function describe(e) {
  switch (e.type) {
    case 'run.accepted':
      return `task: ${e.task}${e.forked_from ? ` (forked from ${e.forked_from.run_id} after #${e.forked_from.seq})` : ''}`;
    case 'run.started':
      return `planner ${e.planner_id}${e.resumed ? ' (resumed)' : ''}`;
    case 'llm.request':
      return `turn ${e.iteration}, ${e.tools.length} tools offered`;
    case 'llm.response':
      return `turn ${e.iteration}: ${e.tool_calls.length} tool calls, ${e.usage.input_tokens} in / ${e.usage.output_tokens} out tokens`;
    case 'tool.search':
      return `${e.strategy} "${e.query}" → ${e.results.join(', ') || 'nothing'}`;
    case 'tool.started':
      return `${e.name} on ${e.worker_id}`;
    case 'tool.completed':
    case 'tool.failed':
      return `${e.name} ${e.is_error ? 'failed' : 'ok'} in ${e.elapsed_ms} ms`;
    case 'run.completed':
      return `${e.status}${e.reason ? `: ${e.reason}` : ''}`;
    case 'run.failed':
      return `${e.error.code}: ${e.error.message}`;
    case 'approval.requested':
      return `${e.approval_id}: ${e.summary}`;
    case 'approval.decided':
      return `${e.approval_id} ${e.decision === 'approve' ? 'approved' : 'denied'} by ${e.by}`;
    default:
      return e.message ?? '';
  }
}

/**
 * "fork from here" on a model turn: a new run from the state before the turn (after the event before its
 * llm.request), so the model chosen in the form answers this turn and the ones after it.
 */
function forkForm(runId, note) {
  let seq;
  const at = h('span', { class: 'muted' });
  const provider = h('input', { name: 'provider', placeholder: 'provider (as the original)' });
  const model = h('input', { name: 'model', placeholder: 'model (as the original)' });
  const form = h(
    'form',
    { class: 'fork-form', hidden: true },
    at,
    provider,
    model,
    h('button', { type: 'submit' }, 'Start fork'),
  );
  form.addEventListener('submit', (ev) => {
    ev.preventDefault();
    const body = {
      seq,
      ...(provider.value ? { provider: provider.value } : {}),
      ...(model.value ? { model: model.value } : {}),
    };
    api(`/api/runs/${encodeURIComponent(runId)}/fork`, { method: 'POST', body: JSON.stringify(body) })
      .then((r) => (location.hash = `#/runs/${encodeURIComponent(r.run_id)}`))
      .catch((error) => (note.textContent = String(error)));
  });
  const button = (list, response) => {
    const request = list
      .filter((r) => r.type === 'llm.request' && r.iteration === response.iteration && r.seq < response.seq)
      .at(-1);
    if (!request) return null;
    const before = request.seq - 1;
    return h(
      'button',
      {
        type: 'button',
        class: 'fork',
        'data-seq': before,
        title: 'start a new run from the state before this turn, with the model you choose',
        onclick: () => {
          seq = before;
          at.textContent = `fork before turn ${response.iteration} (after event #${before}) with `;
          form.hidden = false;
        },
      },
      'fork from here',
    );
  };
  return { form, button };
}

/** One run: status, cancel, model turns, tool calls and the live event timeline. */
export function runPage(main, runId) {
  const events = new Map();
  const status = h('span', {}, badge('unknown'));
  const cancel = h('button', { type: 'button', class: 'danger', id: 'cancel' }, 'Cancel run');
  const note = h('span', { class: 'muted' });
  const turns = h('div', { class: 'turns' });
  const calls = h('tbody');
  const timeline = h('ol', { class: 'timeline' });
  const pending = h('div', { class: 'approvals' });
  const origin = h('p', { class: 'muted', id: 'forked-from' });
  const fork = forkForm(runId, note);
  let recorded = 'unknown';
  let cancelSent = false;
  const decide = (approvalId, decision) =>
    api(`/api/runs/${encodeURIComponent(runId)}/approvals/${encodeURIComponent(approvalId)}`, {
      method: 'POST',
      body: JSON.stringify({ decision, ...(decision === 'deny' ? { reason: 'denied in the console' } : {}) }),
    }).catch((error) => (note.textContent = String(error)));
  cancel.addEventListener('click', () => {
    cancelSent = true;
    cancel.disabled = true;
    api(`/api/runs/${encodeURIComponent(runId)}/cancel`, { method: 'POST' })
      .then((r) => (note.textContent = r.cancelled ? 'cancel sent' : 'already finished'))
      .catch((error) => (note.textContent = String(error)));
  });
  main.append(
    h('p', {}, h('a', { href: '#/runs' }, '← runs')),
    h('h1', {}, 'Run ', h('span', { class: 'mono', id: 'run-id' }, runId), ' ', status),
    origin,
    h('div', { class: 'actions' }, cancel, note),
    fork.form,
    pending,
    h('h2', {}, 'Model turns'),
    turns,
    h('h2', {}, 'Tool calls'),
    h(
      'table',
      { class: 'calls' },
      h(
        'thead',
        {},
        h('tr', {}, ...['tool', 'arguments', 'worker', 'duration', 'result'].map((t) => h('th', {}, t))),
      ),
      calls,
    ),
    h('h2', {}, 'Events'),
    timeline,
  );

  const render = () => {
    const list = [...events.values()].sort((a, b) => a.seq - b.seq);
    const final = list.find((e) => FINAL.has(e.type));
    const started = list.some((e) => e.type === 'run.started');
    const state = final
      ? final.type === 'run.failed'
        ? 'failed'
        : final.status
      : !LIVE.has(recorded)
        ? recorded
        : started
          ? 'running'
          : 'accepted';
    status.replaceChildren(badge(state));
    const finished = !LIVE.has(state);
    cancel.hidden = finished;
    cancel.disabled = finished || cancelSent;
    const decided = new Set(list.filter((e) => e.type === 'approval.decided').map((e) => e.approval_id));
    pending.replaceChildren(
      ...list
        .filter((e) => e.type === 'approval.requested' && !decided.has(e.approval_id) && !final)
        .map((e) =>
          h(
            'div',
            { class: 'approval', 'data-approval-id': e.approval_id },
            h('span', {}, `waits for approval: ${e.summary} `),
            h('button', { type: 'button', onclick: () => decide(e.approval_id, 'approve') }, 'Approve'),
            h(
              'button',
              { type: 'button', class: 'danger', onclick: () => decide(e.approval_id, 'deny') },
              'Deny',
            ),
          ),
        ),
    );
    const accepted = list.find((e) => e.type === 'run.accepted');
    origin.replaceChildren(
      ...(accepted?.forked_from
        ? [
            'forked from ',
            h(
              'a',
              { href: `#/runs/${encodeURIComponent(accepted.forked_from.run_id)}`, class: 'mono' },
              accepted.forked_from.run_id,
            ),
            ` after event #${accepted.forked_from.seq}`,
          ]
        : []),
    );
    turns.replaceChildren(
      ...list
        .filter((e) => e.type === 'llm.response')
        .map((e) =>
          h(
            'div',
            { class: 'turn', 'data-iteration': e.iteration },
            h(
              'div',
              { class: 'turn-head' },
              `turn ${e.iteration}`,
              h('span', { class: 'muted' }, ` ${e.usage.input_tokens} in / ${e.usage.output_tokens} out`),
              final ? fork.button(list, e) : null,
            ),
            e.text ? h('p', { class: 'text' }, e.text) : null,
            ...e.tool_calls.map((c) =>
              h('div', { class: 'mono call-line' }, `→ ${c.name}(${json(c.arguments, 200)})`),
            ),
          ),
        ),
    );
    const args = new Map();
    for (const e of list)
      if (e.type === 'llm.response') for (const c of e.tool_calls) args.set(c.id, c.arguments);
    const byCall = new Map();
    for (const e of list)
      if (e.type.startsWith('tool.') && e.call_id)
        byCall.set(e.call_id, { ...(byCall.get(e.call_id) ?? {}), [e.type]: e });
    calls.replaceChildren(
      ...[...byCall].map(([callId, c]) => {
        const done = c['tool.completed'] ?? c['tool.failed'];
        const any = done ?? c['tool.started'];
        return h(
          'tr',
          { 'data-call-id': callId, class: done?.is_error ? 'failed' : '' },
          h('td', { class: 'mono' }, any.name),
          h('td', { class: 'mono small' }, json(args.get(callId), 300)),
          h('td', { class: 'mono small' }, any.worker_id ?? ''),
          h('td', { class: 'num' }, done ? `${done.elapsed_ms} ms` : 'running'),
          h(
            'td',
            { class: 'small' },
            done ? (done.error ? `${done.error.code}: ${done.error.message}` : json(done.preview, 300)) : '',
          ),
        );
      }),
    );
    timeline.replaceChildren(
      ...list.map((e) =>
        h(
          'li',
          { 'data-type': e.type },
          h('span', { class: 'seq' }, `#${e.seq}`),
          h('span', { class: 'ts' }, time(e.ts)),
          h('span', { class: 'type' }, e.type),
          h('span', { class: 'desc' }, describe(e)),
        ),
      ),
    );
  };

  const source = new EventSource(`/api/runs/${encodeURIComponent(runId)}/events`);
  watchLive(source);
  source.addEventListener('run-event', (e) => {
    const event = JSON.parse(e.data);
    events.set(event.seq, event);
    render();
  });
  api(`/api/runs/${encodeURIComponent(runId)}`)
    .then((run) => {
      recorded = run.summary.status;
      render();
    })
    .catch(() => {});
  render();
  return () => source.close();
}
