import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import {
  AckPolicy,
  DeliverPolicy,
  type Consumer,
  type ConsumerMessages,
  type JsMsg,
} from '@nats-io/jetstream';
import {
  AgentMeshError,
  CancelRequestSchema,
  DEFAULT_PREFIX,
  ErrorCode,
  NatsBus,
  RUN_ID_PATTERN,
  RunLimitsSchema,
  RunRequestSchema,
  ServiceName,
  TERMINAL_EVENT_TYPES,
  announceService,
  describeZodError,
  encodeJson,
  ensureRunStreams,
  isAgentMeshError,
  respondError,
  respondJson,
  silentLogger,
  subjects as buildSubjects,
  toErrorPayload,
  type BlobStore,
  type Bus,
  type BusMessage,
  type KvStore,
  type Logger,
  type RunEvent,
  type RunEventOf,
  type RunLimits,
  type RunRequest,
  envelopeFromHeaders,
  type RunRequestInput,
  type ServiceHandle,
  type Subjects,
  type Subscription,
  type ToolSearchStrategy,
  type ToolSpec,
} from '@agentmesh/protocol';
import { CapabilityTable, type CapabilityRule } from './capabilities.js';
import {
  CheckpointWriter,
  DEFAULT_CHECKPOINT_TTL_MS,
  DEFAULT_LEASE_MS,
  RunLease,
  lastStoredEvent,
  leaseLostError,
  openCheckpoints,
  readCheckpoint,
  readRunEvents,
  type DurabilityOptions,
  type LeaseClaim,
} from './durable.js';
import { RunEventSink } from './events.js';
import type { SearchMode } from './exposure.js';
import { DEFAULT_LOOP_THRESHOLDS, type LoopThresholds } from './loop-detector.js';
import { PriceTable, type PriceTableInput } from './prices.js';
import {
  ProviderClients,
  resolveProvider,
  type ProviderChoice,
  type ProviderSettings,
} from './providers/index.js';
import type { NativeSearchVariant } from './providers/types.js';
import { DEFAULT_NUDGE, RunLoop, loadRunTools } from './run-loop.js';
import type { CheckpointHook, RunSnapshot } from './run-state.js';
import { buildSystemPrompt } from './system-prompt.js';
import { openRunRecords, openTranscriptStore, saveTranscript, type RunRecord } from './transcript.js';
import { Semaphore } from './util.js';

export const PLANNER_VERSION = '0.1.0';

/** Tool search settings (`tools.search` in agentmesh.yaml). */
export interface ToolSearchDefaults {
  strategy?: ToolSearchStrategy;
  /** auto: native provider search where the capability table allows it, client-side otherwise. */
  mode?: 'auto' | 'native' | 'client';
  /** Results per search (default 10, at most 50). */
  limit?: number;
  /** Soft cap on the token footprint of promoted tools (chars / 4); the oldest promoted are evicted first. */
  budget_tokens?: number;
  /** List deferred tools by name in the system prompt. */
  include_stub_listing?: boolean;
}

/** What applies to runs that do not say otherwise. */
export interface PlannerDefaults {
  limits?: Partial<RunLimits>;
  tool_search?: ToolSearchStrategy | ToolSearchDefaults;
  system?: string;
  /** Names or globs deferred for every run (a run's own list adds to these). */
  deferred?: string[];
  /** Names or globs always loaded for every run (wins over deferred). */
  always?: string[];
  /** The message sent after a turn with neither a tool call nor an answer. */
  nudge?: string;
  loop_detect?: Partial<LoopThresholds>;
}

export interface PlannerOptions {
  bus: Bus;
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
}

export interface ExecuteOptions {
  signal?: AbortSignal;
  /** Every event of the run, in order, as it happens. */
  onEvent?: (event: RunEvent) => void;
}

export type RunResult = RunEventOf<'run.completed'> | RunEventOf<'run.failed'>;

interface ActiveRun {
  controller: AbortController;
  stop: { status: 'cancelled' | 'timeout'; reason: string } | undefined;
  cleanup: () => void;
}

/** What a durable run carries into {@link Planner.runValidated}: its lease, its checkpoints and where it resumes. */
interface DurableRun {
  lease: RunLease;
  writer: CheckpointWriter;
  /** The last checkpoint, when another planner ran this run before. */
  snapshot: RunSnapshot | undefined;
  /** The last seq published for the run (events continue after it). */
  lastSeq: number;
  earlier: RunEvent[];
}

interface RunOrigin {
  streamSeq?: number;
  durable?: DurableRun;
}

interface EventPublisher {
  publish: (e: RunEvent) => void;
  flush: () => Promise<void>;
  /** Drops what is queued and publishes nothing more. */
  close: () => void;
}

