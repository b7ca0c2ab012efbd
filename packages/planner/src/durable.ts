import {
  AgentMeshError,
  DEFAULT_PREFIX,
  ErrorCode,
  RunEventSchema,
  encodeJson,
  isAgentMeshError,
  openRunEventLog,
  backoffDelay,
  retry,
  sleep,
  subjects,
  type Backend,
  type KvStore,
  type Logger,
  type RunEvent,
} from '@agentmesh/protocol';
import type { RunSnapshot } from './run-state.js';
import type { RunRecord } from './transcript.js';

/** Durability settings of a planner (run ownership, failover speed, checkpoint retention). */
export interface DurabilityOptions {
  /**
   * How long a run stays owned by its planner without a lease renewal (default 10 s). The planner renews every
   * third of it and stops a run itself when it could not renew in time; another planner takes a run over only after
   * its lease ran out. It is also the intake's ack_wait, so a dead planner's runs are redelivered after about this long.
   */
  leaseMs?: number;
  /** How long checkpoints are kept in KV (default 24 h); a run resumed later starts over from its first turn. */
  checkpointTtlMs?: number;
}

export const DEFAULT_LEASE_MS = 10_000;
export const DEFAULT_CHECKPOINT_TTL_MS = 24 * 3_600_000;
/** How much earlier than its lease a planner gives a run up when renewals fail (clock skew, slow requests). */
const SELF_FENCE_MARGIN_MS = 1_000;

const dec = new TextDecoder();

function bucketPrefix(prefix: string): string {
  return prefix.replace(/[^A-Za-z0-9_-]/g, '_');
}

/** The KV bucket of run checkpoints (`agentmesh_checkpoints` for the default prefix), one key per run id. */
export function checkpointsBucket(prefix: string = DEFAULT_PREFIX): string {
  return `${bucketPrefix(prefix)}_checkpoints`;
}

export function openCheckpoints(bus: Backend, prefix: string, ttlMs: number): Promise<KvStore> {
  return bus.kv(checkpointsBucket(prefix), { ttlMs });
}

/** A checkpoint as stored: the snapshot and which ownership epoch wrote it. */
export interface StoredCheckpoint {
  version: 1;
  planner_id: string;
  epoch: number;
  saved_at: string;
  snapshot: RunSnapshot;
}

/** The error that stops a run on a planner that lost its ownership to another one. */
export function leaseLostError(runId: string, why: string): AgentMeshError {
  return new AgentMeshError(ErrorCode.Conflict, `run "${runId}" is no longer owned by this planner: ${why}`, {
    retryable: false,
    details: { run_id: runId, lease_lost: true },
  });
}

export function parseRecord(value: Uint8Array): RunRecord {
  return JSON.parse(dec.decode(value)) as RunRecord;
}

export type LeaseClaim =
  | { kind: 'acquired'; lease: RunLease; previous: RunRecord | undefined }
  | { kind: 'finished'; record: RunRecord; revision: number }
  | { kind: 'held'; record: RunRecord; retryInMs: number };

/**
 * Ownership of one run: the run record in KV names its planner, an epoch (raised by every takeover) and the time its
 * lease ends. Every write is a compare-and-set on the record's revision, so of two planners only one owns a run; a
 * planner that cannot renew in time or finds another epoch in the record calls `onLost` and must stop the run.
 */
export class RunLease {
  private revision: number;
  private timer: NodeJS.Timeout | undefined;
  private lastRenewedAt: number;
  private lostReason: string | undefined;
  private readonly lostListeners = new Set<(why: string) => void>();
  private readonly cancelListeners = new Set<(reason: string) => void>();
  private renewing: Promise<void> | undefined;

  private constructor(
    private readonly records: KvStore,
    public record: RunRecord,
    revision: number,
    readonly leaseMs: number,
    private readonly log: Logger,
    renewedAt: number,
  ) {
    this.revision = revision;
    this.lastRenewedAt = renewedAt;
  }

  get runId(): string {
    return this.record.run_id;
  }
  get epoch(): number {
    return this.record.epoch ?? 1;
  }
  get plannerId(): string {
    return this.record.planner_id;
  }
  get lost(): boolean {
    return this.lostReason !== undefined;
  }

