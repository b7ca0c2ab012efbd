import { randomUUID } from 'node:crypto';
import {
  CATALOG_BUCKET,
  CatalogAvailabilitySchema,
  CatalogDeregisterSchema,
  CatalogGetSchema,
  CatalogHeartbeatSchema,
  CatalogListSchema,
  CatalogRegisterSchema,
  ServiceName,
  createLogger,
  fastValidator,
  isToolName,
  resolveToolLoading,
  serve,
  subjects,
  toErrorPayload,
  type Backend,
  type BusMessage,
  type CatalogRegister,
  type CatalogRegisterReply,
  type ExposureLayer,
  type KvEntry,
  type Logger,
  type SearchStrategy,
  type ServiceHandle,
  type Subscription,
  type CatalogAvailability,
  type ToolLoading,
} from '@agentmesh/protocol';
import { ToolAvailability } from './availability.js';
import { CatalogBucket } from './bucket.js';
import { z } from 'zod';
import { conflictRejection } from './rejections.js';
import { RegistrationPolicy, foreignWorkerError, type RegistrationRoles } from './role-policy.js';
import { screenRegistration } from './screen.js';
import { DeferredIndex } from './deferred-index.js';
import { PulseBatch, PulseKeys, pulseIds } from './pulses.js';
import { CatalogQueries, SearchRequestSchema } from './queries.js';
import { traceCatalogSearch } from './search-span.js';
import {
  CatalogKeys,
  ToolRegistry,
  encodeRecord,
  parseWorkerRecord,
  type LiveTool,
  type WorkerRecord,
} from './registry.js';
import {
  DEFAULT_SEARCH_LIMIT,
  MAX_SEARCH_LIMIT,
  clampSearchLimit,
  createToolIndex,
} from './search/tool-index.js';

export const CATALOG_VERSION = '0.1.0';
/** Queue group every catalog replica joins, so each request is answered once. */
export const CATALOG_QUEUE = 'agentmesh-catalog';
export const DEFAULT_WORKER_TTL_MS = 10_000;
/** Largest request accepted on list, get, search, heartbeat and deregister (register may use the bus limit). */
export const DEFAULT_MAX_REQUEST_BYTES = 64 * 1024;

export interface CatalogOptions {
  bus: Backend;
  /** Subject prefix (default `agentmesh`). */
  prefix?: string;
  logger?: Logger;
  /** A worker that sends no heartbeat for this long is expired (default 10 000 ms; a worker may ask for its own). */
  workerTtlMs?: number;
  /** The configuration file's exposure overrides (names or globs); `always` wins over `deferred`. */
  exposure?: ExposureLayer;
  search?: {
    /** Strategy when a request names none (default bm25). */
    strategy?: SearchStrategy;
    /** Results when a request names no limit (default 10). */
    limit?: number;
    /** Upper clamp of a request's limit (default and most 50). */
    maxLimit?: number;
    /** Wall-clock budget of one regex search (default 250 ms). */
    regexBudgetMs?: number;
  };
  /** KV bucket of the catalog state (default `agentmesh_catalog`). */
  bucket?: string;
  /** Largest list, get, search, heartbeat or deregister request (default 64 KiB). */
  maxRequestBytes?: number;
  /** Largest register request (default: the bus payload limit). */
  maxRegisterBytes?: number;
  /**
   * Worker roles and the tool namespaces each may register (`{ worker_math: ['math'], worker: ['*'] }`). Set, a
   * worker registers on `<prefix>.catalog.register.<role>` (NATS permissions bind each role's user to its subject)
   * and the unscoped `<prefix>.catalog.register` is refused; left out, any registration is taken.
   */
  roles?: RegistrationRoles;
  /** Stops the catalog when aborted. */
  signal?: AbortSignal;
}

/**
 * Register requests are checked by an ajv validator compiled once from the schema (a request that fails it, or lacks
 * a default, goes through zod, which names the offending field as before): zod copies every one of the specs.
 */
const checkRegister = fastValidator(CatalogRegisterSchema, (request) =>
  request.tools.every((spec) => isToolName(spec.name)),
);
/** Register bodies reach the handler unchecked; it runs {@link checkRegister}. */
const UncheckedSchema = z.unknown();