/**
 * The planner actor. It takes run requests (from the JetStream intake on NATS, from `runs.submit` on the in-process
 * bus, or directly through {@link Planner.execute}), drives the model, dispatches tool calls over the bus and
 * publishes every step as a run event.
 */
export class Planner {
  readonly id: string;
  readonly prefix: string;
  private readonly bus: Bus;
  private readonly subjects: Subjects;
  private readonly logger: Logger;
  private readonly providerSettings: ProviderSettings;
  private readonly clients: ProviderClients;

  /** models (issue 20): the model's price; a new run whose model has none gets a `run.warning`. */
  private priceOrWarn(choice: ProviderChoice, sink: RunEventSink, warn: boolean) {
    const price = this.prices.priceOf(choice.kind, choice.model);
    if (price === undefined && warn)
      sink.emit({
        type: 'run.warning',
        code: 'price_unknown',
        message: `no price is known for ${choice.kind} model ${choice.model}: the run's cost is not counted (add it under prices: in the configuration)`,
      });
    return price;
  }
  private readonly capabilities: CapabilityTable;
  private readonly prices: PriceTable;
  private readonly defaults: PlannerDefaults;
  private readonly maxConcurrentRuns: number;
  private readonly active = new Map<string, ActiveRun>();
  private readonly inflight = new Set<Promise<unknown>>();
  private readyPromise: Promise<void> | undefined;
  private records: KvStore | undefined;
  private checkpoints: KvStore | undefined;
  private transcripts: BlobStore | undefined;
  private readonly leaseMs: number;
  private readonly durable: boolean;
  private cancelSub: Subscription | undefined;
  private submitSub: Subscription | undefined;
  private service: ServiceHandle | undefined;
  private intake: Promise<void> | undefined;
  private currentFetch: ConsumerMessages | undefined;
  private stopping = false;
  private intakeSlots: Semaphore | undefined;
  /** Intake messages of the runs this planner is handling, by run id (a redelivery here replaces the handle). */
  private readonly intakeRuns = new Map<string, { msg: JsMsg }>();

  constructor(private readonly options: PlannerOptions) {
    this.bus = options.bus;
    this.prefix = options.prefix ?? DEFAULT_PREFIX;
    this.subjects = buildSubjects(this.prefix);
    this.id = options.plannerId ?? `planner-${hostname()}-${process.pid}-${randomUUID().slice(0, 6)}`;
    this.logger = (options.logger ?? silentLogger()).child({ planner_id: this.id });
    this.providerSettings = options.providers ?? {};
    this.clients = new ProviderClients(this.providerSettings);
    this.capabilities = new CapabilityTable(options.capabilities ?? []);
    this.prices = new PriceTable(options.prices ?? {});
    this.defaults = options.defaults ?? {};
    this.maxConcurrentRuns = options.maxConcurrentRuns ?? 256;
    this.leaseMs = Math.max(1_000, options.durability?.leaseMs ?? DEFAULT_LEASE_MS);
    this.durable = this.bus instanceof NatsBus && options.durability?.enabled !== false;
  }

  /** Throws `invalid_config` (saying how to fix it) when a run like `request` could not reach a model. */
  checkConfig(
    request: Partial<Pick<RunRequestInput, 'provider' | 'model' | 'base_url' | 'script'>> = {},
  ): ProviderChoice {
    return resolveProvider(request, this.providerSettings);
  }

  /** Runs currently executing in this planner. */
  get activeRuns(): number {
    return this.active.size;
  }

  private ready(): Promise<void> {
    this.readyPromise ??= (async () => {
      if (this.bus instanceof NatsBus) await ensureRunStreams(this.bus, this.prefix);
      this.records = await openRunRecords(this.bus, this.prefix);
      if (this.durable)
        this.checkpoints = await openCheckpoints(
          this.bus,
          this.prefix,
          this.options.durability?.checkpointTtlMs ?? DEFAULT_CHECKPOINT_TTL_MS,
        );
      if (this.options.transcripts !== false)
        this.transcripts = await openTranscriptStore(this.bus, this.prefix);
      this.cancelSub = this.bus.subscribe(this.subjects.allRunCancels, (msg) => this.onCancel(msg));
    })();
    return this.readyPromise;
  }

