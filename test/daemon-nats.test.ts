/**
 * Issue 23, daemons on a real nats-server with a stand-in OpenAI server: triggers wake a daemon in order, one per
 * wake, each handled exactly once even when its planner dies between triggers; a trigger sent while the daemon is
 * busy waits its turn; the timer wakes it; the idle watchdog ends it; a full queue refuses with `queue_full`.
 */
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import {
  ErrorCode,
  NatsBus,
  createLogger,
  isAgentMeshError,
  retry,
  silentLogger,
  subjects,
  type RunEvent,
} from '@agentmesh/protocol';
import { Planner, cancelRun, readScriptFile, submitRun, triggerRun } from '@agentmesh/planner';
import { startOpenAiServer } from './fixtures/llm/openai-server.js';
import type { FakeLlmServer, FakeReply } from './fixtures/llm/common.js';
import { calcTool, sha256Tool, startFakeMesh, type FakeMesh } from './fixtures/llm/mesh.js';
import { dropPrefix, uniquePrefix } from './fixtures/llm/nats.js';
import { cleanEnv, runAgentmesh } from './helpers/cli.js';
import { EventBoard, firstWakeOffQueue } from './helpers/wait.js';

const natsUrl = inject('natsUrl');
const prefix = uniquePrefix('dm');
const LEASE_MS = 2_000;
let client: NatsBus;
let nc: NatsConnection;
let mesh: FakeMesh;
let server: FakeLlmServer;
const planners: { planner: Planner; bus: NatsBus; id: string }[] = [];
const board = new EventBoard();
/** Replies the stand-in model holds back until the test releases them, by trigger n. */
const gates = new Map<number, Promise<void>>();

const eventsOf = (runId: string) => board.of(runId);
const until = <T>(what: string, check: () => T | undefined, timeoutMs = 30000) =>
  board.until(what, check, { timeoutMs });

function count(runId: string, predicate: (e: RunEvent) => boolean): number {
  return eventsOf(runId).filter(predicate).length;
}

const idleCount = (runId: string) => count(runId, (e) => e.type === 'daemon.idle');
const finalOf = (runId: string) => eventsOf(runId).find((e) => e.type === 'run.completed');

/** The model: a trigger `{kind: "job", n}` is answered "handled n" (after its gate, if any); anything else "ready". */
async function reply(body: Record<string, any>): Promise<FakeReply> {
  const last = (body['messages'] as { role: string; content: string }[]).at(-1)!;
  const trigger = /^\{"kind":"job","n":(\d+)\}$/.exec(last.content);
  if (!trigger) return { text: 'ready' };
  const n = Number(trigger[1]);
  await gates.get(n);
  return { text: `handled ${n}` };
}

/** The trigger numbers the model was asked about, in order (one model request per handled trigger). */
function modelSaw(): number[] {
  return server.requests
    .map((b) => /^\{"kind":"job","n":(\d+)\}$/.exec((b['messages'] as { content: string }[]).at(-1)!.content))
    .filter((m) => m !== null)
    .map((m) => Number(m[1]));
}

/**
 * Sends a trigger right after a planner died. The server may still route the request to the dead planner's queue
 * subscription until it notices the closed socket; that request is lost unanswered (never queued), so a timed-out
 * request is sent again, as any client of a request/reply subject does.
 */
function triggerAfterKill(runId: string, trigger: { kind: string; n: number }) {
  return retry(() => triggerRun(client, runId, trigger, { prefix, timeoutMs: 3_000 }), {
    attempts: 5,
    retryable: (error) => error.code === ErrorCode.Timeout,
  });
}

async function startPlanner(id: string): Promise<void> {
  const bus = await NatsBus.connect(natsUrl);
  const planner = new Planner({
    bus,
    prefix,
    logger: process.env['DEBUG_DAEMON'] ? createLogger('planner', { level: 'debug' }) : silentLogger(),
    plannerId: id,
    durability: { leaseMs: LEASE_MS },
    providers: { openaiApiKey: 'sk-test', openaiBaseUrl: server.url, maxRetries: 0, stream: false, env: {} },
  });
  await planner.start();
  planners.push({ planner, bus, id });
}

async function startDaemon(runId: string, daemon: Record<string, number> = {}): Promise<void> {
  await submitRun(
    client,
    { id: runId, task: 'Handle each job trigger.', provider: 'openai', model: 'gpt-4o-mini', daemon },
    { prefix },
  );
  await until(`${runId} idle`, () => (idleCount(runId) >= 1 ? true : undefined));
}

beforeAll(async () => {
  client = await NatsBus.connect(natsUrl);
  nc = await connect({ servers: natsUrl });
  mesh = startFakeMesh(client, [calcTool, sha256Tool], { prefix });
  server = await startOpenAiServer(reply);
  nc.subscribe(subjects(prefix).allRunEvents, {
    callback: (_err, msg) => {
      const e = msg.json<RunEvent>();
      board.add(e);
    },
  });
  await nc.flush();
  await startPlanner('planner-a');
  await startPlanner('planner-b');
});

