/**
 * Issue 22, planner failover on a real nats-server with the default lease (10 s): a run whose planner process is
 * killed -9 continues on another planner long before the lease ends (the dead planner's connection is its liveness
 * signal), while a planner that is only frozen past the intake's redelivery time keeps its run (no false takeover).
 */
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import type { NatsBus, RunEvent } from '@agentmesh/protocol';
import { readRunEvents, submitRun } from '@agentmesh/planner';
import { cleanEnv, startActor, type ActorProcess } from './helpers/cli.js';
import { startNatsFleet, type NatsFleet } from './helpers/fleet.js';
import { waitForRunEnd, waitForRunEvent } from './helpers/wait.js';

const natsUrl = inject('natsUrl');
let fleet: NatsFleet;
let prefix: string;
let client: NatsBus;
const actors: ActorProcess[] = [];

const eventsOf = (runId: string) => readRunEvents(client, runId, { prefix });
const eventOf = (runId: string, what: string, match: (e: RunEvent) => boolean) =>
  waitForRunEvent(client, runId, match, { prefix, what });

async function plannerProcess(): Promise<ActorProcess> {
  const actor = await startActor(
    ['planner', '--nats', natsUrl, '--prefix', prefix],
    cleanEnv({ AGENTMESH_REDELIVER_MS: '1000' }),
  );
  actors.push(actor);
  return actor;
}

const inProcessPlanner = async (id: string) =>
  (await fleet.planner(id, { durability: { redeliverMs: 1_000 } })).planner;

/** Submits a one-turn run whose model answers after `modelMs`, and waits until a planner asked the model. */
async function runInModelCall(runId: string, modelMs: number): Promise<void> {
  await submitRun(
    client,
    { id: runId, task: 'one slow turn', tool_search: 'off', script: [{ text: 'ok', delay_ms: modelMs }] },
    { prefix },
  );
  await eventOf(runId, `${runId} to ask the model`, (e) => e.type === 'llm.request');
}

beforeAll(async () => {
  fleet = await startNatsFleet(natsUrl, { prefixTag: 'df' });
  ({ prefix, client } = fleet);
  fleet.onStop(async () => {
    for (const a of actors) await a.stop('SIGKILL').catch(() => undefined);
  });
});

afterAll(() => fleet.stop());

describe('planner failover with the default 10 s lease', () => {
  it('a run whose planner is killed -9 continues on another planner within a few seconds, once', async () => {
    const doomed = await plannerProcess();
    const runId = 'failover-kill';
    await runInModelCall(runId, 1_500);
    await inProcessPlanner('survivor');
    const killedAt = Date.now();
    doomed.child.kill('SIGKILL');
    const resumed = await eventOf(
      runId,
      'the run to continue on the survivor',
      (e) => e.type === 'run.started' && e.resumed === true,
    );
    const failoverMs = Date.now() - killedAt;
    console.log(`failover after kill -9: ${failoverMs} ms (lease 10000 ms)`);
    expect(resumed).toMatchObject({ planner_id: 'survivor' });
    expect(failoverMs).toBeLessThan(6_000);
    const final = await waitForRunEnd(client, runId, { prefix });
    expect(final).toMatchObject({ type: 'run.completed', status: 'done', text: 'ok' });
    const events = await eventsOf(runId);
    expect(events.map((e) => e.seq)).toEqual(events.map((_, i) => i + 1));
    expect(events.filter((e) => e.type === 'run.started' && e.resumed === true)).toHaveLength(1);
  }, 60_000);

  it('a planner frozen past the redelivery time (SIGSTOP) keeps its run: nobody takes it over', async () => {
    const frozen = await plannerProcess();
    const runId = 'failover-frozen';
    await runInModelCall(runId, 500);
    const started = await eventOf(runId, 'run.started', (e) => e.type === 'run.started');
    frozen.child.kill('SIGSTOP');
    try {
      // the intake redelivers the run about every second meanwhile; the survivor asks the frozen planner, gets no
      // answer, and leaves the run to it
      await new Promise((r) => setTimeout(r, 3_500));
    } finally {
      frozen.child.kill('SIGCONT');
    }
    const final = await waitForRunEnd(client, runId, { prefix });
    expect(final).toMatchObject({ type: 'run.completed', status: 'done', text: 'ok' });
    const events = await eventsOf(runId);
    expect(events.filter((e) => e.type === 'run.started')).toEqual([started]);
    expect(events.map((e) => e.seq)).toEqual(events.map((_, i) => i + 1));
  }, 60_000);
});
