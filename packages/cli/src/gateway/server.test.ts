import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { HttpAgent } from '@ag-ui/client';
import { EventSchemas } from '@ag-ui/core/schemas';
import { Ajv2020 } from 'ajv/dist/2020.js';
import {
  DefaultChatTransport,
  parseJsonEventStream,
  readUIMessageStream,
  uiMessageChunkSchema,
  type UIMessage,
  type UIMessageChunk,
} from 'ai';
import { DEFAULT_PREFIX, RunEventSchema, silentLogger, type RunEvent } from '@agentmesh/protocol';
import { readTranscript } from '@agentmesh/planner';
import { RunIndex } from '../console/run-index.js';
import { startEmbedded, type EmbeddedMesh } from '../embedded.js';
import { AG_UI_CUSTOM_EVENTS } from './formats/index.js';
import { ROUTES } from './routes.js';
import { startGateway, type Gateway } from './server.js';
import { IndexRunSource } from './source.js';

const ACME = 'a'.repeat(40);
const GLOBEX = 'g'.repeat(40);
const script = [
  { text: 'adding', tool_calls: [{ name: 'math.calc', arguments: { lhs: 2, rhs: 3, op: 'add' } }] },
  { text: '2 + 3 = 5' },
];

let mesh: EmbeddedMesh;
let index: RunIndex;
let gateway: Gateway;

beforeAll(async () => {
  mesh = await startEmbedded({ config: {}, logger: silentLogger(), approvals: true });
  index = new RunIndex(mesh.bus, DEFAULT_PREFIX, silentLogger());
  await index.start();
  gateway = await startGateway({
    bus: mesh.bus,
    prefix: DEFAULT_PREFIX,
    source: new IndexRunSource(index),
    logger: silentLogger(),
    keys: new Map([
      [ACME, 'acme'],
      [GLOBEX, 'globex'],
    ]),
    corsOrigins: ['http://app.example'],
    port: 0,
    keepAliveMs: 50,
  });
});

afterAll(async () => {
  await gateway.close();
  index.stop();
  await mesh.stop();
});

function call(path: string, init: RequestInit & { key?: string | null } = {}): Promise<Response> {
  const { key = ACME, ...rest } = init;
  return fetch(`${gateway.url}${path}`, {
    ...rest,
    headers: {
      ...(key === null ? {} : { authorization: `Bearer ${key}` }),
      ...(rest.body === undefined ? {} : { 'content-type': 'application/json' }),
      ...(rest.headers as Record<string, string>),
    },
  });
}

async function submit(body: Record<string, unknown> = {}, key = ACME): Promise<string> {
  const res = await call('/v1/runs', {
    method: 'POST',
    key,
    body: JSON.stringify({ task: 'add 2 and 3', script, ...body }),
  });
  expect(res.status, await res.clone().text()).toBe(202);
  return ((await res.json()) as { run_id: string }).run_id;
}

/** The SSE frames of a whole stream: `id` and the parsed `data` of each. */
async function frames(res: Response): Promise<{ id: string | undefined; data: string }[]> {
  const text = await res.text();
  return text
    .split('\n\n')
    .filter((block) => block.includes('data: '))
    .map((block) => ({
      id: /^id: (.*)$/m.exec(block)?.[1],
      data: /^data: (.*)$/m.exec(block)![1]!,
    }));
}

