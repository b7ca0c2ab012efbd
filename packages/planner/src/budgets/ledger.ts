import {
  DEFAULT_PREFIX,
  ErrorCode,
  encodeJson,
  isAgentMeshError,
  parseJson,
  readEntries,
  retry,
  type Backend,
  type KvStore,
} from '@agentmesh/protocol';

/** What one tenant used on one UTC day, across every planner. */
export interface TenantUsage {
  /** Input plus output tokens of every model turn. */
  tokens: number;
  /** Spend in US dollars of the turns whose model has a price. */
  cost_usd: number;
  /** Model turns counted. */
  turns: number;
}

const MINUTE_MS = 60_000;
const DAY_MS = 24 * 3_600_000;
const EMPTY: TenantUsage = { tokens: 0, cost_usd: 0, turns: 0 };

/** Compare-and-set conflicts (another planner wrote first) are retried, quickly: the counters are hot keys. */
const CAS_RETRY = {
  attempts: 100,
  timeoutMs: 15_000,
  baseMs: 2,
  capMs: 100,
  jitter: 1,
  retryable: (error: unknown) => isAgentMeshError(error, ErrorCode.Conflict),
};

function bucketPrefix(prefix: string): string {
  return prefix.replace(/[^A-Za-z0-9_-]/g, '_');
}

/** The KV bucket of per-tenant submit counters and daily usage (`agentmesh_tenant_usage`). */
export function tenantUsageBucket(prefix: string = DEFAULT_PREFIX): string {
  return `${bucketPrefix(prefix)}_tenant_usage`;
}

/** Opens the tenant usage bucket; its entries live three days (today, and yesterday's for a late look). */
export function openTenantUsage(bus: Backend, prefix: string = DEFAULT_PREFIX): Promise<KvStore> {
  return bus.kv(tenantUsageBucket(prefix), { ttlMs: 3 * DAY_MS });
}

/** The UTC day of `now` as YYYY-MM-DD. */
export function utcDay(now: number): string {
  return new Date(now).toISOString().slice(0, 10);
}

/** Milliseconds from `now` to the next UTC midnight (when daily budgets start again). */
export function msToNextUtcDay(now: number): number {
  return DAY_MS - (now % DAY_MS);
}

const encodeTenant = (tenant: string) => Buffer.from(tenant, 'utf8').toString('base64url') || '_';
const decodeTenant = (key: string) => Buffer.from(key, 'base64url').toString('utf8');
const usageKey = (tenant: string, day: string) => `usage.${encodeTenant(tenant)}.${day}`;
const rateKey = (tenant: string, window: number) => `rate.${encodeTenant(tenant)}.${window}`;

function parseUsage(value: Uint8Array): TenantUsage {
  const raw = parseJson(value, 'tenant usage') as Partial<TenantUsage>;
  return {
    tokens: Number(raw.tokens) || 0,
    cost_usd: Number(raw.cost_usd) || 0,
    turns: Number(raw.turns) || 0,
  };
}

/** The last value and revision this process saw of a counter key: the next compare-and-set tries it first. */
interface Seen<T> {
  value: T;
  revision: number;
}
const MAX_SEEN = 1_000;

/**
 * Changes one counter key by compare-and-set, retried on conflict: `change` gets the current value (undefined when
 * the key is new) and returns the next one, or undefined to leave the key as it is. Exact under concurrent writers.
 * The first attempt trusts the value this process wrote or read last (one round trip when no other planner wrote
 * since); a conflict reads the key afresh.
 */
async function casUpdate<T>(
  kv: KvStore,
  key: string,
  seen: Map<string, Seen<unknown>>,
  decode: (value: Uint8Array) => T,
  change: (current: T | undefined) => T | undefined,
): Promise<{ before: T | undefined; after: T | undefined }> {
  return retry(async (attempt) => {
    let current = attempt === 1 ? (seen.get(key) as Seen<T> | undefined) : undefined;
    if (current === undefined) {
      const entry = await kv.get(key);
      current = entry === null ? undefined : { value: decode(entry.value), revision: entry.revision };
    }
    const before = current?.value;
    const after = change(before);
    if (after === undefined) return { before, after };
    try {
      const revision =
        current === undefined
          ? await kv.create(key, encodeJson(after))
          : await kv.update(key, encodeJson(after), current.revision);
      if (seen.size >= MAX_SEEN) seen.clear();
      seen.set(key, { value: after, revision });
    } catch (error) {
      seen.delete(key);
      throw error;
    }
    return { before, after };
  }, CAS_RETRY);
}

