import type { JetStreamManager, MsgRequest } from '@nats-io/jetstream';
import type { KV } from '@nats-io/kv';
import { mapLimited } from '../concurrency.js';
import { AgentMeshError, ErrorCode } from '../errors.js';
import { retry } from '../retry.js';
import { subjectMatches } from '../bus/shared.js';

export interface KvEntry {
  key: string;
  value: Uint8Array;
  revision: number;
  operation: 'PUT' | 'DEL' | 'PURGE';
}

export interface KvWatcher {
  stop(): void;
}

/**
 * The key-value store actors keep state in: a JetStream KV bucket on NATS, a map in process. Keys are
 * dot-separated tokens of `[-/_=.a-zA-Z0-9]`.
 */
export interface KvStore {
  get(key: string): Promise<KvEntry | null>;
  put(key: string, value: Uint8Array): Promise<number>;
  /** Writes only when the key does not exist; otherwise fails with `conflict`. */
  create(key: string, value: Uint8Array): Promise<number>;
  /** Writes only when the key is at `revision`; otherwise fails with `conflict`. */
  update(key: string, value: Uint8Array, revision: number): Promise<number>;
  delete(key: string): Promise<void>;
  /**
   * The keys matching `filter` (all keys without one), each once. A key deleted lately may still be listed: read
   * each with `get`, which returns null for it.
   */
  keys(filter?: string): Promise<string[]>;
  /**
   * False when no key matching `filter` holds anything, read in one request; true when one may (a deleted key's
   * marker counts, and so does a failed read). A store without it leaves the caller to read each key.
   */
  mayHaveKeys?(filter: string): Promise<boolean>;
  /** Calls `onEntry` for current values (unless `updatesOnly`) and every later change, in revision order. */
  watch(onEntry: (entry: KvEntry) => void, options?: KvWatchOptions): Promise<KvWatcher>;
}

/** How many keys {@link readEntries} reads at once (the catalog load and the run, approval, session and input listings). */
export const KEY_READS_IN_FLIGHT = 64;

/**
 * The current entries of the keys matching `filter` (every key without one), read {@link KEY_READS_IN_FLIGHT} at a
 * time rather than one round trip after another, in the order `keys` listed them. A key deleted meanwhile is left out.
 */
export async function readEntries(kv: KvStore, filter?: string): Promise<KvEntry[]> {
  const entries = await mapLimited(await kv.keys(filter), KEY_READS_IN_FLIGHT, (key) => kv.get(key));
  return entries.filter((entry): entry is KvEntry => entry !== null);
}

export interface KvWatchOptions {
  key?: string;
  updatesOnly?: boolean;
  /**
   * Entries the watcher already holds (its own writes, applied when written): such an entry may arrive with an
   * empty value, which then never crosses the wire; every other entry comes with its value. An entry whose
   * revision was overwritten before its value could be read is skipped (the newer revision follows). A promise
   * answers for a write still in flight: the watch can hear of a write before its writer hears the answer, and
   * waits for the writer rather than reading the value back (later entries wait behind it, in revision order).
   */
  known?: (key: string, revision: number) => boolean | Promise<boolean>;
}

export interface KvBucketOptions {
  /** Entries older than this are dropped (0 = keep). */
  ttlMs?: number;
  history?: number;
  /**
   * Bytes the bucket may hold (JetStream `max_bytes`); a write of a new key beyond it is refused, replacing or
   * deleting a key still works. Left out, an existing bucket keeps its limit. Not enforced in memory.
   */
  maxBytes?: number;
  /**
   * Reads go to the bucket's stream leader, so a read sees every write acknowledged before it. By default a read is
   * a direct get that any replica of a replicated bucket may answer, one still catching up included: for buckets
   * whose readers act on a key's absence (a daemon's trigger queue skips a trigger it cannot see).
   */
  consistentReads?: boolean;
}