  /**
   * Starts taking runs: on NATS a durable consumer on the runs stream shared by every planner replica; on the
   * in-process bus a subscription on `runs.submit` (answered with `{ run_id }`). Also announces the service.
   */
  async start(): Promise<void> {
    await this.ready();
    this.stopping = false;
    this.service = await announceService(this.bus, {
      name: ServiceName.Planner,
      version: PLANNER_VERSION,
      description: 'agentmesh planner: runs agent loops',
      metadata: { planner_id: this.id },
    });
    this.intakeSlots = new Semaphore(this.maxConcurrentRuns);
    if (this.bus instanceof NatsBus) {
      const consumer = await this.intakeConsumer(this.bus);
      this.intake = this.intakeLoop(consumer);
    } else {
      this.submitSub = this.bus.subscribe(this.subjects.runsSubmit, (msg) => this.onMemorySubmit(msg));
    }
    this.logger.info({ prefix: this.prefix, bus: this.bus.kind }, 'planner started');
  }

  /** Stops taking runs, lets the runs in progress finish, then stops listening. */
  async drain(): Promise<void> {
    this.stopping = true;
    this.submitSub?.unsubscribe();
    this.currentFetch?.stop();
    await this.intake?.catch(() => undefined);
    while (this.inflight.size > 0) await Promise.allSettled([...this.inflight]);
    this.cancelSub?.unsubscribe();
    this.cancelSub = undefined;
    this.readyPromise = undefined;
    await this.service?.stop();
    this.logger.info('planner drained');
  }

  /** Cancels a run of this planner; false when it is not running here. */
  cancel(runId: string, reason = 'cancelled'): boolean {
    const run = this.active.get(runId);
    if (run === undefined) return false;
    run.stop ??= { status: 'cancelled', reason: `cancelled: ${reason}` };
    run.controller.abort(new AgentMeshError(ErrorCode.Cancelled, reason));
    return true;
  }

  /**
   * Runs one request to its end in this process and returns the final event. Events are published on
   * `runs.<id>.events` and handed to `onEvent` as they happen. An invalid request ends as `run.failed` with
   * `invalid_request`; a run id this planner fleet has seen already throws `conflict`.
   */
  async execute(request: RunRequestInput | unknown, options: ExecuteOptions = {}): Promise<RunResult> {
    await this.ready();
    const parsed = RunRequestSchema.safeParse(request);
    if (!parsed.success)
      return this.failInvalid(request, describeZodError(parsed.error), `run-${randomUUID()}`, options);
    return this.track(this.runValidated(parsed.data, parsed.data.id ?? `run-${randomUUID()}`, options, {}));
  }

  private track<T>(work: Promise<T>): Promise<T> {
    this.inflight.add(work);
    void work.finally(() => this.inflight.delete(work)).catch(() => undefined);
    return work;
  }

  /**
   * Publishes a run's events. On NATS each goes to JetStream with msg id `<run>:<seq>`, one at a time and in order,
   * retried until stored: the stream holds a gapless prefix of the run's events even across a server restart.
   */
  private eventPublisher(runId: string): EventPublisher {
    const subject = this.subjects.runEvents(runId);
    const bus = this.bus;
    if (!(bus instanceof NatsBus))
      return {
        publish: (e) => bus.publish(subject, encodeJson(e)),
        flush: async () => undefined,
        close: () => undefined,
      };
    const js = bus.jetstream();
    const queue: RunEvent[] = [];
    let pumping: Promise<void> | undefined;
    let closed = false;
    const publishOne = async (e: RunEvent) => {
      const data = encodeJson(e);
      for (let attempt = 1; !closed; attempt++) {
        try {
          await js.publish(subject, data, { msgID: `${runId}:${e.seq}`, timeout: 5_000 });
          return;
        } catch (error) {
          if (attempt === 1 || attempt % 10 === 0)
            this.logger.warn(
              { run_id: runId, seq: e.seq, attempt, err: (error as Error).message },
              'event publish failed; retrying',
            );
          if (attempt >= 120) {
            this.logger.error({ run_id: runId, seq: e.seq }, 'event not published: giving up');
            return;
          }
          await new Promise((r) => setTimeout(r, Math.min(1_000, 50 * 2 ** attempt)));
        }
      }
    };
    const pump = async () => {
      while (queue.length > 0 && !closed) {
        await publishOne(queue[0]!);
        queue.shift();
      }
    };
    const start = () => {
      pumping ??= pump().finally(() => {
        pumping = undefined;
        if (queue.length > 0 && !closed) start();
      });
    };
    return {
      publish: (e) => {
        if (closed) return;
        queue.push(e);
        start();
      },
      flush: async () => {
        while (pumping !== undefined) await pumping;
      },
      close: () => {
        closed = true;
        queue.length = 0;
      },
    };
  }

