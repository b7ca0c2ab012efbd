import {
  AgentMeshError,
  ErrorCode,
  backoffDelay,
  encodeJson,
  isAgentMeshError,
  sleep,
  type KvStore,
  type Logger,
  type RunWaiting,
} from '@agentmesh/protocol';
import { firstRunRecord, parseRecord, type RunRecord } from '../model/record.js';
import { isNewerSchema, SCHEMA_VERSION } from '../model/versions.js';

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
  /**
   * How long a run request stays with a planner that stopped confirming it works on it (default: the lease; at most
   * the lease): the intake's ack_wait. The planner confirms every third of it. A redelivered run is taken over at once
   * when its planner is gone (no responders on its presence subject) or gave it up, and after the lease otherwise.
   * Shorter than the lease is fast failover (about `redeliverMs` after a crash), at a price: a planner then gives up
   * every run it holds as soon as its NATS connection drops (it may be taken over meanwhile), so a brief network
   * fault moves runs to other planners. `AGENTMESH_REDELIVER_MS` sets it for `agentmesh planner`.
   */
  redeliverMs?: number;
}

export const DEFAULT_LEASE_MS = 10_000;
export const DEFAULT_CHECKPOINT_TTL_MS = 24 * 3_600_000;
/** How much earlier than its lease a planner gives a run up when renewals fail (clock skew, slow requests). */
const SELF_FENCE_MARGIN_MS = 1_000;

/** The error that stops a run on a planner that lost its ownership to another one. */
export function leaseLostError(runId: string, why: string): AgentMeshError {
  return new AgentMeshError(ErrorCode.Conflict, `run "${runId}" is no longer owned by this planner: ${why}`, {
    retryable: false,
    details: { run_id: runId, lease_lost: true },
  });
}

/** Who takes a lease, for how long, and where it logs. */
export interface LeaseHolder {
  plannerId: string;
  leaseMs: number;
  log: Logger;
  /**
   * Whether the planner named in a live lease is gone or no longer holds the run (its liveness signal): then the
   * run is taken over at once instead of after its lease. Without it a live lease is always waited out.
   */
  holderGone?: ((plannerId: string, runId: string) => Promise<boolean>) | undefined;
}

