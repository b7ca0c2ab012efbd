import { describe, expect, it } from 'vitest';
import { MemoryKvStore, silentLogger, type RunEvent, type RunEventBody } from '@agentmesh/protocol';
import type { RunContext } from '../run/context.js';
import { DaemonSession, type DaemonOptions } from './daemon-session.js';
import { TriggerQueue } from './trigger-queue.js';

const OPTIONS: DaemonOptions = { wake_interval_ms: 0, idle_watchdog: 0, queue_capacity: 10, watch_paths: [] };

/** A trigger queue whose reads fail `failures` times with what NATS throws when a node restarts. */
function flakyQueue(failures: number): { queue: TriggerQueue; failed: () => number } {
  const queue = new TriggerQueue(new MemoryKvStore());
  let failed = 0;
  const next = queue.next.bind(queue);
  queue.next = async (runId, after) => {
    if (failed < failures) {
      failed++;
      throw new Error(failed === 1 ? 'timeout' : 'jetstream is not enabled');
    }
    return next(runId, after);
  };
  return { queue, failed: () => failed };
}

function idleContext(runId: string) {
  const events: RunEventBody[] = [];
  const controller = new AbortController();
  const ctx = {
    state: { run_id: runId, messages: [] },
    signal: controller.signal,
    env: {},
    log: silentLogger(),
    stopCheck: () => undefined,
    checkpoint: async () => undefined,
    sink: { emit: (e: RunEventBody) => void events.push(e) },
  } as unknown as RunContext;
  return { ctx, events, abort: () => controller.abort() };
}

describe('DaemonSession wake', () => {
  it('rides out a NATS timeout while it waits: the daemon wakes on its trigger instead of failing', async () => {
    const { queue, failed } = flakyQueue(2);
    await queue.open('d1', 10);
    await queue.enqueue('d1', { kind: 'build', n: 1 });
    const session = new DaemonSession(
      OPTIONS,
      { idle: true, handled: 0, idle_ticks: 0, dropped_reported: 0 },
      queue,
    );
    const { ctx, events } = idleContext('d1');
    await expect(session.wake(ctx)).resolves.toBeUndefined();
    expect(failed()).toBe(2);
    expect(events).toEqual([{ type: 'daemon.woken', reason: 'trigger', trigger: { kind: 'build', n: 1 } }]);
    expect(session.state).toMatchObject({ idle: false, handled: 1 });
    expect(await queue.depth('d1')).toBe(0);
  });

  it('still fails on a failure that is not transient', async () => {
    const queue = new TriggerQueue(new MemoryKvStore());
    await queue.open('d2', 10);
    queue.next = async () => {
      throw new Error('trigger record is corrupt');
    };
    const session = new DaemonSession(
      OPTIONS,
      { idle: true, handled: 0, idle_ticks: 0, dropped_reported: 0 },
      queue,
    );
    await expect(session.wake(idleContext('d2').ctx)).rejects.toThrow('trigger record is corrupt');
  });

  it('publishes daemon.woken once the wake is checkpointed, before the queue updates that can stall on NATS', async () => {
    const queue = new TriggerQueue(new MemoryKvStore());
    await queue.open('d3', 10);
    await queue.enqueue('d3', { kind: 'build', n: 1 });
    let unstall!: () => void;
    const stalled = new Promise<void>((resolve) => (unstall = resolve));
    const remove = queue.remove.bind(queue);
    queue.remove = async (runId, upTo) => {
      await stalled;
      return remove(runId, upTo);
    };
    const session = new DaemonSession(
      OPTIONS,
      { idle: true, handled: 0, idle_ticks: 0, dropped_reported: 0 },
      queue,
    );
    const { ctx, events } = idleContext('d3');
    let checkpoints = 0;
    ctx.checkpoint = async () => void checkpoints++;
    const woken = session.wake(ctx);
    while (events.length === 0) await new Promise((resolve) => setImmediate(resolve));
    expect(checkpoints).toBe(1);
    expect(events).toEqual([{ type: 'daemon.woken', reason: 'trigger', trigger: { kind: 'build', n: 1 } }]);
    unstall();
    await expect(woken).resolves.toBeUndefined();
    expect(await queue.depth('d3')).toBe(0);
  });

  it('keeps the wake in its checkpoint until daemon.woken is published, and only there', async () => {
    const queue = new TriggerQueue(new MemoryKvStore());
    await queue.open('d4', 10);
    await queue.enqueue('d4', { kind: 'build', n: 4 });
    const state = { idle: true, handled: 0, idle_ticks: 0, dropped_reported: 0 };
    const session = new DaemonSession(OPTIONS, state, queue);
    const { ctx, events } = idleContext('d4');
    const checkpointed: unknown[] = [];
    ctx.checkpoint = async () => void checkpointed.push(structuredClone(state));
    await session.wake(ctx);
    const woken = { type: 'daemon.woken', reason: 'trigger', trigger: { kind: 'build', n: 4 } };
    expect(checkpointed).toEqual([{ idle: false, handled: 1, idle_ticks: 0, dropped_reported: 0, woken }]);
    expect(events).toEqual([woken]);
    expect(state).not.toHaveProperty('woken', expect.anything());
  });
});

describe('DaemonSession resumed', () => {
  const woken = { type: 'daemon.woken', reason: 'trigger', trigger: { kind: 'build', n: 5 } } as const;
  const stored = (seq: number, type: string) => ({ run_id: 'd5', seq, ts: '', type }) as unknown as RunEvent;

  /** A session resumed from the wake's checkpoint (its events up to seq 3), given what the takeover read. */
  function resume(lastSeq: number, earlier: RunEvent[]) {
    const state = { idle: false, handled: 1, idle_ticks: 0, dropped_reported: 0, woken };
    const session = new DaemonSession(OPTIONS, state, new TriggerQueue(new MemoryKvStore()));
    const { ctx, events } = idleContext('d5');
    (ctx.state as { seq: number }).seq = 3;
    session.resumed(ctx, { lastSeq, earlier });
    return { events, state };
  }

  const upToCheckpoint = [stored(1, 'run.accepted'), stored(2, 'run.started'), stored(3, 'daemon.idle')];

  it('publishes the wake whose event the planner before never stored, once', () => {
    const { events, state } = resume(3, upToCheckpoint);
    expect(events).toEqual([woken]);
    expect(state.woken).toBeUndefined();
  });

  it('publishes nothing when the event is stored after the checkpoint', () => {
    const { events, state } = resume(5, [
      ...upToCheckpoint,
      stored(4, 'daemon.woken'),
      stored(5, 'llm.request'),
    ]);
    expect(events).toEqual([]);
    expect(state.woken).toBeUndefined();
  });

  it('publishes it when other events follow the checkpoint but not it', () => {
    expect(resume(4, [...upToCheckpoint, stored(4, 'run.paused')]).events).toEqual([woken]);
  });

  it('takes the event as stored when events follow the checkpoint but could not be read: never twice', () => {
    expect(resume(5, []).events).toEqual([]);
  });
});
