import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import {
  CancelRequestSchema,
  DEFAULT_PREFIX,
  ServiceName,
  respondJson,
  runIdOfSubject,
  silentLogger,
  sleep,
  subjects as buildSubjects,
  type BlobStore,
  type Backend,
  type BusMessage,
  type KvStore,
  type Logger,
  type RunRequestInput,
  type ServiceHandle,
  type Subjects,
  type Subscription,
  type TenantsConfig,
} from '@agentmesh/protocol';
import { CapabilityTable, type CapabilityRule } from './capabilities.js';
import {
  DEFAULT_CHECKPOINT_TTL_MS,
  DEFAULT_LEASE_MS,
  type DurabilityOptions,
  type RunLease,
} from './durable/lease.js';
import { DRAIN_HANDOFF } from './durable/keepers.js';
import { PlannerPresence } from './durable/presence.js';
import { plannerInfra, type IntakeDelivery, type PlannerInfra } from './infra/backend.js';
import { FairIntake } from './fair/fair-intake.js';
import { cancelQueuedRun, type QueuedCancel } from './fair/queued-cancel.js';
import { removeWaitingMessage, type WaitingPlace } from './fair/waiting-message.js';
import { QueuedSet } from './fair/queued-set.js';
import { parseRecord } from './model/record.js';
import { openTenantWaiting, openTriggerStore } from './infra/backend.js';
import {
  IdleDaemons,
  MAX_TRIGGER_BYTES,
  TRIGGERS_STORE_MAX_BYTES,
  serveTriggers,
  TriggerQueue,
  type TriggerLimits,
} from './daemon/index.js';
import type { DurableDeps } from './durable/takeover.js';
import { TenantQuotas } from './budgets/index.js';
import { RunIntake } from './intake.js';
import { runFeatures } from './run-features.js';
import { PriceTable, type PriceTableInput } from './prices.js';
import {
  ProviderClients,
  resolveProvider,
  type ProviderChoice,
  type ProviderSettings,
} from './providers/index.js';
import { ActiveRuns } from './run/active-runs.js';
import { ApprovalStore } from './hitl/approval-store.js';
import { serveApprovals } from './hitl/approval-service.js';
import { RunControlStore, serveRunControls } from './hitl/run-controls.js';
import { SessionStore } from './hitl/session-store.js';
import { openSessionStores } from './infra/backend.js';
import { transcriptStore } from './infra/transcripts.js';
import { RunExecutor, type ExecuteOptions, type RunResult } from './run/executor.js';
import type { PlannerDefaults } from './run/setup.js';
import type { CheckpointHook, RunSnapshot } from './model/snapshot.js';
import { Semaphore } from './util.js';
import { SCHEMA_VERSION } from './model/versions.js';
import { mirrorTenantEvents, serveTenantApi } from './tenancy/index.js';

export type { ExecuteOptions, RunResult } from './run/executor.js';
export type { PlannerDefaults, SystemPromptOverride, ToolSearchDefaults } from './run/setup.js';

export const PLANNER_VERSION = '0.1.0';
/** The key prefix of a planner's per-tenant run counts in its service `load`. */
export const RUNNING_LOAD_PREFIX = 'running:';

/** How long a draining planner waits for its runs to reach a turn boundary before it hands them over as they stand. */
export const DEFAULT_DRAIN_TIMEOUT_MS = 30_000;

/** How {@link Planner.drain} ends the runs in flight. */
export interface DrainOptions {
  /**
   * Hand runs in flight to other planners (durable planners only) instead of finishing them here: at their next turn
   * boundary, waiting runs at once. Without it the planner lets them finish.
   */
  handOff?: boolean;
  /** With `handOff`: runs still here after this long are handed over where they stand (default 30 s). */
  timeoutMs?: number;
}