describe('gateway runs and streams', () => {
  it('accepts a run (202) and streams its events with id = seq, ending after the last one', async () => {
    const runId = await submit();
    const events = (await frames(await call(`/v1/runs/${runId}/events`))).map((f) => ({
      id: f.id,
      event: RunEventSchema.parse(JSON.parse(f.data)),
    }));
    expect(events[0]!.event.type).toBe('run.accepted');
    expect(events.at(-1)!.event.type).toBe('run.completed');
    for (const { id, event } of events) expect(id).toBe(String(event.seq));
    expect(events.map((e) => e.event.seq)).toEqual(events.map((_e, i) => i + 1));
    const run = (await (await call(`/v1/runs/${runId}`)).json()) as Record<string, unknown>;
    expect(run).toMatchObject({ run_id: runId, tenant: 'acme', status: 'done' });
  });

  it('resumes after Last-Event-ID or ?after=, each later event once', async () => {
    const runId = await submit();
    const all = await frames(await call(`/v1/runs/${runId}/events`));
    const byHeader = await frames(
      await call(`/v1/runs/${runId}/events`, { headers: { 'last-event-id': '3' } }),
    );
    const byQuery = await frames(await call(`/v1/runs/${runId}/events?after=3`));
    expect(byHeader).toEqual(all.slice(3));
    expect(byQuery).toEqual(all.slice(3));
    const atEnd = await frames(await call(`/v1/runs/${runId}/events?after=${all.length}`));
    expect(atEnd).toEqual([]);
    const bad = await call(`/v1/runs/${runId}/events?after=x`);
    expect(bad.status).toBe(400);
    expect(await bad.text()).toMatch(/resume point/);
  });

  it('answers a submit that accepts text/event-stream with the run stream itself', async () => {
    const res = await call('/v1/runs', {
      method: 'POST',
      headers: { accept: 'text/event-stream' },
      body: JSON.stringify({ task: 'add', script }),
    });
    expect(res.status).toBe(200);
    const runId = res.headers.get('x-agentmesh-run-id')!;
    const events = (await frames(res)).map((f) => RunEventSchema.parse(JSON.parse(f.data)));
    expect(events[0]).toMatchObject({ type: 'run.accepted', run_id: runId, seq: 1 });
    expect(events.at(-1)).toMatchObject({ type: 'run.completed', status: 'done' });
    const ai = await call('/v1/runs?format=ai-sdk', {
      method: 'POST',
      body: JSON.stringify({ task: 'add', script }),
    });
    expect(ai.headers.get('x-vercel-ai-ui-message-stream')).toBe('v1');
    expect((await frames(ai)).at(-1)!.data).toBe('[DONE]');
  });

  it('sends a keep-alive comment while a run is quiet', async () => {
    const runId = `run-quiet-${Date.now()}`;
    const approvalScript = [
      { tool_calls: [{ name: 'math.calc', arguments: { lhs: 1, rhs: 1, op: 'add' } }] },
      { text: 'ok' },
    ];
    await submit({ id: runId, script: approvalScript, approvals: { require: ['math.*'] } });
    const res = await call(`/v1/runs/${runId}/events`);
    const reader = res.body!.getReader();
    let text = '';
    while (!text.includes(': keep-alive')) text += new TextDecoder().decode((await reader.read()).value);
    await reader.cancel();
    await call(`/v1/runs/${runId}/cancel`, { method: 'POST', body: '{}' });
  });
});