/** How long the search index waits after the last registration change before it catches up (a search catches up first). */
const INDEX_SETTLE_MS = 50;

/**
 * The catalog actor: keeps the tools live workers serve (registration, heartbeats, expiry), decides their exposure,
 * and answers list, get and search. State lives in a KV bucket (JetStream KV on NATS) that every replica watches,
 * so replicas agree and a restarted catalog serves the same tools at once; each replica keeps a search index in
 * memory, updated as tools come and go.
 */
export class Catalog {
  private readonly bus: Backend;
  private readonly logger: Logger;
  private readonly subjects: ReturnType<typeof subjects>;
  private readonly workerTtlMs: number;
  private readonly exposure: ExposureLayer | undefined;
  private readonly defaultStrategy: SearchStrategy;
  private readonly queries: CatalogQueries;
  private readonly maxRequestBytes: number;
  private readonly maxRegisterBytes: number;
  private readonly bucketName: string;
  private readonly registry = new ToolRegistry();
  private readonly policy: RegistrationPolicy;
  private readonly index: DeferredIndex;
  /** tool name -> the live tool in the search index, with its loading after the configured overrides */
  private readonly live = new Map<string, { tool: LiveTool; loading: ToolLoading }>();
  /** This replica's state of `live`, as catalog list replies name it: a new value whenever a live tool changes. */
  private readonly liveEpoch = randomUUID().slice(0, 8);
  private liveChanges = 0;
  private readonly availability = new ToolAvailability();
  /** Workers with a `beats.<id>` key in the bucket (written by a catalog before heartbeats were batched). */
  private readonly legacyBeats = new Set<string>();
  /** Heartbeats this replica answered since its last flush (see {@link PulseBatch}). */
  private readonly pulses = new PulseBatch(this.liveEpoch);
  /** worker id -> when this replica last saw its record change (local clock: no skew between replicas). */
  private readonly seenAt = new Map<string, number>();
  /** The catalog's KV bucket, mirrored here: every entry reaches {@link Catalog.apply} once. */
  private readonly bucket: CatalogBucket;
  private service: ServiceHandle | undefined;
  private subscriptions: Subscription[] = [];
  private sweepTimer: NodeJS.Timeout | undefined;
  private stopStatus: (() => void) | undefined;
  private started = false;
  private readonly signal: AbortSignal | undefined;

  constructor(options: CatalogOptions) {
    this.bus = options.bus;
    this.logger = options.logger ?? createLogger('agentmesh-catalog');
    this.subjects = subjects(options.prefix);
    this.workerTtlMs = options.workerTtlMs ?? DEFAULT_WORKER_TTL_MS;
    this.exposure = options.exposure;
    this.defaultStrategy = options.search?.strategy ?? 'bm25';
    const maxLimit = clampSearchLimit(options.search?.maxLimit ?? MAX_SEARCH_LIMIT, MAX_SEARCH_LIMIT);
    this.maxRequestBytes = options.maxRequestBytes ?? DEFAULT_MAX_REQUEST_BYTES;
    this.maxRegisterBytes = options.maxRegisterBytes ?? options.bus.maxPayload;
    this.bucketName = options.bucket ?? CATALOG_BUCKET;
    this.policy = new RegistrationPolicy(options.roles);
    this.bucket = new CatalogBucket({
      bus: options.bus,
      bucket: this.bucketName,
      logger: this.logger,
      apply: (entry, written) => this.apply(entry, written),
    });
    this.index = new DeferredIndex(
      createToolIndex(
        options.search?.regexBudgetMs === undefined ? {} : { regexBudgetMs: options.search.regexBudgetMs },
      ),
      INDEX_SETTLE_MS,
    );
    this.signal = options.signal;
    this.queries = new CatalogQueries({
      live: this.live,
      index: this.index,
      availability: this.availability,
      maxPayload: options.bus.maxPayload,
      defaultStrategy: this.defaultStrategy,
      defaultLimit: clampSearchLimit(options.search?.limit ?? DEFAULT_SEARCH_LIMIT, maxLimit),
      maxLimit,
      version: () => `${this.liveEpoch}.${this.liveChanges}`,
    });
  }

