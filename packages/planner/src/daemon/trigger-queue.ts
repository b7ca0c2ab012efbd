import {
  AgentMeshError,
  ErrorCode,
  KeyedSerializer,
  encodeJson,
  isAgentMeshError,
  isTransientFailure,
  parseJson,
  retry,
  type KvStore,
  type KvWatcher,
  type Trigger,
} from '@agentmesh/protocol';
import { createHash } from 'node:crypto';
import { assertKnownSchema, SCHEMA_VERSION } from '../model/versions.js';

/** The queue facts of one daemon: capacity, the last seq handed out and taken, how many a full queue refused. */
interface QueueMeta {
  /** The record's format (absent: 1). */
  schema_version?: number | undefined;
  capacity: number;
  next: number;
  head: number;
  dropped: number;
  /** The daemon waits for a wake source (for `agentmesh runs list`). */
  idle?: boolean;
  /** Seqs the daemon skipped: their keys hold a skip mark until the queue closes. */
  skipped?: number[];
  /** The seqs the latest requests with a `request_id` reserved, oldest first: `[tag of the id, seq]`. */
  requests?: [string, number][];
}

/** What {@link TriggerQueue.enqueue} answers: the trigger's seq, the queue's depth, and whether it was a repeat. */
export type Queued = {
  seq: number;
  depth: number;
  /** A request with this `request_id` had queued it already: nothing was queued now. */
  duplicate?: true;
};

export interface QueuedTrigger {
  seq: number;
  trigger: Trigger;
}

/** Pending (queued, not yet taken) triggers one daemon may hold, whatever its `queue_capacity` asks. */
export const DEFAULT_MAX_PENDING_TRIGGERS = 1_000;
/** The largest trigger body, in bytes (its JSON). */
export const MAX_TRIGGER_BYTES = 64 * 1024;
/** Bytes the trigger bucket holds for all daemons together (its JetStream `max_bytes`). */
export const TRIGGERS_STORE_MAX_BYTES = 256 * 1024 * 1024;

/** What one planner lets the daemons' trigger queues hold (PlannerOptions `triggers`, config `triggers:`). */
export interface TriggerLimits {
  /** Pending triggers per daemon (default {@link DEFAULT_MAX_PENDING_TRIGGERS}); more are refused `quota_exceeded`. */
  maxPendingPerDaemon?: number;
  /** The largest trigger (default {@link MAX_TRIGGER_BYTES}); a larger one is refused `payload_too_large`. */
  maxTriggerBytes?: number;
  /** The trigger bucket's `max_bytes` (default {@link TRIGGERS_STORE_MAX_BYTES}). */
  storeMaxBytes?: number;
}

/** A reserved seq whose trigger never arrived (its sender died between reserving and writing) is skipped after this. */
const GAP_TIMEOUT_MS = 5_000;
/**
 * What the daemon writes (with a create) at a seq it skips: a trigger write that comes later finds the key taken and
 * queues its trigger again at a new seq, so a trigger acknowledged `ok` is never behind the daemon. A valid trigger
 * for a planner that predates it (it wakes the daemon once with this kind), never sent by a client (`agentmesh.`).
 */
const SKIPPED = encodeJson({ kind: 'agentmesh.skipped', skipped: true });
const sameBytes = (a: Uint8Array, b: Uint8Array) => Buffer.compare(a, b) === 0;
const isSkipped = (value: Uint8Array) => sameBytes(value, SKIPPED);
/** How many of the latest request ids a queue remembers with their seq (a client repeats within seconds). */
const REMEMBERED_REQUESTS = 64;
/** A request id as the queue's meta keeps it: 64 bits of its sha256, whatever its length. */
const requestTag = (requestId: string) => createHash('sha256').update(requestId).digest('hex').slice(0, 16);
const SEQ_DIGITS = 12;
const itemKey = (runId: string, seq: number) => `${runId}.q.${String(seq).padStart(SEQ_DIGITS, '0')}`;
const metaKey = (runId: string) => `${runId}.meta`;
const isConflict = (error: unknown) => isAgentMeshError(error, ErrorCode.Conflict);
/**
 * A daemon's own queue exists while it runs, so its `not_found` is a read served by a replica still behind the
 * create (a KV get may be answered by any replica of an R3 bucket, one restarting included): read again.
 */