  private async failInvalid(
    raw: unknown,
    problems: string,
    fallbackId: string,
    options: ExecuteOptions,
  ): Promise<RunEventOf<'run.failed'>> {
    const rawId = raw !== null && typeof raw === 'object' ? (raw as { id?: unknown }).id : undefined;
    const runId = typeof rawId === 'string' && RUN_ID_PATTERN.test(rawId) ? rawId : fallbackId;
    const publisher = this.eventPublisher(runId);
    const sink = new RunEventSink(runId, publisher.publish, options.onEvent);
    const event = sink.emit({
      type: 'run.failed',
      error: {
        code: ErrorCode.InvalidRequest,
        message: `invalid run request: ${problems}`,
        retryable: false,
      },
    });
    await publisher.flush();
    this.logger.warn({ run_id: runId, problems }, 'invalid run request');
    return event;
  }

  private async claim(runId: string, origin: RunOrigin): Promise<void> {
    const record: RunRecord = {
      run_id: runId,
      planner_id: this.id,
      state: 'running',
      accepted_at: new Date().toISOString(),
      ...(origin.streamSeq === undefined ? {} : { stream_seq: origin.streamSeq }),
    };
    try {
      await this.records!.create(runId, encodeJson(record));
    } catch (error) {
      if (isAgentMeshError(error, ErrorCode.Conflict))
        throw new AgentMeshError(
          ErrorCode.Conflict,
          `run "${runId}" was already submitted; a run id is run once`,
          {
            retryable: false,
            details: { run_id: runId },
          },
        );
      throw error;
    }
  }

  private async runValidated(
    request: RunRequest,
    runId: string,
    options: ExecuteOptions,
    origin: RunOrigin,
  ): Promise<RunResult> {
    const durable = origin.durable;
    if (durable === undefined) await this.claim(runId, origin);
    const log = this.logger.child({ run_id: runId });
    const publisher = this.eventPublisher(runId);
    const sink = new RunEventSink(
      runId,
      publisher.publish,
      options.onEvent,
      durable?.lastSeq ?? 0,
      durable?.earlier,
    );
    const resumed = durable?.snapshot;
    const startedAt = resumed?.started_at ?? new Date().toISOString();
    let choice: ProviderChoice | undefined;
    let final: RunResult;
    let snapshot: RunSnapshot | undefined;
    try {
      try {
        choice = resolveProvider(request, this.providerSettings);
      } catch (error) {
        if (sink.lastSeq === 0)
          sink.emit({
            type: 'run.accepted',
            task: request.task,
            ...(request.identity ? { identity: request.identity } : {}),
          });
        const e = AgentMeshError.from(error);
        final = sink.emit({
          type: 'run.failed',
          error: { code: e.code, message: e.message, retryable: false },
        });
        return final;
      }
      if (sink.lastSeq === 0)
        sink.emit({
          type: 'run.accepted',
          task: request.task,
          provider: choice.kind,
          model: choice.model,
          ...(request.identity ? { identity: request.identity } : {}),
        });
      const isResume = (durable?.lastSeq ?? 0) > 0 || resumed !== undefined;
      sink.emit({ type: 'run.started', planner_id: this.id, ...(isResume ? { resumed: true } : {}) });
      const timeoutMs = this.limits(request).timeout_ms;
      const remainingMs = Math.max(1, timeoutMs - (Date.now() - Date.parse(startedAt)));
      const run = this.startClock(runId, request, options.signal, remainingMs);
      if (durable) {
        durable.lease.onLost((why) => {
          sink.fence();
          publisher.close();
          run.controller.abort(leaseLostError(runId, why));
        });
        durable.lease.onCancelRequested((reason) => this.cancel(runId, reason));
      }
      try {
        snapshot = resumed ?? this.initialSnapshot(request, runId, choice, startedAt);
        snapshot.planner_id = this.id;
        const caps = this.capabilities.resolve(choice.kind, choice.model);
        // models (issue 20): the run's tool protocol (request / models: entry, then the capability table)
        const toolProtocol = choice.toolProtocol ?? caps.tool_protocol;
        const provider = this.clients.create(choice, { toolProtocol });
        const scope = this.scope(request);
        let specs: ToolSpec[];
        try {
          specs = await loadRunTools(
            this.bus,
            this.subjects,
            scope,
            run.controller.signal,
            this.options.catalogRetryMs,
          );
        } catch (error) {
          if (!run.controller.signal.aborted) throw error;
          specs = [];
        }
        if (!caps.native_tools && toolProtocol !== 'text' && specs.length > 0) {
          sink.emit({
            type: 'run.notice',
            kind: 'no_native_tools',
            message: `the capability table says ${choice.kind} model ${choice.model} has no native tool calls: no tools are offered`,
          });
          specs = [];
        }
        const loop = new RunLoop(snapshot, specs, {
          bus: this.bus,
          ...(this.options.catalogRetryMs === undefined
            ? {}
            : { catalogRetryMs: this.options.catalogRetryMs }),
          prefix: this.prefix,
          subjects: this.subjects,
          plannerId: this.id,
          logger: log,
          provider,
          capabilities: caps,
          prices: this.prices,
          price: this.priceOrWarn(choice, sink, resumed === undefined), // models (issue 20)
          sink,
          signal: run.controller.signal,
          stopReason: () => run.stop,
          searchLimit: this.searchDefaults().limit ?? 10,
          loopThresholds: { ...DEFAULT_LOOP_THRESHOLDS, ...this.defaults.loop_detect },
          nudge: this.defaults.nudge ?? DEFAULT_NUDGE,
          checkpoint: this.checkpointHook(durable, publisher, this.options.checkpoint),
          resultCheckpoint: durable ? this.checkpointHook(durable, publisher, undefined) : undefined,
          scope,
        });
        if (resumed === undefined)
          snapshot.system = buildSystemPrompt({
            system: request.system ?? this.defaults.system,
            toolSearch: snapshot.search.mode === 'client' && loop.toolExposure.hasDeferred,
            ...(this.searchDefaults().include_stub_listing && snapshot.search.mode === 'client'
              ? { stubs: loop.toolExposure.stubs() }
              : {}),
          });
        else
          log.info(
            { phase: snapshot.phase, iteration: snapshot.iteration, seq: sink.lastSeq },
            'run resumed',
          );
        final = await loop.run();
      } catch (error) {
        const e = toErrorPayload(error);
        log.warn({ code: e.code, err: e.message }, 'run failed before its loop');
        sink.emit({ type: 'run.notice', kind: 'error', message: e.message, details: { code: e.code } });
        const stop = run.stop;
        final = sink.emit({
          type: 'run.completed',
          status: stop?.status ?? 'failed',
          reason: stop?.reason ?? `${e.code}: ${e.message}`,
          text: '',
          iterations: snapshot?.iteration ?? 0,
          tool_calls: snapshot?.tool_calls ?? 0,
          usage: snapshot?.usage ?? { input_tokens: 0, output_tokens: 0 },
        });
      } finally {
        this.stopClock(runId);
      }
      return final;
    } finally {
      if (durable?.lease.lost === true) log.info('run handed to another planner: not finalized here');
      else
        await this.finalize(runId, request, choice, snapshot, sink, startedAt, publisher.flush, log, durable);
    }
  }

