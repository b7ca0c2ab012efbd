import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { jetstreamManager, type JetStreamManager } from '@nats-io/jetstream';
import { ensureStream } from './nats-assets.js';

let connections: NatsConnection[] = [];
let managers: JetStreamManager[] = [];
const created: string[] = [];

beforeAll(async () => {
  connections = await Promise.all(Array.from({ length: 4 }, () => connect({ servers: inject('natsUrl') })));
  managers = await Promise.all(connections.map((nc) => jetstreamManager(nc)));
});

afterAll(async () => {
  for (const name of created) await managers[0]!.streams.delete(name).catch(() => undefined);
  await Promise.all(connections.map((nc) => nc.close()));
});

describe('ensureStream against a real nats-server', () => {
  it('several processes creating the same stream at once all succeed (a planner fleet starting together)', async () => {
    const id = randomUUID().slice(0, 8).toUpperCase();
    for (let round = 0; round < 25; round++) {
      const name = `RACE${id}_${round}_EVENTS`;
      created.push(name);
      const wanted = { name, subjects: [`race${id}.${round}.events.>`], max_age: 0 };
      const results = await Promise.allSettled(managers.map((jsm) => ensureStream(jsm, wanted)));
      expect(results.filter((r) => r.status === 'rejected')).toEqual([]);
    }
  });

  it('a stream whose subjects another stream holds is still refused, naming the asset', async () => {
    const id = randomUUID().slice(0, 8).toUpperCase();
    const subjects = [`overlap${id}.events.>`];
    created.push(`OWNER${id}`, `OTHER${id}`);
    await ensureStream(managers[0]!, { name: `OWNER${id}`, subjects });
    await expect(ensureStream(managers[1]!, { name: `OTHER${id}`, subjects })).rejects.toMatchObject({
      code: 'invalid_config',
      message: expect.stringMatching(new RegExp(`OTHER${id}.*overlap`)),
    });
  });
});
