import {
  CATALOG_BUCKET,
  ServiceName,
  createLogger,
  subjects,
  toErrorPayload,
  type Backend,
  type CatalogAvailability,
  type ExposureLayer,
  type KvEntry,
  type Logger,
  type SearchStrategy,
  type ServiceHandle,
  type Subscription,
} from '@agentmesh/protocol';
import { ToolAvailability } from './availability.js';
import { CatalogBucket } from './bucket.js';
import { DeferredIndex } from './deferred-index.js';
import { serveCatalog } from './endpoints.js';
import { LiveTools } from './live-tools.js';
import { WorkerLiveness } from './liveness.js';
import { PulseKeys } from './pulses.js';
import { CatalogQueries } from './queries.js';
import { Registrar } from './registration.js';
import { CatalogKeys, parseWorkerRecord, type WorkerRecord } from './registry.js';
import { RegistrationPolicy, type RegistrationRoles } from './role-policy.js';
import {
  DEFAULT_SEARCH_LIMIT,
  MAX_SEARCH_LIMIT,
  clampSearchLimit,
  createToolIndex,
} from './search/tool-index.js';

export { CATALOG_QUEUE } from './endpoints.js';

export const CATALOG_VERSION = '0.1.0';
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

/** How long the search index waits after the last registration change before it catches up (a search catches up first). */
const INDEX_SETTLE_MS = 50;

/**
 * The catalog actor: keeps the tools live workers serve (registration, heartbeats, expiry), decides their exposure,
 * and answers list, get and search. State lives in a KV bucket (JetStream KV on NATS) that every replica watches,
 * so replicas agree and a restarted catalog serves the same tools at once; each replica keeps a search index in
 * memory, updated as tools come and go.
 *
 * The parts: {@link Registrar} takes registrations, {@link WorkerLiveness} heartbeats, deregistration and expiry,
 * {@link LiveTools} the live tools and the search index, {@link CatalogQueries} list, get and search, and
 * {@link serveCatalog} the subjects; this class wires them to the bucket and runs them.
 */
export class Catalog {
  private readonly bus: Backend;
  private readonly logger: Logger;
  private readonly subjects: ReturnType<typeof subjects>;
  private readonly bucketName: string;
  private readonly tools: LiveTools;
  private readonly availability = new ToolAvailability();
  private readonly policy: RegistrationPolicy;
  /** The catalog's KV bucket, mirrored here: every entry reaches {@link Catalog.apply} once. */
  private readonly bucket: CatalogBucket;
  private readonly registrar: Registrar;
  private readonly liveness: WorkerLiveness;
  private readonly queries: CatalogQueries;
  private readonly limits: { maxRequestBytes: number; maxRegisterBytes: number; strategy: SearchStrategy };
  private service: ServiceHandle | undefined;
  private subscriptions: Subscription[] = [];
  private started = false;
  private readonly signal: AbortSignal | undefined;

  constructor(options: CatalogOptions) {
    this.bus = options.bus;
    this.logger = options.logger ?? createLogger('agentmesh-catalog');
    this.subjects = subjects(options.prefix);
    this.bucketName = options.bucket ?? CATALOG_BUCKET;
    this.signal = options.signal;
    const workerTtlMs = options.workerTtlMs ?? DEFAULT_WORKER_TTL_MS;
    this.limits = {
      maxRequestBytes: options.maxRequestBytes ?? DEFAULT_MAX_REQUEST_BYTES,
      maxRegisterBytes: options.maxRegisterBytes ?? options.bus.maxPayload,
      strategy: options.search?.strategy ?? 'bm25',
    };
    const regexBudgetMs = options.search?.regexBudgetMs;
    const index = createToolIndex(regexBudgetMs === undefined ? {} : { regexBudgetMs });
    this.tools = new LiveTools(new DeferredIndex(index, INDEX_SETTLE_MS), options.exposure);
    this.policy = new RegistrationPolicy(options.roles);
    this.bucket = new CatalogBucket({
      bus: options.bus,
      bucket: this.bucketName,
      logger: this.logger,
      apply: (entry, written) => this.apply(entry, written),
    });
    const { registry } = this.tools;
    const parts = { bucket: this.bucket, registry, logger: this.logger, workerTtlMs };
    this.registrar = new Registrar({ ...parts, policy: this.policy, index: this.tools.index });
    this.liveness = new WorkerLiveness({
      ...parts,
      bus: options.bus,
      availability: this.availability,
      replica: this.tools.replica,
    });
    this.queries = this.createQueries(options);
  }

