import { describe, expect, it } from 'vitest';
import { KeyedSerializer, mapLimited } from './concurrency.js';

describe('mapLimited', () => {
  it('keeps at most `limit` calls in flight and returns results in the items order', async () => {
    let inFlight = 0;
    let peak = 0;
    const items = Array.from({ length: 50 }, (_, i) => i);
    const out = await mapLimited(items, 4, async (n) => {
      inFlight++;
      peak = Math.max(peak, inFlight);
      await new Promise((r) => setTimeout(r, n % 3));
      inFlight--;
      return n * 2;
    });
    expect(out).toEqual(items.map((n) => n * 2));
    expect(peak).toBe(4);
  });

  it('rejects with the first failure and starts no call after it', async () => {
    const started: number[] = [];
    await expect(
      mapLimited([0, 1, 2, 3, 4, 5], 2, async (n) => {
        started.push(n);
        await Promise.resolve();
        if (n === 1) throw new Error('item 1 failed');
        return n;
      }),
    ).rejects.toThrow('item 1 failed');
    expect(started).toEqual([0, 1, 2]);
  });

  it('resolves with an empty list for no items', async () => {
    expect(await mapLimited([], 8, () => Promise.resolve(1))).toEqual([]);
  });
});

describe('KeyedSerializer', () => {
  it('runs the steps of one key one at a time, in order, past a failure; other keys side by side', async () => {
    const serializer = new KeyedSerializer();
    const log: string[] = [];
    const step =
      (name: string, ms: number, fail = false) =>
      async () => {
        log.push(`start ${name}`);
        await new Promise((r) => setTimeout(r, ms));
        log.push(`end ${name}`);
        if (fail) throw new Error(`${name} failed`);
        return name;
      };
    const a1 = serializer.run('a', step('a1', 20, true));
    const a2 = serializer.run('a', step('a2', 1));
    const b1 = serializer.run('b', step('b1', 5));
    await expect(a1).rejects.toThrow('a1 failed');
    await expect(Promise.all([a2, b1])).resolves.toEqual(['a2', 'b1']);
    expect(log.indexOf('end a1')).toBeLessThan(log.indexOf('start a2'));
    expect(log.indexOf('start b1')).toBeLessThan(log.indexOf('end a1'));
    expect(serializer.size).toBe(0);
  });
});
