import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import { performance } from 'node:perf_hooks';
import {
  ARTIFACTS_BUCKET,
  AgentMeshError,
  ArtifactFetchSchema,
  CatalogHeartbeatReplySchema,
  CatalogRegisterReplySchema,
  ErrorCode,
  ServiceName,
  createLogger,
  encodeJson,
  parseJson,
  parseToolInvocation,
  requestJson,
  respondError,
  respondJson,
  serve,
  SlotTable,
  subjects as buildSubjects,
  toErrorPayload,
  toolQueueGroup,
  type BlobStore,
  type Backend,
  type BusMessage,
  type CatalogRegisterReply,
  type ErrorPayload,
  type Logger,
  type ServiceHandle,
  type Subjects,
  type Subscription,
  type ToolInvocation,
  type ToolInvocationInput,
  type ToolOutcome,
  type ToolSpec,
  sleep,
} from '@agentmesh/protocol';
import { ARTIFACT_FETCH_MAX_BYTES, TenantArtifacts, type ArtifactStore } from './artifacts.js';
import { AbortScope, ProgressHub, type CallProgress } from './call-scope.js';
import { CpuPool } from './cpu-pool.js';
import { Deadlines, type Deadline } from './deadlines.js';
import type { Tool, ToolContext } from './define-tool.js';
import { byteLength, capForModel, outputText } from './format.js';
import {
  OutcomeCache,
  SharedOutcomes,
  type CacheEntry,
  type OutcomeCacheOptions,
  type SharedEntry,
  type SharedOutcomeOptions,
} from './outcome-cache.js';
import { backoffDelay, classifyFailure } from './policy.js';

export const DEFAULT_WORKER_CONCURRENCY = 64;
export const DEFAULT_ARTIFACT_THRESHOLD_BYTES = 32 * 1024;
export const DEFAULT_MAX_OUTPUT_BYTES = 64 * 1024;
const KNOWN_CODES: ReadonlySet<string> = new Set(Object.values(ErrorCode));
const CANCELLED_RUNS_KEPT = 1024;
const CANCELLED_RUN_TTL_MS = 10 * 60_000;

function cancelledError(runId: string, reason: string | undefined): AgentMeshError {
  return new AgentMeshError(
    ErrorCode.Cancelled,
    `the call was cancelled with its run ${runId}${reason ? `: ${reason}` : ''}`,
    {
      retryable: false,
      details: { run_id: runId },
    },
  );
}

export interface ToolWorkerOptions {
  bus: Backend;
  tools: Tool<any, any>[];
  /** Subject prefix (default `agentmesh`). */
  prefix?: string;
  /** Unique per process; default `<host>-<pid>-<random>`. */
  workerId?: string;
  /** Calls in flight at once; beyond it the worker answers `busy` at once (default 64). */
  concurrency?: number;
  /** piscina threads for CPU-bound tools (default: available parallelism). */
  threads?: number;
  /**
   * CPU calls accepted beyond busy threads (default: the thread count); past it CPU calls are answered `busy` so
   * other replicas take them.
   */
  cpuQueueDepth?: number;
  logger?: Logger;
  /** Catalog heartbeat interval (default 5000 ms); the registration TTL is three times this. */
  heartbeatMs?: number;
  /** Interval of `heartbeat` progress notices while a call runs (default 1000 ms). */
  progressHeartbeatMs?: number;
  /** Outputs larger than this go to the artifact store (default 32 KiB). */
  artifactThresholdBytes?: number;
  /** Size of the preview that stands in for an artifact (default 4 KiB). */
  previewBytes?: number;
  /** Cap of what reaches a model when the invocation does not set `max_output_bytes` (default 64 KiB). */
  maxOutputBytes?: number;
  /** Replay cache of the outcomes of non-idempotent tools by idempotency key (idempotent tools simply run). */
  outcomeCache?: OutcomeCacheOptions;
  /**
   * The outcome store shared by all replicas (KV bucket `<prefix>_tool_outcomes`): a non-idempotent call runs at most
   * once per idempotency key across the fleet within its TTL. `false` keeps only the per-process cache.
   */
  sharedOutcomes?: SharedOutcomeOptions | false;
  /** Register with the catalog (default true). */
  register?: boolean;
}

type State = 'new' | 'starting' | 'running' | 'draining' | 'stopped';

/**
 * The tool-worker actor. Serves each of its tools on `<prefix>.tool.invoke.<name>` in the tool's queue group, so
 * replicas share calls; validates arguments and outputs, applies each tool's retry policy, bounds its calls in flight,
 * runs CPU-bound tools on piscina threads, moves heavy outputs to the artifact store, serves `artifact_fetch`, aborts a
 * run's calls on its cancel subject, registers and heartbeats with the catalog, and drains on demand.
 */
