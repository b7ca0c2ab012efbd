/**
 * The durable intake's open pull: each planner keeps one pull on the shared intake consumer while it has a free run
 * slot, asks for the next request as a delivery takes a slot, stops the pull when no slot is free, and stops it when
 * it drains. The ack wait here (the lease) is 60 s, longer than any wait below: a request that went to a planner
 * that could not run it, or to a pull nobody reads, would hold its test past the timeout.
 */
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { jetstreamManager } from '@nats-io/jetstream';
import { ServiceName, connectBackend, streamNames, subjects, type RunEvent } from '@agentmesh/protocol';
import { readRunEvents, readRunRecord, submitRun, type PlannerOptions } from '@agentmesh/planner';
import { FaultProxy } from './helpers/fault-proxy.js';
import { startNatsFleet, type NatsFleet } from './helpers/fleet.js';
import { until, waitForRunEnd, waitForRunEvent } from './helpers/wait.js';

const natsUrl = inject('natsUrl');
const ONE_SLOT: Partial<PlannerOptions> = { maxConcurrentRuns: 1, durability: { leaseMs: 60_000 } };
let fleet: NatsFleet;
let nc: NatsConnection;

beforeAll(async () => {
  fleet = await startNatsFleet(natsUrl, { prefixTag: 'pip' });
  nc = await connect({ servers: natsUrl });
});
afterAll(async () => {
  await fleet.stop();
  await nc.close();
});

const run = (id: string, delayMs: number) => ({
  id,
  task: 'wait',
  script: [{ text: `done ${id}`, delay_ms: delayMs }],
});
const submit = (id: string, delayMs: number) =>
  submitRun(fleet.client, run(id, delayMs), { prefix: fleet.prefix });

/** Counts the JetStream API requests on the planners' intake consumer (pulls, consumer infos) while `on()` holds. */
function countIntakeRequests(on: () => boolean): { count: () => number; stop: () => void } {
  const consumer = `${streamNames(fleet.prefix).runs}.${ServiceName.Planner}`;
  let count = 0;
  const sub = nc.subscribe('$JS.API.CONSUMER.>', {
    callback: (_e, msg) => {
      if (msg.subject.endsWith(`.${consumer}`) && on()) count++;
    },
  });
  return { count: () => count, stop: () => sub.unsubscribe() };
}

describe('the durable intake keeps one pull open per planner', () => {
  it('two planners of one slot each run every request once, none waiting for the ack wait', async () => {
    await fleet.planner('pip-a', ONE_SLOT);
    await fleet.planner('pip-b', ONE_SLOT);
    const ids = Array.from({ length: 8 }, (_, i) => `pip-each-${i}`);
    const started = Date.now();
    for (const id of ids) await submit(id, 300);
    const ends = await Promise.all(
      ids.map((id) => waitForRunEnd(fleet.client, id, { prefix: fleet.prefix, timeoutMs: 40_000 })),
    );
    expect(ends.map((e) => e.type)).toEqual(ids.map(() => 'run.completed'));
    // 8 turns of 0.3 s on 2 slots; a request left with a planner that could not run it would wait 60 s
    expect(Date.now() - started).toBeLessThan(20_000);
    const runners = new Set<string>();
    for (const id of ids) {
      const events = await readRunEvents(fleet.client, id, { prefix: fleet.prefix });
      const count = (type: RunEvent['type']) => events.filter((e) => e.type === type).length;
      expect([count('run.accepted'), count('run.started'), count('run.completed')]).toEqual([1, 1, 1]);
      runners.add((await readRunRecord(fleet.client, id, { prefix: fleet.prefix }))!.planner_id);
    }
    expect([...runners].sort()).toEqual(['pip-a', 'pip-b']);
    for (const p of fleet.planners) await p.drain();
  }, 90_000);

  it('a planner with no free slot asks the intake nothing, and a request submitted then goes to another planner', async () => {
    const events = subjects(fleet.prefix);
    await fleet.planner('pip-busy', ONE_SLOT);
    // its one slot is taken for 5 s: from the run's start to its model answer, no pull and no consumer info
    let watching = false;
    const requests = countIntakeRequests(() => watching);
    const answered = new Promise<void>((resolve) => {
      const sub = nc.subscribe(events.runEvents('pip-long-1'), {
        callback: (_e, msg) => {
          const type = msg.json<RunEvent>().type;
          if (type === 'run.started') watching = true;
          if (type !== 'llm.response') return;
          watching = false;
          sub.unsubscribe();
          resolve();
        },
      });
    });
    await nc.flush();
    await submit('pip-long-1', 5_000);
    await answered;
    requests.stop();
    expect(requests.count()).toBe(0);
    await waitForRunEnd(fleet.client, 'pip-long-1', { prefix: fleet.prefix });

    // busy again; a request submitted now waits in the queue and a planner started after it runs it at once
    await submit('pip-long-2', 5_000);
    await waitForRunEvent(fleet.client, 'pip-long-2', (e) => e.type === 'run.started', {
      prefix: fleet.prefix,
    });
    await submit('pip-quick', 0);
    await fleet.planner('pip-free', ONE_SLOT);
    await waitForRunEnd(fleet.client, 'pip-quick', { prefix: fleet.prefix, timeoutMs: 40_000 });
    expect((await readRunRecord(fleet.client, 'pip-quick', { prefix: fleet.prefix }))?.planner_id).toBe(
      'pip-free',
    );
    const longEvents = await readRunEvents(fleet.client, 'pip-long-2', { prefix: fleet.prefix });
    expect(longEvents.map((e) => e.type)).not.toContain('llm.response');
    for (const p of fleet.planners) await p.drain();
  }, 90_000);

  it('a planner stopped while its pull is open leaves the next request to the next planner at once', async () => {
    const jsm = await jetstreamManager(nc);
    const stream = streamNames(fleet.prefix).runs;
    for (let round = 1; round <= 3; round++) {
      const { planner } = await fleet.planner(`pip-stop-${round}`, ONE_SLOT);
      await until('the planner pull open', async () => {
        const info = await jsm.consumers.info(stream, ServiceName.Planner);
        return (info.num_waiting ?? 0) > 0;
      });
      await planner.drain();
      const id = `pip-after-stop-${round}`;
      await submit(id, 0);
      await fleet.planner(`pip-next-${round}`, ONE_SLOT);
      const end = await waitForRunEnd(fleet.client, id, { prefix: fleet.prefix, timeoutMs: 40_000 });
      expect(end).toMatchObject({ type: 'run.completed' });
      expect((await readRunRecord(fleet.client, id, { prefix: fleet.prefix }))?.planner_id).toBe(
        `pip-next-${round}`,
      );
      for (const p of fleet.planners) await p.drain();
    }
  }, 150_000);
});