export interface PlannerOptions {
  bus: Backend;
  prefix?: string;
  logger?: Logger;
  /** Unique per planner process (default: host, pid and a random suffix). */
  plannerId?: string;
  providers?: ProviderSettings;
  /** Capability rules consulted before the shipped table. */
  capabilities?: CapabilityRule[];
  /** Prices (USD per million tokens) by `provider:model-glob`, added to the shipped table. */
  prices?: PriceTableInput;
  defaults?: PlannerDefaults;
  /** Runs this planner takes from the intake at once (default 256). */
  maxConcurrentRuns?: number;
  /** How long a run waits for the catalog to answer (through a restart or failover) before failing (default 30 s). */
  catalogRetryMs?: number;
  /** Store each run's transcript in the transcripts object store (default true). */
  transcripts?: boolean;
  /** Called with the run snapshot after every model turn and tool batch (durable runs also store each tool result). */
  checkpoint?: CheckpointHook;
  /**
   * Durable runs (NATS intake only; on by default there): each run is owned through a lease in its run record and
   * checkpointed to KV after every model turn and tool result, so another planner resumes it if this one dies.
   */
  durability?: DurabilityOptions & { enabled?: boolean };
  /**
   * Calls that need approval (`defaults.approvals`, a tool's `needs_confirmation`, a run's `approvals`) wait for a
   * decision on `runs.<run_id>.approve`, kept in the approvals bucket. Default: on with a durable (NATS) intake, off
   * on the in-process bus (embedded runs ask on the terminal instead). The same switch turns on input and
   * pause/resume (`runs.<run_id>.input|pause|resume`, kept in the controls bucket until applied).
   */
  approvals?: boolean;
  /** What the daemons' trigger queues may hold: per-daemon quota, trigger size, the bucket's bytes. */
  triggers?: TriggerLimits;
  /** Per-tenant limits (configuration `tenants:`); absent: one unlimited `default` tenant. */
  tenants?: TenantsConfig;
  /** The build this planner runs, announced in its service metadata as `version_tag` (default: its version). */
  versionTag?: string;
}

interface Stores {
  approvals: ApprovalStore | undefined;
  controls: RunControlStore | undefined;
  records: KvStore;
  checkpoints: KvStore | undefined;
  transcripts: BlobStore | undefined;
}

/**
 * The planner actor. Runs come in through its {@link RunIntake} (the durable runs stream on NATS, `runs.submit` on
 * the in-process bus, or {@link Planner.execute}), are driven by the {@link RunExecutor} and, on a durable intake,
 * kept by a lease and checkpoints so another planner can resume them. This class composes those parts and owns the
 * actor's lifecycle (start, drain, cancel).
 */
export class Planner {
  readonly id: string;
  readonly prefix: string;
  private readonly bus: Backend;
  private readonly subjects: Subjects;
  private readonly logger: Logger;
  private readonly infra: PlannerInfra;
  private readonly active = new ActiveRuns();
  private readonly executor: RunExecutor;
  private readonly intake: RunIntake;
  private readonly inflight = new Set<Promise<unknown>>();
  private readonly leaseMs: number;
  private readonly redeliverMs: number;
  private readonly presence: PlannerPresence;
  private readonly durable: boolean;
  private readyPromise: Promise<void> | undefined;
  private stores: Stores | undefined;
  private durableOf: { stores: Stores; deps: DurableDeps } | undefined;
  private cancelSub: Subscription | undefined;
  private approvalSub: Subscription | undefined;
  private controlSubs: Subscription[] = [];
  private sessions: Promise<SessionStore> | undefined;
  private triggerSub: Subscription | undefined;
  private tenantSubs: Subscription[] = [];
  private triggerQueue: Promise<TriggerQueue> | undefined;
  private readonly idleDaemons = new IdleDaemons();
  private service: ServiceHandle | undefined;
  private stopIntake: (() => Promise<void>) | undefined;
  private tenantWaiting: Promise<KvStore> | undefined;
  private handingOff = false;
  private readonly newerReported = new Set<string>();