export class ToolWorker {
  readonly workerId: string;
  private readonly bus: Backend;
  private readonly subjects: Subjects;
  private readonly tools = new Map<string, Tool<any, any>>();
  private readonly logger: Logger;
  private readonly concurrency: number;
  private readonly progressHeartbeatMs: number;
  private readonly heartbeatMs: number;
  private readonly artifactThreshold: number;
  private readonly previewBytes: number;
  private readonly maxOutputBytes: number;
  private readonly cache: OutcomeCache;
  private shared: SharedOutcomes | undefined;
  private readonly sharedOptions: SharedOutcomeOptions | false | undefined;
  private readonly progress: ProgressHub;
  private readonly deadlines = new Deadlines();
  /** The calls running now; a run's cancel finds its own among them (they are at most `concurrency`). */
  private readonly runningCalls = new SlotTable<RunCallScope>();
  /** Runs cancelled lately, so that a call crossing its run's cancel on the wire is not started. */
  private readonly cancelledRuns = new Map<string, { reason: string | undefined; at: number }>();
  private readonly lifecycle = new AbortController();
  private readonly threads: number | undefined;
  private readonly cpuQueueDepth: number | undefined;
  private readonly shouldRegister: boolean;
  private state: State = 'new';
  private inFlightCalls = 0;
  private toolSubs: Subscription[] = [];
  private otherSubs: Subscription[] = [];
  private pool: CpuPool | undefined;
  private blobs: BlobStore | undefined;
  private service: ServiceHandle | undefined;
  private heartbeatTimer: NodeJS.Timeout | undefined;
  private registering: Promise<void> | undefined;
  private registered = false;
  private drained: Promise<void> | undefined;
  private firstRegistration: {
    promise: Promise<CatalogRegisterReply>;
    resolve: (r: CatalogRegisterReply) => void;
  };

  constructor(options: ToolWorkerOptions) {
    this.bus = options.bus;
    this.subjects = buildSubjects(options.prefix);
    this.workerId = options.workerId ?? `${hostname()}-${process.pid}-${randomBytes(3).toString('hex')}`;
    this.logger = (options.logger ?? createLogger('agentmesh-tool-worker')).child({
      worker_id: this.workerId,
    });
    this.concurrency = Math.max(1, options.concurrency ?? DEFAULT_WORKER_CONCURRENCY);
    this.progressHeartbeatMs = Math.max(10, options.progressHeartbeatMs ?? 1000);
    this.heartbeatMs = Math.max(50, options.heartbeatMs ?? 5000);
    this.artifactThreshold = Math.max(
      256,
      options.artifactThresholdBytes ?? DEFAULT_ARTIFACT_THRESHOLD_BYTES,
    );
    this.previewBytes = Math.max(64, options.previewBytes ?? 4096);
    this.maxOutputBytes = Math.max(256, options.maxOutputBytes ?? DEFAULT_MAX_OUTPUT_BYTES);
    this.cache = new OutcomeCache(options.outcomeCache);
    this.sharedOptions = options.sharedOutcomes;
    this.progress = new ProgressHub(this.bus, this.workerId, this.progressHeartbeatMs, this.logger);
    this.threads = options.threads;
    this.cpuQueueDepth = options.cpuQueueDepth;
    this.shouldRegister = options.register ?? true;
    for (const tool of options.tools) {
      if (this.tools.has(tool.name))
        throw new AgentMeshError(
          ErrorCode.Conflict,
          `tool "${tool.name}" is given twice to one worker: names must be unique`,
          {
            retryable: false,
            details: { name: tool.name },
          },
        );
      this.tools.set(tool.name, tool);
    }
    let resolve!: (r: CatalogRegisterReply) => void;
    const promise = new Promise<CatalogRegisterReply>((r) => (resolve = r));
    this.firstRegistration = { promise, resolve };
  }

  /** The specs this worker registers. */
  get specs(): ToolSpec[] {
    return [...this.tools.values()].map((t) => t.spec);
  }

  /** Calls running now. */
  get inFlight(): number {
    return this.inFlightCalls;
  }

  /** Live piscina threads (0 without CPU-bound tools). */
  get cpuThreads(): number {
    return this.pool?.liveThreads ?? 0;
  }

  /** Resolves with the catalog's answer once this worker is registered. */
  whenRegistered(): Promise<CatalogRegisterReply> {
    return this.firstRegistration.promise;
  }

