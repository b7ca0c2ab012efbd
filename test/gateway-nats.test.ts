/**
 * Issue 34, the HTTP gateway in front of a NATS fleet: runs submitted over HTTP, their streams read from the
 * JetStream event log (nothing kept in the gateway), a client that drops mid-run and resumes with Last-Event-ID,
 * approval through the gateway, @ag-ui/client's own parser on the ag-ui stream, tenants kept apart.
 */
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { runHttpRequest, transformHttpEventStream, verifyEvents } from '@ag-ui/client';
import type { BaseEvent } from '@ag-ui/core';
import { DefaultChatTransport, readUIMessageStream, type UIMessage } from 'ai';
import { RunEventSchema, silentLogger, type RunEvent } from '@agentmesh/protocol';
import { NatsRunSource, startGateway, type Gateway } from '@agentmesh/cli';
import { cleanEnv, startActor } from './helpers/cli.js';
import { startNatsFleet, type NatsFleet } from './helpers/fleet.js';

const natsUrl = inject('natsUrl');
const ACME = 'k'.repeat(40);
const GLOBEX = 'q'.repeat(40);
let fleet: NatsFleet;
let gateway: Gateway;

beforeAll(async () => {
  fleet = await startNatsFleet(natsUrl, { prefixTag: 'gw' });
  await fleet.planner('gw-p1');
  gateway = await startGateway({
    bus: fleet.client,
    prefix: fleet.prefix,
    source: new NatsRunSource(fleet.client, fleet.prefix),
    logger: silentLogger(),
    keys: new Map([
      [ACME, 'acme'],
      [GLOBEX, 'globex'],
    ]),
    port: 0,
  });
});

afterAll(async () => {
  await gateway?.close();
  await fleet?.stop();
});

function call(path: string, init: RequestInit & { key?: string } = {}): Promise<Response> {
  const { key = ACME, ...rest } = init;
  return fetch(`${gateway.url}${path}`, {
    ...rest,
    headers: {
      authorization: `Bearer ${key}`,
      'content-type': 'application/json',
      ...(rest.headers as Record<string, string>),
    },
  });
}

async function submit(body: Record<string, unknown>, key = ACME): Promise<string> {
  const res = await call('/v1/runs', { method: 'POST', key, body: JSON.stringify(body) });
  expect(res.status, await res.clone().text()).toBe(202);
  return ((await res.json()) as { run_id: string }).run_id;
}

/** Reads a stream's run events until `stop` says so, then drops the connection; returns them and the last id. */
async function readUntil(
  res: Response,
  stop: (e: RunEvent) => boolean,
): Promise<{ events: RunEvent[]; lastId: string }> {
  const reader = res.body!.getReader();
  const decoder = new TextDecoder();
  const events: RunEvent[] = [];
  let buffer = '';
  let lastId = '0';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += decoder.decode(value, { stream: true });
    let cut: number;
    while ((cut = buffer.indexOf('\n\n')) >= 0) {
      const block = buffer.slice(0, cut);
      buffer = buffer.slice(cut + 2);
      const data = /^data: (.*)$/m.exec(block)?.[1];
      if (data === undefined) continue;
      lastId = /^id: (.*)$/m.exec(block)?.[1] ?? lastId;
      const event = RunEventSchema.parse(JSON.parse(data));
      events.push(event);
      if (stop(event)) {
        await reader.cancel();
        return { events, lastId };
      }
    }
  }
  return { events, lastId };
}

const approvalScript = [
  { text: 'let me multiply', tool_calls: [{ name: 'math.calc', arguments: { lhs: 6, rhs: 7, op: 'mul' } }] },
  { text: '6 x 7 = 42' },
];

