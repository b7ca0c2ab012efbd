import type { Server as HttpServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Role, TaskState, type Message, type Task } from '@a2a-js/sdk';
import {
  ClientFactory,
  ClientFactoryOptions,
  JsonRpcTransportFactory,
  type Client,
} from '@a2a-js/sdk/client';
import { LegacyJsonRpcTransport } from '@a2a-js/sdk/compat/v0_3/client';
import { DEFAULT_PREFIX, silentLogger } from '@agentmesh/protocol';
import { BoundedTaskStore, serveA2a, startEmbedded, type EmbeddedMesh } from '@agentmesh/cli';
import { ServerCallContext } from '@a2a-js/sdk/server';
import { freePort } from './helpers/nats-server.js';

function userMessage(text: string): Message {
  return {
    messageId: `m-${Math.random().toString(36).slice(2)}`,
    contextId: '',
    taskId: '',
    role: Role.ROLE_USER,
    parts: [
      { content: { $case: 'text', value: text }, metadata: undefined, filename: '', mediaType: 'text/plain' },
    ],
    metadata: undefined,
    extensions: [],
    referenceTaskIds: [],
  };
}

const request = (text: string, returnImmediately = false) => ({
  tenant: '',
  message: userMessage(text),
  configuration: {
    acceptedOutputModes: ['text/plain'],
    taskPushNotificationConfig: undefined,
    returnImmediately,
  },
  metadata: undefined,
});

const partText = (task: Task) =>
  task.artifacts
    .flatMap((a) => a.parts)
    .map((p) => (p.content?.$case === 'text' ? p.content.value : ''))
    .join('');

const TOKEN = 'a2a-test-token-0123456789abcdef0123456789';

/** `fetch` that sends the agent's bearer token, as a configured A2A client would. */
const withToken: typeof fetch = (input, init) =>
  fetch(input, {
    ...init,
    headers: { ...(init?.headers as Record<string, string>), authorization: `Bearer ${TOKEN}` },
  });

function tokenClients(): ClientFactory {
  return new ClientFactory(
    ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
      transports: [new JsonRpcTransportFactory({ fetchImpl: withToken })],
    }),
  );
}

