import { describe, expect, it } from 'vitest';
import { MemoryKvStore, type RunRequest } from '@agentmesh/protocol';
import { claimRecord } from './keepers.js';
import { parseRecord } from '../model/record.js';

const request = { id: 'r1', task: 'wait for a human' } as RunRequest;

describe('claimRecord (a run that is not durable)', () => {
  it("a waiting state read before the run's end never writes over its finished record", async () => {
    const records = new MemoryKvStore();
    const keeper = await claimRecord(records, { runId: 'r1', plannerId: 'p1', request });
    const get = records.get.bind(records);
    let finishing: Promise<void> | undefined;
    records.get = async (key) => {
      const entry = await get(key);
      // the run ends between the waiting state's read and its write
      finishing ??= keeper.finish('cancelled', new Date().toISOString());
      await finishing;
      return entry;
    };
    await keeper.setWaiting?.('paused');
    const record = parseRecord((await get('r1'))!.value);
    expect(record.state).toBe('finished');
    expect(record.status).toBe('cancelled');
    expect(record.waiting).toBeUndefined();
  });

  it('records the waiting state of a running run', async () => {
    const records = new MemoryKvStore();
    const keeper = await claimRecord(records, { runId: 'r1', plannerId: 'p1', request });
    await keeper.setWaiting?.('awaiting_approval');
    expect(parseRecord((await records.get('r1'))!.value).waiting).toBe('awaiting_approval');
  });
});
