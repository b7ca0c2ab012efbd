/**
 * A daemon's planner cut off from NATS after the wake's checkpoint and before the wake's `daemon.woken` reached the
 * server (a fault proxy drops that append and everything after it): the planner that resumes the run publishes the
 * event, once, and the trigger is handled once. Real nats-server, a stand-in OpenAI server.
 */
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { NatsBus, silentLogger, subjects, type RunEvent } from '@agentmesh/protocol';
import { Planner, cancelRun, submitRun, triggerRun } from '@agentmesh/planner';
import { startOpenAiServer } from './fixtures/llm/openai-server.js';
import type { FakeLlmServer, FakeReply } from './fixtures/llm/common.js';
import { calcTool, startFakeMesh, type FakeMesh } from './fixtures/llm/mesh.js';
import { dropPrefix, uniquePrefix } from './fixtures/llm/nats.js';
import { FaultProxy } from './helpers/fault-proxy.js';
import { EventBoard } from './helpers/wait.js';

const natsUrl = inject('natsUrl');
const prefix = uniquePrefix('dwr');
const LEASE_MS = 2_000;
const board = new EventBoard();
const planners: { planner: Planner; bus: NatsBus }[] = [];
let client: NatsBus;
let nc: NatsConnection;
let mesh: FakeMesh;
let server: FakeLlmServer;
let proxy: FaultProxy;

async function reply(body: Record<string, any>): Promise<FakeReply> {
  const last = (body['messages'] as { content: string }[]).at(-1)!;
  const job = /^\{"kind":"job","n":(\d+)\}$/.exec(last.content);
  return { text: job ? `handled ${job[1]}` : 'ready' };
}

async function startPlanner(id: string, url: string): Promise<void> {
  const bus = await NatsBus.connect(url);
  const planner = new Planner({
    bus,
    prefix,
    logger: silentLogger(),
    plannerId: id,
    durability: { leaseMs: LEASE_MS },
    providers: { openaiApiKey: 'sk-test', openaiBaseUrl: server.url, maxRetries: 0, stream: false, env: {} },
  });
  await planner.start();
  planners.push({ planner, bus });
}

const ofType = (runId: string, type: RunEvent['type']) => board.of(runId).filter((e) => e.type === type);

beforeAll(async () => {
  client = await NatsBus.connect(natsUrl);
  nc = await connect({ servers: natsUrl });
  mesh = startFakeMesh(client, [calcTool], { prefix });
  server = await startOpenAiServer(reply);
  proxy = await FaultProxy.start(natsUrl);
  nc.subscribe(subjects(prefix).allRunEvents, { callback: (_e, msg) => board.add(msg.json<RunEvent>()) });
  await nc.flush();
});

afterAll(async () => {
  for (const { planner } of planners)
    await Promise.race([planner.drain(), new Promise((r) => setTimeout(r, 2_000))]);
  for (const { bus } of planners) await bus.close().catch(() => undefined);
  await proxy.close();
  mesh.stop();
  await server.close();
  await nc.close();
  await dropPrefix(client, prefix);
  await client.close();
});

describe('daemon.woken across a planner lost between the wake checkpoint and the event', () => {
  it('is published once, by the planner that resumes the run, and the trigger is handled once', async () => {
    const runId = 'dwr-1';
    await startPlanner('planner-cut', proxy.url);
    await submitRun(
      client,
      { id: runId, task: 'Handle each job trigger.', provider: 'openai', model: 'gpt-4o-mini', daemon: {} },
      { prefix },
    );
    await board.until(
      'idle on the first planner',
      () => ofType(runId, 'daemon.idle').length > 0 || undefined,
    );
    await startPlanner('planner-next', natsUrl);

    const eventsSubject = subjects(prefix).runEvents(runId);
    const cut = proxy.cutOnSend((chunk) => {
      const text = chunk.toString('latin1');
      return text.includes(eventsSubject) && text.includes('"daemon.woken"');
    });
    expect(await triggerRun(client, runId, { kind: 'job', n: 1 }, { prefix })).toMatchObject({ seq: 1 });
    await cut;
    const idleAgain = () => ofType(runId, 'daemon.idle').length >= 2 || undefined;
    await board.until('idle again after the takeover', idleAgain, { timeoutMs: 60_000 });

    const events = board.of(runId);
    const woken = ofType(runId, 'daemon.woken');
    expect(woken).toEqual([expect.objectContaining({ reason: 'trigger', trigger: { kind: 'job', n: 1 } })]);
    const resumedAt = events.findIndex((e) => e.type === 'run.started' && e.resumed);
    expect(resumedAt).toBeGreaterThan(0);
    expect(events.indexOf(woken[0]!)).toBeGreaterThan(resumedAt);
    expect(events.map((e) => e.seq)).toEqual(events.map((_, i) => i + 1));
    const asked = server.requests.filter((b) =>
      (b['messages'] as { content: string }[]).some((m) => m.content === '{"kind":"job","n":1}'),
    );
    expect(asked).toHaveLength(1);

    await cancelRun(client, runId, { prefix });
    await board.until('cancelled', () => ofType(runId, 'run.completed')[0]);
  }, 90_000);
});
