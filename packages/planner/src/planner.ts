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
  type RunRequestInput,
  type ServiceHandle,
  type Subjects,
  type Subscription,
  type ToolSearchStrategy,
  type ToolSpec,
} from '@agentmesh/protocol';
import { CapabilityTable, type CapabilityRule } from './capabilities.js';
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
  /** Store each run's transcript in the transcripts object store (default true). */
  transcripts?: boolean;
  /** Called with the run snapshot after every model turn and tool batch (checkpointing). */
  checkpoint?: CheckpointHook;
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

interface RunOrigin {
  streamSeq?: number;
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
  private readonly capabilities: CapabilityTable;
  private readonly prices: PriceTable;
  private readonly defaults: PlannerDefaults;
  private readonly maxConcurrentRuns: number;
  private readonly active = new Map<string, ActiveRun>();
  private readonly inflight = new Set<Promise<unknown>>();
  private readyPromise: Promise<void> | undefined;
  private records: KvStore | undefined;
  private transcripts: BlobStore | undefined;
  private cancelSub: Subscription | undefined;
  private submitSub: Subscription | undefined;
  private service: ServiceHandle | undefined;
  private intake: Promise<void> | undefined;
  private currentFetch: ConsumerMessages | undefined;
  private stopping = false;
  private intakeSlots: Semaphore | undefined;

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

