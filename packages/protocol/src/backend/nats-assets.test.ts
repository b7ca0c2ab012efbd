import type { JetStreamManager, StreamConfig, StreamInfo } from '@nats-io/jetstream';
import { describe, expect, it } from 'vitest';
import { ensureStream } from './nats-assets.js';

/** A stream manager holding one existing stream; records the updates it is asked for. */
function managerWith(config: Partial<StreamConfig>) {
  const updates: Partial<StreamConfig>[] = [];
  const info = (c: Partial<StreamConfig>) => ({ config: c }) as unknown as StreamInfo;
  const jsm = {
    streams: {
      info: async () => info(config),
      add: async () => {
        throw new Error('stream name already in use');
      },
      update: async (_name: string, next: Partial<StreamConfig>) => {
        updates.push(next);
        return info(next);
      },
    },
  } as unknown as JetStreamManager;
  return { jsm, updates };
}

describe('ensureStream on an existing stream', () => {
  it('keeps its replica count when replicas are not enforced (a client that did not configure them)', async () => {
    const { jsm, updates } = managerWith({ name: 'RUNS', num_replicas: 3, max_age: 0 });
    await ensureStream(jsm, { name: 'RUNS', num_replicas: 1, max_age: 0 }, { enforceReplicas: false });
    expect(updates).toEqual([]);
  });

  it('updates other settings without touching the replica count when replicas are not enforced', async () => {
    const { jsm, updates } = managerWith({ name: 'RUNS', num_replicas: 3, max_age: 0 });
    await ensureStream(jsm, { name: 'RUNS', num_replicas: 1, max_age: 5 }, { enforceReplicas: false });
    expect(updates).toHaveLength(1);
    expect(updates[0]).toMatchObject({ num_replicas: 3, max_age: 5 });
  });

  it('brings the replica count to the configured one when replicas are enforced', async () => {
    const { jsm, updates } = managerWith({ name: 'RUNS', num_replicas: 3 });
    await ensureStream(jsm, { name: 'RUNS', num_replicas: 1 });
    expect(updates).toEqual([expect.objectContaining({ num_replicas: 1 })]);
  });
});
