import { describe, expect, it } from 'vitest';
import { ErrorCode, MemoryKvStore, isAgentMeshError, type KvStore } from '@agentmesh/protocol';
import { DEFAULT_MAX_PENDING_TRIGGERS, MAX_TRIGGER_BYTES, TriggerQueue } from './trigger-queue.js';

const item = (seq: number) => `d.q.${String(seq).padStart(12, '0')}`;

const refusal = (p: Promise<unknown>) =>
  p.then(
    () => undefined,
    (e: unknown) => e,
  );

describe('TriggerQueue limits', () => {
  it('by default a daemon holds 1,000 pending triggers even when its queue_capacity asks for 100,000', async () => {
    const queue = new TriggerQueue(new MemoryKvStore());
    await queue.open('d', 100_000);
    for (let n = 1; n <= DEFAULT_MAX_PENDING_TRIGGERS; n++) await queue.enqueue('d', { kind: 'job', n });
    const refused = await refusal(queue.enqueue('d', { kind: 'job' }));
    expect(isAgentMeshError(refused, ErrorCode.QuotaExceeded)).toBe(true);
    expect(refused).toMatchObject({
      retryable: true,
      details: { pending: 1_000, quota: 1_000, capacity: 100_000 },
    });
    expect(await queue.dropped('d')).toBe(1);
    await queue.remove('d', 1);
    await expect(queue.enqueue('d', { kind: 'job' })).resolves.toMatchObject({ depth: 1_000 });
  });

  it('a capacity under the quota still refuses with queue_full', async () => {
    const queue = new TriggerQueue(new MemoryKvStore(), { maxPendingPerDaemon: 5 });
    await queue.open('d', 2);
    await queue.enqueue('d', { kind: 'a' });
    await queue.enqueue('d', { kind: 'b' });
    expect(isAgentMeshError(await refusal(queue.enqueue('d', { kind: 'c' })), ErrorCode.QueueFull)).toBe(
      true,
    );
  });

  it('refuses a trigger above the size limit, naming its size and the limit, and queues nothing', async () => {
    const queue = new TriggerQueue(new MemoryKvStore());
    await queue.open('d', 10);
    const trigger = { kind: 'job', data: 'z'.repeat(MAX_TRIGGER_BYTES) };
    const size = JSON.stringify(trigger).length;
    const refused = await refusal(queue.enqueue('d', trigger));
    expect(isAgentMeshError(refused, ErrorCode.PayloadTooLarge)).toBe(true);
    expect((refused as Error).message).toContain(
      `${size} bytes exceeds the limit of ${MAX_TRIGGER_BYTES} bytes`,
    );
    expect(await queue.depth('d')).toBe(0);
  });
});

describe('TriggerQueue and schema_version', () => {
  it('stamps the queue with schema_version 1, stores and hands triggers out as sent, refuses a newer queue', async () => {
    const kv = new MemoryKvStore();
    const queue = new TriggerQueue(kv);
    await queue.open('d', 10);
    await queue.enqueue('d', { kind: 'job', n: 1 });
    const item = JSON.parse(new TextDecoder().decode((await kv.get('d.q.000000000001'))!.value)) as object;
    expect(item).toEqual({ kind: 'job', n: 1 });
    expect(await queue.next('d', 0)).toEqual({ seq: 1, trigger: { kind: 'job', n: 1 } });
    const meta = JSON.parse(new TextDecoder().decode((await kv.get('d.meta'))!.value)) as object;
    expect(meta).toMatchObject({ schema_version: 1 });
    await kv.put(
      'd.q.000000000001',
      new TextEncoder().encode(JSON.stringify({ ...item, schema_version: 2 })),
    );
    expect(isAgentMeshError(await refusal(queue.next('d', 0)), ErrorCode.Unavailable)).toBe(true);
    await kv.put('d.meta', new TextEncoder().encode(JSON.stringify({ ...meta, schema_version: 2 })));
    expect(isAgentMeshError(await refusal(queue.next('d', 0)), ErrorCode.Unavailable)).toBe(true);
  });
});

describe('TriggerQueue on a replicated bucket', () => {
  it('setIdle rides out a read that does not see the queue yet (a replica behind its create)', async () => {
    const kv = new MemoryKvStore();
    const queue = new TriggerQueue(kv);
    await queue.open('d', 10);
    const get = kv.get.bind(kv);
    let stale = 2;
    kv.get = async (key) => (stale-- > 0 ? null : get(key));
    await queue.setIdle('d', true);
    expect(stale).toBeLessThan(0);
    expect(await queue.status('d')).toMatchObject({ state: 'idle' });
  });
});

