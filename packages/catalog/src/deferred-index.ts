import type { ToolSpec } from '@agentmesh/protocol';
import type { ToolIndex } from './search/tool-index.js';

/**
 * The search index, updated lazily: registering many tools only records the changes, and the index catches up once
 * changes have stopped for `settleMs` (one timer per quiet period, not one per tool) or before the next read.
 */
export class DeferredIndex {
  /** name -> spec to add, or null to remove */
  private readonly pending = new Map<string, ToolSpec | null>();
  private timer: NodeJS.Timeout | undefined;
  private lastChange = 0;

  constructor(
    private readonly index: ToolIndex,
    private readonly settleMs: number,
  ) {}

  /** Records that `name` now has `spec` (null: removed). */
  set(name: string, spec: ToolSpec | null): void {
    this.pending.set(name, spec);
    this.lastChange = performance.now();
    if (this.timer === undefined) this.settle(this.settleMs);
  }

  /** The index with every recorded change applied. */
  current(): ToolIndex {
    this.stop();
    for (const [name, spec] of this.pending) {
      if (spec === null) this.index.remove(name);
      else this.index.add(spec);
    }
    this.pending.clear();
    return this.index;
  }

  /** Stops the catch-up timer (pending changes stay recorded). */
  stop(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
  }

  private settle(delayMs: number): void {
    this.timer = setTimeout(() => {
      const quietFor = performance.now() - this.lastChange;
      if (quietFor < this.settleMs) this.settle(this.settleMs - quietFor);
      else this.current();
    }, delayMs);
    this.timer.unref();
  }
}