/** JetStream refused a write because the bucket holds its `max_bytes`. */
function bucketFull(bucket: string, key: string, cause: unknown): AgentMeshError | undefined {
  if (!/maximum bytes exceeded/i.test((cause as Error).message ?? '')) return undefined;
  return new AgentMeshError(
    ErrorCode.QuotaExceeded,
    `KV bucket ${bucket} is full (its max_bytes is reached): key "${key}" was not written`,
    { retryable: true, cause, details: { bucket, key } },
  );
}

/**
 * Whether JetStream refused a create because the key exists (not at revision 0). Any other failure (a timeout, a
 * stream without a leader yet) says nothing about the key.
 */
function isWrongRevision(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  return (
    code === 10071 || code === 10164 || /wrong last sequence/i.test((error as Error | null)?.message ?? '')
  );
}

function conflict(key: string, cause?: unknown): AgentMeshError {
  return new AgentMeshError(ErrorCode.Conflict, `key "${key}" changed concurrently`, {
    retryable: true,
    details: { key },
    ...(cause === undefined ? {} : { cause }),
  });
}

/** A KV bucket on JetStream. */
export class NatsKvStore implements KvStore {
  private readonly subjectPrefix: string;

  /** `reads`: the view gets go through (a leader-bound one for `consistentReads`); `kv` otherwise. */
  constructor(
    private readonly kv: KV,
    private readonly jsm: JetStreamManager,
    private readonly bucket: string,
    private readonly reads: KV = kv,
  ) {
    this.subjectPrefix = `$KV.${bucket}.`;
  }

  async get(key: string): Promise<KvEntry | null> {
    const e = await this.reads.get(key);
    if (e === null || e.operation !== 'PUT') return null;
    return { key, value: e.value, revision: e.revision, operation: 'PUT' };
  }
  async put(key: string, value: Uint8Array): Promise<number> {
    try {
      return await this.kv.put(key, value);
    } catch (error) {
      throw bucketFull(this.bucket, key, error) ?? error;
    }
  }
  async create(key: string, value: Uint8Array): Promise<number> {
    try {
      return await this.kv.create(key, value);
    } catch (error) {
      throw bucketFull(this.bucket, key, error) ?? (isWrongRevision(error) ? conflict(key, error) : error);
    }
  }
  async update(key: string, value: Uint8Array, revision: number): Promise<number> {
    try {
      return await this.kv.update(key, value, revision);
    } catch (error) {
      // any failure: the write may have landed without an answer, so the caller reads the key again (a lease
      // renewal does, at once) as it does when another writer changed it
      throw conflict(key, error);
    }
  }
  async delete(key: string): Promise<void> {
    try {
      await this.kv.delete(key);
    } catch (error) {
      throw bucketFull(this.bucket, key, error) ?? error;
    }
  }
  /**
   * Reads the subjects of the bucket's stream in one request (paged by the client when there are many). The KV
   * client's own `keys()` follows an ordered consumer until its pending count reaches zero or it idles 5 s: under
   * steady writes it can list a key twice, and it may never end on a server whose pending count is off.
   */
  async keys(filter = '>'): Promise<string[]> {
    const info = await this.jsm.streams.info(`KV_${this.bucket}`, {
      subjects_filter: this.subjectPrefix + filter,
    });
    return Object.keys(info.state.subjects ?? {}).map((subject) => subject.slice(this.subjectPrefix.length));
  }
  /**
   * The first message of the bucket's stream on a matching subject, in one stream message get (`next_by_subj`; the
   * direct get takes one subject, not a filter): none means no such key.
   */
  async mayHaveKeys(filter: string): Promise<boolean> {
    try {
      // the server takes `next_by_subj` on STREAM.MSG.GET as on a direct get; the client types it on the latter only
      const next = { seq: 0, next_by_subj: this.subjectPrefix + filter } as unknown as MsgRequest;
      const first = await this.jsm.streams.getMessage(`KV_${this.bucket}`, next);
      return first !== null;
    } catch {
      return true;
    }
  }
  async watch(onEntry: (entry: KvEntry) => void, options: KvWatchOptions = {}): Promise<KvWatcher> {
    const { known } = options;
    const iter = await this.kv.watch({
      ...(options.key === undefined ? {} : { key: options.key }),
      ...(options.updatesOnly ? { include: 'updates' as never } : {}),
      ...(known === undefined ? {} : { headers_only: true }),
    });
    const stopped = new AbortController();
    void (async () => {
      for await (const e of iter) {
        const entry = { key: e.key, value: e.value, revision: e.revision, operation: e.operation };
        const held = known === undefined || e.operation !== 'PUT' || known(e.key, e.revision);
        if (held === true || (held !== false && (await held.catch(() => false)))) onEntry(entry);
        else {
          const stored = await retry(() => this.kv.get(e.key, { revision: e.revision }), {
            signal: stopped.signal,
            retryable: () => true,
          });
          if (stored !== null) onEntry({ ...entry, value: stored.value });
        }
      }
    })().catch(() => undefined);
    return {
      stop: () => {
        stopped.abort();
        iter.stop();
      },
    };
  }
}