  /**
   * Takes a run for `plannerId`: creates its record, or takes over a record whose lease ran out. A finished run and
   * a run whose owner's lease is live are reported, not taken.
   */
  static async acquire(
    records: KvStore,
    base: Omit<RunRecord, 'planner_id' | 'state' | 'epoch' | 'lease_until'>,
    plannerId: string,
    leaseMs: number,
    log: Logger,
  ): Promise<LeaseClaim> {
    for (let attempt = 1; ; attempt++) {
      const now = Date.now();
      const entry = await records.get(base.run_id);
      try {
        if (entry === null) {
          const record: RunRecord = {
            ...base,
            planner_id: plannerId,
            state: 'running',
            epoch: 1,
            lease_until: now + leaseMs,
          };
          const revision = await records.create(base.run_id, encodeJson(record));
          return {
            kind: 'acquired',
            lease: new RunLease(records, record, revision, leaseMs, log, now),
            previous: undefined,
          };
        }
        const current = parseRecord(entry.value);
        if (current.state === 'finished')
          return { kind: 'finished', record: current, revision: entry.revision };
        const leaseUntil = current.lease_until ?? 0;
        if (leaseUntil > now && current.planner_id !== plannerId)
          return { kind: 'held', record: current, retryInMs: Math.min(leaseMs, leaseUntil - now) + 250 };
        const record: RunRecord = {
          ...current,
          planner_id: plannerId,
          epoch: (current.epoch ?? 1) + 1,
          lease_until: now + leaseMs,
          takeovers: (current.takeovers ?? 0) + 1,
        };
        const revision = await records.update(base.run_id, encodeJson(record), entry.revision);
        return {
          kind: 'acquired',
          lease: new RunLease(records, record, revision, leaseMs, log, now),
          previous: current,
        };
      } catch (error) {
        if (!isAgentMeshError(error, ErrorCode.Conflict) || attempt >= 8) throw error;
      }
    }
  }

  /** Renews the lease every third of its length until {@link RunLease.stop}. */
  start(): void {
    this.timer = setInterval(
      () => {
        this.checkExpiry();
        if (this.lostReason === undefined) void this.renew();
      },
      Math.max(100, Math.floor(this.leaseMs / 3)),
    );
    this.timer.unref?.();
  }

  stop(): void {
    clearInterval(this.timer);
    this.timer = undefined;
  }

  onLost(listener: (why: string) => void): void {
    this.lostListeners.add(listener);
  }

  /** Called when `agentmesh runs cancel` marked the record (the cancel survives a takeover). */
  onCancelRequested(listener: (reason: string) => void): void {
    this.cancelListeners.add(listener);
    if (this.record.cancel_requested !== undefined) listener(this.record.cancel_requested);
  }

  /** Throws the lease-lost error when ownership is gone (or about to be: renewals failing for too long). */
  assertOwned(): void {
    this.checkExpiry();
    if (this.lostReason !== undefined) throw leaseLostError(this.runId, this.lostReason);
  }

  private checkExpiry(): void {
    if (
      this.lostReason === undefined &&
      Date.now() - this.lastRenewedAt > this.leaseMs - SELF_FENCE_MARGIN_MS
    )
      this.markLost(`the lease could not be renewed for ${Date.now() - this.lastRenewedAt} ms`);
  }

  private markLost(why: string): void {
    if (this.lostReason !== undefined) return;
    this.lostReason = why;
    this.stop();
    this.log.warn({ run_id: this.runId, why }, 'run ownership lost: stopping it here');
    for (const l of this.lostListeners) l(why);
  }

  renew(): Promise<void> {
    this.renewing ??= this.write({}).finally(() => (this.renewing = undefined));
    return this.renewing;
  }

  /** Marks the run finished (a CAS write, so a planner that lost the run cannot). */
  async finish(fields: Pick<RunRecord, 'status' | 'finished_at'>): Promise<void> {
    this.stop();
    await this.renewing?.catch(() => undefined);
    await this.write({ ...fields, state: 'finished' }, 6);
  }

  private async write(fields: Partial<RunRecord>, tries = 1): Promise<void> {
    let conflicts = 0;
    for (let attempt = 1; attempt <= tries; attempt++) {
      if (this.lostReason !== undefined) return;
      const sentAt = Date.now();
      const next: RunRecord = { ...this.record, ...fields, lease_until: sentAt + this.leaseMs };
      try {
        this.revision = await this.records.update(this.runId, encodeJson(next), this.revision);
        this.record = next;
        this.lastRenewedAt = sentAt;
        return;
      } catch (error) {
        if (isAgentMeshError(error, ErrorCode.Conflict)) {
          if (++conflicts <= 5 && (await this.reconcile())) {
            attempt--;
            continue;
          }
          return;
        }
        this.log.debug({ run_id: this.runId, err: (error as Error).message }, 'lease renewal failed');
        this.checkExpiry();
        if (attempt < tries) await sleep(backoffDelay(attempt, { baseMs: 250, capMs: 2_000 }));
      }
    }
    this.checkExpiry();
  }

  /**
   * After a conflict: true when the record is still ours (our own earlier write landed without an answer, or a
   * cancel was requested), so the write can be retried on the new revision; otherwise ownership is lost.
   */
  private async reconcile(): Promise<boolean> {
    const entry = await this.records.get(this.runId).catch(() => undefined);
    if (entry === undefined) return false;
    if (entry === null) {
      this.markLost('the run record is gone');
      return false;
    }
    const current = parseRecord(entry.value);
    if (current.planner_id !== this.plannerId || (current.epoch ?? 1) !== this.epoch) {
      this.markLost(`planner ${current.planner_id} took it over (epoch ${current.epoch ?? 1})`);
      return false;
    }
    if (current.state === 'finished') {
      this.revision = entry.revision;
      this.record = current;
      return false;
    }
    const cancel = current.cancel_requested;
    this.revision = entry.revision;
    this.record = { ...this.record, ...(cancel === undefined ? {} : { cancel_requested: cancel }) };
    if (cancel !== undefined) for (const l of this.cancelListeners) l(cancel);
    return true;
  }
}