describe('gateway stream formats', () => {
  it('ag-ui: every frame parses with @ag-ui/core and carries the text and the tool call', async () => {
    const runId = await submit();
    const got = await frames(await call(`/v1/runs/${runId}/events?format=ag-ui`));
    const events = got.map((f) => EventSchemas.parse(JSON.parse(f.data)));
    const types = events.map((e) => e.type);
    expect(types[0]).toBe('RUN_STARTED');
    expect(types.at(-1)).toBe('RUN_FINISHED');
    for (const t of [
      'STEP_STARTED',
      'STEP_FINISHED',
      'TEXT_MESSAGE_START',
      'TEXT_MESSAGE_CONTENT',
      'TEXT_MESSAGE_END',
      'TOOL_CALL_START',
      'TOOL_CALL_ARGS',
      'TOOL_CALL_END',
      'TOOL_CALL_RESULT',
    ])
      expect(types).toContain(t);
    const text = events.flatMap((e) => (e.type === 'TEXT_MESSAGE_CONTENT' ? [e.delta] : [])).join('|');
    expect(text).toBe('adding|2 + 3 = 5');
    const result = events.find((e) => e.type === 'TOOL_CALL_RESULT') as { content: string };
    expect(result.content).toContain('5');
    const accept = await frames(
      await call(`/v1/runs/${runId}/events`, { headers: { accept: 'text/event-stream; format=ag-ui' } }),
    );
    expect(accept).toEqual(got);
    for (const cut of got.filter((f) => f.id !== undefined).map((f) => f.id!)) {
      const rest = await frames(
        await call(`/v1/runs/${runId}/events?format=ag-ui`, { headers: { 'last-event-id': cut } }),
      );
      const upTo = got.findIndex((f) => f.id === cut);
      expect([...got.slice(0, upTo + 1), ...rest].map((f) => f.data)).toEqual(got.map((f) => f.data));
    }
  });

  it('ag-ui: approvals go out as CUSTOM events with documented names, and the approve route lets the run go on', async () => {
    const runId = `run-agui-approval-${Date.now()}`;
    const approvalScript = [
      { tool_calls: [{ name: 'math.calc', arguments: { lhs: 2, rhs: 2, op: 'mul' } }] },
      { text: '4' },
    ];
    await submit({ id: runId, script: approvalScript, approvals: { require: ['math.*'] } });
    const res = await call(`/v1/runs/${runId}/events?format=ag-ui`);
    const reader = res.body!.pipeThrough(new TextDecoderStream()).getReader();
    const events: Record<string, unknown>[] = [];
    let buffer = '';
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += value;
      const blocks = buffer.split('\n\n');
      buffer = blocks.pop()!;
      for (const block of blocks) {
        const data = /^data: (.*)$/m.exec(block)?.[1];
        if (data === undefined) continue;
        const event = EventSchemas.parse(JSON.parse(data)) as Record<string, unknown>;
        events.push(event);
        if (event['name'] === AG_UI_CUSTOM_EVENTS['approval.requested']) {
          const { approval_id } = event['value'] as { approval_id: string };
          const decided = await call(`/v1/runs/${runId}/approve`, {
            method: 'POST',
            body: JSON.stringify({ approval_id }),
          });
          expect(decided.status).toBe(200);
        }
      }
    }
    const custom = events.filter((e) => e['type'] === 'CUSTOM').map((e) => e['name']);
    expect(custom).toEqual(['agentmesh.approval.requested', 'agentmesh.approval.decided']);
    expect(events.at(-1)).toMatchObject({ type: 'RUN_FINISHED', result: { status: 'done', text: '4' } });
  });

  it('ai-sdk: the ai package reads the stream, resumed halfway, into one UIMessage with text and tool parts', async () => {
    const runId = await submit();
    const whole = await call(`/v1/runs/${runId}/events?format=ai-sdk`);
    expect(whole.headers.get('x-vercel-ai-ui-message-stream')).toBe('v1');
    const got = await frames(whole);
    expect(got.at(-1)!.data).toBe('[DONE]');
    const cut = got.findIndex((f) => f.id !== undefined && Number(f.id) >= 4);
    const first = got.slice(0, cut + 1);
    const rest = await frames(
      await call(`/v1/runs/${runId}/events?format=ai-sdk`, {
        headers: { 'last-event-id': first.at(-1)!.id! },
      }),
    );
    expect([...first, ...rest]).toEqual(got);
    const sse = [...first, ...rest].map((f) => `data: ${f.data}\n\n`).join('');
    const chunks = parseJsonEventStream({
      stream: new Response(sse).body!,
      schema: uiMessageChunkSchema,
    }).pipeThrough(
      new TransformStream({
        transform(part, controller) {
          if (!part.success) throw part.error;
          controller.enqueue(part.value);
        },
      }),
    );
    let message: UIMessage | undefined;
    for await (const m of readUIMessageStream({ stream: chunks })) message = m;
    const texts = message!.parts.flatMap((p) => (p.type === 'text' ? [p.text] : []));
    expect(texts).toEqual(['adding', '2 + 3 = 5']);
    const tool = message!.parts.find((p) => p.type === 'dynamic-tool') as Record<string, unknown>;
    expect(tool).toMatchObject({
      toolName: 'math.calc',
      state: 'output-available',
      input: { lhs: 2, rhs: 3, op: 'add' },
    });
  });

  it("@ag-ui/client's HttpAgent runs a task through POST /v1/ag-ui and gets the text, the tool call and its result", async () => {
    const agent = new HttpAgent({
      url: `${gateway.url}/v1/ag-ui`,
      headers: { authorization: `Bearer ${ACME}` },
    });
    agent.setMessages([{ id: 'u1', role: 'user', content: 'add 2 and 3' }]);
    await agent.runAgent({ forwardedProps: { script } });
    const assistant = agent.messages.filter((m) => m.role === 'assistant');
    expect(assistant.map((m) => m.content)).toEqual(['adding', '2 + 3 = 5']);
    expect(assistant[0]!.toolCalls?.[0]?.function).toMatchObject({ name: 'math.calc' });
    const tool = agent.messages.find((m) => m.role === 'tool');
    expect(tool?.content).toContain('5');
    const run = (await (await call('/v1/runs')).json()) as {
      runs: { session?: string }[];
    };
    expect(run.runs.some((r) => r.session === agent.threadId)).toBe(true);
    agent.addMessage({ id: 'u2', role: 'user', content: 'and again' });
    await agent.runAgent({ forwardedProps: { script } });
    expect(agent.messages.filter((m) => m.role === 'assistant')).toHaveLength(4);
    const again = (await (await call(`/v1/runs?session=${agent.threadId}`)).json()) as { runs: unknown[] };
    expect(again.runs).toHaveLength(2);
  });

  it("the ai package's DefaultChatTransport chats through POST /v1/chat and resumes a run in progress (GET /v1/chat/{id}/stream)", async () => {
    const transport = new DefaultChatTransport({
      api: `${gateway.url}/v1/chat`,
      headers: { authorization: `Bearer ${ACME}` },
    });
    const chatId = `chat-${Date.now()}`;
    const user = (text: string): UIMessage => ({ id: text, role: 'user', parts: [{ type: 'text', text }] });
    const read = async (stream: ReadableStream<UIMessageChunk>) => {
      let last: UIMessage | undefined;
      for await (const m of readUIMessageStream({ stream })) last = m;
      return last!;
    };
    const first = await read(
      await transport.sendMessages({
        chatId,
        messages: [user('add 2 and 3')],
        trigger: 'submit-message',
        messageId: undefined,
        abortSignal: undefined,
        body: { agentmesh: { script } },
      }),
    );
    expect(first.parts.flatMap((p) => (p.type === 'text' ? [p.text] : []))).toEqual(['adding', '2 + 3 = 5']);
    expect(await transport.reconnectToStream({ chatId })).toBeNull();

    const waiting = await transport.sendMessages({
      chatId,
      messages: [user('multiply 2 and 2')],
      trigger: 'submit-message',
      messageId: undefined,
      abortSignal: undefined,
      body: {
        agentmesh: {
          script: [
            { tool_calls: [{ name: 'math.calc', arguments: { lhs: 2, rhs: 2, op: 'mul' } }] },
            { text: '4' },
          ],
          approvals: { require: ['math.*'] },
        },
      },
    });
    const reader = waiting.getReader();
    let approvalId: string | undefined;
    while (approvalId === undefined) {
      const { value } = await reader.read();
      if (value?.type === 'data-approval') approvalId = (value.data as { approval_id: string }).approval_id;
    }
    await reader.cancel();
    const resumed = await transport.reconnectToStream({ chatId });
    expect(resumed).not.toBeNull();
    const runs = (await (await call(`/v1/runs?session=${chatId}`)).json()) as { runs: { run_id: string }[] };
    await call(`/v1/runs/${runs.runs[0]!.run_id}/approve`, {
      method: 'POST',
      body: JSON.stringify({ approval_id: approvalId }),
    });
    const second = await read(resumed!);
    expect(second.parts.flatMap((p) => (p.type === 'text' ? [p.text] : []))).toEqual(['4']);
    expect(second.parts.find((p) => p.type === 'dynamic-tool')).toMatchObject({
      toolName: 'math.calc',
      state: 'output-available',
      output: { result: 4 },
    });
  });

  it('an unknown format is 400 naming the known ones', async () => {
    const runId = await submit();
    const res = await call(`/v1/runs/${runId}/events?format=xml`);
    expect(res.status).toBe(400);
    expect(await res.text()).toMatch(/agentmesh, ag-ui, ai-sdk/);
  });
});

