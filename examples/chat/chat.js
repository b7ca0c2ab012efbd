// A chat page on the agentmesh gateway (docs/gateway.md). Open it with ?gateway=http://host:port and, when the
// gateway has keys, &key=<api key>. The run, what the page showed and the last event id are kept in
// sessionStorage: after a reload the page shows them again and resumes the stream with Last-Event-ID, so every
// event is shown once.
const params = new URLSearchParams(location.search);
const gateway = (params.get('gateway') ?? sessionStorage.getItem('chat.gateway') ?? location.origin).replace(
  /\/$/,
  '',
);
const key = params.get('key') ?? sessionStorage.getItem('chat.key') ?? '';
sessionStorage.setItem('chat.gateway', gateway);
sessionStorage.setItem('chat.key', key);

const log = document.getElementById('log');
const status = document.getElementById('status');
let state = JSON.parse(sessionStorage.getItem('chat.run') ?? 'null');

const headers = (extra = {}) => ({ ...(key ? { authorization: `Bearer ${key}` } : {}), ...extra });
const save = () => sessionStorage.setItem('chat.run', JSON.stringify(state));

function line(entry) {
  const li = document.createElement('li');
  li.dataset.kind = entry.kind;
  li.dataset.seq = String(entry.seq);
  li.textContent = entry.text;
  if (entry.kind === 'approval' && !entry.decided)
    for (const decision of ['approve', 'deny']) {
      const button = document.createElement('button');
      button.textContent = decision === 'approve' ? 'Approve' : 'Deny';
      button.onclick = () => decide(entry.approval_id, decision);
      li.append(' ', button);
    }
  return li;
}

function render() {
  log.replaceChildren(...(state?.lines ?? []).map(line));
  status.textContent =
    state === null ? 'idle' : state.done ? `finished: ${state.status}` : `running ${state.runId}`;
}

function add(entry) {
  state.lines.push(entry);
}

/** Folds one run event into what the page shows. */
function apply(event) {
  const texts = state.lines.filter((l) => l.kind === 'assistant' && l.iteration === event.iteration);
  switch (event.type) {
    case 'llm.delta':
      if (event.kind !== 'text') return;
      if (texts.length > 0) texts[0].text += event.text;
      else add({ kind: 'assistant', iteration: event.iteration, seq: event.seq, text: event.text });
      return;
    case 'llm.response':
      if (texts.length === 0 && event.text !== '')
        add({ kind: 'assistant', iteration: event.iteration, seq: event.seq, text: event.text });
      for (const call of event.tool_calls)
        add({ kind: 'tool', seq: event.seq, text: `${call.name} ${JSON.stringify(call.arguments)}` });
      return;
    case 'tool.completed':
    case 'tool.failed':
      return add({ kind: 'result', seq: event.seq, text: `${event.name} -> ${event.preview}` });
    case 'approval.requested':
      return add({ kind: 'approval', seq: event.seq, approval_id: event.approval_id, text: event.summary });
    case 'approval.decided':
      for (const l of state.lines) if (l.approval_id === event.approval_id) l.decided = event.decision;
      return add({ kind: 'decision', seq: event.seq, text: `${event.decision} (${event.by})` });
    case 'run.completed':
      Object.assign(state, { done: true, status: event.status });
      return;
    case 'run.failed':
      Object.assign(state, { done: true, status: 'failed' });
      return add({ kind: 'error', seq: event.seq, text: event.error.message });
  }
}

/** Reads the run's stream after the last event shown; reconnects (with Last-Event-ID) until the run ends. */
async function follow() {
  while (state !== null && !state.done) {
    try {
      const res = await fetch(`${gateway}/v1/runs/${encodeURIComponent(state.runId)}/events`, {
        headers: headers({ 'last-event-id': String(state.lastId) }),
      });
      if (!res.ok) throw new Error(`events: ${res.status}`);
      const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
      let buffer = '';
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buffer += value;
        let cut;
        while ((cut = buffer.indexOf('\n\n')) >= 0) {
          const block = buffer.slice(0, cut);
          buffer = buffer.slice(cut + 2);
          const data = /^data: (.*)$/m.exec(block)?.[1];
          const id = /^id: (.*)$/m.exec(block)?.[1];
          if (data === undefined || id === undefined) continue;
          apply(JSON.parse(data));
          state.lastId = Number(id);
          save();
          render();
        }
      }
    } catch (error) {
      status.textContent = `reconnecting: ${error.message}`;
    }
    if (!state.done) await new Promise((resolve) => setTimeout(resolve, 1000));
  }
}

async function decide(approvalId, decision) {
  await fetch(`${gateway}/v1/runs/${encodeURIComponent(state.runId)}/approve`, {
    method: 'POST',
    headers: headers({ 'content-type': 'application/json' }),
    body: JSON.stringify({ approval_id: approvalId, decision }),
  });
}

document.getElementById('ask').addEventListener('submit', async (e) => {
  e.preventDefault();
  const task = new FormData(e.target).get('task');
  const res = await fetch(`${gateway}/v1/runs`, {
    method: 'POST',
    headers: headers({ 'content-type': 'application/json' }),
    body: JSON.stringify({ task }),
  });
  const body = await res.json();
  if (!res.ok) {
    status.textContent = `${body.error.code}: ${body.error.message}`;
    return;
  }
  state = { runId: body.run_id, lastId: 0, done: false, lines: [{ kind: 'user', seq: 0, text: task }] };
  save();
  render();
  await follow();
});

render();
if (state !== null && !state.done) void follow();
