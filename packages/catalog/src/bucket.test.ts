import {
  silentLogger,
  type Backend,
  type KvEntry,
  type KvStore,
  type KvWatchOptions,
} from '@agentmesh/protocol';
import { describe, expect, it } from 'vitest';
import { CatalogBucket } from './bucket.js';

/** A bucket whose revisions and watch deliveries the test hands out: it stands for writes of other replicas too. */
function controlledStore() {
  let revision = 0;
  let deliver: ((entry: KvEntry) => void) | undefined;
  let known: KvWatchOptions['known'];
  /** Set: the next put is stored at once but answered only when the test calls it (or failed with an error). */
  let held: ((failure?: Error) => void) | undefined;
  const store = {
    get: async () => null,
    put: () => {
      const stored = ++revision;
      if (held === undefined) return Promise.resolve(stored);
      return new Promise<number>((resolve, reject) => {
        held = (failure) => (failure === undefined ? resolve(stored) : reject(failure));
      });
    },
    delete: async () => void ++revision,
    keys: async () => [],
    watch: async (onEntry: (entry: KvEntry) => void, options?: KvWatchOptions) => {
      deliver = onEntry;
      known = options?.known;
      return { stop: () => undefined };
    },
  } as unknown as KvStore;
  return {
    backend: { kv: async () => store } as unknown as Backend,
    /** What the bucket tells its watch of an entry (whether to read its value). */
    known: (key: string, rev: number) => known!(key, rev),
    /** The next put is stored but not answered: call the returned function to answer it. */
    holdNextPut: () => {
      held = () => undefined;
      return (failure?: Error) => held!(failure);
    },
    /** Another replica's write: it takes the next revision, and this replica hears of it only through the watch. */
    foreignWrite: () => ++revision,
    deliver: (key: string, rev: number) =>
      deliver?.({ key, value: new Uint8Array(0), revision: rev, operation: 'PUT' }),
  };
}

/** An opened bucket over `kv`; `applied` collects the revisions it applies, in order. */
async function opened(
  kv: ReturnType<typeof controlledStore>,
  applied: number[] = [],
): Promise<CatalogBucket> {
  const bucket = new CatalogBucket({
    bus: kv.backend,
    bucket: 'b',
    logger: silentLogger(),
    apply: (entry) => applied.push(entry.revision),
  });
  await bucket.open();
  return bucket;
}

const settled = async (promise: Promise<void>): Promise<boolean> => {
  let done = false;
  void promise.then(() => (done = true));
  for (let i = 0; i < 5; i++) await Promise.resolve();
  return done;
};

describe('CatalogBucket.echoOf', () => {
  it('does not wait for the watch when every earlier revision is a put of this replica', async () => {
    const kv = controlledStore();
    const bucket = await opened(kv);
    const first = await bucket.write('workers.a', new Uint8Array([1]));
    const second = await bucket.write('workers.b', new Uint8Array([2]));
    expect([first, second]).toEqual([1, 2]);
    expect(await settled(bucket.echoOf(second))).toBe(true);
    bucket.stop();
  });

  it('waits for the watch while an earlier revision is another replica write it has not applied', async () => {
    const kv = controlledStore();
    const applied: number[] = [];
    const bucket = await opened(kv, applied);
    await bucket.write('workers.a', new Uint8Array([1]));
    const theirs = kv.foreignWrite();
    const mine = await bucket.write('workers.b', new Uint8Array([2]));
    const echo = bucket.echoOf(mine);
    expect(await settled(echo)).toBe(false);
    kv.deliver('workers.c', theirs);
    expect(await settled(echo)).toBe(true);
    // the other replica's write is applied before the registration checks its conflicts
    expect(applied).toEqual([1, 3, 2]);
    bucket.stop();
  });

  it('counts a delete of its own as unknown until the watch delivers it (its revision is not returned)', async () => {
    const kv = controlledStore();
    const bucket = await opened(kv);
    await bucket.remove('workers.gone');
    const mine = await bucket.write('workers.b', new Uint8Array([2]));
    const echo = bucket.echoOf(mine);
    expect(await settled(echo)).toBe(false);
    kv.deliver('workers.gone', 1);
    expect(await settled(echo)).toBe(true);
    bucket.stop();
  });
});

describe('CatalogBucket and the watch of its own writes', () => {
  it('has the watch wait for a put it hears of before the put is answered, not read the value back', async () => {
    const kv = controlledStore();
    const applied: number[] = [];
    const bucket = await opened(kv, applied);
    const answer = kv.holdNextPut();
    const written = bucket.write('workers.a', new Uint8Array([1]));
    const told = kv.known('workers.a', 1);
    expect(told).toBeInstanceOf(Promise);
    answer();
    expect(await written).toBe(1);
    expect(await told).toBe(true);
    expect(applied).toEqual([1]);
    expect(kv.known('workers.a', 1)).toBe(true);
    bucket.stop();
  });

  it('has the watch read the value when the put failed, and at once for a key it is not writing', async () => {
    const kv = controlledStore();
    const bucket = await opened(kv);
    const answer = kv.holdNextPut();
    const written = bucket.write('workers.a', new Uint8Array([1]));
    const told = kv.known('workers.a', 1);
    answer(new Error('no answer'));
    await expect(written).rejects.toThrow('no answer');
    expect(await told).toBe(false);
    expect(kv.known('workers.b', 2)).toBe(false);
    expect(kv.known('workers.a', 1)).toBe(false);
    bucket.stop();
  });
});