describe('TriggerQueue reads of a replica behind the create', () => {
  /** Makes the next `n` reads of a daemon's meta miss it, as a KV replica that has not caught up does; counts reads. */
  function missing(kv: MemoryKvStore, n: number): { reads: number } {
    const get = MemoryKvStore.prototype.get.bind(kv);
    const seen = { reads: 0 };
    kv.get = (key) => {
      if (!key.endsWith('.meta')) return get(key);
      seen.reads++;
      return n-- > 0 ? Promise.resolve(null) : get(key);
    };
    return seen;
  }

  it("the daemon's own reads (next trigger, depth, refused count, removal) read again rather than ending it not_found", async () => {
    const kv = new MemoryKvStore();
    const queue = new TriggerQueue(kv);
    await queue.open('d', 10);
    await queue.enqueue('d', { kind: 'job', n: 1 });
    missing(kv, 2);
    await expect(queue.next('d', 0)).resolves.toMatchObject({ seq: 1, trigger: { kind: 'job', n: 1 } });
    missing(kv, 2);
    await expect(queue.depth('d')).resolves.toBe(1);
    missing(kv, 2);
    await expect(queue.dropped('d')).resolves.toBe(0);
    missing(kv, 2);
    await queue.remove('d', 1);
    await expect(queue.depth('d')).resolves.toBe(0);
  });

  it('a sender hears not_found after one read for a run with no queue', async () => {
    const kv = new MemoryKvStore();
    const seen = missing(kv, 0);
    const refused = await refusal(new TriggerQueue(kv).enqueue('nobody', { kind: 'job' }));
    expect(isAgentMeshError(refused, ErrorCode.NotFound)).toBe(true);
    expect(seen.reads).toBe(1);
  });
});

describe('TriggerQueue.open', () => {
  /** Makes the next `n` creates fail with `error`, as a bucket still electing its leader does. */
  function failingCreates(kv: MemoryKvStore, n: number, error: Error): void {
    const create = MemoryKvStore.prototype.create.bind(kv);
    kv.create = (key, value) => (n-- > 0 ? Promise.reject(error) : create(key, value));
  }

  it('creates the queue through transient failures of the create (no responders, a timeout)', async () => {
    const kv = new MemoryKvStore();
    failingCreates(kv, 2, new Error('503 no responders available'));
    const queue = new TriggerQueue(kv);
    await queue.open('d', 10);
    await expect(queue.enqueue('d', { kind: 'job' })).resolves.toMatchObject({ seq: 1, depth: 1 });
  });

  it('fails on any other failure of the create, and keeps a queue that exists', async () => {
    const kv = new MemoryKvStore();
    failingCreates(kv, 1, new Error('permissions violation for publish'));
    const queue = new TriggerQueue(kv);
    await expect(queue.open('d', 10)).rejects.toThrow(/permissions violation/);
    await queue.open('d', 10);
    await queue.enqueue('d', { kind: 'job' });
    await queue.open('d', 10);
    await expect(queue.depth('d')).resolves.toBe(1);
  });
});