const behindTheCreate = (error: unknown) => isAgentMeshError(error, ErrorCode.NotFound);
const conflictOrBehind = (error: unknown) => isConflict(error) || behindTheCreate(error);

/**
 * The durable, FIFO, bounded trigger queues of daemon runs, kept in one KV bucket: `<run>.meta` (capacity, the last
 * seq reserved and taken, refused count; changed by compare-and-set) and one key per queued trigger,
 * `<run>.q.<seq>`. A sender reserves a seq, then creates the trigger's key, and only then hears `ok`. A trigger leaves
 * the queue after the daemon's checkpoint recorded that it was taken, so one in flight when a planner dies is taken
 * again by the planner that resumes the run, and never twice (the checkpoint says which seq was handled). A seq whose
 * trigger has not arrived after {@link GAP_TIMEOUT_MS} (its sender died, or its write is slow) is skipped by creating
 * its key as a skip mark: the create decides between the two writers, and a sender that loses it queues again.
 */
export class TriggerQueue {
  private readonly gaps = new Map<string, number>();
  /** This process's writes of each queue's meta, one at a time. */
  private readonly metaWrites = new KeyedSerializer();
  /** Pending triggers one daemon may hold here. */
  readonly maxPending: number;
  /** The largest trigger this queue stores, in bytes. */
  readonly maxTriggerBytes: number;

  private readonly gapTimeoutMs: number;

  /** `gapTimeoutMs`: how long a reserved seq may stay unwritten before the daemon skips it (tests shorten it). */
  constructor(
    private readonly kv: KvStore,
    limits: TriggerLimits = {},
    options: { gapTimeoutMs?: number } = {},
  ) {
    this.maxPending = limits.maxPendingPerDaemon ?? DEFAULT_MAX_PENDING_TRIGGERS;
    this.maxTriggerBytes = limits.maxTriggerBytes ?? MAX_TRIGGER_BYTES;
    this.gapTimeoutMs = options.gapTimeoutMs ?? GAP_TIMEOUT_MS;
  }

  /** Opens a daemon's queue (kept when it exists: a resumed run keeps what was queued). */
  async open(runId: string, capacity: number): Promise<void> {
    const meta: QueueMeta = { schema_version: SCHEMA_VERSION, capacity, next: 0, head: 0, dropped: 0 };
    // a bucket just made (its R3 stream still electing a leader) or a node restarting fails the create for a while
    await retry(
      () =>
        this.kv.create(metaKey(runId), encodeJson(meta)).then(
          () => undefined,
          (error: unknown) => {
            if (!isConflict(error)) throw error;
          },
        ),
      { attempts: 20, timeoutMs: 30_000, retryable: isTransientFailure },
    );
  }