  /** Loads the bucket, starts answering on the catalog subjects and announces the service. */
  async start(): Promise<void> {
    if (this.started) return;
    this.signal?.throwIfAborted();
    this.started = true;
    try {
      // compiles the register check now (tens of ms) rather than inside the first worker's registration
      checkRegister({ worker_id: 'warm', tools: [] }, 'catalog register request');
      await this.bucket.open();
      this.serveAll();
      await this.bus.flush();
      this.service = await this.bus.announce({
        name: ServiceName.Catalog,
        version: CATALOG_VERSION,
        description: 'agentmesh tool catalog: registration, exposure and tool search',
      });
      this.scheduleSweep();
      this.stopStatus = this.bus.onStatus((status) => {
        if (status.type !== 'reconnect') return;
        const now = Date.now();
        for (const id of this.seenAt.keys()) this.seenAt.set(id, now);
        this.logger.info('reconnected: workers get a full ttl to heartbeat again before they expire');
      });
      this.signal?.addEventListener('abort', () => void this.stop(), { once: true });
      this.logger.info({ tools: this.live.size, bucket: this.bucketName }, 'catalog started');
    } catch (error) {
      await this.stop();
      throw error;
    }
  }

  /** Stops answering (in-flight requests finish), stops the watch and the expiry sweep. */
  async stop(): Promise<void> {
    if (!this.started) return;
    this.started = false;
    clearTimeout(this.sweepTimer);
    this.index.stop();
    this.stopStatus?.();
    this.stopStatus = undefined;
    const subs = this.subscriptions;
    this.subscriptions = [];
    await Promise.all(subs.map((s) => s.drain().catch(() => s.unsubscribe())));
    this.bucket.stop();
    await this.service?.stop();
    this.service = undefined;
  }

  /** Names of the live tools this replica knows, sorted. */
  toolNames(): string[] {
    return [...this.live.keys()].sort();
  }

  /** Applies one KV entry, once per key and revision (from the watch, the snapshot or our own write). */
  private apply(entry: KvEntry, written?: WorkerRecord): void {
    const present = entry.operation === 'PUT';
    let affected: string[] = [];
    try {
      if (CatalogKeys.isWorker(entry.key)) {
        const record = present ? (written ?? parseWorkerRecord(entry.value)) : undefined;
        affected = this.registry.setWorker(entry.key, record, entry.revision);
        if (record !== undefined) this.seenAt.set(record.worker_id, Date.now());
      } else if (PulseKeys.is(entry.key)) {
        if (present) this.markSeen(pulseIds(entry.value));
        return;
      } else if (CatalogKeys.isBeat(entry.key)) {
        const workerId = CatalogKeys.workerOfBeat(entry.key);
        if (present) this.legacyBeats.add(workerId);
        else this.legacyBeats.delete(workerId);
        if (present) this.markSeen([workerId]);
        return;
      } else return;
    } catch (error) {
      this.logger.warn(
        { key: entry.key, err: toErrorPayload(error).message },
        'ignoring a malformed catalog entry',
      );
      return;
    }
    for (const name of affected) this.reindex(name);
  }

  /** Marks workers this replica knows as seen now (heartbeats another replica answered, or a pre-batching beat key). */
  private markSeen(workerIds: readonly string[]): void {
    const now = Date.now();
    for (const id of workerIds) if (this.registry.worker(id) !== undefined) this.seenAt.set(id, now);
  }

  private reindex(name: string): void {
    const tool = this.registry.live(name);
    const current = this.live.get(name);
    if (tool === undefined) {
      if (current !== undefined) {
        this.index.set(name, null);
        this.live.delete(name);
        this.liveChanges++;
      }
      return;
    }
    if (current?.tool.hash !== tool.hash) this.index.set(name, tool.spec);
    this.live.set(name, { tool, loading: resolveToolLoading(name, tool.spec.loading, this.exposure) });
    this.liveChanges++;
  }