  /** Opens the artifact store, subscribes every tool, and starts registering with the catalog. */
  async start(): Promise<void> {
    if (this.state !== 'new')
      throw new AgentMeshError(ErrorCode.Conflict, `worker ${this.workerId} was already started`);
    this.state = 'starting';
    try {
      this.blobs = await this.bus.blobs(ARTIFACTS_BUCKET);
    } catch (error) {
      this.state = 'new';
      throw new AgentMeshError(
        ErrorCode.JetStreamUnavailable,
        `the tool worker cannot open the artifact store "${ARTIFACTS_BUCKET}": ${(error as Error).message}. ` +
          'NATS mode needs JetStream: start the server with "nats-server -js".',
        { retryable: false, cause: error },
      );
    }
    const sharedOptions = this.sharedOptions;
    if (sharedOptions !== false && [...this.tools.values()].some((t) => !t.spec.idempotent))
      this.shared = await SharedOutcomes.open(this.bus, this.subjects.prefix, sharedOptions ?? {});
    if ([...this.tools.values()].some((t) => t.cpu !== undefined))
      this.pool = new CpuPool({
        ...(this.threads === undefined ? {} : { threads: this.threads }),
        ...(this.cpuQueueDepth === undefined ? {} : { queueDepth: this.cpuQueueDepth }),
      });
    for (const tool of this.tools.values()) {
      this.toolSubs.push(
        this.bus.subscribe(this.subjects.toolInvoke(tool.name), (msg) => this.onInvoke(tool, msg), {
          queue: toolQueueGroup(tool.name),
        }),
      );
    }
    this.otherSubs.push(this.bus.subscribe(this.subjects.allRunCancels, (msg) => this.onCancel(msg)));
    this.otherSubs.push(
      serve({
        bus: this.bus,
        subject: this.subjects.artifactFetch,
        queue: 'artifacts.fetch',
        schema: ArtifactFetchSchema,
        what: 'artifact fetch request',
        logger: this.logger,
        handler: (req) =>
          new TenantArtifacts(this.requireBlobs(), { tenant: req.identity.tenant }).read(req.ref, {
            offset: req.offset,
            maxBytes: Math.min(req.max_bytes, ARTIFACT_FETCH_MAX_BYTES, this.bus.maxPayload - 4096),
          }),
      }),
    );
    this.service = await this.bus.announce({
      name: ServiceName.ToolWorker,
      version: '0.1.0',
      description: 'agentmesh tool worker',
      metadata: { worker_id: this.workerId, tools: String(this.tools.size) },
    });
    this.state = 'running';
    if (this.shouldRegister) {
      this.registering = this.registerLoop();
      this.heartbeatTimer = setInterval(() => void this.heartbeat(), this.heartbeatMs);
      this.heartbeatTimer.unref();
    }
    this.logger.info(
      { tools: [...this.tools.keys()], threads: this.pool?.threads ?? 0 },
      'tool worker serving',
    );
  }

  /**
   * Stops taking calls, lets the calls in flight finish, deregisters from the catalog and stops the thread pool.
   * Safe to call more than once (SIGTERM handlers).
   */
  drain(): Promise<void> {
    this.drained ??= this.doDrain();
    return this.drained;
  }

  private async doDrain(): Promise<void> {
    const wasRunning = this.state === 'running';
    this.state = 'draining';
    clearInterval(this.heartbeatTimer);
    this.lifecycle.abort(new AgentMeshError(ErrorCode.Closed, `worker ${this.workerId} is draining`));
    await Promise.all(this.toolSubs.map((s) => s.drain()));
    await this.registering?.catch(() => undefined);
    if (wasRunning && this.registered) {
      await this.bus
        .request(this.subjects.catalogDeregister, encodeJson({ worker_id: this.workerId }), {
          timeoutMs: 1000,
        })
        .catch((error: unknown) =>
          this.logger.debug({ err: (error as Error).message }, 'deregister got no answer'),
        );
    }
    await Promise.all(this.otherSubs.map((s) => s.drain()));
    await this.pool
      ?.destroy()
      .catch((error: unknown) => this.logger.warn({ err: error }, 'thread pool stop failed'));
    await this.service?.stop();
    this.state = 'stopped';
    this.logger.info('tool worker drained');
  }

  /**
   * Runs one invocation through the whole pipeline (validation, policy, artifacts) without the bus. This is what
   * each `tool.invoke` message gets; embedded callers may use it directly.
   */
  async execute(input: ToolInvocationInput | ToolInvocation): Promise<ToolOutcome> {
    return this.executeParsed(parseToolInvocation(input, 'tool invocation', ErrorCode.InvalidRequest, true));
  }

  private requireBlobs(): BlobStore {
    if (this.blobs === undefined)
      throw new AgentMeshError(ErrorCode.Unavailable, 'the tool worker is not started');
    return this.blobs;
  }