  constructor(private readonly options: PlannerOptions) {
    this.bus = options.bus;
    this.prefix = options.prefix ?? DEFAULT_PREFIX;
    this.subjects = buildSubjects(this.prefix);
    this.id = options.plannerId ?? `planner-${hostname()}-${process.pid}-${randomUUID().slice(0, 6)}`;
    this.logger = (options.logger ?? silentLogger()).child({ planner_id: this.id });
    this.infra = plannerInfra(this.bus, this.prefix, this.logger);
    this.leaseMs = Math.max(1_000, options.durability?.leaseMs ?? DEFAULT_LEASE_MS);
    this.redeliverMs = Math.min(this.leaseMs, Math.max(500, options.durability?.redeliverMs ?? this.leaseMs));
    this.presence = new PlannerPresence(this.bus, this.prefix, this.id, this.logger, {
      giveUpOnDisconnect: this.redeliverMs < this.leaseMs,
    });
    this.durable = this.infra.durable && options.durability?.enabled !== false;
    const providers = options.providers ?? {};
    const { bus, prefix, logger } = this;
    const quotas = options.tenants && new TenantQuotas({ bus, prefix, logger, tenants: options.tenants });
    this.executor = this.createExecutor(providers, quotas);
    this.intake = new RunIntake({
      infra: this.infra,
      executor: this.executor,
      plannerId: this.id,
      logger: this.logger,
      leaseMs: this.redeliverMs,
      records: () => this.stores!.records,
      durable: () => this.durableDeps(),
      describe: (request) => {
        try {
          return resolveProvider(request, providers);
        } catch {
          return undefined;
        }
      },
      quotas,
    });
  }

  /** The executor, wired to this planner's bus, stores and features. */
  private createExecutor(providers: ProviderSettings, quotas: TenantQuotas | undefined): RunExecutor {
    const { options } = this;
    return new RunExecutor({
      bus: this.bus,
      prefix: this.prefix,
      subjects: this.subjects,
      plannerId: this.id,
      logger: this.logger,
      providers,
      clients: new ProviderClients(providers),
      capabilities: new CapabilityTable(options.capabilities ?? []),
      prices: new PriceTable(options.prices ?? {}),
      defaults: options.defaults ?? {},
      catalogRetryMs: options.catalogRetryMs,
      checkpoint: options.checkpoint,
      active: this.active,
      publisher: (runId, publishing) =>
        mirrorTenantEvents(
          this.bus,
          this.prefix,
          runId,
          publishing?.tenant,
          this.infra.eventPublisher(runId, publishing),
        ),
      transcripts: () => transcriptStore(this.stores?.transcripts),
      features: runFeatures({
        defaults: options.defaults ?? {},
        approvals: () => this.stores?.approvals,
        controls: () => this.stores?.controls,
        triggers: () => this.triggers(),
        idleDaemons: this.idleDaemons,
        sessions: () => this.sessionStore(),
        quotas,
        forks: {
          transcripts: () => this.infra.transcripts(),
          events: (runId) => this.infra.readRunEvents(runId),
        },
      }),
    });
  }

  /** The fair intake runs when tenants are configured on a durable backend; otherwise one shared FIFO, as before. */
  private get fairIntake(): boolean {
    return this.infra.durable && Object.keys(this.options.tenants ?? {}).length > 0;
  }

  private async startIntake(slots: Semaphore): Promise<() => Promise<void>> {
    const onDelivery = (delivery: IntakeDelivery) => this.track(this.intake.deliver(delivery));
    if (!this.fairIntake) return this.infra.startIntake({ slots, leaseMs: this.redeliverMs, onDelivery });
    const fair = new FairIntake({
      queue: await this.infra.runQueue(),
      subjects: this.subjects,
      tenants: this.options.tenants ?? {},
      slots,
      leaseMs: this.redeliverMs,
      logger: this.logger,
      admission: (delivery) => this.intake.admission(delivery),
      deliver: onDelivery,
      refuse: (delivery, runId, error) => this.track(this.intake.refuse(delivery, runId, error)),
      admitSubmission: (delivery, request, runId) => this.intake.checkQuota(delivery, request, runId),
      storeQueued: (runId, request, queued) => this.intake.storeQueued(runId, request, queued),
      waitingRuns: () => this.waitingRuns(),
      finished: async (runId) => {
        const entry = await this.stores!.records.get(runId);
        return entry !== null && parseRecord(entry.value).state === 'finished';
      },
    });
    fair.start();
    return () => fair.stop();
  }