/**
 * An in-process KV with the same semantics (revisions, create/update conflicts, watch, and entries older than
 * `ttlMs` dropped like a bucket's max age).
 */
export class MemoryKvStore implements KvStore {
  private readonly entries = new Map<string, KvEntry>();
  private readonly writtenAt = new Map<string, number>();
  private revision = 0;
  private readonly watchers = new Set<{ key: string | undefined; fn: (e: KvEntry) => void }>();
  private readonly ttlMs: number;

  constructor(options: { ttlMs?: number } = {}) {
    this.ttlMs = options.ttlMs ?? 0;
  }

  private expire(now = Date.now()): void {
    if (this.ttlMs <= 0) return;
    for (const [key, at] of this.writtenAt) {
      if (now - at <= this.ttlMs) break;
      this.writtenAt.delete(key);
      this.entries.delete(key);
    }
  }

  async get(key: string): Promise<KvEntry | null> {
    this.expire();
    return this.entries.get(key) ?? null;
  }
  private write(key: string, value: Uint8Array, operation: KvEntry['operation']): number {
    this.expire();
    const entry: KvEntry = { key, value, revision: ++this.revision, operation };
    this.writtenAt.delete(key);
    if (operation === 'PUT') {
      this.entries.set(key, entry);
      if (this.ttlMs > 0) this.writtenAt.set(key, Date.now());
    } else this.entries.delete(key);
    for (const w of this.watchers) if (w.key === undefined || subjectMatches(w.key, key)) w.fn(entry);
    return entry.revision;
  }
  async put(key: string, value: Uint8Array): Promise<number> {
    return this.write(key, value, 'PUT');
  }
  async create(key: string, value: Uint8Array): Promise<number> {
    this.expire();
    if (this.entries.has(key)) throw conflict(key);
    return this.write(key, value, 'PUT');
  }
  async update(key: string, value: Uint8Array, revision: number): Promise<number> {
    this.expire();
    if (this.entries.get(key)?.revision !== revision) throw conflict(key);
    return this.write(key, value, 'PUT');
  }
  async delete(key: string): Promise<void> {
    if (this.entries.has(key)) this.write(key, new Uint8Array(0), 'DEL');
  }
  async keys(filter?: string): Promise<string[]> {
    this.expire();
    return [...this.entries.keys()].filter((k) => filter === undefined || subjectMatches(filter, k));
  }
  async mayHaveKeys(filter: string): Promise<boolean> {
    return (await this.keys(filter)).length > 0;
  }
  async watch(onEntry: (entry: KvEntry) => void, options: KvWatchOptions = {}): Promise<KvWatcher> {
    if (!options.updatesOnly)
      for (const e of this.entries.values())
        if (options.key === undefined || subjectMatches(options.key, e.key)) onEntry(e);
    const w = { key: options.key, fn: onEntry };
    this.watchers.add(w);
    return { stop: () => this.watchers.delete(w) };
  }
}
