import { MemoryKvStore, silentLogger, type KvStore, type RunRequest } from '@agentmesh/protocol';
import { describe, expect, it } from 'vitest';
import type { PlannerInfra } from '../infra/backend.js';
import { runDurably } from './takeover.js';

/** Run records whose writes fail once `failing` is set (a runs bucket electing a leader). */
function flakyRecords(): { store: KvStore; fail: () => void } {
  const inner = new MemoryKvStore();
  let failing = false;
  const store: KvStore = Object.create(inner) as KvStore;
  store.update = (key, value, revision) =>
    failing ? Promise.reject(new Error('no responders')) : inner.update(key, value, revision);
  return { store, fail: () => (failing = true) };
}

function deps(records: KvStore) {
  return {
    infra: {} as PlannerInfra,
    records,
    checkpoints: new MemoryKvStore(),
    plannerId: 'p1',
    leaseMs: 10_000,
    logger: silentLogger(),
  };
}

const request = { id: 'r1', task: 't' } as RunRequest;

describe('runDurably: the intake message of a finished run', () => {
  it('is acked when the run record says finished', async () => {
    const { store } = flakyRecords();
    const settlement = await runDurably(deps(store), request, { runId: 'r1', streamSeq: 1 }, (keeper) =>
      keeper.finish('done', new Date().toISOString()),
    );
    expect(settlement).toEqual({ kind: 'ack' });
  });

  it('is left for redelivery when the finishing write did not land (the run would stay "running" forever)', async () => {
    const { store, fail } = flakyRecords();
    const settlement = await runDurably(deps(store), request, { runId: 'r1', streamSeq: 1 }, (keeper) => {
      fail();
      return keeper.finish('done', new Date().toISOString());
    });
    expect(settlement).toEqual({ kind: 'leave' });
  }, 20_000);
});