  private waitingRuns(): Promise<KvStore> {
    return (this.tenantWaiting ??= openTenantWaiting(this.bus, this.prefix));
  }

  /** Cancels a run waiting in its tenant's queue (fair intake only; docs/tenancy.md). */
  private cancelQueued(runId: string, reason: string, tenant?: string): Promise<QueuedCancel> {
    if (!this.fairIntake) return Promise.resolve({ kind: 'not_queued' });
    const deps = {
      records: this.stores!.records,
      plannerId: this.id,
      logger: this.logger,
      readRunEvents: (id: string) => this.infra.readRunEvents(id),
      eventPublisher: (id: string) => this.infra.eventPublisher(id),
      waiting: new QueuedSet(() => this.waitingRuns()),
      removeWaiting: async (id: string, place: WaitingPlace) =>
        removeWaitingMessage(await this.infra.runQueue(), this.subjects, id, place),
    };
    return cancelQueuedRun(deps, runId, reason, tenant);
  }

  /** Throws `invalid_config` (saying how to fix it) when a run like `request` could not reach a model. */
  checkConfig(
    request: Partial<Pick<RunRequestInput, 'provider' | 'model' | 'base_url' | 'script'>> = {},
  ): ProviderChoice {
    return resolveProvider(request, this.options.providers ?? {});
  }

  /** Runs currently executing in this planner. */
  get activeRuns(): number {
    return this.active.size;
  }

  /** What durable runs need of this planner: made once its stores are open, then the same for every delivery. */
  private durableDeps(): DurableDeps | undefined {
    const { stores } = this;
    const checkpoints = stores?.checkpoints;
    if (!this.durable || stores === undefined || checkpoints === undefined) return undefined;
    if (this.durableOf?.stores === stores) return this.durableOf.deps;
    const { infra, id: plannerId, leaseMs, logger, presence } = this;
    const deps = {
      ...{ infra, records: stores.records, checkpoints, plannerId, leaseMs, logger, presence },
      draining: () => this.handingOff,
      newerReported: this.newerReported,
    };
    this.durableOf = { stores, deps };
    return deps;
  }

  private sessionStore(): Promise<SessionStore> {
    this.sessions ??= openSessionStores(this.bus, this.prefix).then(
      ({ blobs, meta }) => new SessionStore(blobs, meta),
    );
    return this.sessions;
  }

  private async hitlStores(): Promise<Pick<Stores, 'approvals' | 'controls'>> {
    if (!(this.options.approvals ?? this.infra.durable)) return { approvals: undefined, controls: undefined };
    return {
      approvals: new ApprovalStore(await this.infra.approvals()),
      controls: new RunControlStore(await this.infra.controls()),
    };
  }

  private ready(): Promise<void> {
    this.readyPromise ??= (async () => {
      await this.infra.prepare();
      const stores = await this.openStores();
      this.stores = stores;
      this.serve(stores);
    })();
    return this.readyPromise;
  }

  private async openStores(): Promise<Stores> {
    const ttl = this.options.durability?.checkpointTtlMs ?? DEFAULT_CHECKPOINT_TTL_MS;
    return {
      records: await this.infra.runRecords(),
      checkpoints: this.durable ? await this.infra.checkpoints(ttl) : undefined,
      transcripts: this.options.transcripts === false ? undefined : await this.infra.transcripts(),
      ...(await this.hitlStores()),
    };
  }

