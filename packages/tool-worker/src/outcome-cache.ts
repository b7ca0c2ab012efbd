import { createHash } from 'node:crypto';
import {
  DEFAULT_PREFIX,
  ErrorCode,
  encodeJson,
  isAgentMeshError,
  retry,
  type Backend,
  type KvStore,
  type ToolOutcome,
} from '@agentmesh/protocol';

export interface OutcomeCacheOptions {
  /** Most outcomes kept (default 2048); the oldest go first. */
  maxEntries?: number;
  /** How long an outcome is replayed (default 10 minutes). */
  maxAgeMs?: number;
}

/** One idempotency key in an {@link OutcomeCache}: running until its outcome is recorded. */
export interface CacheEntry {
  readonly key: string;
  outcome: ToolOutcome | undefined;
  /** When the outcome was recorded (ms since epoch); 0 while the call runs. */
  at: number;
  waiters: ((outcome: ToolOutcome | undefined) => void)[] | undefined;
}

/**
 * Outcomes by idempotency key, bounded in size and age, plus the calls still running under a key, so that a call
 * re-sent to the same worker answers the first outcome instead of running twice. One map entry per key serves both;
 * past `maxEntries` the oldest outcomes are dropped an eighth at a time. The worker uses it for non-idempotent tools
 * only: an idempotent call is safe to run again, and every kept outcome outlives the young generation, which costs
 * the garbage collector more than the map costs anything else.
 */
export class OutcomeCache {
  private readonly entries = new Map<string, CacheEntry>();
  private readonly maxEntries: number;
  private readonly maxAgeMs: number;
  private done = 0;

  constructor(options: OutcomeCacheOptions = {}) {
    this.maxEntries = Math.max(1, options.maxEntries ?? 2048);
    this.maxAgeMs = Math.max(1, options.maxAgeMs ?? 600_000);
  }

  /** The entry of a key: a recorded outcome (not expired) or a call still running; undefined when unknown. */
  find(key: string): CacheEntry | undefined {
    const entry = this.entries.get(key);
    if (entry === undefined || entry.at === 0 || Date.now() - entry.at <= this.maxAgeMs) return entry;
    this.entries.delete(key);
    this.done--;
    return undefined;
  }

  /** Marks a call as running under `key` (after {@link find} found nothing), so duplicates wait for it. */
  begin(key: string): CacheEntry {
    const entry: CacheEntry = { key, outcome: undefined, at: 0, waiters: undefined };
    this.entries.set(key, entry);
    return entry;
  }

  /** The outcome of a running entry, once it is recorded (undefined when the call ended without one). */
  wait(entry: CacheEntry): Promise<ToolOutcome | undefined> {
    if (entry.at !== 0) return Promise.resolve(entry.outcome);
    return new Promise((resolve) => (entry.waiters ??= []).push(resolve));
  }

  /** Records the outcome of a running entry; cancelled calls and calls without an outcome are not replayed. */
  finish(entry: CacheEntry, outcome: ToolOutcome | undefined): void {
    if (entry.at !== 0) return;
    const waiters = entry.waiters;
    entry.waiters = undefined;
    if (outcome === undefined || outcome.error?.code === ErrorCode.Cancelled) {
      if (this.entries.get(entry.key) === entry) this.entries.delete(entry.key);
      entry.at = -1;
    } else {
      entry.outcome = outcome;
      entry.at = Date.now();
      if (++this.done > this.maxEntries) this.evict();
    }
    if (waiters !== undefined) for (const w of waiters) w(outcome);
  }

  private evict(): void {
    const target = this.maxEntries - Math.max(1, this.maxEntries >> 3);
    for (const [key, entry] of this.entries) {
      if (this.done <= target) break;
      if (entry.at === 0) continue;
      this.entries.delete(key);
      this.done--;
    }
  }

  /** Outcomes kept. */
  get size(): number {
    return this.done;
  }
}

/** Settings of the outcome store shared by every worker replica. */
export interface SharedOutcomeOptions {
  /** How long a key is remembered (default 1 hour): a call re-sent later than this runs again. */
  ttlMs?: number;
  /** A claim whose worker has not refreshed it for this long is taken as lost (default 10 s). */
  claimStaleMs?: number;
}