  private onInvoke(tool: Tool<any, any>, msg: BusMessage): Promise<void> | void {
    const cpuFull = tool.cpu !== undefined && this.pool?.saturated === true;
    if (this.state !== 'running' || this.inFlightCalls >= this.concurrency || cpuFull) {
      respondError(this.bus, msg, {
        code: ErrorCode.Busy,
        message:
          this.state !== 'running'
            ? `worker ${this.workerId} is draining`
            : cpuFull
              ? `worker ${this.workerId} has all ${this.pool?.threads} CPU threads busy and its queue full; try another replica`
              : `worker ${this.workerId} has ${this.inFlightCalls} calls in flight (limit ${this.concurrency}); try another replica`,
        retryable: true,
        details: { worker_id: this.workerId, tool: tool.name },
      } satisfies ErrorPayload);
      return;
    }
    this.inFlightCalls++;
    return this.answerInvoke(tool, msg);
  }

  private async answerInvoke(tool: Tool<any, any>, msg: BusMessage): Promise<void> {
    try {
      let invocation: ToolInvocation;
      try {
        const what = `invocation of ${tool.name}`;
        invocation = parseToolInvocation(parseJson(msg.text(), what), what);
      } catch (error) {
        const payload = toErrorPayload(error);
        const callId = rawCallId(msg.data);
        if (callId !== undefined) payload.details = { ...payload.details, call_id: callId };
        respondError(this.bus, msg, payload);
        return;
      }
      const outcome =
        invocation.tool === tool.name
          ? await this.executeParsed(invocation)
          : this.errorOutcome(
              invocation,
              new AgentMeshError(
                ErrorCode.UnknownTool,
                `invocation for tool "${invocation.tool}" arrived on the subject of "${tool.name}"`,
                { retryable: false },
              ),
              0,
              0,
            );
      respondJson(this.bus, msg, outcome);
    } finally {
      this.inFlightCalls--;
    }
  }

  private executeParsed(invocation: ToolInvocation): ToolOutcome | Promise<ToolOutcome> {
    const tool = this.tools.get(invocation.tool);
    if (tool === undefined)
      return this.errorOutcome(
        invocation,
        new AgentMeshError(
          ErrorCode.UnknownTool,
          `unknown tool "${invocation.tool}": worker ${this.workerId} does not serve it`,
          {
            retryable: false,
            details: { served: [...this.tools.keys()] },
          },
        ),
        0,
        0,
      );
    const idempotencyKey = invocation.idempotency_key;
    if (idempotencyKey === undefined || tool.spec.idempotent)
      return this.runCall(tool, invocation, undefined);
    const tenant = invocation.identity.tenant;
    const key =
      tenant === 'default'
        ? `${tool.name}\u0000${idempotencyKey}`
        : `${tool.name}\u0001${tenant.length}:${tenant}\u0000${idempotencyKey}`;
    const known = this.cache.find(key);
    if (known === undefined) {
      const entry = this.cache.begin(key);
      if (this.shared === undefined) return this.runCall(tool, invocation, entry);
      return this.runOnce(tool, invocation, this.shared).then(
        (done) => {
          const outcome: ToolOutcome = { ...done, dedup: 'shared' };
          this.cache.finish(entry, outcome);
          return outcome;
        },
        (error: unknown) => {
          this.cache.finish(entry, undefined);
          throw error;
        },
      );
    }
    if (known.outcome !== undefined) return this.replay(invocation, known.outcome);
    return this.replayWhenDone(invocation, known);
  }

  private replay(invocation: ToolInvocation, outcome: ToolOutcome): ToolOutcome {
    return { ...outcome, call_id: invocation.call_id, replayed: true };
  }

  private async replayWhenDone(invocation: ToolInvocation, entry: CacheEntry): Promise<ToolOutcome> {
    const progress = this.openProgress(invocation);
    try {
      const outcome = await this.cache.wait(entry);
      return outcome === undefined ? await this.executeParsed(invocation) : this.replay(invocation, outcome);
    } finally {
      progress?.close();
    }
  }

