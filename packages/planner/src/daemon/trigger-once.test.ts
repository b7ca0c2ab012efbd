/**
 * Issue 35 follow-up: a trigger whose write landed but whose answer was lost is queued once. The item write succeeds
 * and then throws `timeout` (the reply to the KV write was lost); the sender's retry (same request id) must find its
 * own write, not reserve a second seq.
 */
import { afterAll, describe, expect, inject, it } from 'vitest';
import {
  AgentMeshError,
  ErrorCode,
  MemoryKvStore,
  NatsBus,
  silentLogger,
  subjects,
  type KvStore,
} from '@agentmesh/protocol';
import { ControlLedger } from '../infra/control-ledger.js';
import { openTriggerStore } from '../infra/backend.js';
import { serveTriggers } from './responder.js';
import { triggerRun } from './trigger-client.js';
import { TriggerQueue } from './trigger-queue.js';

/** The KV store with the answer to its first write of a queued trigger lost: the write lands, then `timeout`. */
function losingFirstItemAnswer<T extends KvStore>(kv: T): T & { lost: number } {
  let lost = 0;
  return new Proxy(kv, {
    get(target, prop) {
      if (prop === 'lost') return lost;
      if (prop === 'put')
        return async (key: string, value: Uint8Array) => {
          const revision = await target.put(key, value);
          if (!key.includes('.q.') || lost > 0) return revision;
          lost++;
          throw new AgentMeshError(ErrorCode.Timeout, 'the answer to the trigger write was lost', {
            retryable: true,
          });
        };
      const value = Reflect.get(target, prop, target) as unknown;
      return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value;
    },
  }) as T & { lost: number };
}

describe('a trigger whose write landed but whose answer was lost', () => {
  it('is queued once when the request is applied again, and not again once the daemon took it', async () => {
    const kv = losingFirstItemAnswer(new MemoryKvStore());
    const queue = new TriggerQueue(kv);
    const ledger = new ControlLedger(new MemoryKvStore());
    await queue.open('d', 10);
    const apply = () =>
      ledger.once('d', 'rq-1', 'trigger', {}, () => queue.enqueue('d', { kind: 'job' }, 'rq-1'));
    await expect(apply()).rejects.toThrow(/answer to the trigger write was lost/);
    expect(await apply()).toEqual({ outcome: { seq: 1, depth: 1 }, duplicate: true });
    expect(await queue.depth('d')).toBe(1);
    expect(await queue.next('d', 1)).toBeUndefined();

    // the daemon takes it before the sender's retry arrives: the retry writes nothing
    const taken = losingFirstItemAnswer(new MemoryKvStore());
    const second = new TriggerQueue(taken);
    await second.open('e', 10);
    await expect(second.enqueue('e', { kind: 'job' }, 'rq-2')).rejects.toThrow(/lost/);
    expect(await second.next('e', 0)).toMatchObject({ seq: 1 });
    await second.remove('e', 1);
    expect(await second.enqueue('e', { kind: 'job' }, 'rq-2')).toMatchObject({ seq: 1 });
    expect(await second.depth('e')).toBe(0);
    expect(await taken.get('e.q.000000000001')).toBeNull();
    expect(await second.enqueue('e', { kind: 'job' }, 'rq-3')).toMatchObject({ seq: 2, depth: 1 });
  });
});

describe('a trigger sent on NATS whose answer was lost', () => {
  const natsUrl = inject('natsUrl');
  const prefix = `ttrigonce${Math.random().toString(16).slice(2, 10)}`;
  let bus: NatsBus | undefined;

  afterAll(async () => {
    if (bus === undefined) return;
    const jsm = await bus.jetstreamManager();
    for (const name of [`KV_${prefix}_triggers`, `KV_${prefix}_trigger_ledger`])
      await jsm.streams.delete(name).catch(() => undefined);
    await bus.close();
  });

  it('the sender retries on the timeout and the planner queues the trigger once', async () => {
    bus = await NatsBus.connect(natsUrl);
    const kv = losingFirstItemAnswer(await openTriggerStore(bus, prefix));
    const queue = new TriggerQueue(kv);
    await queue.open('daemon-1', 10);
    const sub = serveTriggers({
      bus,
      subjects: subjects(prefix),
      queue: () => Promise.resolve(queue),
      logger: silentLogger(),
      ledger: new ControlLedger(await bus.kv(`${prefix}_trigger_ledger`)),
    });
    try {
      const reply = await triggerRun(bus, 'daemon-1', { kind: 'build' }, { prefix, timeoutMs: 15_000 });
      expect(kv.lost).toBe(1);
      expect(reply).toMatchObject({ ok: true, seq: 1, depth: 1, duplicate: true, attempts: 2 });
      expect(await queue.depth('daemon-1')).toBe(1);
      expect(await queue.next('daemon-1', 0)).toEqual({ seq: 1, trigger: { kind: 'build' } });
      expect(await queue.next('daemon-1', 1)).toBeUndefined();
    } finally {
      sub.unsubscribe();
    }
  });
});
