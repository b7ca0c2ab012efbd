import { silentLogger, type Backend, type KvEntry, type KvStore } from '@agentmesh/protocol';
import { describe, expect, it } from 'vitest';
import { CatalogBucket } from './bucket.js';

/** A bucket whose revisions and watch deliveries the test hands out: it stands for writes of other replicas too. */
function controlledStore() {
  let revision = 0;
  let deliver: ((entry: KvEntry) => void) | undefined;
  const store = {
    get: async () => null,
    put: async () => ++revision,
    delete: async () => void ++revision,
    keys: async () => [],
    watch: async (onEntry: (entry: KvEntry) => void) => {
      deliver = onEntry;
      return { stop: () => undefined };
    },
  } as unknown as KvStore;
  return {
    backend: { kv: async () => store } as unknown as Backend,
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