  private createQueries(options: CatalogOptions): CatalogQueries {
    const maxLimit = clampSearchLimit(options.search?.maxLimit ?? MAX_SEARCH_LIMIT, MAX_SEARCH_LIMIT);
    return new CatalogQueries({
      live: () => this.tools.current(),
      index: this.tools.index,
      availability: this.availability,
      maxPayload: options.bus.maxPayload,
      defaultStrategy: this.limits.strategy,
      defaultLimit: clampSearchLimit(options.search?.limit ?? DEFAULT_SEARCH_LIMIT, maxLimit),
      maxLimit,
      version: () => this.tools.version(),
    });
  }

  /** Loads the bucket, starts answering on the catalog subjects and announces the service. */
  async start(): Promise<void> {
    if (this.started) return;
    this.signal?.throwIfAborted();
    this.started = true;
    try {
      await this.bucket.open();
      this.subscriptions = serveCatalog({
        bus: this.bus,
        subjects: this.subjects,
        logger: this.logger,
        maxRequestBytes: this.limits.maxRequestBytes,
        maxRegisterBytes: this.limits.maxRegisterBytes,
        policy: this.policy,
        registrar: this.registrar,
        liveness: this.liveness,
        queries: this.queries,
        defaultStrategy: this.limits.strategy,
        setAvailability: (notice) => this.setAvailability(notice),
      });
      await this.bus.flush();
      this.service = await this.bus.announce({
        name: ServiceName.Catalog,
        version: CATALOG_VERSION,
        description: 'agentmesh tool catalog: registration, exposure and tool search',
      });
      this.liveness.start();
      this.signal?.addEventListener('abort', () => void this.stop(), { once: true });
      this.logger.info({ tools: this.tools.current().size, bucket: this.bucketName }, 'catalog started');
    } catch (error) {
      await this.stop();
      throw error;
    }
  }

  /** Stops answering (in-flight requests finish), stops the watch and the expiry sweep. */
  async stop(): Promise<void> {
    if (!this.started) return;
    this.started = false;
    this.liveness.stop();
    this.tools.index.stop();
    const subs = this.subscriptions;
    this.subscriptions = [];
    await Promise.all(subs.map((s) => s.drain().catch(() => s.unsubscribe())));
    this.bucket.stop();
    await this.service?.stop();
    this.service = undefined;
  }

  /** Names of the live tools this replica knows, sorted. */
  toolNames(): string[] {
    return this.tools.names();
  }

  /** Applies one KV entry, once per key and revision (from the watch, the snapshot or our own write). */
  private apply(entry: KvEntry, written?: WorkerRecord): void {
    const present = entry.operation === 'PUT';
    try {
      if (CatalogKeys.isWorker(entry.key)) {
        const record = present ? (written ?? parseWorkerRecord(entry.value)) : undefined;
        this.tools.setWorker(entry.key, record, entry.revision);
        if (record !== undefined) this.liveness.recordSeen(record.worker_id);
      } else if (PulseKeys.is(entry.key)) {
        if (present) this.liveness.applyPulses(entry.value);
      } else if (CatalogKeys.isBeat(entry.key)) {
        this.liveness.applyLegacyBeat(entry.key, present);
      }
    } catch (error) {
      this.logger.warn(
        { key: entry.key, err: toErrorPayload(error).message },
        'ignoring a malformed catalog entry',
      );
    }
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
}
