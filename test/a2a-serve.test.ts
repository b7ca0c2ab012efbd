import type { Server as HttpServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Role, TaskState, type Message, type Task } from '@a2a-js/sdk';
import { ClientFactory, type Client } from '@a2a-js/sdk/client';
import { LegacyJsonRpcTransport } from '@a2a-js/sdk/compat/v0_3/client';
import { DEFAULT_PREFIX, silentLogger } from '@agentmesh/protocol';
import { serveA2a, startEmbedded, type EmbeddedMesh } from '@agentmesh/cli';
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
    });
    servers.push(http);
    const address = http.address() as AddressInfo;
    return new ClientFactory().createFromUrl(`http://127.0.0.1:${address.port}`);
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
    const legacy = new LegacyJsonRpcTransport({ endpoint: `http://127.0.0.1:${port}/a2a` });
    const task = (await legacy.sendMessage(request('hash abc the old way'))) as Task;
    expect(task.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
    expect(partText(task)).toContain('ba7816bf');
    const again = await legacy.getTask({ tenant: '', id: task.id, historyLength: undefined });
    expect(again.id).toBe(task.id);
  });
});