  /**
   * Runs a non-idempotent call at most once across every replica: replays a stored outcome, waits for a call another
   * worker is running, refuses (`worker_lost`, not retryable) a call whose worker stopped without an outcome, and
   * otherwise claims the key, runs the call and stores its outcome.
   */
  private async runOnce(
    tool: Tool<any, any>,
    invocation: ToolInvocation,
    shared: SharedOutcomes,
  ): Promise<ToolOutcome> {
    const key = SharedOutcomes.keyOf(invocation.identity.tenant, tool.name, invocation.idempotency_key!);
    const t0 = performance.now();
    const waitUntil = Date.now() + (invocation.timeout_ms ?? tool.policy.timeout_ms) + shared.claimStaleMs;
    let progress: CallProgress | undefined;
    try {
      for (;;) {
        let entry: SharedEntry | undefined;
        try {
          entry = await shared.get(key);
          if (entry === undefined) {
            const claim = await shared.claim(key, this.workerId);
            if (claim !== undefined) {
              const refresher = setInterval(
                () => void claim.refresh().catch(() => undefined),
                Math.max(50, Math.floor(shared.claimStaleMs / 3)),
              );
              let outcome: ToolOutcome | undefined;
              try {
                outcome = await this.runCall(tool, invocation, undefined, true);
                return outcome;
              } finally {
                clearInterval(refresher);
                const final: SharedEntry =
                  outcome === undefined || outcome.error?.code === ErrorCode.Cancelled
                    ? {
                        state: 'interrupted',
                        worker_id: this.workerId,
                        at: Date.now(),
                        reason: outcome?.error?.message ?? 'the call ended without an outcome',
                      }
                    : { state: 'done', outcome, at: Date.now() };
                await claim.settle(final).catch((error: unknown) =>
                  this.logger.warn(
                    {
                      run_id: invocation.run_id,
                      call_id: invocation.call_id,
                      err: (error as Error).message,
                    },
                    'outcome not stored: a re-sent call will be refused as "may have run"',
                  ),
                );
              }
            }
            continue;
          }
        } catch (error) {
          return this.errorOutcome(
            invocation,
            new AgentMeshError(
              ErrorCode.Unavailable,
              `the shared outcome store is unavailable, so worker ${this.workerId} did not run call ` +
                `${invocation.call_id} of the non-idempotent tool "${tool.name}": ${(error as Error).message}`,
              { retryable: true },
            ),
            1,
            performance.now() - t0,
          );
        }
        if (entry.state === 'done') return { ...entry.outcome, call_id: invocation.call_id, replayed: true };
        if (entry.state === 'claimed' && shared.isLive(entry) && Date.now() < waitUntil) {
          progress ??= this.openProgress(invocation, true);
          await sleep(200, this.lifecycle.signal);
          if (this.lifecycle.signal.aborted)
            return this.errorOutcome(
              invocation,
              new AgentMeshError(
                ErrorCode.Closed,
                `worker ${this.workerId} is draining while call ${invocation.call_id} runs on worker ${entry.worker_id}`,
                { retryable: false },
              ),
              1,
              performance.now() - t0,
            );
          continue;
        }
        const what =
          entry.state === 'interrupted'
            ? `was interrupted (${entry.reason})`
            : shared.isLive(entry)
              ? 'is still running it'
              : 'stopped without an outcome';
        this.logger.warn(
          {
            run_id: invocation.run_id,
            call_id: invocation.call_id,
            tool: tool.name,
            first_worker: entry.worker_id,
          },
          'non-idempotent call re-sent after its worker was lost: not run again',
        );
        return this.errorOutcome(
          invocation,
          new AgentMeshError(
            ErrorCode.WorkerLost,
            `call ${invocation.call_id} of tool "${tool.name}" was already started by worker ${entry.worker_id}, which ` +
              `${what}; the tool is not idempotent and may have run, so it was not run again`,
            {
              retryable: false,
              details: { first_worker_id: entry.worker_id, idempotency_key: invocation.idempotency_key },
            },
          ),
          1,
          performance.now() - t0,
        );
      }
    } finally {
      progress?.close();
    }
  }

  private openProgress(invocation: ToolInvocation, sharedDedup = false): CallProgress | undefined {
    if (invocation.progress_subject === undefined) return undefined;
    return this.progress.open(invocation.progress_subject, invocation.call_id, invocation.tool, sharedDedup);
  }

