/**
 * Security issue 40, "Daemon triggers": what the daemons' trigger queues may hold, on a real nats-server. The trigger
 * bucket has a JetStream max_bytes (the planner's `triggers.storeMaxBytes`, else TRIGGERS_STORE_MAX_BYTES), a
 * trigger above `maxTriggerBytes` is refused `payload_too_large`, a daemon holds at most `maxPendingPerDaemon`
 * pending triggers whatever its queue_capacity asks (`quota_exceeded`), and a full bucket refuses new triggers with
 * a named error while taken ones can still be removed.
 */
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import {
  ErrorCode,
  NatsBus,
  isAgentMeshError,
  silentLogger,
  subjects,
  type RunEvent,
} from '@agentmesh/protocol';
import {
  Planner,
  TRIGGERS_STORE_MAX_BYTES,
  TriggerQueue,
  cancelRun,
  daemonStatuses,
  openTriggerStore,
  submitRun,
  triggerRun,
  triggersBucket,
  type TriggerLimits,
} from '@agentmesh/planner';
import { startFakeMesh, type FakeMesh } from './fixtures/llm/mesh.js';
import { dropPrefix, uniquePrefix } from './fixtures/llm/nats.js';
import { EventBoard, firstWakeOffQueue } from './helpers/wait.js';

const natsUrl = inject('natsUrl');
const prefix = uniquePrefix('tl');
const defaultPrefix = uniquePrefix('tld');
const LIMITS: Required<TriggerLimits> = {
  maxPendingPerDaemon: 3,
  maxTriggerBytes: 1024,
  storeMaxBytes: 512 * 1024,
};
let client: NatsBus;
let nc: NatsConnection;
let mesh: FakeMesh;
const planners: { planner: Planner; bus: NatsBus }[] = [];
const board = new EventBoard();

async function startPlanner(p: string, triggers?: TriggerLimits): Promise<void> {
  const bus = await NatsBus.connect(natsUrl);
  const planner = new Planner({
    bus,
    prefix: p,
    logger: silentLogger(),
    ...(triggers ? { triggers } : {}),
  });
  await planner.start();
  planners.push({ planner, bus });
}

async function bucketMaxBytes(p: string): Promise<number> {
  const jsm = await client.jetstreamManager();
  return (await jsm.streams.info(`KV_${triggersBucket(p)}`)).config.max_bytes;
}

beforeAll(async () => {
  client = await NatsBus.connect(natsUrl);
  nc = await connect({ servers: natsUrl });
  mesh = startFakeMesh(client, [], { prefix });
  nc.subscribe(subjects(prefix).allRunEvents, { callback: (_e, msg) => board.add(msg.json<RunEvent>()) });
  await nc.flush();
  await startPlanner(prefix, LIMITS);
  await startPlanner(defaultPrefix);
});

afterAll(async () => {
  for (const { planner } of planners)
    await Promise.race([planner.drain(), new Promise((r) => setTimeout(r, 2_000))]);
  for (const { bus } of planners) await bus.close().catch(() => undefined);
  mesh.stop();
  await nc.close();
  await dropPrefix(client, prefix);
  await dropPrefix(client, defaultPrefix);
  await client.close();
});

describe('daemon trigger limits', () => {
  it('the trigger bucket has max_bytes: the configured one, else TRIGGERS_STORE_MAX_BYTES; a reader keeps it', async () => {
    // the first trigger opens the bucket (this one is for no daemon)
    for (const p of [prefix, defaultPrefix])
      await expect(triggerRun(client, 'tl-none', { kind: 'job' }, { prefix: p })).rejects.toMatchObject({
        code: ErrorCode.NotFound,
      });
    expect(await bucketMaxBytes(prefix)).toBe(LIMITS.storeMaxBytes);
    expect(await bucketMaxBytes(defaultPrefix)).toBe(TRIGGERS_STORE_MAX_BYTES);
    await daemonStatuses(client, ['tl-none'], { prefix });
    expect(await bucketMaxBytes(prefix)).toBe(LIMITS.storeMaxBytes);
  });

  it('refuses a trigger above max_trigger_bytes with payload_too_large naming its size and the limit', async () => {
    const big = { kind: 'job', data: 'x'.repeat(2_000) };
    const size = JSON.stringify(big).length;
    const refused = await triggerRun(client, 'tl-none', big, { prefix }).catch((e: unknown) => e);
    expect(isAgentMeshError(refused, ErrorCode.PayloadTooLarge)).toBe(true);
    expect((refused as Error).message).toContain(
      `${size} bytes exceeds the limit of ${LIMITS.maxTriggerBytes}`,
    );
  });

  it('a daemon asking queue_capacity 100000 holds at most the quota: the (quota+1)th pending trigger is refused', async () => {
    const runId = 'tl-quota';
    await submitRun(
      client,
      {
        id: runId,
        task: 'Handle each trigger.',
        provider: 'scripted',
        script: [{ text: 'ready' }, { delay_ms: 120_000, text: 'slow' }],
        daemon: { queue_capacity: 100_000 },
      },
      { prefix },
    );
    await board.until('idle', () => board.of(runId).find((e) => e.type === 'daemon.idle'), {
      timeoutMs: 20_000,
    });
    await triggerRun(client, runId, { kind: 'job', n: 0 }, { prefix });
    await board.until('trigger 0 taken off the queue', () => firstWakeOffQueue(board.of(runId)), {
      timeoutMs: 20_000,
    });
    // the daemon is busy with trigger 0 (taken off the queue): what follows waits
    for (let n = 1; n <= LIMITS.maxPendingPerDaemon; n++)
      expect(await triggerRun(client, runId, { kind: 'job', n }, { prefix })).toMatchObject({ depth: n });
    const refused = await triggerRun(client, runId, { kind: 'job', n: 99 }, { prefix }).catch(
      (e: unknown) => e,
    );
    expect(isAgentMeshError(refused, ErrorCode.QuotaExceeded)).toBe(true);
    expect((refused as Error).message).toMatch(/holds 3 pending triggers.*max_pending_per_daemon is 3/);
    expect((await daemonStatuses(client, [runId], { prefix })).get(runId)?.depth).toBe(3);
    await cancelRun(client, runId, { prefix });
    await board.until(
      'ended',
      () => board.of(runId).find((e) => e.type === 'run.completed' || e.type === 'run.failed'),
      { timeoutMs: 20_000 },
    );
  });

  it('a full bucket refuses new triggers, naming it; taken triggers are still removed, and room comes back', async () => {
    const p = uniquePrefix('tlf');
    try {
      const queue = new TriggerQueue(await openTriggerStore(client, p, { maxBytes: 16 * 1024 }), {
        maxPendingPerDaemon: 10_000,
      });
      await queue.open('r', 10_000);
      const trigger = { kind: 'job', data: 'y'.repeat(900) };
      let stored = 0;
      let refused: unknown;
      while (refused === undefined && stored < 100)
        await queue.enqueue('r', trigger).then(
          () => stored++,
          (e: unknown) => (refused = e),
        );
      expect(isAgentMeshError(refused, ErrorCode.QuotaExceeded)).toBe(true);
      expect((refused as Error).message).toContain(`KV bucket ${triggersBucket(p)} is full`);
      expect(stored).toBeGreaterThan(5);
      await queue.remove('r', 5);
      await expect(queue.enqueue('r', trigger)).resolves.toMatchObject({ seq: stored + 2 });
    } finally {
      await dropPrefix(client, p);
    }
  });
});