describe('gateway auth and tenancy', () => {
  it('answers 401 without a key or with an unknown one', async () => {
    const missing = await call('/v1/runs', { key: null });
    expect(missing.status).toBe(401);
    expect(missing.headers.get('www-authenticate')).toMatch(/^Bearer/);
    expect((await call('/v1/runs', { key: 'x'.repeat(40) })).status).toBe(401);
    expect((await call('/healthz', { key: null })).status).toBe(200);
  });

  it('hides a run of another tenant: 404 to read, stream or control it, absent from lists', async () => {
    const runId = await submit({}, GLOBEX);
    expect((await call(`/v1/runs/${runId}`)).status).toBe(404);
    expect((await call(`/v1/runs/${runId}/events`)).status).toBe(404);
    expect((await call(`/v1/runs/${runId}/cancel`, { method: 'POST', body: '{}' })).status).toBe(404);
    expect((await call(`/v1/runs/${runId}/input`, { method: 'POST', body: '{"text":"hi"}' })).status).toBe(
      404,
    );
    const mine = (await (await call('/v1/runs')).json()) as { runs: { run_id: string; tenant: string }[] };
    expect(mine.runs.map((r) => r.run_id)).not.toContain(runId);
    expect(mine.runs.every((r) => r.tenant === 'acme')).toBe(true);
    const theirs = (await (await call('/v1/runs', { key: GLOBEX })).json()) as { runs: { run_id: string }[] };
    expect(theirs.runs.map((r) => r.run_id)).toContain(runId);
    expect((await call('/v1/runs?tenant=globex')).status).toBe(403);
  });

  it('answers a resubmitted run id again without a second run, and refuses a run id of another tenant (409)', async () => {
    const runId = await submit({ id: `run-own-${Date.now()}` });
    expect(await submit({ id: runId })).toBe(runId);
    expect(index.list().filter((s) => s.run_id === runId)).toHaveLength(1);
    const theirs = await call('/v1/runs', {
      method: 'POST',
      key: GLOBEX,
      body: JSON.stringify({ id: runId, task: 'x', script }),
    });
    expect(theirs.status).toBe(409);
    expect(((await theirs.json()) as { error: { code: string } }).error.code).toBe('conflict');
  });

  it('sets identity.tenant from the key and refuses a body naming another tenant (403 naming both)', async () => {
    const res = await call('/v1/runs', {
      method: 'POST',
      body: JSON.stringify({ task: 'x', script, identity: { tenant: 'globex' } }),
    });
    expect(res.status).toBe(403);
    const body = (await res.json()) as { error: { code: string; message: string } };
    expect(body.error.code).toBe('permission_denied');
    expect(body.error.message).toMatch(/"globex".*"acme"/);
    const runId = await submit({ identity: { user: 'u1', session: 's-gw' } });
    const accepted = index.list().find((s) => s.run_id === runId)!;
    expect(accepted.tenant).toBe('acme');
  });

  it("forks only its own tenant's runs: another tenant's run is not_found to a fork, as an unknown one", async () => {
    const theirs = await submit({}, GLOBEX);
    const mine = await submit();
    for (const runId of [theirs, mine])
      for (let i = 0; (await readTranscript(mesh.bus, runId)) === null; i++) {
        if (i > 400) throw new Error(`no transcript of ${runId}`);
        await new Promise((r) => setTimeout(r, 25));
      }
    const fork = async (runId: string) => {
      const forkId = await submit({ script: [{ text: 'forked' }], fork: { run_id: runId, seq: 2 } });
      const last = (await frames(await call(`/v1/runs/${forkId}/events`))).at(-1)!;
      return RunEventSchema.parse(JSON.parse(last.data));
    };
    expect(await fork(theirs)).toMatchObject({ type: 'run.failed', error: { code: 'not_found' } });
    expect(await fork('run-nobody-has')).toMatchObject({ type: 'run.failed', error: { code: 'not_found' } });
    expect(await fork(mine)).toMatchObject({ type: 'run.completed', status: 'done', text: 'forked' });
  });

  it('refuses a foreign Origin and answers a listed one with CORS headers', async () => {
    expect((await call('/v1/runs', { headers: { origin: 'http://evil.example' } })).status).toBe(403);
    const ok = await call('/v1/runs', { headers: { origin: 'http://app.example' } });
    expect(ok.headers.get('access-control-allow-origin')).toBe('http://app.example');
    const preflight = await call('/v1/runs', {
      method: 'OPTIONS',
      key: null,
      headers: { origin: 'http://app.example' },
    });
    expect(preflight.status).toBe(204);
  });
});