  /** The loop's checkpoint hook: events flushed first, then the durable checkpoint, then the user's hook. */
  private checkpointHook(
    durable: DurableRun | undefined,
    publisher: EventPublisher,
    user: CheckpointHook | undefined,
  ): CheckpointHook | undefined {
    if (durable === undefined) return user;
    return async (snap) => {
      durable.lease.assertOwned();
      await publisher.flush();
      durable.lease.assertOwned();
      await durable.writer.write(snap);
      if (user) await user(snap);
    };
  }

  private async finalize(
    runId: string,
    request: RunRequest,
    choice: ProviderChoice | undefined,
    snapshot: RunSnapshot | undefined,
    sink: RunEventSink,
    startedAt: string,
    flush: () => Promise<void>,
    log: Logger,
    durable: DurableRun | undefined,
  ): Promise<void> {
    const last = sink.events[sink.events.length - 1];
    const status = last?.type === 'run.completed' ? last.status : 'failed';
    const endedAt = new Date().toISOString();
    const chores: Promise<unknown>[] = [flush()];
    if (this.transcripts)
      chores.push(
        saveTranscript(this.transcripts, {
          version: 1,
          run_id: runId,
          planner_id: this.id,
          request,
          provider: choice?.kind,
          model: choice?.model,
          system: snapshot?.system,
          status,
          reason:
            last?.type === 'run.completed'
              ? last.reason
              : last?.type === 'run.failed'
                ? last.error.message
                : undefined,
          started_at: startedAt,
          ended_at: endedAt,
          messages: snapshot?.messages ?? [],
          events: sink.events,
        }).catch((error: unknown) => log.warn({ err: (error as Error).message }, 'transcript not saved')),
      );
    await Promise.all(chores);
    if (durable) {
      await durable.lease
        .finish({ status, finished_at: endedAt })
        .catch((error: unknown) => log.warn({ err: (error as Error).message }, 'run record not updated'));
      await durable.writer.clear(runId);
    } else if (this.records) {
      const record: RunRecord = {
        run_id: runId,
        planner_id: this.id,
        state: 'finished',
        accepted_at: startedAt,
        finished_at: endedAt,
        status,
        task: request.task.slice(0, 200),
      };
      await this.records
        .put(runId, encodeJson(record))
        .catch((error: unknown) => log.warn({ err: (error as Error).message }, 'run record not updated'));
    }
    log.debug({ status }, 'run finished');
  }

