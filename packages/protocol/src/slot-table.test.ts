import { describe, expect, it } from 'vitest';
import { SlotTable } from './slot-table.js';

describe('SlotTable', () => {
  it('finds each value under its own handle and counts them', () => {
    const table = new SlotTable<{ n: number }>();
    const handles = Array.from({ length: 100 }, (_, n) => table.add({ n }));
    expect(new Set(handles).size).toBe(100);
    expect(table.size).toBe(100);
    handles.forEach((h, n) => expect(table.get(h)).toEqual({ n }));
  });

  it('never gives a reused slot a stale handle', () => {
    const table = new SlotTable<{ n: number }>();
    const first = table.add({ n: 1 });
    expect(table.delete(first)).toBe(true);
    expect(table.delete(first)).toBe(false);
    const second = table.add({ n: 2 });
    expect(second).not.toBe(first);
    expect(table.get(first)).toBeUndefined();
    expect(table.delete(first)).toBe(false);
    expect(table.get(second)).toEqual({ n: 2 });
    expect(table.size).toBe(1);
  });

  it('writes a handle as a subject token and reads it back, also once generations pass 2^31', () => {
    const table = new SlotTable<object>();
    const handles: number[] = [];
    for (let n = 0; n < 3000; n++) {
      const h = table.add({});
      handles.push(h);
      if (n % 2 === 0) table.delete(h);
    }
    for (const h of [...handles, 2 ** 22 * (2 ** 30 - 1) + 5]) {
      const token = SlotTable.token(h);
      expect(token).toMatch(/^\d+_\d+$/);
      expect(SlotTable.fromToken(token)).toBe(h);
    }
    for (const bad of ['', '_', '12', 'x_1']) expect(table.get(SlotTable.fromToken(bad))).toBeUndefined();
  });

  it('finds nothing under handles it never gave out', () => {
    const table = new SlotTable<object>();
    const h = table.add({});
    for (const bogus of [0, -h, h + 1, h + 0.5, Number.NaN, Infinity, 2 ** 60])
      expect(table.get(bogus)).toBeUndefined();
    expect(table.size).toBe(1);
  });

  it('visits every value once, and allows deleting while it does', () => {
    const table = new SlotTable<{ n: number }>();
    for (let n = 0; n < 10; n++) table.add({ n });
    const seen: number[] = [];
    table.forEach((value, handle) => {
      seen.push(value.n);
      table.delete(handle);
    });
    expect(seen).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
    expect(table.size).toBe(0);
    table.forEach(() => expect.unreachable());
  });

  it('reuses freed slots instead of growing under churn', () => {
    const table = new SlotTable<{ n: number }>();
    const live: number[] = [];
    for (let n = 0; n < 64; n++) live.push(table.add({ n }));
    for (let n = 64; n < 10_000; n++) {
      table.delete(live.shift()!);
      live.push(table.add({ n }));
    }
    let slots = 0;
    table.forEach(() => slots++);
    expect(slots).toBe(64);
    expect(Math.max(...live.map((h) => h % 2 ** 22))).toBeLessThan(64);
  });
});