describe('gateway limits and errors', () => {
  it('answers 413 above 1 MiB and 400 naming the JSON problem', async () => {
    const big = await call('/v1/runs', {
      method: 'POST',
      body: JSON.stringify({ task: 'x'.repeat(1 << 20) }),
    });
    expect(big.status).toBe(413);
    expect(((await big.json()) as { error: { code: string } }).error.code).toBe('payload_too_large');
    const bad = await call('/v1/runs', { method: 'POST', body: '{"task": ' });
    expect(bad.status).toBe(400);
    expect(await bad.text()).toMatch(/not valid JSON/);
    const identity = await call('/v1/runs', { method: 'POST', body: '{"task": "x", "identity": "acme"}' });
    expect(identity.status).toBe(400);
    expect(await identity.text()).toMatch(/identity must be an object/);
    const invalid = await call('/v1/runs', { method: 'POST', body: '{"task": 5}' });
    expect(invalid.status).toBe(400);
    expect(await invalid.text()).toMatch(/task/);
  });

  it('answers a control sent again with its request_id as duplicate, once recorded', async () => {
    const runId = await submit({ script: [{ text: 'slow', delay_ms: 10_000 }] });
    const pause = () => call(`/v1/runs/${runId}/pause`, { method: 'POST', body: '{"request_id":"rq-gw-1"}' });
    const first = await pause();
    expect(first.status, await first.clone().text()).toBe(200);
    expect(await first.json()).toEqual({ run_id: runId, ok: true });
    expect(await (await pause()).json()).toEqual({ run_id: runId, ok: true, duplicate: true });
    const cancelled = await call(`/v1/runs/${runId}/cancel`, {
      method: 'POST',
      body: '{"request_id":"rq-gw-2"}',
    });
    expect(cancelled.status).toBe(200);
  });

  it('controls a run with the named errors of the fleet', async () => {
    const runId = await submit();
    await frames(await call(`/v1/runs/${runId}/events`));
    const late = await call(`/v1/runs/${runId}/cancel`, { method: 'POST', body: '{}' });
    expect(late.status).toBe(409);
    expect(((await late.json()) as { error: { code: string } }).error.code).toBe('run_finished');
    const empty = await call(`/v1/runs/${runId}/input`, { method: 'POST', body: '{}' });
    expect(empty.status).toBe(400);
  });
});