/** Usage of one tenant's turns waiting for the next write, and who waits for it. */
interface UsageBatch extends TenantUsage {
  waiters: { resolve: () => void; reject: (error: unknown) => void }[];
}

/** The outcome of taking one submit slot: taken, or refused until the next window. */
export type RateSlot = { ok: true; used: number } | { ok: false; used: number; retryAfterMs: number };

/**
 * Per-tenant counters in the tenant usage bucket, shared by every planner: submissions per one-minute window
 * (`rate.<tenant>.<window>`) and usage per UTC day (`usage.<tenant>.<day>`), each changed by compare-and-set.
 */
export class TenantLedger {
  private readonly seen = new Map<string, Seen<unknown>>();
  private readonly pending = new Map<string, UsageBatch>();
  private readonly flushing = new Set<string>();

  constructor(
    private readonly kv: KvStore,
    private readonly now: () => number = Date.now,
  ) {}

  /** Takes one of `perMinute` submit slots of the tenant's current minute window, or says when the next opens. */
  async takeRunSlot(tenant: string, perMinute: number): Promise<RateSlot> {
    const at = this.now();
    const window = Math.floor(at / MINUTE_MS);
    const { before, after } = await casUpdate(
      this.kv,
      rateKey(tenant, window),
      this.seen,
      (value) => Number(parseJson(value, 'rate counter')) || 0,
      (count = 0) => (count >= perMinute ? undefined : count + 1),
    );
    if (after !== undefined) return { ok: true, used: after };
    return { ok: false, used: before ?? 0, retryAfterMs: Math.max(1, (window + 1) * MINUTE_MS - at) };
  }

  /** Submissions counted in the tenant's current minute window. */
  async runsThisMinute(tenant: string): Promise<number> {
    const entry = await this.kv.get(rateKey(tenant, Math.floor(this.now() / MINUTE_MS)));
    return entry === null ? 0 : Number(parseJson(entry.value, 'rate counter')) || 0;
  }

  /** The tenant's usage today (UTC). */
  async usageToday(tenant: string): Promise<TenantUsage> {
    const key = usageKey(tenant, utcDay(this.now()));
    const entry = await this.kv.get(key);
    if (entry === null) return { ...EMPTY };
    const usage = parseUsage(entry.value);
    this.seen.set(key, { value: usage, revision: entry.revision });
    return usage;
  }

  /**
   * Adds one model turn's tokens and cost to the tenant's usage today; resolves once it is stored. Turns of one tenant
   * that end while a write of its usage is in flight are added together in the next write, so many concurrent runs
   * cost this process one compare-and-set at a time per tenant rather than a storm of conflicting ones.
   */
  addUsage(tenant: string, turn: { tokens: number; cost_usd?: number | undefined }): Promise<void> {
    return new Promise((resolve, reject) => {
      const batch = this.pending.get(tenant) ?? { ...EMPTY, waiters: [] };
      batch.tokens += turn.tokens;
      batch.cost_usd += turn.cost_usd ?? 0;
      batch.turns += 1;
      batch.waiters.push({ resolve, reject });
      this.pending.set(tenant, batch);
      if (!this.flushing.has(tenant)) void this.flush(tenant);
    });
  }

  private async flush(tenant: string): Promise<void> {
    this.flushing.add(tenant);
    try {
      for (let batch = this.pending.get(tenant); batch; batch = this.pending.get(tenant)) {
        this.pending.delete(tenant);
        const { waiters, ...added } = batch;
        try {
          await casUpdate(
            this.kv,
            usageKey(tenant, utcDay(this.now())),
            this.seen,
            parseUsage,
            (current = EMPTY) => ({
              tokens: current.tokens + added.tokens,
              cost_usd: current.cost_usd + added.cost_usd,
              turns: current.turns + added.turns,
            }),
          );
          for (const w of waiters) w.resolve();
        } catch (error) {
          for (const w of waiters) w.reject(error);
        }
      }
    } finally {
      this.flushing.delete(tenant);
    }
  }

  /** Every tenant's usage today, by tenant name. */
  async allUsageToday(): Promise<Map<string, TenantUsage>> {
    const day = utcDay(this.now());
    const usage = new Map<string, TenantUsage>();
    for (const entry of await readEntries(this.kv, 'usage.*.*')) {
      const [, tenant, keyDay] = entry.key.split('.');
      if (tenant !== undefined && keyDay === day) usage.set(decodeTenant(tenant), parseUsage(entry.value));
    }
    return usage;
  }
}