  private serveAll(): void {
    const s = this.subjects;
    const common = { bus: this.bus, queue: CATALOG_QUEUE, logger: this.logger };
    const small = { ...common, maxBytes: this.maxRequestBytes };
    const register = (subject: string, roleOf: (msg: BusMessage) => string | undefined) =>
      serve({
        ...common,
        maxBytes: this.maxRegisterBytes,
        subject,
        schema: UncheckedSchema,
        what: 'catalog register request',
        handler: (body, msg) => {
          const role = roleOf(msg);
          const namespaces = this.policy.namespacesOf(role, s.catalogRegister);
          return this.register(checkRegister(body, 'catalog register request'), role, namespaces);
        },
      });
    const roleAt = s.catalogRegister.length + 1;
    this.subscriptions = [
      register(s.catalogRegister, () => undefined),
      register(s.allCatalogRegisterRoles, (msg) => msg.subject.slice(roleAt)),
      serve({
        ...small,
        subject: s.catalogDeregister,
        schema: CatalogDeregisterSchema,
        what: 'catalog deregister request',
        handler: (body) => this.deregister(body.worker_id),
      }),
      serve({
        ...small,
        subject: s.catalogHeartbeat,
        schema: CatalogHeartbeatSchema,
        what: 'catalog heartbeat',
        handler: (body) => this.heartbeat(body.worker_id),
      }),
      serve({
        ...small,
        subject: s.catalogList,
        schema: CatalogListSchema,
        what: 'catalog list request',
        handler: (body) => this.queries.list(body),
      }),
      serve({
        ...small,
        subject: s.catalogGet,
        schema: CatalogGetSchema,
        what: 'catalog get request',
        handler: (body) => this.queries.get(body),
      }),
      serve({
        ...small,
        subject: s.catalogSearch,
        schema: SearchRequestSchema,
        what: 'catalog search request',
        handler: (body, msg) =>
          traceCatalogSearch(
            msg.headers,
            { query: body.query, strategy: body.strategy ?? this.defaultStrategy },
            () => this.queries.search(body),
          ),
      }),
      serve({
        bus: this.bus,
        logger: this.logger,
        maxBytes: this.maxRegisterBytes,
        subject: s.catalogAvailability,
        schema: CatalogAvailabilitySchema,
        what: 'catalog availability notice',
        handler: (body) => this.setAvailability(body),
      }),
    ];
  }

  /** Records which of a worker's tools cannot run now; every replica hears it (no queue group). */
  private setAvailability(notice: CatalogAvailability): { ok: true } {
    this.availability.apply(notice);
    this.logger.info(
      { worker_id: notice.worker_id, tools: notice.tools.length, available: notice.available },
      'tool availability changed',
    );
    return { ok: true };
  }

  /**
   * Registers the worker's tools: one KV write of its record. A spec that differs from the one another live worker
   * serves under the same name and version is rejected, naming both workers. Two replicas racing on conflicting
   * specs settle it the same way everywhere: the earlier record revision wins, and the later registration, once its
   * own write comes back through the watch, drops the losing tools from its record and reports them rejected.
   */
  private async register(
    request: CatalogRegister,
    role: string | undefined,
    namespaces: readonly string[] | undefined,
  ): Promise<CatalogRegisterReply> {
    const workerId = request.worker_id;
    const owner = this.registry.worker(workerId);
    if (this.policy.scoped && owner !== undefined && owner.role !== role)
      throw foreignWorkerError(workerId, role, owner.role);
    const ttlMs = request.ttl_ms ?? this.workerTtlMs;
    const { accepted, rejected, canonical } = screenRegistration(request, role, namespaces, this.registry);
    const key = CatalogKeys.worker(workerId);
    const registeredAt = this.registry.worker(workerId)?.registered_at ?? new Date().toISOString();
    let record: WorkerRecord = {
      worker_id: workerId,
      ttl_ms: ttlMs,
      registered_at: registeredAt,
      ...(role === undefined ? {} : { role }),
      tools: accepted,
    };
    let revision = await this.writeRecord(key, record, canonical);
    await this.bucket.echoOf(revision);
    const lost = new Set<string>();
    for (const { hash, spec } of record.tools) {
      const conflict = this.registry.conflicts(spec.name, spec.version, hash, workerId);
      if (conflict === undefined) continue;
      lost.add(hash);
      rejected.push(conflictRejection(spec, hash, workerId, conflict.workers, conflict.hash));
    }
    if (lost.size > 0) {
      record = { ...record, tools: record.tools.filter((t) => !lost.has(t.hash)) };
      revision = await this.writeRecord(key, record, canonical);
    }
    for (const r of rejected)
      this.logger.warn(
        { worker_id: workerId, tool: r.name, code: r.error.code, err: r.error.message },
        'tool registration rejected',
      );
    this.logger.info(
      { worker_id: workerId, accepted: record.tools.length, rejected: rejected.length },
      'worker registered',
    );
    return { accepted: record.tools.map((t) => t.spec.name), rejected, ttl_ms: ttlMs };
  }