export type LeaseClaim =
  | { kind: 'acquired'; lease: RunLease; previous: RunRecord | undefined }
  | { kind: 'finished'; record: RunRecord; revision: number }
  | { kind: 'held'; record: RunRecord; retryInMs: number }
  /** The record is of a newer schema version than this planner understands: left as is for a newer planner. */
  | { kind: 'newer'; record: RunRecord; retryInMs: number };

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
  private handedOver = false;
  private stopped = false;

  readonly leaseMs: number;
  private readonly log: Logger;

  private constructor(
    private readonly records: KvStore,
    public record: RunRecord,
    revision: number,
    holder: LeaseHolder & { renewedAt: number },
  ) {
    this.revision = revision;
    this.leaseMs = holder.leaseMs;
    this.log = holder.log;
    this.lastRenewedAt = holder.renewedAt;
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
  /** True once {@link RunLease.release} gave the run to another planner (its intake message goes back at once). */
  get released(): boolean {
    return this.handedOver;
  }
  /** True once the run record says finished (the finishing write landed, or another planner's did). */
  get finished(): boolean {
    return this.record.state === 'finished';
  }

  /**
   * Takes a run for `plannerId`: creates its record, or takes over a record whose lease ran out. A finished run and
   * a run whose owner's lease is live are reported, not taken.
   */
  static async acquire(
    records: KvStore,
    base: Omit<RunRecord, 'planner_id' | 'state' | 'epoch' | 'lease_until'>,
    holder: LeaseHolder,
  ): Promise<LeaseClaim> {
    const { plannerId, leaseMs } = holder;
    for (let attempt = 1; ; attempt++) {
      const now = Date.now();
      // a run is new far more often than not: try to create its record first, and read it only when it exists
      const entry = attempt === 1 ? null : await records.get(base.run_id);
      try {
        if (entry === null) {
          const record = firstRunRecord(base, plannerId, now + leaseMs);
          const revision = await records.create(base.run_id, encodeJson(record));
          return {
            kind: 'acquired',
            lease: new RunLease(records, record, revision, { ...holder, renewedAt: now }),
            previous: undefined,
          };
        }
        const current = parseRecord(entry.value);
        if (current.state === 'finished')
          return { kind: 'finished', record: current, revision: entry.revision };
        const leaseUntil = current.lease_until ?? 0;
        if (
          leaseUntil > now &&
          current.planner_id !== plannerId &&
          !(await holder.holderGone?.(current.planner_id, base.run_id))
        )
          return { kind: 'held', record: current, retryInMs: Math.min(leaseMs, leaseUntil - now) + 250 };
        if (isNewerSchema(current)) return { kind: 'newer', record: current, retryInMs: leaseMs };
        const record: RunRecord = {
          ...current,
          schema_version: SCHEMA_VERSION,
          planner_id: plannerId,
          epoch: (current.epoch ?? 1) + 1,
          lease_until: now + leaseMs,
          takeovers: (current.takeovers ?? 0) + 1,
        };
        const revision = await records.update(base.run_id, encodeJson(record), entry.revision);
        return {
          kind: 'acquired',
          lease: new RunLease(records, record, revision, { ...holder, renewedAt: now }),
          previous: current,
        };
      } catch (error) {
        if (!isAgentMeshError(error, ErrorCode.Conflict) || attempt >= 8) throw error;
      }
    }
  }

  /** Renews the lease every third of its length until {@link RunLease.stop} (not once it is lost or finished). */
  start(): void {
    if (this.timer !== undefined || this.stopped || this.lostReason !== undefined) return;
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
    this.stopped = true;
    clearInterval(this.timer);
    this.timer = undefined;
  }

  /** Called when ownership is lost (at once when it is lost already). */
  onLost(listener: (why: string) => void): void {
    this.lostListeners.add(listener);
    if (this.lostReason !== undefined) listener(this.lostReason);
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

  /** Gives the run up here (the planner lost its connection, so another one may take it over). */
  fence(why: string): void {
    this.markLost(why);
  }

  /**
   * Hands the run to another planner now (a draining planner, at a turn boundary): the record keeps its owner and
   * epoch but its lease ends (a compare-and-set write), then the run stops here as if ownership were lost. The
   * planner that gets the run next takes it over from its checkpoint at once instead of after the lease.
   */
  async release(why: string): Promise<void> {
    this.stop();
    await this.renewing?.catch(() => undefined);
    if (this.lostReason !== undefined || this.handedOver) return;
    this.handedOver = true;
    const next: RunRecord = { ...this.record, lease_until: 0 };
    try {
      this.revision = await this.records.update(this.runId, encodeJson(next), this.revision);
      this.record = next;
    } catch (error) {
      this.log.debug({ run_id: this.runId, err: (error as Error).message }, 'lease not ended early');
    }
    this.markLost(why);
  }

  private checkExpiry(): void {
    if (
      this.lostReason === undefined &&
      Date.now() - this.lastRenewedAt > this.leaseMs - SELF_FENCE_MARGIN_MS
    )
      this.markLost(`the lease could not be renewed for ${Date.now() - this.lastRenewedAt} ms`);
  }

  /**
   * Gives the run up here: another planner owns it (found by a write that met its epoch). The run stops without a
   * final event of its own, as when a renewal finds the record taken.
   */
  markLost(why: string): void {
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

  /** Records how the run waits (`awaiting_approval`, `paused`) or that it no longer waits. */
  async setWaiting(waiting: RunWaiting | undefined): Promise<void> {
    await this.renewing?.catch(() => undefined);
    await this.write({ waiting }, 3);
  }

  /** Marks the run finished (a CAS write, so a planner that lost the run cannot). */
  async finish(fields: Pick<RunRecord, 'status' | 'finished_at'>): Promise<void> {
    this.stop();
    await this.renewing?.catch(() => undefined);
    await this.write({ ...fields, state: 'finished', waiting: undefined }, 6);
  }

  private async write(fields: Partial<RunRecord>, tries = 1): Promise<void> {
    let conflicts = 0;
    for (let attempt = 1; attempt <= tries; attempt++) {
      // a run being handed over is not renewed or written again: its lease ends with the release
      if (this.lostReason !== undefined || this.handedOver) return;
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
        if (attempt < tries) await sleep(backoffDelay(attempt, { baseMs: 250, capMs: 1_500 }));
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