  private async runCall(
    tool: Tool<any, any>,
    invocation: ToolInvocation,
    entry: CacheEntry | undefined,
    sharedDedup = false,
  ): Promise<ToolOutcome> {
    const t0 = performance.now();
    const progress = this.openProgress(invocation, sharedDedup);
    const call = new RunCallScope(invocation.run_id);
    const running = this.runningCalls.add(call);
    const cancelled = this.cancelledRuns.size === 0 ? undefined : this.cancelledRuns.get(invocation.run_id);
    if (cancelled !== undefined) call.abort(cancelledError(invocation.run_id, cancelled.reason));
    let logger: Logger | undefined;
    const callLogger = () =>
      (logger ??= this.logger.child({
        run_id: invocation.run_id,
        call_id: invocation.call_id,
        tool: tool.name,
      }));
    let attempts = 0;
    let outcome: ToolOutcome | undefined;
    try {
      const args: unknown = tool.parseArguments(invocation.arguments);
      const policy = tool.policy;
      const timeoutMs = Math.min(invocation.timeout_ms ?? policy.timeout_ms, policy.timeout_ms);
      for (;;) {
        attempts++;
        try {
          const output = await this.runAttempt(
            tool,
            args,
            invocation,
            attempts,
            timeoutMs,
            call,
            callLogger,
            progress,
          );
          const made = this.successOutcome(invocation, output, attempts, t0, callLogger);
          outcome = made instanceof Promise ? await made : made;
          if (this.logger.isLevelEnabled('debug'))
            callLogger().debug({ attempts, elapsed_ms: outcome.elapsed_ms }, 'tool call completed');
          return outcome;
        } catch (error) {
          const failure = classifyFailure(error);
          const retry =
            failure !== 'cancelled' &&
            tool.spec.idempotent &&
            attempts < policy.max_attempts &&
            policy.retry_on.includes(failure) &&
            !call.aborted;
          if (!retry) throw error;
          const delay = backoffDelay(policy, attempts);
          callLogger().warn(
            { attempt: attempts, failure, delay_ms: delay, err: (error as Error).message },
            'tool attempt failed, retrying',
          );
          await call.race(sleep(delay));
        }
      }
    } catch (error) {
      outcome = this.errorOutcome(invocation, error, Math.max(1, attempts), performance.now() - t0);
      callLogger().info({ code: outcome.error?.code, attempts: outcome.attempts }, 'tool call failed');
      return outcome;
    } finally {
      progress?.close();
      this.runningCalls.delete(running);
      if (entry !== undefined) this.cache.finish(entry, outcome);
    }
  }

  private runAttempt(
    tool: Tool<any, any>,
    args: unknown,
    invocation: ToolInvocation,
    attempt: number,
    timeoutMs: number,
    call: AbortScope,
    logger: () => Logger,
    progress: CallProgress | undefined,
  ): Promise<unknown> {
    if (call.aborted) return Promise.reject(call.reason as Error);
    const run = new Attempt(tool, call, this.deadlines, timeoutMs, attempt);
    try {
      let running: Promise<unknown>;
      if (tool.cpu !== undefined && this.pool !== undefined) {
        const context = {
          runId: invocation.run_id,
          callId: invocation.call_id,
          identity: invocation.identity,
          attempt,
          workerId: this.workerId,
        };
        running = this.pool.run(tool.cpu, args, context, run.scope.signal);
      } else {
        running = tool.runHandler(
          args,
          this.handlerContext(tool, invocation, attempt, run.scope, logger, progress),
        );
      }
      running.then(run.succeed, run.fail);
    } catch (error) {
      run.fail(error);
    }
    return run.promise;
  }

  private handlerContext(
    tool: Tool<any, any>,
    invocation: ToolInvocation,
    attempt: number,
    scope: AbortScope,
    logger: () => Logger,
    progress: CallProgress | undefined,
  ): ToolContext {
    return new HandlerContext(
      this.requireBlobs(),
      tool.name,
      invocation,
      attempt,
      this.workerId,
      scope,
      logger,
      progress,
    );
  }

  private successOutcome(
    invocation: ToolInvocation,
    output: unknown,
    attempts: number,
    t0: number,
    logger: () => Logger,
  ): ToolOutcome | Promise<ToolOutcome> {
    let text: string;
    try {
      text = outputText(output);
    } catch (error) {
      throw new AgentMeshError(
        ErrorCode.InvalidOutput,
        `tool "${invocation.tool}" returned output that is not JSON: ${(error as Error).message}`,
        { retryable: false },
      );
    }
    const maxOutput = invocation.max_output_bytes ?? this.maxOutputBytes;
    const limit = Math.min(this.artifactThreshold, maxOutput);
    if (text.length * 3 <= limit || byteLength(text) <= limit)
      return {
        call_id: invocation.call_id,
        tool: invocation.tool,
        worker_id: this.workerId,
        is_error: false,
        output,
        preview: text,
        elapsed_ms: round(performance.now() - t0),
        attempts,
      };
    return this.artifactOutcome(invocation, output, text, attempts, t0, logger);
  }

