import { randomUUID } from 'node:crypto';
import { resolveToolLoading, type ExposureLayer, type ToolLoading } from '@agentmesh/protocol';
import type { DeferredIndex } from './deferred-index.js';
import { ToolRegistry, type LiveTool, type WorkerRecord } from './registry.js';

/** A live tool as list, get and search serve it: its newest live version, and its loading after the overrides. */
export interface LiveEntry {
  tool: LiveTool;
  loading: ToolLoading;
}

/**
 * This replica's live tools: the registry of worker records, the tools they make live (with their configured
 * exposure), and the search index, kept in step as records come and go. Its version changes whenever a live tool
 * does, so a list request naming the version it got last can be answered `unchanged`.
 */
export class LiveTools {
  readonly registry = new ToolRegistry();
  /** tool name -> the live tool in the search index */
  private readonly live = new Map<string, LiveEntry>();
  /** Names whose live state may have changed since the last read: a burst of registrations settles each name once. */
  private readonly pending = new Set<string>();
  private readonly epoch = randomUUID().slice(0, 8);
  private changes = 0;

  constructor(
    readonly index: DeferredIndex,
    private readonly exposure: ExposureLayer | undefined,
  ) {
    index.beforeCatchUp = () => this.settle();
  }

  /** The live tools, every record applied so far settled first. */
  current(): ReadonlyMap<string, LiveEntry> {
    this.settle();
    return this.live;
  }

  /** This replica's state of the live tools, as catalog list replies name it. */
  version(): string {
    this.settle();
    return `${this.epoch}.${this.changes}`;
  }

  /** A name for this replica, unique to its lifetime (its heartbeat batches are keyed by it). */
  get replica(): string {
    return this.epoch;
  }

  /** Names of the live tools, sorted. */
  names(): string[] {
    return [...this.current().keys()].sort();
  }

  /**
   * Applies a worker record (undefined: deleted) at a KV revision. The registry changes at once (a registration checks
   * its conflicts there); the live tools it touches are settled at the next read, or once registrations pause.
   */
  setWorker(key: string, record: WorkerRecord | undefined, revision: number): void {
    for (const name of this.registry.setWorker(key, record, revision)) this.pending.add(name);
    this.index.changed();
  }

  private settle(): void {
    if (this.pending.size === 0) return;
    for (const name of this.pending) this.reindex(name);
    this.pending.clear();
  }

  private reindex(name: string): void {
    const tool = this.registry.live(name);
    const current = this.live.get(name);
    if (tool === undefined) {
      if (current !== undefined) {
        this.index.set(name, null);
        this.live.delete(name);
        this.changes++;
      }
      return;
    }
    if (current?.tool.hash !== tool.hash) this.index.set(name, tool.spec);
    this.live.set(name, { tool, loading: resolveToolLoading(name, tool.spec.loading, this.exposure) });
    this.changes++;
  }
}