  private startClock(
    runId: string,
    request: RunRequest,
    external: AbortSignal | undefined,
    remainingMs?: number,
  ): ActiveRun {
    const run: ActiveRun = { controller: new AbortController(), stop: undefined, cleanup: () => undefined };
    const timeoutMs = this.limits(request).timeout_ms;
    const waitMs = remainingMs ?? timeoutMs;
    const timer = setTimeout(() => {
      run.stop ??= { status: 'timeout', reason: `timeout_ms (${timeoutMs}) elapsed` };
      run.controller.abort(new AgentMeshError(ErrorCode.Timeout, `run timed out after ${timeoutMs} ms`));
    }, waitMs);
    timer.unref?.();
    const onExternal = () => {
      const reason =
        external?.reason instanceof Error ? external.reason.message : String(external?.reason ?? 'aborted');
      run.stop ??= { status: 'cancelled', reason: `cancelled: ${reason}` };
      run.controller.abort(external?.reason);
    };
    if (external?.aborted) onExternal();
    else external?.addEventListener('abort', onExternal, { once: true });
    run.cleanup = () => {
      clearTimeout(timer);
      external?.removeEventListener('abort', onExternal);
    };
    this.active.set(runId, run);
    return run;
  }

  private stopClock(runId: string): void {
    this.active.get(runId)?.cleanup();
    this.active.delete(runId);
  }

  private limits(request: RunRequest): RunLimits {
    return RunLimitsSchema.parse({ ...this.defaults.limits, ...request.limits });
  }

  private searchDefaults(): ToolSearchDefaults {
    const d = this.defaults.tool_search;
    return typeof d === 'string' ? { strategy: d } : (d ?? {});
  }

  private scope(request: RunRequest): { allow?: string[]; deferred?: string[]; always?: string[] } {
    const deferred = [...(this.defaults.deferred ?? []), ...(request.deferred ?? [])];
    const always = [...(this.defaults.always ?? []), ...(request.always ?? [])];
    return {
      ...(request.tools ? { allow: request.tools } : {}),
      ...(deferred.length > 0 ? { deferred } : {}),
      ...(always.length > 0 ? { always } : {}),
    };
  }

  private initialSnapshot(
    request: RunRequest,
    runId: string,
    choice: ProviderChoice,
    startedAt: string,
  ): RunSnapshot {
    const search = this.searchDefaults();
    const strategy = request.tool_search ?? search.strategy ?? 'bm25';
    const caps = this.capabilities.resolve(choice.kind, choice.model);
    let mode: SearchMode = strategy === 'off' ? 'off' : 'client';
    let variant: NativeSearchVariant | undefined;
    // models (issue 20): a model on the text tool protocol searches client-side (nothing goes on the wire)
    const textProtocol = (choice.toolProtocol ?? caps.tool_protocol) === 'text';
    if (strategy !== 'off' && search.mode !== 'client' && caps.tool_search.length > 0 && !textProtocol) {
      if ((strategy === 'bm25' || strategy === 'regex') && caps.tool_search.includes(strategy))
        variant = strategy;
      // models (issue 20): a hosted search (OpenAI Responses) is the model's own; it needs no strategy match
      else if (search.mode === 'native' || caps.tool_search[0] === 'hosted') variant = caps.tool_search[0];
      if (variant !== undefined) mode = 'native';
    }
    return {
      version: 1,
      run_id: runId,
      planner_id: this.id,
      request,
      provider: { kind: choice.kind, model: choice.model },
      limits: this.limits(request),
      search: { mode, strategy, native_variant: variant, budget_tokens: search.budget_tokens },
      system: '',
      iteration: 0,
      tool_calls: 0,
      nudges: 0,
      usage: { input_tokens: 0, output_tokens: 0 },
      last_text: '',
      messages: [{ role: 'user', content: request.task }],
      exposure: { promoted: [], pending: [], surfaced: [], artifacts: false },
      loop: { signature: undefined, count: 0 },
      succeeded: [],
      seq: 0,
      started_at: startedAt,
      phase: 'model',
    };
  }

  private onCancel(msg: BusMessage): void {
    const head = `${this.prefix}.runs.`;
    if (!msg.subject.startsWith(head) || !msg.subject.endsWith('.cancel')) return;
    const runId = msg.subject.slice(head.length, -'.cancel'.length);
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
  }