  private async artifactOutcome(
    invocation: ToolInvocation,
    output: unknown,
    text: string,
    attempts: number,
    t0: number,
    logger: () => Logger,
  ): Promise<ToolOutcome> {
    const maxOutput = invocation.max_output_bytes ?? this.maxOutputBytes;
    const base = {
      call_id: invocation.call_id,
      tool: invocation.tool,
      worker_id: this.workerId,
      is_error: false,
      attempts,
    };
    try {
      const artifact = await new TenantArtifacts(this.requireBlobs(), {
        tenant: invocation.identity.tenant,
        runId: invocation.run_id,
        callId: invocation.call_id,
        tool: invocation.tool,
      }).put(text, { mime: typeof output === 'string' ? 'text/plain; charset=utf-8' : 'application/json' });
      return {
        ...base,
        artifact,
        preview: capForModel(text, Math.min(this.previewBytes, maxOutput), artifact),
        elapsed_ms: round(performance.now() - t0),
      };
    } catch (error) {
      logger().error(
        { err: (error as Error).message },
        'artifact store failed; the output is only previewed',
      );
      return { ...base, preview: capForModel(text, maxOutput), elapsed_ms: round(performance.now() - t0) };
    }
  }

  private errorOutcome(
    invocation: ToolInvocation,
    error: unknown,
    attempts: number,
    elapsedMs: number,
  ): ToolOutcome {
    const payload = toErrorPayload(error);
    payload.details = { ...payload.details, call_id: invocation.call_id, tool: invocation.tool };
    const maxOutput = invocation.max_output_bytes ?? this.maxOutputBytes;
    return {
      call_id: invocation.call_id,
      tool: invocation.tool,
      worker_id: this.workerId,
      is_error: true,
      error: payload,
      preview: capForModel(`error [${payload.code}]: ${payload.message}`, maxOutput),
      elapsed_ms: round(elapsedMs),
      attempts,
    };
  }

  private onCancel(msg: BusMessage): void {
    const head = `${this.subjects.prefix}.runs.`;
    if (!msg.subject.startsWith(head) || !msg.subject.endsWith('.cancel')) return;
    const runId = msg.subject.slice(head.length, -'.cancel'.length);
    let reason: string | undefined;
    try {
      const body =
        msg.data.length === 0 ? {} : (parseJson(msg.text(), 'cancel request') as { reason?: unknown });
      if (typeof body.reason === 'string') reason = body.reason;
    } catch {
      // a cancel with a malformed body still cancels
    }
    this.cancelledRuns.delete(runId);
    this.cancelledRuns.set(runId, { reason, at: Date.now() });
    for (const [id, entry] of this.cancelledRuns) {
      if (this.cancelledRuns.size <= CANCELLED_RUNS_KEPT && Date.now() - entry.at < CANCELLED_RUN_TTL_MS)
        break;
      this.cancelledRuns.delete(id);
    }
    const calls: RunCallScope[] = [];
    this.runningCalls.forEach((call) => {
      if (call.runId === runId) calls.push(call);
    });
    if (calls.length === 0) return;
    this.logger.info({ run_id: runId, calls: calls.length, reason }, 'cancelling the calls of a run');
    for (const call of calls) call.abort(cancelledError(runId, reason));
  }

  private async registerLoop(): Promise<void> {
    const signal = this.lifecycle.signal;
    let delay = 200;
    while (!signal.aborted) {
      try {
        const reply = await requestJson(
          this.bus,
          this.subjects.catalogRegister,
          { worker_id: this.workerId, tools: this.specs, ttl_ms: this.heartbeatMs * 3 },
          CatalogRegisterReplySchema,
          { timeoutMs: 3000, signal },
        );
        this.registered = true;
        for (const r of reply.rejected)
          this.logger.error(
            { tool: r.name, code: r.error.code, err: r.error.message },
            'catalog rejected a tool',
          );
        this.logger.info(
          { accepted: reply.accepted.length, rejected: reply.rejected.length },
          'registered with the catalog',
        );
        this.firstRegistration.resolve(reply);
        return;
      } catch (error) {
        if (signal.aborted) return;
        this.logger.debug(
          { err: (error as Error).message, retry_ms: delay },
          'catalog did not take the registration yet',
        );
        await sleep(delay * (0.75 + Math.random() * 0.5), signal);
        delay = Math.min(delay * 2, 5000);
      }
    }
  }

  private async heartbeat(): Promise<void> {
    if (this.state !== 'running' || !this.registered) return;
    try {
      const reply = await requestJson(
        this.bus,
        this.subjects.catalogHeartbeat,
        { worker_id: this.workerId },
        CatalogHeartbeatReplySchema,
        { timeoutMs: Math.min(3000, this.heartbeatMs), signal: this.lifecycle.signal },
      );
      if (!reply.known && this.state === 'running') {
        this.logger.info('the catalog forgot this worker; registering again');
        this.registered = false;
        this.registering = this.registerLoop();
      }
    } catch (error) {
      this.logger.debug({ err: (error as Error).message }, 'catalog heartbeat got no answer');
    }
  }
}

/** The scope of one call, which its run's cancel aborts. */
class RunCallScope extends AbortScope {
  constructor(readonly runId: string) {
    super();
  }
}