  /** What the planner answers beside its runs: cancels, approvals, run controls, triggers and the tenant API. */
  private serve(stores: Stores): void {
    this.cancelSub = this.bus.subscribe(this.subjects.allRunCancels, (msg) => this.onCancel(msg));
    if (this.durable) this.presence.start();
    const served = { bus: this.bus, prefix: this.prefix, records: stores.records, logger: this.logger };
    if (stores.approvals !== undefined)
      this.approvalSub = serveApprovals({ ...served, store: stores.approvals });
    if (stores.controls !== undefined)
      this.controlSubs = serveRunControls({ ...served, store: stores.controls });
    this.triggerSub = serveTriggers({
      bus: this.bus,
      subjects: this.subjects,
      queue: () => this.triggers(),
      logger: this.logger,
      maxBytes: this.options.triggers?.maxTriggerBytes ?? MAX_TRIGGER_BYTES,
      ledger: stores.controls?.ledger,
    });
    this.tenantSubs = this.serveTenants(stores);
  }

  /** The tenant API (`<prefix>.tenant.*.…`, docs/tenancy.md), served by every planner. */
  private serveTenants(stores: Stores): Subscription[] {
    const approvals = stores.approvals;
    return serveTenantApi({
      bus: this.bus,
      prefix: this.prefix,
      logger: this.logger,
      records: stores.records,
      readEvents: (runId) => this.infra.readRunEvents(runId),
      pendingApprovals: approvals && (() => approvals.list()),
      cancelQueued: async (runId, reason, tenant) =>
        (await this.cancelQueued(runId, reason, tenant)).kind === 'cancelled',
      sessions: () => this.sessionStore(),
    });
  }

  /**
   * Starts taking runs: on NATS a durable consumer on the runs stream shared by every planner replica; on the
   * in-process bus a subscription on `runs.submit` (answered with `{ run_id }`). Also announces the service.
   */
  async start(): Promise<void> {
    await this.ready();
    this.service = await this.bus.announce({
      name: ServiceName.Planner,
      version: PLANNER_VERSION,
      description: 'agentmesh planner: runs agent loops',
      metadata: {
        planner_id: this.id,
        version_tag: this.options.versionTag ?? PLANNER_VERSION,
        schema_version: String(SCHEMA_VERSION),
      },
      load: () => ({
        in_flight: this.active.size,
        ...(this.fairIntake ? runningLoad(this.intake.runningByTenant()) : {}),
      }),
    });
    this.stopIntake = await this.startIntake(new Semaphore(this.options.maxConcurrentRuns ?? 256));
    this.logger.info({ prefix: this.prefix, bus: this.bus.kind }, 'planner started');
  }

  /**
   * Stops taking runs, lets the runs in progress finish, then stops listening. Idle daemons are not waited for: once
   * this planner is gone their leases run out and another planner resumes them.
   *
   * With `handOff` (a durable planner, e.g. on SIGTERM) runs are not finished here: each is handed to another
   * planner at its next turn boundary (right after its checkpoint), and runs that wait (for a decision, paused, idle
   * daemons) at once; another planner resumes them from their checkpoint without waiting out the lease. Runs still
   * here after `timeoutMs` are handed over wherever they stand.
   */
  async drain(options: DrainOptions = {}): Promise<void> {
    await this.stopIntake?.();
    this.stopIntake = undefined;
    if (options.handOff === true && this.durable) await this.handOff(options.timeoutMs);
    else
      while (this.inflight.size > this.idleDaemons.size)
        await Promise.race([Promise.allSettled([...this.inflight]), this.idleDaemons.changed()]);
    this.cancelSub?.unsubscribe();
    this.cancelSub = undefined;
    this.presence.stop();
    this.approvalSub?.unsubscribe();
    this.approvalSub = undefined;
    for (const sub of this.controlSubs.splice(0)) sub.unsubscribe();
    this.triggerSub?.unsubscribe();
    this.triggerSub = undefined;
    for (const sub of this.tenantSubs.splice(0)) sub.unsubscribe();
    this.readyPromise = undefined;
    await this.service?.stop();
    this.logger.info('planner drained');
  }