  /**
   * Appends a trigger; fails with `not_found` for a run that is not a live daemon, `payload_too_large` above
   * {@link maxTriggerBytes}, `queue_full` at the daemon's capacity, `quota_exceeded` at {@link maxPending}. With a
   * `requestId`, a repeat of a request the queue already took (the answer to the first was lost, or the first is
   * still being written by another planner) is answered with its seq and `duplicate`, and queues nothing.
   */
  async enqueue(runId: string, trigger: Trigger, requestId?: string): Promise<Queued> {
    const body = encodeJson(trigger);
    if (body.length > this.maxTriggerBytes)
      throw new AgentMeshError(
        ErrorCode.PayloadTooLarge,
        `trigger for run ${runId} of ${body.length} bytes exceeds the limit of ${this.maxTriggerBytes} bytes`,
        { retryable: false, details: { size: body.length, max_bytes: this.maxTriggerBytes } },
      );
    if (isSkipped(body))
      throw new AgentMeshError(
        ErrorCode.InvalidMessage,
        `trigger for run ${runId} is the queue's skip mark (kind "agentmesh.skipped", skipped: true): not queued`,
        { retryable: false },
      );
    const tag = requestId === undefined ? undefined : requestTag(requestId);
    let skipped: number | undefined;
    for (let attempt = 1; ; attempt++) {
      // a queue that is not there is no daemon's: not_found at once (only a conflict is retried)
      const reserved = await this.updateMeta(runId, () => this.reserve(runId, tag, skipped), isConflict);
      const queued = { seq: reserved.seq, depth: reserved.depth };
      const key = itemKey(runId, reserved.seq);
      if (!reserved.earlier) {
        if ((await this.write(key, body)) === 'written') return queued;
      } else {
        const stands = await this.earlierWrite(key, reserved.seq, reserved.head, body);
        if (stands === 'queued') return { ...queued, duplicate: true };
        if (stands === 'none' && (await this.write(key, body)) === 'written')
          return { ...queued, duplicate: true };
      }
      // the daemon skipped the seq, or another trigger holds it: a seq reserved twice, which nats-server before
      // 2.9.21 lets two compare-and-set writes racing on a clustered bucket do (nats-server#4320)
      skipped = reserved.seq;
      if (attempt >= 20)
        throw new AgentMeshError(
          ErrorCode.Unavailable,
          `trigger for run ${runId} was not queued: ${attempt} seqs reserved for it were skipped by the daemon or held by other triggers before it was written`,
          { retryable: true },
        );
    }
  }

  /**
   * Where the trigger an earlier request reserved `seq` for stands: `queued` (there, or taken), `none` (not written
   * yet), `gone` (a skip mark or another trigger holds the seq).
   */
  private async earlierWrite(
    key: string,
    seq: number,
    head: number,
    body: Uint8Array,
  ): Promise<'queued' | 'none' | 'gone'> {
    const found = await this.kv.get(key);
    if (found === null) return seq <= head ? 'queued' : 'none';
    return sameBytes(found.value, body) ? 'queued' : 'gone';
  }

  /**
   * Creates a trigger's key (or a skip mark's): `written` once it holds these bytes (a create whose answer was lost is
   * found there), `skipped` when it holds a skip mark, `other` when another trigger holds it. A failure that may not
   * have landed is retried on the same key.
   */
  private async write(key: string, body: Uint8Array): Promise<'written' | 'skipped' | 'other'> {
    return retry(
      async () => {
        try {
          await this.kv.create(key, body);
          return 'written';
        } catch (error) {
          if (!isConflict(error)) throw error;
          const found = await this.kv.get(key);
          if (found === null) throw error;
          if (isSkipped(found.value)) return 'skipped';
          return sameBytes(found.value, body) ? 'written' : 'other';
        }
      },
      { attempts: 20, timeoutMs: 5_000, retryable: (e) => !isConflict(e) && isTransientFailure(e) },
    );
  }

  /**
   * Reserves the next seq (remembering it for the request `tag`), or gives the seq an earlier request with this tag
   * reserved (`earlier`) unless the daemon skipped that one (`skipped`).
   */
  private async reserve(
    runId: string,
    tag: string | undefined,
    skipped: number | undefined,
  ): Promise<{ seq: number; depth: number; head: number; earlier: boolean }> {
    const { meta, revision } = await this.meta(runId);
    const depth = meta.next - meta.head;
    const requests = meta.requests ?? [];
    const earlier = tag === undefined ? undefined : requests.find(([t]) => t === tag)?.[1];
    if (earlier !== undefined && earlier !== skipped)
      return { seq: earlier, depth, head: meta.head, earlier: true };
    if (depth >= Math.min(meta.capacity, this.maxPending)) {
      await this.kv
        .update(metaKey(runId), encodeJson({ ...meta, dropped: meta.dropped + 1 }), revision)
        .catch(() => undefined);
      throw this.refusal(runId, meta.capacity, depth);
    }
    const seq = meta.next + 1;
    const remembered: [string, number][] | undefined =
      tag === undefined
        ? undefined
        : [...requests.filter(([t]) => t !== tag), [tag, seq] as [string, number]].slice(
            -REMEMBERED_REQUESTS,
          );
    await this.kv.update(
      metaKey(runId),
      encodeJson({ ...meta, next: seq, ...(remembered === undefined ? {} : { requests: remembered }) }),
      revision,
    );
    return { seq, depth: depth + 1, head: meta.head, earlier: false };
  }

