import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { Objm, type ObjectStore } from '@nats-io/obj';
import { NatsBlobStore } from './blobs.js';

const filled = (n: number, value: number) => new Uint8Array(n).fill(value);
const json = { mime: 'application/json' };
let nc: NatsConnection;
let os: ObjectStore;

beforeAll(async () => {
  nc = await connect({ servers: inject('natsUrl') });
  os = await new Objm(nc).create(`blobs_race_${randomBytes(4).toString('hex')}`);
});

afterAll(async () => {
  await os.destroy().catch(() => undefined);
  await nc.close();
});

describe('NatsBlobStore on a real nats-server', () => {
  it('reads a blob written again while it is read (its old chunks purged) instead of waiting forever', async () => {
    const writer = new NatsBlobStore(os);
    await writer.put('session', filled(3000, 1), json);
    // the reader looks the object up; another process writes it again before the reader asks for its chunks
    let raced = false;
    const js = (os as unknown as { js: { consumers: object } }).js;
    const consumers = new Proxy(js.consumers, {
      get(target, prop, receiver) {
        const value: unknown = Reflect.get(target, prop, receiver);
        if (prop !== 'getPushConsumer' || typeof value !== 'function') return value;
        return async (...args: unknown[]) => {
          if (!raced) {
            raced = true;
            await writer.put('session', filled(2000, 2), json);
          }
          return (value as (...a: unknown[]) => Promise<unknown>).apply(target, args);
        };
      },
    });
    const racing = Object.create(os) as ObjectStore;
    Object.defineProperty(racing, 'js', {
      value: new Proxy(js, { get: (t, p) => (p === 'consumers' ? consumers : Reflect.get(t, p)) }),
    });
    const read = await new NatsBlobStore(racing).get('session');
    expect(raced).toBe(true);
    expect(new Uint8Array(read!.data)).toEqual(filled(2000, 2));
    expect(read?.info).toMatchObject({ name: 'session', size: 2000, mime: 'application/json' });
  }, 15_000);

  it('reads a blob that is not written meanwhile, and answers null for one that is gone', async () => {
    const store = new NatsBlobStore(os);
    await store.put('plain', filled(100_000, 3), json);
    expect(new Uint8Array((await store.get('plain'))!.data)).toEqual(filled(100_000, 3));
    await store.delete('plain');
    expect(await store.get('plain')).toBeNull();
    expect(await store.info('plain')).toBeNull();
  });
});