afterAll(async () => {
  for (const { planner } of planners)
    await Promise.race([planner.drain(), new Promise((r) => setTimeout(r, 2_000))]);
  for (const { bus } of planners) await bus.close().catch(() => undefined);
  mesh.stop();
  await server.close();
  await nc.close();
  await dropPrefix(client, prefix);
  await client.close();
});

describe('daemon runs', () => {
  it('handles three triggers in order, once each, across a planner killed between the second and third', async () => {
    const runId = 'dm-three';
    let release!: () => void;
    gates.set(1, new Promise<void>((r) => (release = r)));
    await startDaemon(runId);
    const first = await triggerRun(client, runId, { kind: 'job', n: 1 }, { prefix });
    expect(first).toMatchObject({ ok: true, seq: 1 });
    await until('woken by 1, trigger 1 off the queue', () => firstWakeOffQueue(eventsOf(runId)));
    // the daemon is busy with trigger 1 (its model reply is held back): trigger 2 waits its turn in the queue
    const second = await triggerRun(client, runId, { kind: 'job', n: 2 }, { prefix });
    expect(second).toMatchObject({ seq: 2, depth: 1 });
    expect(modelSaw()).toEqual([1]);
    release();
    await until('idle after 2', () => (idleCount(runId) >= 3 ? true : undefined));

    const owner = eventsOf(runId).find((e) => e.type === 'run.started');
    const killed = planners.find((p) => owner?.type === 'run.started' && p.id === owner.planner_id)!;
    await killed.bus.close();
    const third = await triggerAfterKill(runId, { kind: 'job', n: 3 });
    expect(third).toMatchObject({ seq: 3 });
    await until('idle after 3', () => (idleCount(runId) >= 4 ? true : undefined), 60_000);

    const woken = eventsOf(runId).filter((e) => e.type === 'daemon.woken');
    expect(woken.map((e) => (e.type === 'daemon.woken' ? e.trigger : undefined))).toEqual([
      { kind: 'job', n: 1 },
      { kind: 'job', n: 2 },
      { kind: 'job', n: 3 },
    ]);
    expect(modelSaw()).toEqual([1, 2, 3]);
    const started = eventsOf(runId).filter((e) => e.type === 'run.started');
    expect(started.at(-1)).toMatchObject({ resumed: true });
    expect(eventsOf(runId).map((e) => e.seq)).toEqual(eventsOf(runId).map((_, i) => i + 1));

    await cancelRun(client, runId, { prefix, reason: 'test over' });
    await until('cancelled', () => finalOf(runId));
    expect(finalOf(runId)).toMatchObject({ status: 'cancelled' });
    await expect(triggerRun(client, runId, { kind: 'job', n: 4 }, { prefix })).rejects.toMatchObject({
      code: ErrorCode.NotFound,
    });
  }, 120_000);

  it('wakes on the timer and ends with status watchdog after N idle ticks', async () => {
    const runId = 'dm-timer';
    await submitRun(
      client,
      {
        id: runId,
        task: 'Check in on each tick.',
        provider: 'openai',
        model: 'gpt-4o-mini',
        daemon: { wake_interval_ms: 300, idle_watchdog: 3 },
      },
      { prefix },
    );
    const final = await until('watchdog', () => finalOf(runId));
    expect(final).toMatchObject({ status: 'watchdog' });
    const woken = eventsOf(runId).filter((e) => e.type === 'daemon.woken');
    expect(woken).toHaveLength(2);
    expect(woken.every((e) => e.type === 'daemon.woken' && e.reason === 'timer')).toBe(true);
  });

  it('refuses a trigger with queue_full at capacity and warns the run', async () => {
    const runId = 'dm-full';
    let release!: () => void;
    gates.set(10, new Promise<void>((r) => (release = r)));
    await startDaemon(runId, { queue_capacity: 2 });
    await triggerRun(client, runId, { kind: 'job', n: 10 }, { prefix });
    await until('busy with 10', () => firstWakeOffQueue(eventsOf(runId)));
    await triggerRun(client, runId, { kind: 'job', n: 11 }, { prefix });
    await triggerRun(client, runId, { kind: 'job', n: 12 }, { prefix });
    const refused = await triggerRun(client, runId, { kind: 'job', n: 13 }, { prefix }).catch(
      (e: unknown) => e,
    );
    expect(isAgentMeshError(refused, 'queue_full')).toBe(true);
    release();
    const warned = await until('queue_full warning', () =>
      eventsOf(runId).find((e) => e.type === 'run.warning' && e.code === 'queue_full'),
    );
    expect(warned).toMatchObject({ message: expect.stringContaining('1 trigger(s) refused') });
    await until('12 handled', () => (modelSaw().includes(12) ? true : undefined));
    expect(modelSaw().filter((n) => n >= 10)).toEqual([10, 11, 12]);
    await cancelRun(client, runId, { prefix });
    await until('cancelled', () => finalOf(runId));
  });

  it('answers a trigger for an unknown run and a trigger without a kind with named errors', async () => {
    await expect(triggerRun(client, 'dm-none', { kind: 'job' }, { prefix })).rejects.toMatchObject({
      code: ErrorCode.NotFound,
    });
    const msg = await client.request(subjects(prefix).runTrigger('dm-none'), JSON.stringify({ n: 1 }));
    expect(msg.text()).toContain('kind');
  });

  it('agentmesh runs trigger queues a trigger; runs list shows the daemon state and queue depth', async () => {
    const runId = 'dm-cli';
    await startDaemon(runId);
    const cli = (...args: string[]) =>
      runAgentmesh(['runs', ...args, '--nats', natsUrl, '--prefix', prefix], { env: cleanEnv() });
    const sent = await cli('trigger', runId, '--kind', 'job', '--data', '{"n": 20}');
    expect(sent).toMatchObject({ code: 0, stdout: expect.stringContaining(`trigger 1 queued for ${runId}`) });
    await until('20 handled', () => (idleCount(runId) >= 2 ? true : undefined));
    expect(modelSaw()).toContain(20);
    const listed = await cli('list', '--state', 'running');
    expect(listed.stdout).toMatch(/dm-cli {2}running daemon idle, 0 queued/);
    const bad = await cli('trigger', runId, '--kind', 'job', '--data', '[1]');
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('--data must be a JSON object');
    const unknown = await cli('trigger', 'dm-nope', '--kind', 'job');
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toContain('not a running daemon');
    await cancelRun(client, runId, { prefix });
    await until('cancelled', () => finalOf(runId));
  });

  it('runs examples/daemon.json with the scripted provider: each trigger wakes one scripted turn', async () => {
    const runId = 'dm-example';
    await submitRun(
      client,
      {
        id: runId,
        task: 'React to each build trigger.',
        provider: 'scripted',
        script: readScriptFile(new URL('../examples/daemon.json', import.meta.url).pathname),
        tools: ['crypto'],
        tool_search: 'off',
        daemon: {},
      },
      { prefix },
    );
    await until('example idle', () => (idleCount(runId) >= 1 ? true : undefined));
    await triggerRun(client, runId, { kind: 'build', id: 1 }, { prefix });
    await triggerRun(client, runId, { kind: 'build', id: 2 }, { prefix });
    await until('example handled 2', () => (idleCount(runId) >= 3 ? true : undefined));
    const texts = eventsOf(runId).flatMap((e) => (e.type === 'llm.response' ? [e.text] : []));
    expect(texts).toEqual([
      'Ready. Waiting for build triggers.',
      'A build finished: I will fingerprint its id.',
      'Build 1 fingerprinted. Waiting for the next trigger.',
      'Build 2 noted. Waiting for the next trigger.',
    ]);
    expect(eventsOf(runId).find((e) => e.type === 'tool.completed')).toMatchObject({ name: 'crypto.sha256' });
    await cancelRun(client, runId, { prefix });
    expect(await until('cancelled', () => finalOf(runId))).toMatchObject({ status: 'cancelled' });
  });

  it('a trigger sent twice with one request_id is queued once; the repeat gets the first seq and duplicate', async () => {
    const runId = 'dm-dup';
    await startDaemon(runId);
    const trigger = { kind: 'job', n: 40, request_id: 'rq-job-40' };
    const first = await triggerRun(client, runId, trigger, { prefix });
    const again = await triggerRun(client, runId, trigger, { prefix });
    expect(first).toMatchObject({ ok: true, seq: 1, request_id: 'rq-job-40' });
    expect(first).not.toHaveProperty('duplicate');
    expect(again).toMatchObject({ ok: true, seq: 1, depth: first.depth, duplicate: true });
    const next = await triggerRun(client, runId, { kind: 'job', n: 41 }, { prefix });
    expect(next).toMatchObject({ seq: 2 });
    await until('handled 41', () => (modelSaw().includes(41) ? true : undefined));
    expect(modelSaw().filter((n) => n === 40)).toEqual([40]);
    await cancelRun(client, runId, { prefix });
    expect(await until('cancelled', () => finalOf(runId))).toMatchObject({ status: 'cancelled' });
  });

  it('a draining planner does not wait for its idle daemon; another planner resumes it', async () => {
    await startPlanner('planner-c');
    const runId = 'dm-drain';
    await startDaemon(runId);
    const owner = eventsOf(runId).find((e) => e.type === 'run.started');
    const draining = planners.find((p) => owner?.type === 'run.started' && p.id === owner.planner_id)!;
    await draining.planner.drain();
    await draining.bus.close();
    await triggerAfterKill(runId, { kind: 'job', n: 30 });
    await until('30 handled after the takeover', () => (idleCount(runId) >= 2 ? true : undefined), 60_000);
    expect(modelSaw().filter((n) => n === 30)).toEqual([30]);
    expect(
      eventsOf(runId)
        .filter((e) => e.type === 'run.started')
        .at(-1),
    ).toMatchObject({ resumed: true });
    await cancelRun(client, runId, { prefix });
    await until('cancelled', () => finalOf(runId));
  }, 90_000);
});
