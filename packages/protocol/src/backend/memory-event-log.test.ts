import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { MemoryBus } from '../bus/memory-bus.js';
import { MemoryEventLog } from './memory-event-log.js';

const bytes = (text: string) => new TextEncoder().encode(text);
const MAX_AGE_MS = 1000;

describe('MemoryEventLog expiry', () => {
  let bus: MemoryBus;
  let log: MemoryEventLog;
  beforeEach(() => {
    vi.useFakeTimers({ toFake: ['Date'] });
    vi.setSystemTime(0);
    bus = new MemoryBus();
    log = new MemoryEventLog(bus, MAX_AGE_MS);
  });
  afterEach(async () => {
    vi.useRealTimers();
    await bus.close();
  });

  it("drops a finished run's events once they pass the max age, though it is never appended to again", async () => {
    await log.append('runs.a.events', 1, bytes('a1'));
    await log.append('runs.a.events', 2, bytes('a2'));
    vi.setSystemTime(MAX_AGE_MS + 1);
    await log.append('runs.b.events', 1, bytes('b1'));
    expect(await log.replay('runs.a.events')).toEqual([]);
    expect(await log.last('runs.a.events')).toBeUndefined();
    expect((await log.replay('runs.b.events')).map((e) => e.seq)).toEqual([1]);
  });

  it('keeps a subject whose latest event is within the max age, whenever it began', async () => {
    await log.append('runs.long.events', 1, bytes('l1'));
    vi.setSystemTime(400);
    await log.append('runs.short.events', 1, bytes('s1'));
    vi.setSystemTime(800);
    await log.append('runs.long.events', 2, bytes('l2'));
    vi.setSystemTime(1500);
    await log.append('runs.other.events', 1, bytes('o1'));
    expect(await log.replay('runs.short.events')).toEqual([]);
    expect((await log.last('runs.long.events'))?.seq).toBe(2);
    expect((await log.replay('runs.long.events')).map((e) => e.seq)).toEqual([1, 2]);
  });

  it('keeps everything when the max age is 0', async () => {
    const forever = new MemoryEventLog(bus, 0);
    await forever.append('runs.a.events', 1, bytes('a1'));
    vi.setSystemTime(10 * 365 * 24 * 3_600_000);
    await forever.append('runs.b.events', 1, bytes('b1'));
    expect((await forever.replay('runs.a.events')).map((e) => e.seq)).toEqual([1]);
  });
});
