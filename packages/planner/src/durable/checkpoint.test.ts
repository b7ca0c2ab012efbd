import { describe, expect, it } from 'vitest';
import { MemoryKvStore, encodeJson, silentLogger } from '@agentmesh/protocol';
import type { RunSnapshot } from '../model/snapshot.js';
import { CheckpointWriter, type StoredCheckpoint } from './checkpoint.js';
import { RunLease } from './lease.js';

describe('CheckpointWriter: a checkpoint another planner wrote', () => {
  it('gives the run up through the lease, so the run stops here without a final event of its own', async () => {
    const records = new MemoryKvStore();
    const checkpoints = new MemoryKvStore();
    const claim = await RunLease.acquire(
      records,
      { run_id: 'r1', accepted_at: new Date().toISOString(), task: 't' },
      { plannerId: 'p1', leaseMs: 60_000, log: silentLogger() },
    );
    if (claim.kind !== 'acquired') throw new Error(`lease not acquired: ${claim.kind}`);
    const lease = claim.lease;
    const lost: string[] = [];
    lease.onLost((why) => lost.push(why));
    const snapshot = { run_id: 'r1' } as RunSnapshot;
    const writer = new CheckpointWriter(checkpoints, lease, undefined, silentLogger());
    await writer.write(snapshot);
    const theirs: StoredCheckpoint = {
      version: 1,
      planner_id: 'p2',
      epoch: 2,
      saved_at: new Date().toISOString(),
      snapshot,
    };
    await checkpoints.put('r1', encodeJson(theirs));
    await expect(writer.write(snapshot)).rejects.toMatchObject({
      code: 'conflict',
      details: { lease_lost: true },
    });
    expect(lease.lost).toBe(true);
    expect(lost).toEqual(['a checkpoint of epoch 2 was written by p2']);
    lease.stop();
  });
});

/** A checkpoints bucket that remembers the keys it was asked to delete. */
class DeleteLog extends MemoryKvStore {
  readonly deleted: string[] = [];
  override async delete(key: string): Promise<void> {
    this.deleted.push(key);
    await super.delete(key);
  }
}

async function leaseOf(records: MemoryKvStore, runId: string, plannerId: string): Promise<RunLease> {
  const claim = await RunLease.acquire(
    records,
    { run_id: runId, accepted_at: new Date().toISOString(), task: 't' },
    { plannerId, leaseMs: 60_000, log: silentLogger(), holderGone: async () => true },
  );
  if (claim.kind !== 'acquired') throw new Error(`lease not acquired: ${claim.kind}`);
  return claim.lease;
}

describe('CheckpointWriter.clear: the checkpoint of a finished run', () => {
  it('writes nothing for a run that never had a checkpoint (no delete marker per run)', async () => {
    const checkpoints = new DeleteLog();
    const lease = await leaseOf(new MemoryKvStore(), 'r1', 'p1');
    await new CheckpointWriter(checkpoints, lease, undefined, silentLogger()).clear('r1');
    expect(checkpoints.deleted).toEqual([]);
  });

  it('removes a checkpoint this planner wrote', async () => {
    const checkpoints = new DeleteLog();
    const lease = await leaseOf(new MemoryKvStore(), 'r1', 'p1');
    const writer = new CheckpointWriter(checkpoints, lease, undefined, silentLogger());
    await writer.write({ run_id: 'r1' } as RunSnapshot);
    await writer.clear('r1');
    expect(checkpoints.deleted).toEqual(['r1']);
    expect(await checkpoints.get('r1')).toBeNull();
  });

  it('removes the checkpoint of a run taken over, found at the takeover or not', async () => {
    const records = new MemoryKvStore();
    const checkpoints = new DeleteLog();
    (await leaseOf(records, 'r1', 'p1')).stop();
    const takeover = await leaseOf(records, 'r1', 'p2');
    expect(takeover.epoch).toBe(2);
    await new CheckpointWriter(checkpoints, takeover, undefined, silentLogger()).clear('r1');
    const found = await leaseOf(new MemoryKvStore(), 'r2', 'p1');
    await new CheckpointWriter(checkpoints, found, 7, silentLogger()).clear('r2');
    expect(checkpoints.deleted).toEqual(['r1', 'r2']);
  });
});
