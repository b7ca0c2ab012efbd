import type { JetStreamManager, StreamConfig, StreamInfo } from '@nats-io/jetstream';
import { describe, expect, it } from 'vitest';
import { createRacing, ensureStream } from './nats-assets.js';

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

describe('ensureStream while another process creates the same stream', () => {
  it('carries on with the stream another process made when its own create hears "subjects overlap"', async () => {
    let exists = false;
    const updates: Partial<StreamConfig>[] = [];
    const config = { name: 'EVENTS', subjects: ['p.events.>'], max_age: 0 };
    const jsm = {
      streams: {
        info: async () => {
          if (!exists) throw new Error('stream not found');
          return { config } as unknown as StreamInfo;
        },
        add: async () => {
          exists = true; // the winner's create lands first
          throw new Error('subjects overlap with an existing stream');
        },
        update: async (_name: string, next: Partial<StreamConfig>) => {
          updates.push(next);
          return { config: next } as unknown as StreamInfo;
        },
      },
    } as unknown as JetStreamManager;
    await ensureStream(jsm, config);
    expect(updates).toEqual([]);
  });

  it('still refuses a stream whose subjects a stream of another name holds', async () => {
    const jsm = {
      streams: {
        info: async () => {
          throw new Error('stream not found');
        },
        add: async () => {
          throw new Error('subjects overlap with an existing stream');
        },
      },
    } as unknown as JetStreamManager;
    await expect(ensureStream(jsm, { name: 'EVENTS', subjects: ['p.events.>'] })).rejects.toMatchObject({
      code: 'invalid_config',
      message: expect.stringMatching(/EVENTS.*subjects overlap/),
    });
  });
});

describe('createRacing (a KV bucket or object store created by two processes at once)', () => {
  const jsmWith = (exists: () => boolean) => async () =>
    ({
      streams: {
        info: async () => {
          if (!exists()) throw new Error('stream not found');
          return { config: {} } as unknown as StreamInfo;
        },
      },
    }) as unknown as JetStreamManager;

  it('tries once more when the create heard "subjects overlap" about the stream another process made', async () => {
    let calls = 0;
    const made = await createRacing(
      jsmWith(() => true),
      'KV_b',
      async () => {
        if (++calls === 1) throw new Error('subjects overlap with an existing stream');
        return 'bucket';
      },
    );
    expect(made).toBe('bucket');
    expect(calls).toBe(2);
  });

  it('gives the error back when no stream of that name exists, or the failure is another', async () => {
    const overlap = async () => {
      throw new Error('subjects overlap with an existing stream');
    };
    await expect(
      createRacing(
        jsmWith(() => false),
        'KV_b',
        overlap,
      ),
    ).rejects.toThrow(/subjects overlap/);
    const refused = async () => {
      throw new Error('insufficient resources');
    };
    await expect(
      createRacing(
        jsmWith(() => true),
        'KV_b',
        refused,
      ),
    ).rejects.toThrow(/insufficient resources/);
  });
});
