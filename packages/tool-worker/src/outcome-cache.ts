import type { ToolOutcome } from '@agentmesh/protocol';

export interface OutcomeCacheOptions {
  /** Most outcomes kept (default 2048); the oldest go first. */
  maxEntries?: number;
  /** How long an outcome is replayed (default 10 minutes). */
  maxAgeMs?: number;
}

/**
 * Outcomes by idempotency key, bounded in size and age, plus the calls still running under a key, so that a call
 * re-sent to the same worker answers the first outcome instead of running twice.
 */
export class OutcomeCache {
  private readonly done = new Map<string, { outcome: ToolOutcome; at: number }>();
  private readonly runningCalls = new Map<string, Promise<ToolOutcome>>();
  private readonly maxEntries: number;
  private readonly maxAgeMs: number;

  constructor(options: OutcomeCacheOptions = {}) {
    this.maxEntries = Math.max(1, options.maxEntries ?? 2048);
    this.maxAgeMs = Math.max(1, options.maxAgeMs ?? 600_000);
  }

  /** A finished outcome or a running call for this key, if any. */
  lookup(key: string): ToolOutcome | Promise<ToolOutcome> | undefined {
    const entry = this.done.get(key);
    if (entry !== undefined) {
      if (Date.now() - entry.at <= this.maxAgeMs) return entry.outcome;
      this.done.delete(key);
    }
    return this.runningCalls.get(key);
  }

  /** Marks a call as running under `key`, so duplicates wait for it instead of running again. */
  running(key: string, outcome: Promise<ToolOutcome>): void {
    this.runningCalls.set(key, outcome);
  }

  /** Records the outcome of the call running under `key` (cancelled outcomes are not replayed). */
  settle(key: string, outcome: ToolOutcome | undefined): void {
    this.runningCalls.delete(key);
    if (outcome !== undefined && outcome.error?.code !== 'cancelled') this.remember(key, outcome);
  }

  private remember(key: string, outcome: ToolOutcome): void {
    this.done.delete(key);
    this.done.set(key, { outcome, at: Date.now() });
    while (this.done.size > this.maxEntries) {
      const oldest = this.done.keys().next();
      if (oldest.done === true) break;
      this.done.delete(oldest.value);
    }
  }

  get size(): number {
    return this.done.size;
  }
}
