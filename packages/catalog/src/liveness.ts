import { toErrorPayload, type Backend, type Logger } from '@agentmesh/protocol';
import type { ToolAvailability } from './availability.js';
import type { CatalogBucket } from './bucket.js';
import { PulseBatch, pulseIds } from './pulses.js';
import { CatalogKeys, type ToolRegistry, type WorkerRecord } from './registry.js';

export interface WorkerLivenessOptions {
  bus: Backend;
  bucket: CatalogBucket;
  registry: ToolRegistry;
  availability: ToolAvailability;
  logger: Logger;
  /** This replica's name: its batched heartbeats are written under it. */
  replica: string;
  /** The ttl of a worker that asked for none. */
  workerTtlMs: number;
}

/**
 * Whether workers are still there: heartbeats (batched between replicas, see {@link PulseBatch}), deregistration,
 * and the sweep that expires a worker no replica has heard from within its ttl. Times are this replica's clock, so
 * replicas never compare clocks.
 */
export class WorkerLiveness {
  /** worker id -> when this replica last saw its record change or heard of its heartbeat */
  private readonly seenAt = new Map<string, number>();
  /** Workers with a `beats.<id>` key in the bucket (written by a catalog before heartbeats were batched). */
  private readonly legacyBeats = new Set<string>();
  /** Heartbeats this replica answered since its last flush. */
  private readonly pulses: PulseBatch;
  private sweepTimer: NodeJS.Timeout | undefined;
  private stopStatus: (() => void) | undefined;
  private running = false;

  constructor(private readonly options: WorkerLivenessOptions) {
    this.pulses = new PulseBatch(options.replica);
  }

  /** Starts the expiry sweep; after a reconnect every worker gets a full ttl to heartbeat again. */
  start(): void {
    this.running = true;
    this.scheduleSweep();
    this.stopStatus = this.options.bus.onStatus((status) => {
      if (status.type !== 'reconnect') return;
      const now = Date.now();
      for (const id of this.seenAt.keys()) this.seenAt.set(id, now);
      this.options.logger.info('reconnected: workers get a full ttl to heartbeat again before they expire');
    });
  }

  stop(): void {
    this.running = false;
    clearTimeout(this.sweepTimer);
    this.stopStatus?.();
    this.stopStatus = undefined;
  }

  /** A worker's record was written (by any replica): it is alive now. */
  recordSeen(workerId: string): void {
    this.seenAt.set(workerId, Date.now());
  }

  /** Another replica's batch of heartbeats. */
  applyPulses(value: Uint8Array): void {
    this.markSeen(pulseIds(value));
  }

  /** A heartbeat key as catalogs wrote it before heartbeats were batched (present false: deleted). */
  applyLegacyBeat(key: string, present: boolean): void {
    const workerId = CatalogKeys.workerOfBeat(key);
    if (!present) {
      this.legacyBeats.delete(workerId);
      return;
    }
    this.legacyBeats.add(workerId);
    this.markSeen([workerId]);
  }

  /**
   * A heartbeat marks its worker seen here at once and is noted for the next flush of {@link PulseBatch}, which tells
   * the other replicas: no KV write and no watch wake-up per heartbeat.
   */
  async heartbeat(workerId: string): Promise<{ known: boolean }> {
    if (!(await this.known(workerId))) return { known: false };
    this.seenAt.set(workerId, Date.now());
    this.pulses.note(workerId);
    return { known: true };
  }

  async deregister(workerId: string): Promise<{ known: boolean }> {
    this.options.availability.forget(workerId);
    const known = await this.known(workerId);
    if (known) await this.removeWorker(workerId);
    this.seenAt.delete(workerId);
    this.options.logger.info({ worker_id: workerId, known }, 'worker deregistered');
    return { known };
  }

  /** Whether this replica or the bucket knows the worker (its record may not have reached this replica yet). */
  private async known(workerId: string): Promise<boolean> {
    return (
      this.options.registry.worker(workerId) !== undefined ||
      (await this.options.bucket.get(CatalogKeys.worker(workerId))) !== null
    );
  }

  /** Marks workers this replica knows as seen now. */
  private markSeen(workerIds: readonly string[]): void {
    const now = Date.now();
    for (const id of workerIds) if (this.options.registry.worker(id) !== undefined) this.seenAt.set(id, now);
  }

  /** Schedules the next sweep (and pulse flush) at a fifth of the shortest worker ttl, between 25 ms and 1 s. */
  private scheduleSweep(): void {
    if (!this.running) return;
    let minTtl = this.options.workerTtlMs;
    for (const w of this.options.registry.allWorkers()) minTtl = Math.min(minTtl, w.ttl_ms);
    const delay = Math.min(1000, Math.max(25, Math.floor(minTtl / 5)));
    this.sweepTimer = setTimeout(() => {
      this.sweep()
        .catch((error: unknown) =>
          this.options.logger.warn({ err: toErrorPayload(error).message }, 'catalog sweep failed'),
        )
        .finally(() => this.scheduleSweep());
    }, delay);
    this.sweepTimer.unref();
  }

  /** Flushes the heartbeats answered here, then expires workers no replica has heard from within their ttl. */
  private async sweep(): Promise<void> {
    for (const { key, value } of this.pulses.take()) await this.options.bucket.write(key, value);
    const now = Date.now();
    const expired: WorkerRecord[] = [];
    for (const worker of this.options.registry.allWorkers()) {
      const seen = this.seenAt.get(worker.worker_id) ?? now;
      if (!this.seenAt.has(worker.worker_id)) this.seenAt.set(worker.worker_id, now);
      if (now - seen > worker.ttl_ms) expired.push(worker);
    }
    if (!this.running) return;
    // all at once: 100 workers lost together leave search together, not one KV round trip after another
    await Promise.all(
      expired.map((worker) => {
        this.options.logger.warn(
          { worker_id: worker.worker_id, ttl_ms: worker.ttl_ms },
          'worker missed its heartbeats: expired',
        );
        this.seenAt.delete(worker.worker_id);
        return this.removeWorker(worker.worker_id);
      }),
    );
  }

  /** Deletes a worker's record, and its heartbeat key when a catalog of an earlier version wrote one. */
  private async removeWorker(workerId: string): Promise<void> {
    const beat = this.legacyBeats.has(workerId);
    await Promise.all([
      this.options.bucket.remove(CatalogKeys.worker(workerId)),
      beat ? this.options.bucket.remove(CatalogKeys.beat(workerId)) : undefined,
    ]);
  }
}