  /** Writes a worker record, its specs spliced in from the canonical JSON their hashes were computed from. */
  private writeRecord(key: string, record: WorkerRecord, canonical: Map<string, string>): Promise<number> {
    return this.bucket.write(key, encodeRecord(record, canonical), record);
  }

  private async deregister(workerId: string): Promise<{ known: boolean }> {
    this.availability.forget(workerId);
    const key = CatalogKeys.worker(workerId);
    const known = this.registry.worker(workerId) !== undefined || (await this.bucket.get(key)) !== null;
    if (known) await this.removeWorker(workerId);
    this.seenAt.delete(workerId);
    this.logger.info({ worker_id: workerId, known }, 'worker deregistered');
    return { known };
  }

  /**
   * A heartbeat marks its worker seen here at once and is noted for the next flush of {@link PulseBatch}, which tells
   * the other replicas: no KV write and no watch wake-up per heartbeat.
   */
  private async heartbeat(workerId: string): Promise<{ known: boolean }> {
    if (
      this.registry.worker(workerId) === undefined &&
      (await this.bucket.get(CatalogKeys.worker(workerId))) === null
    )
      return { known: false };
    this.seenAt.set(workerId, Date.now());
    this.pulses.note(workerId);
    return { known: true };
  }

  /** Writes the heartbeats answered since the last flush, for the other replicas. */
  private async flushPulses(): Promise<void> {
    for (const { key, value } of this.pulses.take()) await this.bucket.write(key, value);
  }

  /** Schedules the next sweep (and pulse flush) at a fifth of the shortest worker ttl, between 25 ms and 1 s. */
  private scheduleSweep(): void {
    if (!this.started) return;
    let minTtl = this.workerTtlMs;
    for (const w of this.registry.allWorkers()) minTtl = Math.min(minTtl, w.ttl_ms);
    const delay = Math.min(1000, Math.max(25, Math.floor(minTtl / 5)));
    this.sweepTimer = setTimeout(() => {
      this.sweep()
        .catch((error: unknown) =>
          this.logger.warn({ err: toErrorPayload(error).message }, 'catalog sweep failed'),
        )
        .finally(() => this.scheduleSweep());
    }, delay);
    this.sweepTimer.unref();
  }

  /** Flushes the heartbeats answered here, then expires workers no replica has heard from within their ttl. */
  private async sweep(): Promise<void> {
    await this.flushPulses();
    const now = Date.now();
    const expired: WorkerRecord[] = [];
    for (const worker of this.registry.allWorkers()) {
      const seen = this.seenAt.get(worker.worker_id) ?? now;
      if (!this.seenAt.has(worker.worker_id)) this.seenAt.set(worker.worker_id, now);
      if (now - seen > worker.ttl_ms) expired.push(worker);
    }
    if (!this.started) return;
    // all at once: 100 workers lost together leave search together, not one KV round trip after another
    await Promise.all(
      expired.map((worker) => {
        this.logger.warn(
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
      this.bucket.remove(CatalogKeys.worker(workerId)),
      beat ? this.bucket.remove(CatalogKeys.beat(workerId)) : undefined,
    ]);
  }
}