  private async handOff(timeoutMs = DEFAULT_DRAIN_TIMEOUT_MS): Promise<void> {
    this.handingOff = true;
    const waiting = (lease: RunLease) =>
      lease.record.waiting !== undefined || this.idleDaemons.has(lease.runId);
    const settled = () => Promise.allSettled([...this.inflight]);
    const started = Date.now();
    while (this.inflight.size > 0 && Date.now() - started < timeoutMs) {
      const released = await this.presence.release(DRAIN_HANDOFF, waiting);
      if (released > 0) this.logger.info({ runs: released }, 'waiting runs handed to other planners');
      const left = timeoutMs - (Date.now() - started);
      await Promise.race([settled(), this.idleDaemons.changed(), sleep(Math.min(left, 250))]);
    }
    if (this.inflight.size === 0) return;
    const released = await this.presence.release(`${DRAIN_HANDOFF} (drain timeout ${timeoutMs} ms)`);
    this.logger.warn(
      { runs: released, timeout_ms: timeoutMs },
      'drain timeout: runs handed over where they stand',
    );
    await Promise.race([settled(), sleep(2_000)]);
  }

  /** Cancels a run of this planner; false when it is not running here. */
  cancel(runId: string, reason = 'cancelled'): boolean {
    return this.active.cancel(runId, reason);
  }

  /**
   * Runs one request to its end in this process and returns the final event. Events are published on
   * `runs.<id>.events` and handed to `onEvent` as they happen. An invalid request ends as `run.failed` with
   * `invalid_request`; a run id this planner fleet has seen already throws `conflict`.
   */
  async execute(request: RunRequestInput | unknown, options: ExecuteOptions = {}): Promise<RunResult> {
    await this.ready();
    return this.track(this.intake.submit(request, options));
  }

  /**
   * Continues a run from one of its checkpoints (a snapshot the `checkpoint` hook received) in this process, with
   * the same flow as {@link Planner.execute}; events go on after the snapshot's seq.
   */
  async resume(snapshot: RunSnapshot, options: ExecuteOptions = {}): Promise<RunResult> {
    await this.ready();
    return this.track(this.intake.resume(snapshot, options));
  }

  private track<T>(work: Promise<T>): Promise<T> {
    this.inflight.add(work);
    void work.finally(() => this.inflight.delete(work)).catch(() => undefined);
    return work;
  }

  /** The daemons' trigger queues, opened on first use. */
  private triggers(): Promise<TriggerQueue> {
    const limits = this.options.triggers ?? {};
    this.triggerQueue ??= openTriggerStore(this.bus, this.prefix, {
      maxBytes: limits.storeMaxBytes ?? TRIGGERS_STORE_MAX_BYTES,
    }).then((kv) => new TriggerQueue(kv, limits));
    return this.triggerQueue;
  }

  private onCancel(msg: BusMessage): void {
    const runId = runIdOfSubject(this.prefix, msg.subject, 'cancel');
    if (runId === undefined) return;
    let reason = 'cancel requested';
    try {
      const body = msg.data.length === 0 ? {} : CancelRequestSchema.parse(JSON.parse(msg.text()));
      if (body.reason) reason = body.reason;
    } catch {
      // a malformed cancel still cancels
    }
    const found = this.cancel(runId, reason);
    if (found) this.logger.info({ run_id: runId, reason }, 'run cancelled');
    if (msg.reply !== undefined && found) respondJson(this.bus, msg, { run_id: runId, cancelled: true });
    // every planner hears a cancel: the one whose compare-and-set ends a waiting run answers
    if (!found && this.fairIntake)
      void this.cancelQueued(runId, reason)
        .then((outcome) => {
          if (outcome.kind === 'cancelled' && msg.reply !== undefined)
            respondJson(this.bus, msg, { run_id: runId, cancelled: true, queued: true, status: 'cancelled' });
        })
        .catch((error: unknown) =>
          this.logger.warn({ run_id: runId, err: (error as Error).message }, 'queued run not cancelled'),
        );
  }
}

/** A planner's runs by tenant in its service `load` (`running:<tenant>`), which `agentmesh status` adds up. */
function runningLoad(byTenant: Map<string, number>): Record<string, number> {
  const load: Record<string, number> = {};
  for (const [tenant, n] of byTenant) load[`${RUNNING_LOAD_PREFIX}${tenant}`] = n;
  return load;
}