/**
 * One attempt of a call: settles with the checked output, or rejects on the handler's failure, the attempt's
 * timeout (one shared timer for all attempts) or the call's abort, whichever comes first.
 */
class Attempt implements Deadline {
  readonly scope = new AbortScope();
  readonly promise: Promise<unknown>;
  readonly at: number;
  private readonly deadline: number;
  private settled = false;
  private resolve!: (output: unknown) => void;
  private reject!: (error: unknown) => void;

  constructor(
    private readonly tool: Tool<any, any>,
    private readonly call: AbortScope,
    private readonly deadlines: Deadlines,
    private readonly timeoutMs: number,
    private readonly attempt: number,
  ) {
    this.promise = new Promise<unknown>((resolve, reject) => {
      this.resolve = resolve;
      this.reject = reject;
    });
    this.at = performance.now() + timeoutMs;
    this.deadline = deadlines.add(this);
    call.addAbortListener(this.abort);
  }

  expire(): void {
    const { tool, timeoutMs, attempt } = this;
    this.abort(
      new AgentMeshError(
        ErrorCode.Timeout,
        `tool "${tool.name}" timed out after ${timeoutMs} ms (attempt ${attempt} of ${tool.policy.max_attempts})`,
        { details: { timeout_ms: timeoutMs, attempt } },
      ),
    );
  }

  private readonly abort = (reason: unknown): void => {
    this.scope.abort(reason);
    this.fail(reason);
  };

  private end(): boolean {
    if (this.settled) return false;
    this.settled = true;
    this.deadlines.delete(this.deadline);
    this.call.removeAbortListener(this.abort);
    return true;
  }

  readonly fail = (error: unknown): void => {
    if (this.end()) this.reject(toToolError(error, this.tool.name));
  };

  readonly succeed = (output: unknown): void => {
    if (!this.end()) return;
    try {
      this.resolve(this.tool.checkOutput(output));
    } catch (error) {
      this.reject(toToolError(error, this.tool.name));
    }
  };
}

/** The {@link ToolContext} of one attempt; the signal, logger and artifact store are made on first use. */
class HandlerContext implements ToolContext {
  private artifactStore: TenantArtifacts | undefined;
  readonly runId: string;
  readonly callId: string;
  readonly identity: ToolInvocation['identity'];

  constructor(
    private readonly blobs: BlobStore,
    private readonly tool: string,
    invocation: ToolInvocation,
    readonly attempt: number,
    readonly workerId: string,
    private readonly scope: AbortScope,
    private readonly makeLogger: () => Logger,
    private readonly progress: CallProgress | undefined,
  ) {
    this.runId = invocation.run_id;
    this.callId = invocation.call_id;
    this.identity = invocation.identity;
  }

  get signal(): AbortSignal {
    return this.scope.signal;
  }

  get logger(): Logger {
    return this.makeLogger();
  }

  get artifacts(): ArtifactStore {
    this.artifactStore ??= new TenantArtifacts(this.blobs, {
      tenant: this.identity.tenant,
      runId: this.runId,
      callId: this.callId,
      tool: this.tool,
    });
    return this.artifactStore;
  }

  emit(message: string, data?: unknown): void {
    this.progress?.emit(message, data);
  }
}

/** Makes anything a handler threw into an AgentMeshError with a code the caller and the retry policy understand. */
function toToolError(error: unknown, tool: string): AgentMeshError {
  if (error instanceof AgentMeshError) return error;
  const e = (typeof error === 'object' && error !== null ? error : {}) as {
    code?: unknown;
    retryable?: unknown;
    status?: unknown;
    statusCode?: unknown;
  };
  const message = error instanceof Error ? error.message : String(error);
  if (typeof e.code === 'string' && KNOWN_CODES.has(e.code))
    return new AgentMeshError(e.code, message, {
      ...(typeof e.retryable === 'boolean' ? { retryable: e.retryable } : {}),
      cause: error,
    });
  const failure = classifyFailure(error);
  const status =
    typeof e.status === 'number' ? e.status : typeof e.statusCode === 'number' ? e.statusCode : undefined;
  return new AgentMeshError(ErrorCode.ToolError, `tool "${tool}" failed: ${message}`, {
    retryable: failure === 'transient' || failure === '5xx',
    cause: error,
    ...(status === undefined ? {} : { details: { status } }),
  });
}

function rawCallId(data: Uint8Array): string | undefined {
  try {
    const body = JSON.parse(new TextDecoder().decode(data)) as { call_id?: unknown };
    return typeof body.call_id === 'string' ? body.call_id : undefined;
  } catch {
    return undefined;
  }
}

function round(ms: number): number {
  return Math.round(ms * 100) / 100;
}