  private eventPublisher(runId: string): { publish: (e: RunEvent) => void; flush: () => Promise<void> } {
    const subject = this.subjects.runEvents(runId);
    const bus = this.bus;
    if (!(bus instanceof NatsBus))
      return { publish: (e) => bus.publish(subject, encodeJson(e)), flush: async () => undefined };
    const js = bus.jetstream();
    const pending = new Set<Promise<unknown>>();
    return {
      publish: (e) => {
        const p = js
          .publish(subject, encodeJson(e), { msgID: `${runId}:${e.seq}` })
          .catch((error: unknown) =>
            this.logger.warn(
              { run_id: runId, seq: e.seq, err: (error as Error).message },
              'event publish failed',
            ),
          );
        pending.add(p);
        void p.finally(() => pending.delete(p));
      },
      flush: async () => {
        while (pending.size > 0) await Promise.allSettled([...pending]);
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
    await this.claim(runId, origin);
    const log = this.logger.child({ run_id: runId });
    const publisher = this.eventPublisher(runId);
    const sink = new RunEventSink(runId, publisher.publish, options.onEvent);
    const startedAt = new Date().toISOString();
    let choice: ProviderChoice | undefined;
    let final: RunResult;
    let snapshot: RunSnapshot | undefined;
    try {
      try {
        choice = resolveProvider(request, this.providerSettings);
      } catch (error) {
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
      sink.emit({
        type: 'run.accepted',
        task: request.task,
        provider: choice.kind,
        model: choice.model,
        ...(request.identity ? { identity: request.identity } : {}),
      });
      sink.emit({ type: 'run.started', planner_id: this.id });
      const run = this.startClock(runId, request, options.signal);
      try {
        snapshot = this.initialSnapshot(request, runId, choice, startedAt);
        const provider = this.clients.create(choice);
        const caps = this.capabilities.resolve(choice.kind, choice.model);
        const scope = this.scope(request);
        let specs: ToolSpec[];
        try {
          specs = await loadRunTools(this.bus, this.subjects, scope, run.controller.signal);
        } catch (error) {
          if (!run.controller.signal.aborted) throw error;
          specs = [];
        }
        if (!caps.native_tools && specs.length > 0) {
          sink.emit({
            type: 'run.notice',
            kind: 'no_native_tools',
            message: `the capability table says ${choice.kind} model ${choice.model} has no native tool calls: no tools are offered`,
          });
          specs = [];
        }
        const loop = new RunLoop(snapshot, specs, {
          bus: this.bus,
          prefix: this.prefix,
          subjects: this.subjects,
          plannerId: this.id,
          logger: log,
          provider,
          capabilities: caps,
          prices: this.prices,
          price: this.prices.priceOf(choice.kind, choice.model),
          sink,
          signal: run.controller.signal,
          stopReason: () => run.stop,
          searchLimit: this.searchDefaults().limit ?? 10,
          loopThresholds: { ...DEFAULT_LOOP_THRESHOLDS, ...this.defaults.loop_detect },
          nudge: this.defaults.nudge ?? DEFAULT_NUDGE,
          checkpoint: this.options.checkpoint,
          scope,
        });
        snapshot.system = buildSystemPrompt({
          system: request.system ?? this.defaults.system,
          toolSearch: snapshot.search.mode === 'client' && loop.toolExposure.hasDeferred,
          ...(this.searchDefaults().include_stub_listing && snapshot.search.mode === 'client'
            ? { stubs: loop.toolExposure.stubs() }
            : {}),
        });
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
      await this.finalize(runId, request, choice, snapshot, sink, startedAt, publisher.flush, log);
    }
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
    if (this.records) {
      const record: RunRecord = {
        run_id: runId,
        planner_id: this.id,
        state: 'finished',
        accepted_at: startedAt,
        finished_at: endedAt,
        status,
      };
      chores.push(
        this.records
          .put(runId, encodeJson(record))
          .catch((error: unknown) => log.warn({ err: (error as Error).message }, 'run record not updated')),
      );
    }
    await Promise.all(chores);
    log.debug({ status }, 'run finished');
  }

  private startClock(runId: string, request: RunRequest, external: AbortSignal | undefined): ActiveRun {
    const run: ActiveRun = { controller: new AbortController(), stop: undefined, cleanup: () => undefined };
    const timeoutMs = this.limits(request).timeout_ms;
    const timer = setTimeout(() => {
      run.stop ??= { status: 'timeout', reason: `timeout_ms (${timeoutMs}) elapsed` };
      run.controller.abort(new AgentMeshError(ErrorCode.Timeout, `run timed out after ${timeoutMs} ms`));
    }, timeoutMs);
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
    if (strategy !== 'off' && search.mode !== 'client' && caps.tool_search.length > 0) {
      if ((strategy === 'bm25' || strategy === 'regex') && caps.tool_search.includes(strategy))
        variant = strategy;
      else if (search.mode === 'native') variant = caps.tool_search[0];
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
    let raw: unknown;
    try {
      raw = JSON.parse(msg.text());
    } catch (error) {
      raw = undefined;
      const problem = `not valid JSON: ${(error as Error).message}`;
      respondError(
        this.bus,
        msg,
        new AgentMeshError(ErrorCode.InvalidRequest, `invalid run request: ${problem}`),
      );
      void this.track(this.failInvalid(raw, problem, `run-${randomUUID()}`, {}));
      return;
    }
    const parsed = RunRequestSchema.safeParse(raw);
    if (!parsed.success) {
      const problems = describeZodError(parsed.error);
      respondError(
        this.bus,
        msg,
        new AgentMeshError(ErrorCode.InvalidRequest, `invalid run request: ${problems}`),
      );
      void this.track(this.failInvalid(raw, problems, `run-${randomUUID()}`, {}));
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
      ack_wait: 30_000_000_000,
      max_ack_pending: -1,
      filter_subject: this.subjects.runsSubmit,
    };
    try {
      await jsm.consumers.add(names.runs, config);
    } catch (error) {
      await jsm.consumers.info(names.runs, durable).catch(() => {
        throw error;
      });
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
    const heartbeat = setInterval(() => m.working(), 10_000);
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
      const runId = parsed.data.id ?? fallbackId;
      try {
        await this.runValidated(parsed.data, runId, {}, { streamSeq: seq });
      } catch (error) {
        if (isAgentMeshError(error, ErrorCode.Conflict))
          this.logger.info({ run_id: runId }, 'duplicate run id: not run again');
        else this.logger.error({ run_id: runId, err: (error as Error).message }, 'run could not start');
      }
    } finally {
      clearInterval(heartbeat);
      await m.ackAck().catch(() => m.ack());
    }
  }
}