describe('an open pull whose server goes quiet', () => {
  it('fails once it misses the server heartbeats, as a fetch did, so its taker logs it and starts another', async () => {
    const proxy = await FaultProxy.start(natsUrl);
    const backend = await connectBackend({ servers: proxy.url });
    try {
      const stream = `PIP_HB_${process.pid}`;
      const queue = await backend.workQueue({ stream, subject: `${stream}.submit` });
      const consumer = await queue.consumer('quiet', { ackWaitMs: 60_000 });
      const pull = await consumer.pull({ expiresMs: 1_000 });
      const failed = expect(pull.next()).rejects.toThrow(/missed \d+ heartbeats/);
      // the connection stays open and says nothing for 5 s: heartbeats are due every 0.5 s
      await proxy.stall(5_000);
      await failed;
      const again = await consumer.pull({ expiresMs: 1_000 });
      const next = again.next();
      await queue.submit(new TextEncoder().encode('after'), { dedupeId: 'after' });
      expect((await next)?.text()).toBe('after');
      again.stop();
      const jsm = await jetstreamManager(nc);
      await jsm.streams.delete(stream);
    } finally {
      await backend.close();
      await proxy.close();
    }
  }, 60_000);

  it('a run that outlasts the redelivery time keeps its request: the planner reports it is working on it', async () => {
    // redelivered after 0.5 s unless told the request is in progress; a second planner with a free slot would take it
    const quickRedelivery: Partial<PlannerOptions> = {
      maxConcurrentRuns: 1,
      durability: { leaseMs: 60_000, redeliverMs: 500 },
    };
    await fleet.planner('pip-working', quickRedelivery);
    const jsm = await jetstreamManager(nc);
    const stream = streamNames(fleet.prefix).runs;
    const redelivered = async () => (await jsm.consumers.info(stream, ServiceName.Planner)).num_redelivered;
    const before = await redelivered();
    await submit('pip-outlasts', 2_500);
    await waitForRunEvent(fleet.client, 'pip-outlasts', (e) => e.type === 'run.started', {
      prefix: fleet.prefix,
      what: 'the run started',
    });
    await fleet.planner('pip-spare', quickRedelivery);
    const end = await waitForRunEnd(fleet.client, 'pip-outlasts', {
      prefix: fleet.prefix,
      timeoutMs: 30_000,
    });
    expect(end.type).toBe('run.completed');
    expect(await redelivered()).toBe(before);
    for (const p of fleet.planners) await p.drain();
  }, 60_000);
});