describe('TriggerQueue: a trigger acknowledged ok is never left behind the daemon', () => {
  it('refuses a trigger that is the skip mark itself, so a client cannot make its trigger vanish', async () => {
    const queue = new TriggerQueue(new MemoryKvStore());
    await queue.open('d', 10);
    const refused = await refusal(queue.enqueue('d', { kind: 'agentmesh.skipped', skipped: true }));
    expect(isAgentMeshError(refused, ErrorCode.InvalidMessage)).toBe(true);
    expect((refused as Error).message).toContain('skip mark');
    expect(await queue.depth('d')).toBe(0);
  });

  it('a write slower than the skip lands at a new seq after the daemon skipped its first one', async () => {
    const kv = new MemoryKvStore();
    const queue = new TriggerQueue(kv, {}, { gapTimeoutMs: 0 });
    await queue.open('d', 10);
    const slow = holdCreate(kv, item(1));
    const sentA = queue.enqueue('d', { kind: 'job', n: 'a' });
    await slow.reached;
    await queue.enqueue('d', { kind: 'job', n: 'b' });
    // the daemon gives up on seq 1, takes seq 2 and removes what it passed
    expect(await queue.next('d', 0)).toEqual({ seq: 2, trigger: { kind: 'job', n: 'b' } });
    await queue.remove('d', 2);
    slow.release();
    expect(await sentA).toMatchObject({ seq: 3 });
    expect(await queue.next('d', 2)).toEqual({ seq: 3, trigger: { kind: 'job', n: 'a' } });
    await queue.remove('d', 3);
    expect(await queue.depth('d')).toBe(0);
    await queue.close('d');
    expect(await kv.keys('d.>')).toEqual([]);
  });

  it('a daemon that reaches a seq whose write lands as it skips takes the trigger', async () => {
    const kv = new MemoryKvStore();
    const queue = new TriggerQueue(kv, {}, { gapTimeoutMs: 0 });
    await queue.open('d', 10);
    const get = MemoryKvStore.prototype.get.bind(kv);
    // the first read of seq 1 misses it; its write lands before the daemon's skip mark
    let missed = false;
    kv.get = async (key) => {
      if (key === item(1) && !missed) {
        missed = true;
        return null;
      }
      return get(key);
    };
    await queue.enqueue('d', { kind: 'job', n: 1 });
    expect(await queue.next('d', 0)).toEqual({ seq: 1, trigger: { kind: 'job', n: 1 } });
  });

  it('a write whose answer was lost is found on its retry: queued once, at its seq', async () => {
    const kv = new MemoryKvStore();
    const queue = new TriggerQueue(kv);
    await queue.open('d', 10);
    const create = MemoryKvStore.prototype.create.bind(kv);
    let lost = false;
    kv.create = async (key, value) => {
      const revision = await create(key, value);
      if (key === item(1) && !lost) {
        lost = true;
        throw new Error('TIMEOUT');
      }
      return revision;
    };
    expect(await queue.enqueue('d', { kind: 'job', n: 1 })).toEqual({ seq: 1, depth: 1 });
    expect(lost).toBe(true);
    expect(await queue.depth('d')).toBe(1);
    expect(await queue.next('d', 0)).toEqual({ seq: 1, trigger: { kind: 'job', n: 1 } });
  });
});

describe('TriggerQueue: a request repeated with its request_id queues its trigger once', () => {
  it('a repeat finds the trigger queued, then taken: answered with its seq and duplicate', async () => {
    const queue = new TriggerQueue(new MemoryKvStore());
    await queue.open('d', 10);
    expect(await queue.enqueue('d', { kind: 'job', n: 1 }, 'r1')).toEqual({ seq: 1, depth: 1 });
    expect(await queue.enqueue('d', { kind: 'job', n: 1 }, 'r1')).toEqual({
      seq: 1,
      depth: 1,
      duplicate: true,
    });
    expect(await queue.enqueue('d', { kind: 'job', n: 2 }, 'r2')).toEqual({ seq: 2, depth: 2 });
    await queue.remove('d', 1);
    expect(await queue.enqueue('d', { kind: 'job', n: 1 }, 'r1')).toMatchObject({ seq: 1, duplicate: true });
    expect(await queue.depth('d')).toBe(1);
    expect(await queue.next('d', 1)).toEqual({ seq: 2, trigger: { kind: 'job', n: 2 } });
  });

  it('a repeat while the first write is in flight writes it at the same seq; the first finds it there', async () => {
    const kv = new MemoryKvStore();
    const queue = new TriggerQueue(kv);
    await queue.open('d', 10);
    const slow = holdCreate(kv, item(1));
    const first = queue.enqueue('d', { kind: 'job' }, 'r1');
    await slow.reached;
    expect(await queue.enqueue('d', { kind: 'job' }, 'r1')).toEqual({ seq: 1, depth: 1, duplicate: true });
    slow.release();
    expect(await first).toEqual({ seq: 1, depth: 1 });
    expect(await queue.depth('d')).toBe(1);
    expect(await queue.next('d', 0)).toEqual({ seq: 1, trigger: { kind: 'job' } });
  });

  it('a repeat of a request whose sender died before writing, once the daemon skipped its seq, queues it at a new one', async () => {
    const kv = new MemoryKvStore();
    const queue = new TriggerQueue(kv, {}, { gapTimeoutMs: 0 });
    await queue.open('d', 10);
    const slow = holdCreate(kv, item(1));
    const stalled = queue.enqueue('d', { kind: 'job' }, 'r1');
    await slow.reached;
    expect(await queue.next('d', 0)).toBeUndefined();
    expect(await queue.enqueue('d', { kind: 'job' }, 'r1')).toEqual({ seq: 2, depth: 2 });
    expect(await queue.next('d', 0)).toEqual({ seq: 2, trigger: { kind: 'job' } });
    // the stalled first attempt comes back: it finds the skip mark, then the trigger its repeat queued
    slow.release();
    expect(await stalled).toMatchObject({ seq: 2, duplicate: true });
    await queue.remove('d', 2);
    expect(await queue.depth('d')).toBe(0);
    expect(await queue.next('d', 2)).toBeUndefined();
  });

  it('remembers the latest 64 request ids', async () => {
    const kv = new MemoryKvStore();
    const queue = new TriggerQueue(kv, { maxPendingPerDaemon: 1000 });
    await queue.open('d', 1000);
    for (let n = 1; n <= 70; n++) await queue.enqueue('d', { kind: 'job', n }, `r${n}`);
    const meta = JSON.parse(new TextDecoder().decode((await kv.get('d.meta'))!.value)) as {
      requests: [string, number][];
    };
    expect(meta.requests).toHaveLength(64);
    expect(meta.requests[0]![1]).toBe(7);
    expect(await queue.enqueue('d', { kind: 'job', n: 70 }, 'r70')).toMatchObject({
      seq: 70,
      duplicate: true,
    });
  });
});