describe('agentmesh as an A2A agent, driven by the @a2a-js/sdk client', () => {
  let mesh: EmbeddedMesh;
  const servers: HttpServer[] = [];
  let quick: Client;
  let slow: Client;

  async function agent(script: unknown[]): Promise<Client> {
    const port = await freePort();
    const http = await serveA2a({
      bus: mesh.bus,
      prefix: DEFAULT_PREFIX,
      logger: silentLogger(),
      port,
      publicUrl: `http://127.0.0.1:${port}`,
      baseRequest: { provider: 'scripted', script: script as never },
      token: TOKEN,
    });
    servers.push(http);
    const address = http.address() as AddressInfo;
    return tokenClients().createFromUrl(`http://127.0.0.1:${address.port}`);
  }

  beforeAll(async () => {
    mesh = await startEmbedded({ config: {}, logger: silentLogger() });
    quick = await agent([
      { tool_calls: [{ id: 'c1', name: 'crypto.sha256', arguments: { text: 'abc' } }] },
      { text: 'the digest starts with ba7816bf' },
    ]);
    slow = await agent([{ text: 'too late', delay_ms: 120_000 }]);
  });

  afterAll(async () => {
    await Promise.all(servers.map((s) => new Promise((r) => s.close(r))));
    await mesh?.stop();
  });

  it('serves an agent card', async () => {
    const port = (servers[0]?.address() as AddressInfo).port;
    const card = (await (await fetch(`http://127.0.0.1:${port}/.well-known/agent-card.json`)).json()) as {
      name: string;
      capabilities: { streaming: boolean };
    };
    expect(card.name).toBe('agentmesh');
    expect(card.capabilities.streaming).toBe(true);
  });

  it('refuses a JSON-RPC request without the bearer token, or with a wrong one (401)', async () => {
    const port = (servers[0]?.address() as AddressInfo).port;
    const send = (headers: Record<string, string>) =>
      fetch(`http://127.0.0.1:${port}/a2a`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...headers },
        body: JSON.stringify({
          jsonrpc: '2.0',
          id: 1,
          method: 'message/send',
          params: {
            message: {
              kind: 'message',
              messageId: 'm-forged',
              role: 'user',
              parts: [{ kind: 'text', text: 'hash' }],
            },
          },
        }),
      });
    const missing = await send({});
    expect(missing.status).toBe(401);
    expect(await missing.text()).toContain('Authorization: Bearer');
    expect((await send({ authorization: 'Bearer wrong' })).status).toBe(401);
    const unauthenticated = new LegacyJsonRpcTransport({ endpoint: `http://127.0.0.1:${port}/a2a` });
    await expect(unauthenticated.sendMessage(request('hash abc'))).rejects.toThrow(/Authorization: Bearer/);
  });

  it('message/send runs the message as a task and returns the completed task with the answer', async () => {
    const result = await quick.sendMessage(request('hash abc'));
    const task = result as Task;
    expect(task.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
    expect(partText(task)).toContain('ba7816bf');
    const again = await quick.getTask({ tenant: '', id: task.id, historyLength: undefined });
    expect(again.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
  });

  it('message/stream turns run events into status updates', async () => {
    const states: TaskState[] = [];
    const notes: string[] = [];
    for await (const event of quick.sendMessageStream(request('hash abc again'))) {
      if (event.payload?.$case === 'statusUpdate') {
        const status = event.payload.value.status;
        if (status) states.push(status.state);
        const part = status?.message?.parts[0]?.content;
        if (part?.$case === 'text') notes.push(part.value);
      }
    }
    expect(states).toContain(TaskState.TASK_STATE_WORKING);
    expect(states.at(-1)).toBe(TaskState.TASK_STATE_COMPLETED);
    expect(notes).toContain('calling crypto.sha256');
  });

  it('tasks/cancel cancels the run behind the task', async () => {
    const submitted = (await slow.sendMessage(request('wait for a long time', true))) as Task;
    const started = Date.now();
    let working: Task | undefined;
    while (working?.status?.state !== TaskState.TASK_STATE_WORKING) {
      working = await slow.getTask({ tenant: '', id: submitted.id, historyLength: undefined });
      if (Date.now() - started > 20_000) throw new Error('the task never started working');
      await new Promise((r) => setTimeout(r, 50));
    }
    await slow.cancelTask({ tenant: '', id: submitted.id, metadata: undefined });
    let task: Task | undefined;
    while (task?.status?.state !== TaskState.TASK_STATE_CANCELED) {
      task = await slow.getTask({ tenant: '', id: submitted.id, historyLength: undefined });
      if (Date.now() - started > 30_000) throw new Error(`the task is ${task?.status?.state}, not cancelled`);
      await new Promise((r) => setTimeout(r, 50));
    }
    expect(Date.now() - started).toBeLessThan(60_000);
  });

  it('speaks A2A 0.3 too (message/send, tasks/get through the SDK legacy transport)', async () => {
    const port = (servers[0]?.address() as AddressInfo).port;
    const legacy = new LegacyJsonRpcTransport({
      endpoint: `http://127.0.0.1:${port}/a2a`,
      fetchImpl: withToken,
    });
    const task = (await legacy.sendMessage(request('hash abc the old way'))) as Task;
    expect(task.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
    expect(partText(task)).toContain('ba7816bf');
    const again = await legacy.getTask({ tenant: '', id: task.id, historyLength: undefined });
    expect(again.id).toBe(task.id);
  });
});

describe('the A2A task store is bounded', () => {
  const task = (id: string, state: TaskState): Task => ({
    id,
    contextId: 'c',
    status: { state, message: undefined, timestamp: new Date().toISOString() },
    artifacts: [],
    history: [],
    metadata: undefined,
  });
  const context = new ServerCallContext();

  it('keeps at most maxTasks, dropping the oldest finished task first, then the oldest', async () => {
    const store = new BoundedTaskStore(3);
    await store.save(task('t1', TaskState.TASK_STATE_WORKING), context);
    await store.save(task('t2', TaskState.TASK_STATE_COMPLETED), context);
    await store.save(task('t3', TaskState.TASK_STATE_WORKING), context);
    await store.save(task('t4', TaskState.TASK_STATE_SUBMITTED), context);
    expect(store.size).toBe(3);
    expect(await store.load('t2', context)).toBeUndefined();
    expect((await store.load('t1', context))?.status?.state).toBe(TaskState.TASK_STATE_WORKING);
    await store.save(task('t1', TaskState.TASK_STATE_WORKING), context);
    await store.save(task('t5', TaskState.TASK_STATE_SUBMITTED), context);
    expect(store.size).toBe(3);
    expect(await store.load('t1', context)).toBeUndefined();
    const listed = await store.list(
      { tenant: '', contextId: '', pageSize: 10, pageToken: '', historyLength: undefined } as never,
      context,
    );
    expect(listed.tasks.map((t) => t.id).sort()).toEqual(['t3', 't4', 't5']);
  });

  it('holds 1,000 tasks at most under a stream of 5,000 finished ones', async () => {
    const store = new BoundedTaskStore();
    for (let i = 0; i < 5000; i++) await store.save(task(`t${i}`, TaskState.TASK_STATE_COMPLETED), context);
    expect(store.size).toBe(1000);
    expect(await store.load('t3999', context)).toBeUndefined();
    expect(await store.load('t4000', context)).toBeDefined();
  });
});