  private onMemorySubmit(msg: BusMessage): void {
    if (this.stopping) return;
    const refuse = (raw: unknown, problem: string) => {
      respondError(
        this.bus,
        msg,
        new AgentMeshError(ErrorCode.InvalidRequest, `invalid run request: ${problem}`),
      );
      void this.track(this.failInvalid(raw, problem, `run-${randomUUID()}`, {}));
    };
    let raw: unknown;
    try {
      raw = JSON.parse(msg.text());
    } catch (error) {
      refuse(undefined, `not valid JSON: ${(error as Error).message}`);
      return;
    }
    const parsed = RunRequestSchema.safeParse(raw);
    if (!parsed.success) {
      refuse(raw, describeZodError(parsed.error));
      return;
    }
    const runId = parsed.data.id ?? `run-${randomUUID()}`;
    if (msg.reply !== undefined) respondJson(this.bus, msg, { run_id: runId });
    void this.track(
      (async () => {
        const release = await this.intakeSlots!.acquire();
        try {
          await this.runValidated(parsed.data, runId, {}, {});
        } catch (error) {
          this.logger.warn({ run_id: runId, err: (error as Error).message }, 'run not started');
        } finally {
          release();
        }
      })(),
    );
  }

  private async intakeConsumer(bus: NatsBus): Promise<Consumer> {
    const names = await ensureRunStreams(bus, this.prefix);
    const jsm = await bus.jetstreamManager();
    const durable = ServiceName.Planner;
    const config = {
      durable_name: durable,
      ack_policy: AckPolicy.Explicit,
      deliver_policy: DeliverPolicy.All,
      ack_wait: this.leaseMs * 1_000_000,
      max_ack_pending: -1,
      filter_subject: this.subjects.runsSubmit,
    };
    try {
      await jsm.consumers.add(names.runs, config);
    } catch (error) {
      const info = await jsm.consumers.info(names.runs, durable).catch(() => {
        throw error;
      });
      if (info.config.ack_wait !== config.ack_wait)
        await jsm.consumers
          .update(names.runs, durable, { ack_wait: config.ack_wait })
          .catch((e: unknown) =>
            this.logger.warn({ err: (e as Error).message }, 'could not update the intake ack_wait'),
          );
    }
    return bus.jetstream().consumers.get(names.runs, durable);
  }

  private async intakeLoop(consumer: Consumer): Promise<void> {
    const slots = this.intakeSlots!;
    while (!this.stopping) {
      const release = await slots.acquire();
      if (this.stopping) {
        release();
        break;
      }
      let handed = false;
      try {
        const batch = await consumer.fetch({ max_messages: 1, expires: 2_000 });
        this.currentFetch = batch;
        for await (const m of batch) {
          handed = true;
          void this.track(this.takeMessage(m).finally(release));
        }
      } catch (error) {
        if (!this.stopping) {
          this.logger.warn({ err: (error as Error).message }, 'run intake fetch failed; retrying');
          await new Promise((r) => setTimeout(r, 500));
        }
      } finally {
        this.currentFetch = undefined;
        if (!handed) release();
      }
    }
  }

  private async takeMessage(m: JsMsg): Promise<void> {
    const seq = m.info.streamSequence;
    const fallbackId = `run-seq-${seq}`;
    const holder = { msg: m };
    let settle: { kind: 'ack' } | { kind: 'nak'; delayMs: number } | { kind: 'leave' } = { kind: 'ack' };
    let ownRunId: string | undefined;
    const heartbeat = setInterval(() => holder.msg.working(), Math.max(250, Math.floor(this.leaseMs / 3)));
    try {
      let raw: unknown;
      let problems: string | undefined;
      try {
        raw = JSON.parse(m.string());
      } catch (error) {
        problems = `not valid JSON: ${(error as Error).message}`;
      }
      const parsed = problems === undefined ? RunRequestSchema.safeParse(raw) : undefined;
      if (parsed === undefined || !parsed.success) {
        const text = problems ?? describeZodError(parsed!.error);
        const rawId = raw !== null && typeof raw === 'object' ? (raw as { id?: unknown }).id : undefined;
        const runId = typeof rawId === 'string' && RUN_ID_PATTERN.test(rawId) ? rawId : fallbackId;
        try {
          await this.claim(runId, { streamSeq: seq });
        } catch {
          return;
        }
        await this.failInvalid(raw, text, fallbackId, {});
        await this.records!.put(
          runId,
          encodeJson({
            run_id: runId,
            planner_id: this.id,
            state: 'finished',
            accepted_at: new Date().toISOString(),
            status: 'invalid_request',
          }),
        ).catch(() => undefined);
        return;
      }
      const request = withEnvelopeIdentity(parsed.data, m.headers);
      const runId = request.id ?? fallbackId;
      const handling = this.intakeRuns.get(runId);
      if (handling !== undefined) {
        handling.msg = m;
        settle = { kind: 'leave' };
        return;
      }
      ownRunId = runId;
      this.intakeRuns.set(runId, holder);
      if (!this.durable) {
        try {
          await this.runValidated(request, runId, {}, { streamSeq: seq });
        } catch (error) {
          if (isAgentMeshError(error, ErrorCode.Conflict))
            this.logger.info({ run_id: runId }, 'duplicate run id: not run again');
          else this.logger.error({ run_id: runId, err: (error as Error).message }, 'run could not start');
        }
        return;
      }
      settle = await this.takeDurable(request, runId, seq);
    } finally {
      clearInterval(heartbeat);
      if (ownRunId !== undefined) this.intakeRuns.delete(ownRunId);
      if (settle.kind === 'ack') await holder.msg.ackAck().catch(() => holder.msg.ack());
      else if (settle.kind === 'nak') holder.msg.nak(settle.delayMs);
    }
  }