/**
 * Writes a run's checkpoints to KV, one key per run, as compare-and-set writes stamped with the lease epoch. Writes
 * are serialized and coalesced (a write that finds a newer state queued writes that one); a write that finds another
 * epoch's checkpoint means the run was taken over, and fails with the lease-lost error.
 */
export class CheckpointWriter {
  private chain: Promise<void> = Promise.resolve();
  private version = 0;
  private written = 0;

  constructor(
    private readonly store: KvStore,
    private readonly lease: RunLease,
    private revision: number | undefined,
    private readonly log: Logger,
  ) {}

  /** Resolves once a checkpoint at least as new as `snapshot` now is stored. */
  write(snapshot: Readonly<RunSnapshot>): Promise<void> {
    const version = ++this.version;
    const next = this.chain.then(() =>
      this.written >= version ? undefined : this.flush(snapshot, this.version),
    );
    this.chain = next.catch(() => undefined);
    return next;
  }

  private async flush(snapshot: Readonly<RunSnapshot>, version: number): Promise<void> {
    const runId = snapshot.run_id;
    const body: StoredCheckpoint = {
      version: 1,
      planner_id: this.lease.plannerId,
      epoch: this.lease.epoch,
      saved_at: new Date().toISOString(),
      snapshot: snapshot as RunSnapshot,
    };
    const data = encodeJson(body);
    await retry(() => this.writeOnce(runId, data, version), {
      baseMs: 100,
      capMs: 1_000,
      retryable: (error) => error.details?.['lease_lost'] !== true,
      onRetry: (error, attempt) =>
        this.log.debug({ run_id: runId, attempt, err: error.message }, 'checkpoint write failed; retrying'),
    });
  }

  /** One compare-and-set write, following our own epoch's newer revisions; a foreign epoch means the lease is lost. */
  private async writeOnce(runId: string, data: Uint8Array, version: number): Promise<void> {
    for (;;) {
      this.lease.assertOwned();
      try {
        this.revision =
          this.revision === undefined
            ? await this.store.create(runId, data)
            : await this.store.update(runId, data, this.revision);
        this.written = version;
        return;
      } catch (error) {
        if (!isAgentMeshError(error, ErrorCode.Conflict)) throw error;
        const entry = await this.store.get(runId);
        if (entry === null) {
          this.revision = undefined;
          continue;
        }
        const stored = JSON.parse(dec.decode(entry.value)) as StoredCheckpoint;
        if (stored.epoch === this.lease.epoch && stored.planner_id === this.lease.plannerId) {
          this.revision = entry.revision;
          continue;
        }
        throw leaseLostError(
          runId,
          `a checkpoint of epoch ${stored.epoch} was written by ${stored.planner_id}`,
        );
      }
    }
  }

  /** Removes the checkpoint of a finished run. */
  async clear(runId: string): Promise<void> {
    await this.chain;
    await this.store.delete(runId).catch(() => undefined);
  }
}

/** Reads a run's stored checkpoint and its KV revision, or undefined. */
export async function readCheckpoint(
  store: KvStore,
  runId: string,
): Promise<{ checkpoint: StoredCheckpoint; revision: number } | undefined> {
  const entry = await store.get(runId);
  if (entry === null) return undefined;
  return { checkpoint: JSON.parse(dec.decode(entry.value)) as StoredCheckpoint, revision: entry.revision };
}

/** The last event stored in the event log for a run, or undefined when there is none (or the backend keeps none). */
export async function lastStoredEvent(
  bus: Backend,
  runId: string,
  prefix: string = DEFAULT_PREFIX,
): Promise<RunEvent | undefined> {
  if (!bus.durable) return undefined;
  const log = await openRunEventLog(bus, prefix);
  const stored = await log.last(subjects(prefix).runEvents(runId));
  return stored === undefined ? undefined : RunEventSchema.parse(JSON.parse(dec.decode(stored.data)));
}

/**
 * Every stored event of a run, in order (an empty list when the backend keeps none). Events replayed by a resumed
 * planner are included as stored: seq is gapless and increasing, and a `run.started` with `resumed: true` marks
 * each takeover.
 */
export async function readRunEvents(
  bus: Backend,
  runId: string,
  options: { prefix?: string; signal?: AbortSignal } = {},
): Promise<RunEvent[]> {
  if (!bus.durable) return [];
  const prefix = options.prefix ?? DEFAULT_PREFIX;
  const log = await openRunEventLog(bus, prefix);
  const stored = await log.replay(subjects(prefix).runEvents(runId), {
    ...(options.signal === undefined ? {} : { signal: options.signal }),
  });
  return stored.map((e) => RunEventSchema.parse(JSON.parse(dec.decode(e.data))));
}
