import { performance } from 'node:perf_hooks';
import { SlotTable } from './slot-table.js';

/** Something that must happen at `at` (a `performance.now()` time) unless it is removed first. */
export interface Deadline {
  at: number;
  expire(): void;
}

const MAX_TIMER_MS = 2 ** 31 - 1;

/**
 * Many deadlines on one timer, armed for the earliest one it knows of: adding and removing a deadline costs a table
 * operation instead of a timer. The timer keeps the process alive only while deadlines are pending.
 */
export class Deadlines {
  private readonly entries = new SlotTable<Deadline>();
  private timer: NodeJS.Timeout | undefined;
  private armedAt = Infinity;

  /** Adds a deadline; the handle it returns removes it. */
  add(deadline: Deadline): number {
    const handle = this.entries.add(deadline);
    if (this.timer !== undefined && deadline.at >= this.armedAt) this.timer.ref();
    else this.arm(deadline.at);
    return handle;
  }

  delete(handle: number): void {
    this.entries.delete(handle);
    if (this.entries.size === 0) this.timer?.unref();
  }

  private arm(at: number): void {
    clearTimeout(this.timer);
    this.armedAt = at;
    this.timer = setTimeout(
      this.fire,
      Math.min(MAX_TIMER_MS, Math.max(1, Math.ceil(at - performance.now()))),
    );
  }

  private readonly fire = (): void => {
    this.timer = undefined;
    this.armedAt = Infinity;
    const now = performance.now();
    let next = Infinity;
    const due: Deadline[] = [];
    this.entries.forEach((d, handle) => {
      if (d.at <= now) {
        due.push(d);
        this.entries.delete(handle);
      } else if (d.at < next) next = d.at;
    });
    if (next !== Infinity) this.arm(next);
    for (const d of due) d.expire();
  };
}