/** Holds the first create of `key` until `release()`; `reached` resolves once it is called. */
function holdCreate(kv: MemoryKvStore, key: string) {
  const create = MemoryKvStore.prototype.create.bind(kv);
  let release!: () => void;
  const released = new Promise<void>((resolve) => (release = resolve));
  let reachedResolve!: () => void;
  const reached = new Promise<void>((resolve) => (reachedResolve = resolve));
  let held = false;
  kv.create = async (k, value) => {
    if (k === key && !held) {
      held = true;
      reachedResolve();
      await released;
    }
    return create(k, value);
  };
  return { reached, release };
}

describe('TriggerQueue when a compare-and-set write is accepted twice', () => {
  /** A bucket whose meta updates ignore the revision, as racing ones on a nats-server cluster before 2.9.21 may. */
  function racyMeta(): KvStore {
    const kv = new MemoryKvStore();
    const store = Object.create(kv) as KvStore;
    store.update = (key, value, revision) =>
      key.endsWith('.meta') ? kv.put(key, value) : kv.update(key, value, revision);
    return store;
  }

  it('two planners given one seq for two triggers queue both, and neither is answered duplicate', async () => {
    const kv = racyMeta();
    const [one, two] = [new TriggerQueue(kv), new TriggerQueue(kv)];
    await one.open('d', 10);
    const [a, b] = await Promise.all([
      one.enqueue('d', { kind: 'job', n: 1 }, 'rq-1'),
      two.enqueue('d', { kind: 'job', n: 2 }, 'rq-2'),
    ]);
    expect([a, b]).toEqual([
      expect.not.objectContaining({ duplicate: true }),
      expect.not.objectContaining({ duplicate: true }),
    ]);
    expect(a.seq).not.toBe(b.seq);
    const first = await one.next('d', 0);
    const second = await one.next('d', first!.seq);
    expect([first?.trigger, second?.trigger]).toEqual(
      expect.arrayContaining([
        { kind: 'job', n: 1 },
        { kind: 'job', n: 2 },
      ]),
    );
  });

  it("one planner's own writes of a queue's meta do not race: concurrent triggers take consecutive seqs", async () => {
    const queue = new TriggerQueue(racyMeta());
    await queue.open('d', 10);
    const queued = await Promise.all(
      [1, 2, 3, 4].map((n) => queue.enqueue('d', { kind: 'job', n }, `rq-${n}`)),
    );
    expect(queued.map((q) => q.seq).sort()).toEqual([1, 2, 3, 4]);
    await Promise.all([
      queue.setIdle('d', true),
      queue.enqueue('d', { kind: 'job', n: 5 }),
      queue.remove('d', 2),
    ]);
    expect(await queue.status('d')).toEqual({ state: 'idle', depth: 3 });
  });

  it('a repeat whose earlier seq holds another trigger queues its own', async () => {
    const kv = new MemoryKvStore();
    const queue = new TriggerQueue(kv);
    await queue.open('d', 10);
    const first = await queue.enqueue('d', { kind: 'job', n: 1 }, 'rq-1');
    // the seq the request reserved now holds another trigger (a second reservation of it won the write)
    await kv.put(item(first.seq), new TextEncoder().encode('{"kind":"job","n":9}'));
    const again = await queue.enqueue('d', { kind: 'job', n: 1 }, 'rq-1');
    expect(again.seq).not.toBe(first.seq);
    expect(again).not.toHaveProperty('duplicate');
    expect(await queue.next('d', first.seq)).toEqual({ seq: again.seq, trigger: { kind: 'job', n: 1 } });
  });
});
