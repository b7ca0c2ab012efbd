import { MemoryKvStore, encodeJson, silentLogger, type KvStore, type RunRequest } from '@agentmesh/protocol';
import type { RunRecord } from '../model/record.js';
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

/** The record of run r1, running under a lease that has run out. */
const lapsed = (fields: { schema_version: number; planner_id: string; epoch: number }) => ({
  run_id: 'r1',
  state: 'running',
  lease_until: 0,
  ...fields,
});

describe('runDurably: a run a newer planner wrote', () => {
  const newer = lapsed({ schema_version: 2, planner_id: 'p-new', epoch: 4 });
  const published: unknown[] = [];
  const infra = {
    lastStoredEvent: async () => ({ type: 'llm.request', seq: 7 }),
    readRunEvents: async () => [],
    eventPublisher: () => ({
      publish: (e: unknown) => published.push(e),
      flush: async () => undefined,
      close: () => undefined,
    }),
  } as unknown as PlannerInfra;

  it('is not taken: record untouched, nothing run, the request goes back, one run.warning after the last event', async () => {
    const records = new MemoryKvStore();
    const revision = await records.create('r1', encodeJson(newer));
    const reported = new Set<string>();
    let ran = 0;
    const run = () =>
      runDurably(
        { ...deps(records), infra, newerReported: reported },
        request,
        { runId: 'r1', streamSeq: 1 },
        () => {
          ran++;
          return Promise.resolve();
        },
      );
    expect(await run()).toEqual({ kind: 'nak', delayMs: 10_000 });
    expect(await run()).toEqual({ kind: 'nak', delayMs: 10_000 });
    expect(ran).toBe(0);
    const entry = await records.get('r1');
    expect(entry?.revision).toBe(revision);
    expect(JSON.parse(new TextDecoder().decode(entry!.value))).toEqual(newer);
    expect(published).toEqual([
      expect.objectContaining({ type: 'run.warning', seq: 8, code: 'schema_version', run_id: 'r1' }),
    ]);
  });

  it('whose checkpoint is newer is handed back at once, the checkpoint untouched', async () => {
    const records = new MemoryKvStore();
    await records.create('r1', encodeJson({ ...newer, schema_version: 1, planner_id: 'p-old' }));
    const d = { ...deps(records), infra };
    const checkpoint = encodeJson({ schema_version: 2, version: 1, epoch: 1, snapshot: { future: true } });
    await d.checkpoints.create('r1', checkpoint);
    let ran = 0;
    const settlement = await runDurably(d, request, { runId: 'r1', streamSeq: 1 }, () => {
      ran++;
      return Promise.resolve();
    });
    expect(settlement).toEqual({ kind: 'nak', delayMs: 0 });
    expect(ran).toBe(0);
    expect((await d.checkpoints.get('r1'))?.value).toEqual(checkpoint);
    const record = JSON.parse(new TextDecoder().decode((await records.get('r1'))!.value)) as RunRecord;
    expect(record.lease_until).toBe(0);
  });
});

describe('runDurably: a run whose planner stopped before it started it', () => {
  const stopped = lapsed({ schema_version: 1, planner_id: 'p-old', epoch: 1 });
  const infraEndingAt = (type: string) =>
    ({
      lastStoredEvent: async () => ({ type, seq: 1 }),
      readRunEvents: async () => [{ type, seq: 1, run_id: 'r1' }],
    }) as unknown as PlannerInfra;

  async function resumeOf(lastType: string) {
    const records = new MemoryKvStore();
    await records.create('r1', encodeJson(stopped));
    let resume: { queued?: boolean; lastSeq: number } | undefined;
    await runDurably(
      { ...deps(records), infra: infraEndingAt(lastType) },
      request,
      { runId: 'r1', streamSeq: 1 },
      (keeper) => {
        resume = keeper.resume;
        return keeper.finish('done', new Date().toISOString());
      },
    );
    return resume;
  }

  it('starts it (not a takeover) when only run.accepted or run.queued is stored', async () => {
    expect(await resumeOf('run.accepted')).toMatchObject({ queued: true, lastSeq: 1 });
    expect(await resumeOf('run.queued')).toMatchObject({ queued: true, lastSeq: 1 });
  });

  it('resumes it once it had started', async () => {
    const resume = await resumeOf('run.started');
    expect(resume).toMatchObject({ lastSeq: 1 });
    expect(resume?.queued).toBeUndefined();
  });
});