/** What the shared store knows about one idempotency key. */
export type SharedEntry =
  | { state: 'done'; outcome: ToolOutcome; at: number }
  | { state: 'claimed'; worker_id: string; heartbeat_at: number }
  | { state: 'interrupted'; worker_id: string; at: number; reason: string };

/** The KV bucket of call outcomes by idempotency key (`agentmesh_tool_outcomes` for the default prefix). */
export function toolOutcomesBucket(prefix: string = DEFAULT_PREFIX): string {
  return `${prefix.replace(/[^A-Za-z0-9_-]/g, '_')}_tool_outcomes`;
}

/**
 * Outcomes of non-idempotent calls by idempotency key, shared by all replicas of a fleet (JetStream KV on NATS, one
 * map per bus in process). Before running such a call a worker claims its key (a KV create, so one claim wins) and
 * refreshes the claim while the call runs; it stores the outcome when the call ends. A worker that finds an outcome
 * replays it; one that finds a live claim waits for the outcome; one that finds a stale or interrupted claim knows
 * the call may have run and must not run it again.
 */
export class SharedOutcomes {
  readonly claimStaleMs: number;

  private constructor(
    private readonly kv: KvStore,
    options: SharedOutcomeOptions,
  ) {
    this.claimStaleMs = Math.max(100, options.claimStaleMs ?? 10_000);
  }

  static async open(
    bus: Backend,
    prefix: string,
    options: SharedOutcomeOptions = {},
  ): Promise<SharedOutcomes> {
    const kv = await bus.kv(toolOutcomesBucket(prefix), {
      ttlMs: Math.max(1_000, options.ttlMs ?? 3_600_000),
    });
    return new SharedOutcomes(kv, options);
  }

  /** The store key of a call: a hash of tenant, tool and idempotency key (KV keys allow few characters). */
  static keyOf(tenant: string, tool: string, idempotencyKey: string): string {
    return createHash('sha256').update(`${tenant}\u0000${tool}\u0000${idempotencyKey}`).digest('hex');
  }

  async get(key: string): Promise<SharedEntry | undefined> {
    const entry = await this.kv.get(key);
    return entry === null ? undefined : (JSON.parse(new TextDecoder().decode(entry.value)) as SharedEntry);
  }

  /** Claims a key for `workerId`; undefined when another claim or an outcome is there already. */
  async claim(key: string, workerId: string): Promise<OutcomeClaim | undefined> {
    try {
      const revision = await this.kv.create(key, encodeJson(claimed(workerId)));
      return new OutcomeClaim(this.kv, key, workerId, revision);
    } catch (error) {
      if (isAgentMeshError(error, ErrorCode.Conflict)) return undefined;
      throw error;
    }
  }

  /** Whether a claim is still refreshed by a live worker. */
  isLive(entry: SharedEntry): boolean {
    return entry.state === 'claimed' && Date.now() - entry.heartbeat_at < this.claimStaleMs;
  }
}

function claimed(workerId: string): SharedEntry {
  return { state: 'claimed', worker_id: workerId, heartbeat_at: Date.now() };
}

/** A key this worker claimed: refreshed while the call runs, then settled with the outcome (writes in order). */
export class OutcomeClaim {
  private chain: Promise<unknown> = Promise.resolve();
  private settled = false;

  constructor(
    private readonly kv: KvStore,
    readonly key: string,
    private readonly workerId: string,
    private revision: number,
  ) {}

  refresh(): Promise<void> {
    return this.enqueue(async () => {
      if (!this.settled) await this.write(claimed(this.workerId));
    });
  }

  /** Stores the final state of the key, retrying a few times (a lost write leaves a claim that goes stale). */
  settle(value: SharedEntry): Promise<void> {
    this.settled = true;
    return this.enqueue(() =>
      retry(() => this.write(value), { attempts: 5, baseMs: 200, capMs: 1600, retryable: () => true }),
    );
  }

  private async write(value: SharedEntry): Promise<void> {
    try {
      this.revision = await this.kv.update(this.key, encodeJson(value), this.revision);
    } catch (error) {
      if (!isAgentMeshError(error, ErrorCode.Conflict)) throw error;
      this.revision = await this.kv.put(this.key, encodeJson(value));
    }
  }

  private enqueue(work: () => Promise<void>): Promise<void> {
    const next = this.chain.then(work);
    this.chain = next.catch(() => undefined);
    return next;
  }
}
