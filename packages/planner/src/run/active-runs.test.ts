import { afterEach, describe, expect, it, vi } from 'vitest';
import { ActiveRuns } from './active-runs.js';

const RealAbortController = globalThis.AbortController;

describe('ActiveRuns', () => {
  afterEach(() => {
    globalThis.AbortController = RealAbortController;
  });

  it("makes a run's abort controller on first use, not when the run starts (a new run's path to run.accepted)", () => {
    let made = 0;
    globalThis.AbortController = class extends RealAbortController {
      constructor() {
        super();
        made++;
      }
    };
    const runs = new ActiveRuns();
    const run = runs.start('r1', 60_000, Date.now() + 60_000, undefined);
    expect(made).toBe(0);
    expect(run.controller.signal.aborted).toBe(false);
    expect(run.controller).toBe(run.controller);
    expect(made).toBe(1);
    runs.end('r1');
  });

  it('a cancel that comes before the controller was used still stops the run, with its reason', () => {
    const runs = new ActiveRuns();
    const run = runs.start('r1', 60_000, Date.now() + 60_000, undefined);
    expect(runs.cancel('r1', 'changed my mind')).toBe(true);
    expect(run.stop).toEqual({ status: 'cancelled', reason: 'cancelled: changed my mind' });
    expect(run.controller.signal.aborted).toBe(true);
    expect((run.controller.signal.reason as Error).message).toBe('changed my mind');
    runs.end('r1');
  });

  it('a clock left for later runs from startClock on: no timeout before it, one after it, none once the run ended', () => {
    vi.useFakeTimers();
    try {
      const runs = new ActiveRuns();
      const run = runs.start('r1', 20, Date.now() + 20, undefined, true);
      vi.advanceTimersByTime(1_000);
      expect(run.stop).toBeUndefined();
      expect(runs.cancel('r1', 'still cancellable')).toBe(true);
      expect(run.stop?.status).toBe('cancelled');
      runs.end('r1');
      const later = runs.start('r2', 20, Date.now() + 20, undefined, true);
      later.startClock();
      vi.advanceTimersByTime(19);
      expect(later.stop).toBeUndefined();
      vi.advanceTimersByTime(1);
      expect(later.stop?.status).toBe('timeout');
      expect(later.controller.signal.aborted).toBe(true);
      runs.end('r2');
      const ended = runs.start('r3', 20, Date.now() + 20, undefined, true);
      runs.end('r3');
      ended.startClock();
      vi.advanceTimersByTime(1_000);
      expect(ended.stop).toBeUndefined();
    } finally {
      vi.useRealTimers();
    }
  });

  it('a run times out on its clock whether or not its controller was used', async () => {
    const runs = new ActiveRuns();
    const run = runs.start('r1', 20, Date.now() + 20, undefined);
    await vi.waitFor(() => expect(run.stop?.status).toBe('timeout'), { timeout: 5_000 });
    expect(run.controller.signal.aborted).toBe(true);
    runs.end('r1');
  });
});
