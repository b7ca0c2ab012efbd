/**
 * Issue 22, planner failover on a real nats-server with the default lease (10 s): a run whose planner process is
 * killed -9 continues on another planner long before the lease ends (the dead planner's connection is its liveness
 * signal), while a planner that is only frozen past the intake's redelivery time keeps its run (no false takeover).
 */
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { NatsBus, silentLogger, type RunEvent } from '@agentmesh/protocol';
import { Planner, checkpointsBucket, readRunEvents, submitRun } from '@agentmesh/planner';
import { calcTool, startFakeMesh, type FakeMesh } from './fixtures/llm/mesh.js';
import { dropPrefix, uniquePrefix } from './fixtures/llm/nats.js';
import { cleanEnv, startActor, type ActorProcess } from './helpers/cli.js';

const natsUrl = inject('natsUrl');
const prefix = uniquePrefix('df');
let client: NatsBus;
let mesh: FakeMesh;
const planners: Planner[] = [];
const buses: NatsBus[] = [];
const actors: ActorProcess[] = [];

async function until<T>(what: string, check: () => Promise<T | undefined>, timeoutMs = 30_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

const eventsOf = (runId: string) => readRunEvents(client, runId, { prefix });
const find = (runId: string, match: (e: RunEvent) => boolean) => async () =>
  (await eventsOf(runId)).find(match);
const isFinal = (e: RunEvent) => e.type === 'run.completed' || e.type === 'run.failed';

async function plannerProcess(): Promise<ActorProcess> {
  const actor = await startActor(
    ['planner', '--nats', natsUrl, '--prefix', prefix],
    cleanEnv({ AGENTMESH_REDELIVER_MS: '1000' }),
  );
  actors.push(actor);
  return actor;
}

async function inProcessPlanner(id: string): Promise<Planner> {
  const bus = await NatsBus.connect(natsUrl);
  buses.push(bus);
  const planner = new Planner({
    bus,
    prefix,
    logger: silentLogger(),
    plannerId: id,
    durability: { redeliverMs: 1_000 },
  });
  await planner.start();
  planners.push(planner);
  return planner;
}

/** Submits a one-turn run whose model answers after `modelMs`, and waits until a planner asked the model. */
async function runInModelCall(runId: string, modelMs: number): Promise<void> {
  await submitRun(
    client,
    { id: runId, task: 'one slow turn', tool_search: 'off', script: [{ text: 'ok', delay_ms: modelMs }] },
    { prefix },
  );
  await until(
    `${runId} to ask the model`,
    find(runId, (e) => e.type === 'llm.request'),
  );
}

beforeAll(async () => {
  client = await NatsBus.connect(natsUrl);
  mesh = startFakeMesh(client, [calcTool], { prefix });
});

afterAll(async () => {
  for (const a of actors) await a.stop('SIGKILL').catch(() => undefined);
  for (const p of planners) await p.drain().catch(() => undefined);
  mesh.stop();
  const jsm = await client.jetstreamManager();
  await jsm.streams.delete(`KV_${checkpointsBucket(prefix)}`).catch(() => undefined);
  await dropPrefix(client, prefix);
  for (const b of buses) await b.close().catch(() => undefined);
  await client.close();
});

describe('planner failover with the default 10 s lease', () => {
  it('a run whose planner is killed -9 continues on another planner within a few seconds, once', async () => {
    const doomed = await plannerProcess();
    const runId = 'failover-kill';
    await runInModelCall(runId, 1_500);
    await inProcessPlanner('survivor');
    const killedAt = Date.now();
    doomed.child.kill('SIGKILL');
    const resumed = await until(
      'the run to continue on the survivor',
      find(runId, (e) => e.type === 'run.started' && e.resumed === true),
    );
    const failoverMs = Date.now() - killedAt;
    console.log(`failover after kill -9: ${failoverMs} ms (lease 10000 ms)`);
    expect(resumed).toMatchObject({ planner_id: 'survivor' });
    expect(failoverMs).toBeLessThan(6_000);
    const final = await until('the run to finish', find(runId, isFinal));
    expect(final).toMatchObject({ type: 'run.completed', status: 'done', text: 'ok' });
    const events = await eventsOf(runId);
    expect(events.map((e) => e.seq)).toEqual(events.map((_, i) => i + 1));
    expect(events.filter((e) => e.type === 'run.started' && e.resumed === true)).toHaveLength(1);
  }, 60_000);

  it('a planner frozen past the redelivery time (SIGSTOP) keeps its run: nobody takes it over', async () => {
    const frozen = await plannerProcess();
    const runId = 'failover-frozen';
    await runInModelCall(runId, 500);
    const started = (await until(
      'run.started',
      find(runId, (e) => e.type === 'run.started'),
    ))!;
    frozen.child.kill('SIGSTOP');
    try {
      // the intake redelivers the run about every second meanwhile; the survivor asks the frozen planner, gets no
      // answer, and leaves the run to it
      await new Promise((r) => setTimeout(r, 3_500));
    } finally {
      frozen.child.kill('SIGCONT');
    }
    const final = await until('the run to finish', find(runId, isFinal));
    expect(final).toMatchObject({ type: 'run.completed', status: 'done', text: 'ok' });
    const events = await eventsOf(runId);
    expect(events.filter((e) => e.type === 'run.started')).toEqual([started]);
    expect(events.map((e) => e.seq)).toEqual(events.map((_, i) => i + 1));
  }, 60_000);
});