  private refusal(runId: string, capacity: number, depth: number): AgentMeshError {
    if (capacity <= this.maxPending)
      return new AgentMeshError(
        ErrorCode.QueueFull,
        `the trigger queue of run ${runId} is full (${capacity} queued): the trigger was not queued`,
        { retryable: true, details: { capacity } },
      );
    return new AgentMeshError(
      ErrorCode.QuotaExceeded,
      `run ${runId} holds ${depth} pending triggers, the quota per daemon (triggers.max_pending_per_daemon is ${this.maxPending}): the trigger was not queued`,
      { retryable: true, details: { pending: depth, quota: this.maxPending, capacity } },
    );
  }

  /** The oldest queued trigger after seq `after`, or undefined when none waits (yet). */
  async next(runId: string, after: number): Promise<QueuedTrigger | undefined> {
    const { meta } = await this.ownMeta(runId);
    for (let seq = after + 1; seq <= meta.next; seq++) {
      const key = itemKey(runId, seq);
      const gapKey = `${runId}:${seq}`;
      let entry = await this.kv.get(key);
      if (entry === null) {
        const since = this.gaps.get(gapKey) ?? Date.now();
        this.gaps.set(gapKey, since);
        if (Date.now() - since < this.gapTimeoutMs) return undefined;
        if (await this.markSkipped(runId, seq)) {
          this.gaps.delete(gapKey);
          continue;
        }
        entry = await this.kv.get(key);
        if (entry === null) return undefined;
      }
      this.gaps.delete(gapKey);
      if (isSkipped(entry.value)) continue;
      return { seq, trigger: decodeQueuedTrigger(entry.value) };
    }
    return undefined;
  }

  /** Claims a seq for the skip, and lists it in the meta for {@link close}: false when its trigger was written first. */
  private async markSkipped(runId: string, seq: number): Promise<boolean> {
    // `skipped` too: the key holds a skip mark (this one, whose answer was lost)
    const marked = (await this.write(itemKey(runId, seq), SKIPPED)) !== 'other';
    if (marked)
      await this.updateMeta(runId, async () => {
        const { meta, revision } = await this.meta(runId);
        const skipped = meta.skipped ?? [];
        if (!skipped.includes(seq))
          await this.kv.update(metaKey(runId), encodeJson({ ...meta, skipped: [...skipped, seq] }), revision);
      });
    return marked;
  }

  /** Drops the triggers up to and including `upTo` (they are in the daemon's checkpoint now). */
  async remove(runId: string, upTo: number): Promise<void> {
    await this.updateMeta(runId, async () => {
      const { meta, revision } = await this.meta(runId);
      if (meta.head >= upTo) return;
      for (let seq = meta.head + 1; seq <= upTo; seq++) await this.dropItem(runId, seq, seq === upTo);
      await this.kv.update(metaKey(runId), encodeJson({ ...meta, head: upTo }), revision);
    });
  }

  /**
   * Deletes a taken trigger. A skip mark stays until the queue closes: a create succeeds on a deleted key, so a late
   * write would land behind the daemon. Below the seq taken (`taken` false) a key is read first: only the seqs the
   * daemon skipped are there. A full bucket refuses only the delete of a key that was never written (a seq whose write
   * the full bucket refused): there is nothing to drop then.
   */
  private async dropItem(runId: string, seq: number, taken: boolean): Promise<void> {
    const key = itemKey(runId, seq);
    if (!taken) {
      const entry = await this.kv.get(key);
      if (entry === null || isSkipped(entry.value)) return;
    }
    await this.kv.delete(key).catch((error: unknown) => {
      if (!isAgentMeshError(error, ErrorCode.QuotaExceeded)) throw error;
    });
  }

