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
