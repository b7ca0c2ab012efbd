import { afterEach, describe, expect, it, vi } from 'vitest';
import { MemoryBlobStore } from './blobs.js';

const bytes = (n: number) => new Uint8Array(n).fill(7);
const blob = { mime: 'application/octet-stream' };

describe('MemoryBlobStore', () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it('keeps every blob when it has no limit', async () => {
    const store = new MemoryBlobStore();
    for (let i = 0; i < 50; i++) await store.put(`b${i}`, bytes(1000), blob);
    expect(await store.info('b0')).toMatchObject({ name: 'b0', size: 1000 });
    expect((await store.get('b49'))?.data.length).toBe(1000);
  });

  it('drops the oldest blobs once past memoryMaxBytes, and counts a rewritten blob once', async () => {
    const store = new MemoryBlobStore({ memoryMaxBytes: 2500 });
    await store.put('a', bytes(1000), blob);
    await store.put('b', bytes(1000), blob);
    await store.put('a', bytes(1000), blob);
    expect(await store.info('a')).not.toBeNull();
    expect(await store.info('b')).not.toBeNull();
    await store.put('c', bytes(1000), blob);
    expect(await store.info('b')).toBeNull();
    expect(await store.info('a')).not.toBeNull();
    expect(await store.info('c')).not.toBeNull();
    await store.delete('a');
    await store.put('d', bytes(1000), blob);
    expect(await store.info('c')).not.toBeNull();
    expect(await store.info('d')).not.toBeNull();
  });

  it('keeps a single blob larger than memoryMaxBytes until the next one comes', async () => {
    const store = new MemoryBlobStore({ memoryMaxBytes: 100 });
    await store.put('big', bytes(1000), blob);
    expect((await store.get('big'))?.data.length).toBe(1000);
    await store.put('next', bytes(10), blob);
    expect(await store.get('big')).toBeNull();
    expect(await store.get('next')).not.toBeNull();
  });

  it('drops blobs older than ttlMs', async () => {
    vi.useFakeTimers({ now: 1_000_000 });
    const store = new MemoryBlobStore({ ttlMs: 60_000 });
    await store.put('old', bytes(10), blob);
    vi.setSystemTime(1_030_000);
    await store.put('young', bytes(10), blob);
    vi.setSystemTime(1_061_000);
    expect(await store.info('old')).toBeNull();
    expect(await store.get('young')).not.toBeNull();
    vi.setSystemTime(1_091_000);
    expect(await store.get('young')).toBeNull();
  });
});
