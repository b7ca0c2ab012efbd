import { describe, expect, it } from 'vitest';
import { SetupLane } from './setup-lane.js';

describe('SetupLane', () => {
  it('lets `width` runs in at once and the rest in the order they came', async () => {
    const lane = new SetupLane(2, 60_000);
    const order: number[] = [];
    const leaves: (() => void)[] = [];
    const entered = Array.from({ length: 5 }, (_, i) =>
      lane.enter().then((leave) => {
        order.push(i);
        leaves[i] = leave;
      }),
    );
    await Promise.all(entered.slice(0, 2));
    await Promise.resolve();
    expect(order).toEqual([0, 1]);
    leaves[1]!();
    await entered[2];
    expect(order).toEqual([0, 1, 2]);
    leaves[1]!();
    leaves[1]!();
    await Promise.resolve();
    expect(order).toEqual([0, 1, 2]);
    leaves[0]!();
    leaves[2]!();
    await Promise.all(entered);
    expect(order).toEqual([0, 1, 2, 3, 4]);
  });

  it('frees a place whose run holds it past maxHoldMs, so a stalled setup does not hold the queue', async () => {
    const lane = new SetupLane(1, 5);
    const held = await lane.enter();
    const t0 = performance.now();
    const next = await lane.enter();
    expect(performance.now() - t0).toBeGreaterThanOrEqual(4);
    held();
    let third = false;
    const pending = lane.enter().then((leave) => {
      third = true;
      return leave;
    });
    await Promise.resolve();
    expect(third).toBe(false);
    next();
    (await pending)();
    expect(third).toBe(true);
  });
});