describe('gateway OpenAPI', () => {
  it('documents every live route, and live answers match the documented schemas', async () => {
    const doc = (await (await call('/openapi.json', { key: null })).json()) as {
      openapi: string;
      paths: Record<
        string,
        Record<string, { responses: Record<string, { content?: Record<string, { schema: object }> }> }>
      >;
    };
    expect(doc.openapi).toBe('3.1.0');
    const documented = Object.entries(doc.paths).flatMap(([path, ops]) =>
      Object.keys(ops).map((m) => `${m.toUpperCase()} ${path}`),
    );
    expect(documented.sort()).toEqual(ROUTES.map((r) => `${r.method} ${r.path}`).sort());
    const runId = await submit();
    await frames(await call(`/v1/runs/${runId}/events`));
    const ajv = new Ajv2020({ strict: false });
    const check = async (method: string, template: string, path: string, status: number) => {
      const res = await call(path);
      expect(res.status, `${method} ${path}`).toBe(status);
      const schema =
        doc.paths[template]![method.toLowerCase()]!.responses[String(status)]!.content!['application/json']!
          .schema;
      const validate = ajv.compile(schema);
      expect(validate(await res.json()), JSON.stringify(validate.errors)).toBe(true);
    };
    await check('GET', '/v1/runs', '/v1/runs', 200);
    await check('GET', '/v1/runs/{id}', `/v1/runs/${runId}`, 200);
    await check('GET', '/v1/runs/{id}', '/v1/runs/nope', 404);
    await check('GET', '/v1/tools', '/v1/tools?q=add', 200);
    await check('GET', '/healthz', '/healthz', 200);
    await check('GET', '/readyz', '/readyz', 200);
    for (const route of ROUTES.filter((r) => r.path.includes('{id}') && r.method === 'POST')) {
      const res = await call(route.path.replace('{id}', 'unknown-run'), { method: 'POST', body: '{}' });
      expect([400, 404], route.path).toContain(res.status);
    }
    expect((await call('/v1/nothing')).status).toBe(404);
    const frame = (await frames(await call(`/v1/runs/${runId}/events`)))[0]!;
    const streamSchema =
      doc.paths['/v1/runs/{id}/events']!.get!.responses['200']!.content!['text/event-stream']!.schema;
    expect(ajv.compile(streamSchema)(JSON.parse(frame.data) as RunEvent)).toBe(true);
  });
});