describe('gateway over NATS', () => {
  it('resumes a dropped stream mid-run with Last-Event-ID: every later event once, to the end', async () => {
    const runId = await submit({
      task: 'multiply',
      script: approvalScript,
      approvals: { require: ['math.calc'] },
    });
    const before = await readUntil(
      await call(`/v1/runs/${runId}/events`),
      (e) => e.type === 'approval.requested',
    );
    const approval = before.events.at(-1) as Extract<RunEvent, { type: 'approval.requested' }>;
    const waiting = (await (await call(`/v1/runs/${runId}`)).json()) as { status: string };
    expect(['running', 'awaiting_approval']).toContain(waiting.status);
    const decided = await call(`/v1/runs/${runId}/approve`, {
      method: 'POST',
      body: JSON.stringify({ approval_id: approval.approval_id }),
    });
    expect(decided.status, await decided.clone().text()).toBe(200);
    const after = await readUntil(
      await call(`/v1/runs/${runId}/events`, { headers: { 'last-event-id': before.lastId } }),
      () => false,
    );
    const seqs = [...before.events, ...after.events].map((e) => e.seq);
    expect(seqs).toEqual(seqs.map((_s, i) => i + 1));
    const final = after.events.at(-1)!;
    expect(final).toMatchObject({ type: 'run.completed', status: 'done', text: '6 x 7 = 42' });
    const again = await call(`/v1/runs/${runId}/approve`, {
      method: 'POST',
      body: JSON.stringify({ approval_id: approval.approval_id }),
    });
    expect(again.status).toBe(409);
  });

  it('@ag-ui/client parses and verifies the ag-ui stream (event order rules) into the text and the tool call', async () => {
    const runId = await submit({ task: 'multiply', script: approvalScript });
    const events = await new Promise<BaseEvent[]>((resolve, reject) => {
      const got: BaseEvent[] = [];
      transformHttpEventStream(
        runHttpRequest(() =>
          fetch(`${gateway.url}/v1/runs/${runId}/events?format=ag-ui`, {
            headers: { authorization: `Bearer ${ACME}`, accept: 'text/event-stream' },
          }),
        ),
      )
        .pipe(verifyEvents())
        .subscribe({ next: (e) => got.push(e), error: reject, complete: () => resolve(got) });
    });
    const types = events.map((e) => e.type as string);
    expect(types[0]).toBe('RUN_STARTED');
    expect(types.at(-1)).toBe('RUN_FINISHED');
    const text = events.flatMap((e) =>
      e.type === 'TEXT_MESSAGE_CONTENT' ? [(e as unknown as { delta: string }).delta] : [],
    );
    expect(text.join('')).toContain('6 x 7 = 42');
    const start = events.find((e) => e.type === 'TOOL_CALL_START') as unknown as { toolCallName: string };
    expect(start.toolCallName).toBe('math.calc');
    const result = events.find((e) => e.type === 'TOOL_CALL_RESULT') as unknown as { content: string };
    expect(result.content).toContain('42');
  });

  it("resumes an AI SDK chat mid-run from JetStream (DefaultChatTransport's reconnectToStream; no Redis)", async () => {
    const transport = new DefaultChatTransport({
      api: `${gateway.url}/v1/chat`,
      headers: { authorization: `Bearer ${ACME}` },
    });
    const chatId = `chat-nats-${Date.now()}`;
    const waiting = await transport.sendMessages({
      chatId,
      messages: [{ id: 'm1', role: 'user', parts: [{ type: 'text', text: 'multiply 6 and 7' }] }],
      trigger: 'submit-message',
      messageId: undefined,
      abortSignal: undefined,
      body: { agentmesh: { script: approvalScript, approvals: { require: ['math.calc'] } } },
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
    const decided = await call(`/v1/runs/${runs.runs[0]!.run_id}/approve`, {
      method: 'POST',
      body: JSON.stringify({ approval_id: approvalId }),
    });
    expect(decided.status).toBe(200);
    let message: UIMessage | undefined;
    for await (const m of readUIMessageStream({ stream: resumed! })) message = m;
    expect(message!.parts.flatMap((p) => (p.type === 'text' ? [p.text] : []))).toEqual([
      'let me multiply',
      '6 x 7 = 42',
    ]);
    expect(message!.parts.find((p) => p.type === 'dynamic-tool')).toMatchObject({
      toolName: 'math.calc',
      state: 'output-available',
    });
    // the run record says finished a moment after the final event: then the chat has nothing to resume
    await expect
      .poll(async () => {
        const stream = await transport.reconnectToStream({ chatId });
        await stream?.cancel();
        return stream;
      })
      .toBeNull();
  });

  it('runs as the agentmesh gateway process in front of the fleet, keys from AGENTMESH_GATEWAY_KEYS', async () => {
    const gatewayProcess = await startActor(
      ['gateway', '--port', '0', '--nats', natsUrl, '--prefix', fleet.prefix],
      cleanEnv({ AGENTMESH_GATEWAY_KEYS: `${ACME}=acme` }),
      /API key\(s\), 1 tenant\(s\)/,
    );
    try {
      const url = /agentmesh gateway at (http:\/\/\S+) \(NATS /.exec(gatewayProcess.logs())![1]!;
      expect((await fetch(`${url}/v1/runs`)).status).toBe(401);
      const res = await fetch(`${url}/v1/runs`, {
        method: 'POST',
        headers: {
          authorization: `Bearer ${ACME}`,
          accept: 'text/event-stream',
          'content-type': 'application/json',
        },
        body: JSON.stringify({ task: 'multiply', script: approvalScript }),
      });
      expect(res.status).toBe(200);
      const { events } = await readUntil(res, () => false);
      expect(events.at(-1)).toMatchObject({ type: 'run.completed', status: 'done', text: '6 x 7 = 42' });
      expect(events.map((e) => e.seq)).toEqual(events.map((_e, i) => i + 1));
    } finally {
      await gatewayProcess.stop();
    }
  });

  it("keeps tenants apart: another tenant's run is 404 and not listed", async () => {
    const runId = await submit({ task: 'multiply', script: approvalScript }, GLOBEX);
    expect((await call(`/v1/runs/${runId}`)).status).toBe(404);
    expect((await call(`/v1/runs/${runId}/events`)).status).toBe(404);
    expect((await call(`/v1/runs/${runId}/pause`, { method: 'POST', body: '{}' })).status).toBe(404);
    const mine = (await (await call('/v1/runs')).json()) as { runs: { run_id: string }[] };
    expect(mine.runs.map((r) => r.run_id)).not.toContain(runId);
    const theirs = (await (await call('/v1/runs', { key: GLOBEX })).json()) as {
      runs: { run_id: string; tenant: string }[];
    };
    expect(theirs.runs.find((r) => r.run_id === runId)?.tenant).toBe('globex');
  });
});