  /** Records whether the daemon idles (what `agentmesh runs list` shows). */
  async setIdle(runId: string, idle: boolean): Promise<void> {
    await this.updateMeta(runId, async () => {
      const { meta, revision } = await this.meta(runId);
      if (meta.idle !== idle) await this.kv.update(metaKey(runId), encodeJson({ ...meta, idle }), revision);
    });
  }

  /**
   * A read-modify-write of the queue's meta, retried on a conflict, after this process's other writes of it: racing
   * writes of one process would only conflict (or, on nats-server before 2.9.21, both land: see {@link enqueue}).
   */
  private updateMeta<T>(
    runId: string,
    step: () => Promise<T>,
    retryable: (error: unknown) => boolean = conflictOrBehind,
  ): Promise<T> {
    return this.metaWrites.run(runId, () => retry(step, { attempts: 20, timeoutMs: 5_000, retryable }));
  }

  /** A daemon's state and queue depth, or undefined when the run is no live daemon. */
  async status(runId: string): Promise<{ state: 'idle' | 'active'; depth: number } | undefined> {
    const entry = await this.kv.get(metaKey(runId));
    if (entry === null) return undefined;
    const meta = parseJson(entry.value, 'trigger queue') as QueueMeta;
    return { state: meta.idle === true ? 'idle' : 'active', depth: meta.next - meta.head };
  }

  /** Triggers queued and not yet taken. */
  async depth(runId: string): Promise<number> {
    const { meta } = await this.ownMeta(runId);
    return meta.next - meta.head;
  }

  /** How many triggers a full queue refused so far. */
  async dropped(runId: string): Promise<number> {
    return (await this.ownMeta(runId)).meta.dropped;
  }

  /** Calls `onQueued` whenever a trigger is written for the run. */
  watch(runId: string, onQueued: () => void): Promise<KvWatcher> {
    return this.kv.watch(
      (entry) => {
        if (entry.operation === 'PUT') onQueued();
      },
      { key: `${runId}.q.*`, updatesOnly: true },
    );
  }

  /** Removes the queue of a daemon that ended: its triggers not taken, its skip marks and its meta. */
  async close(runId: string): Promise<void> {
    const { meta } = await this.meta(runId);
    const seqs = new Set(meta.skipped);
    for (let seq = meta.head + 1; seq <= meta.next; seq++) seqs.add(seq);
    for (const seq of seqs) await this.kv.delete(itemKey(runId, seq));
    await this.kv.delete(metaKey(runId));
  }

  /** The meta of a queue the caller knows exists (the daemon's own, while it runs): see {@link behindTheCreate}. */
  private ownMeta(runId: string): Promise<{ meta: QueueMeta; revision: number }> {
    return retry(() => this.meta(runId), { attempts: 20, timeoutMs: 5_000, retryable: behindTheCreate });
  }

  private async meta(runId: string): Promise<{ meta: QueueMeta; revision: number }> {
    const entry = await this.kv.get(metaKey(runId));
    if (entry === null)
      throw new AgentMeshError(ErrorCode.NotFound, `run ${runId} is not a running daemon: no trigger queue`);
    const meta = parseJson(entry.value, 'trigger queue') as QueueMeta;
    return { meta: assertKnownSchema(`trigger queue of run ${runId}`, meta), revision: entry.revision };
  }
}

/**
 * The one decoder of a queued trigger item. Items are the triggers as sent (the protocol's `Trigger`); the queue's
 * `<run>.meta` record carries the `schema_version` of the queue and its items. An item with a `schema_version` of its
 * own (a newer planner's) is read only when this planner knows that version.
 */
export function decodeQueuedTrigger(value: Uint8Array): Trigger {
  const stored = assertKnownSchema(
    'queued trigger',
    parseJson(value, 'queued trigger') as Trigger & { schema_version?: number },
  );
  const { schema_version: _version, ...trigger } = stored;
  return trigger as Trigger;
}
