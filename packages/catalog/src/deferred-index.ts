import type { ToolSpec } from '@agentmesh/protocol';
import type { ToolIndex } from './search/tool-index.js';

/**
 * The search index, updated lazily: registering many tools only records the changes, and the index catches up once
 * changes have stopped for `settleMs` and no registration is under way (one timer per quiet period, not one per
 * tool), or before the next read. Holding it during a registration keeps the catch-up out of a burst even when the
 * process stalls for `settleMs` between two registrations (a loaded machine), where it would delay every reply.
 */
export class DeferredIndex {
  /** name -> spec to add, or null to remove */
  private readonly pending = new Map<string, ToolSpec | null>();
  private timer: NodeJS.Timeout | undefined;
  private lastChange = 0;
  private held = 0;

  constructor(
    private readonly index: ToolIndex,
    private readonly settleMs: number,
  ) {}

  /**
   * Called first by every catch-up, so that changes recorded elsewhere (the live tools, which also defer their work)
   * reach the index through `set` before it applies its own.
   */
  beforeCatchUp: (() => void) | undefined;

  /** Records that `name` now has `spec` (null: removed). */
  set(name: string, spec: ToolSpec | null): void {
    this.pending.set(name, spec);
    this.changed();
  }

  /** Records that a change is pending for {@link beforeCatchUp} to hand over: the catch-up waits for quiet as after `set`. */
  changed(): void {
    this.lastChange = performance.now();
    if (this.timer === undefined) this.settle(this.settleMs);
  }

  /** The index with every recorded change applied. */
  current(): ToolIndex {
    this.beforeCatchUp?.();
    this.stop();
    for (const [name, spec] of this.pending) {
      if (spec === null) this.index.remove(name);
      else this.index.add(spec);
    }
    this.pending.clear();
    return this.index;
  }

  /** Keeps the timer from catching up until the returned release is called (a read still catches up at once). */
  hold(): () => void {
    this.held++;
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.held--;
    };
  }

  /** Stops the catch-up timer (pending changes stay recorded). */
  stop(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
  }

  private settle(delayMs: number): void {
    this.timer = setTimeout(() => {
      const quietFor = performance.now() - this.lastChange;
      if (this.held > 0) this.settle(this.settleMs);
      else if (quietFor < this.settleMs) this.settle(this.settleMs - quietFor);
      else this.current();
    }, delayMs);
    this.timer.unref();
  }
}