  /**
   * Takes a run from the intake with a lease: runs it, resumes it from its checkpoint when another planner had it, or
   * leaves it (a finished run is acked, a run another live planner owns is redelivered later).
   */
  private async takeDurable(
    request: RunRequest,
    runId: string,
    streamSeq: number,
  ): Promise<{ kind: 'ack' } | { kind: 'nak'; delayMs: number } | { kind: 'leave' }> {
    const log = this.logger.child({ run_id: runId });
    let claim: LeaseClaim;
    try {
      claim = await RunLease.acquire(
        this.records!,
        {
          run_id: runId,
          accepted_at: new Date().toISOString(),
          stream_seq: streamSeq,
          task: request.task.slice(0, 200),
        },
        this.id,
        this.leaseMs,
        log,
      );
    } catch (error) {
      log.warn({ err: (error as Error).message }, 'run record unavailable; the run is redelivered later');
      return { kind: 'nak', delayMs: 1_000 };
    }
    if (claim.kind === 'finished') {
      log.info({ status: claim.record.status }, 'run already finished: not run again');
      return { kind: 'ack' };
    }
    if (claim.kind === 'held') {
      log.debug(
        { owner: claim.record.planner_id, retry_in_ms: claim.retryInMs },
        'run owned by a live planner',
      );
      return { kind: 'nak', delayMs: claim.retryInMs };
    }
    const lease = claim.lease;
    try {
      let snapshot: RunSnapshot | undefined;
      let revision: number | undefined;
      let lastSeq = 0;
      let earlier: RunEvent[] = [];
      if (claim.previous !== undefined) {
        const last = await lastStoredEvent(this.bus, runId, this.prefix);
        if (last !== undefined && TERMINAL_EVENT_TYPES.has(last.type)) {
          const status = last.type === 'run.completed' ? last.status : 'failed';
          log.info({ status }, 'run had ended before its planner stopped: marked finished, not run again');
          await lease.finish({ status, finished_at: last.ts });
          await this.checkpoints!.delete(runId).catch(() => undefined);
          return { kind: 'ack' };
        }
        const stored = await readCheckpoint(this.checkpoints!, runId);
        snapshot = stored?.checkpoint.snapshot;
        revision = stored?.revision;
        lastSeq = Math.max(last?.seq ?? 0, snapshot?.seq ?? 0);
        if (last !== undefined)
          earlier = await readRunEvents(this.bus, runId, { prefix: this.prefix }).catch((error: unknown) => {
            log.warn(
              { err: (error as Error).message },
              'earlier events not read: the transcript starts at the takeover',
            );
            return [];
          });
        log.info(
          {
            previous_owner: claim.previous.planner_id,
            epoch: lease.epoch,
            checkpoint: snapshot !== undefined,
            seq: lastSeq,
          },
          'taking over a run whose planner stopped',
        );
      }
      const writer = new CheckpointWriter(this.checkpoints!, lease, revision, log);
      lease.start();
      await this.runValidated(
        request,
        runId,
        {},
        { streamSeq, durable: { lease, writer, snapshot, lastSeq, earlier } },
      );
      return lease.lost ? { kind: 'leave' } : { kind: 'ack' };
    } catch (error) {
      log.error({ err: (error as Error).message }, 'run could not be taken; redelivered later');
      lease.stop();
      return { kind: 'leave' };
    }
  }
}

/**
 * A run request without `identity` takes the identity of its envelope headers (`am-tenant`, `am-user`,
 * `am-session`), so clients that put identity in headers are scoped the same way.
 */
function withEnvelopeIdentity(
  request: RunRequest,
  headers: { keys(): string[]; get(key: string): string } | undefined,
): RunRequest {
  if (request.identity !== undefined || headers === undefined) return request;
  const record: Record<string, string> = {};
  for (const key of headers.keys()) record[key] = headers.get(key);
  const identity = envelopeFromHeaders(record)?.identity;
  return identity === undefined ? request : { ...request, identity };
}
