import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import {
  AgentMeshError,
  ArtifactFetchSchema,
  ErrorCode,
  createLogger,
  handOverOutcome,
  parseJson,
  parseToolInvocation,
  respondError,
  respondJson,
  respondJsonText,
  serve,
  subjects as buildSubjects,
  toErrorPayload,
  toolQueueGroup,
  type Backend,
  type BusMessage,
  type CatalogRegisterReply,
  type Logger,
  type ServiceHandle,
  type Subjects,
  type Subscription,
  type ToolInvocation,
  type ToolInvocationInput,
  type ToolOutcome,
  type ToolSpec,
  traceToolExecution,
} from '@agentmesh/protocol';
import { Admission, type CallRoute } from './admission.js';
import type { RunCallScope } from './attempt.js';
import { ARTIFACT_FETCH_MAX_BYTES, TenantArtifacts } from './artifacts.js';
import { AbortScope, ProgressHub } from './call-scope.js';
import { CapacityNotices } from './capacity-notices.js';
import { CpuPool } from './cpu-pool.js';
import type { Tool } from './define-tool.js';
import { Executor } from './executor.js';
import { OnceGuard } from './once-guard.js';
import type { OutcomeCacheOptions, SharedOutcomeOptions } from './outcome-cache.js';
import { Registration, announceWorker, openArtifactStore } from './registration.js';
import { DaemonPathWatcher } from './daemon-watch.js';
import { RunCancels } from './run-cancels.js';

export const DEFAULT_WORKER_CONCURRENCY = 64;
export const DEFAULT_ARTIFACT_THRESHOLD_BYTES = 32 * 1024;
export const DEFAULT_MAX_OUTPUT_BYTES = 64 * 1024;

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
  /**
   * The worker's role (its NATS user, e.g. `worker_math`): it registers on `<prefix>.catalog.register.<role>`, and a
   * catalog with roles configured holds it to the role's tool namespaces. Left out: the unscoped subject.
   */
  role?: string;
  /**
   * Keep heavy outputs in the shared artifact store and serve artifact fetches (default true). `false`, for a worker
   * whose NATS user has no artifacts grant: a heavy output is only previewed, and the worker serves no fetches.
   */
  artifacts?: boolean;
  /**
   * The worker's workspace root: it then watches there the `watch_paths` daemons announce and sends them
   * `file_changed` triggers (see {@link DaemonPathWatcher}).
   */
  watchRoot?: string;
  /** Quiet time before a `file_changed` trigger goes out (default 500 ms). */
  watchDebounceMs?: number;
}

/**
 * The tool-worker actor. Serves each of its tools on `<prefix>.tool.invoke.<name>` in the tool's queue group, so
 * replicas share calls, and on a subject of its own that its capacity notices point callers at once it has room
 * again. It is composed of: {@link Admission} (concurrency, busy answers, draining), {@link CapacityNotices} (its
 * own subjects and the notices), {@link OnceGuard} (idempotency keys, local and shared), {@link Executor} (validation,
 * policy, attempts, piscina, output checks, artifacts), {@link RunCancels} (a run's cancel reaches its calls wherever
 * they wait) and {@link Registration} (catalog registration and heartbeat). It also serves `artifact_fetch` and
 * drains on demand.
 */
export class ToolWorker {
  readonly workerId: string;
  /** Watches `watch_paths` for daemons (with `watchRoot` only). */
  daemonWatcher: DaemonPathWatcher | undefined;
  private readonly bus: Backend;
  private readonly subjects: Subjects;
  private readonly tools = new Map<string, Tool<any, any>>();
  private readonly logger: Logger;
  private readonly admission: Admission;
  private readonly executor: Executor;
  private readonly onceGuard: OnceGuard;
  private readonly cancels: RunCancels;
  private readonly registration: Registration | undefined;
  private readonly lifecycle = new AbortController();
  private readonly draining = new AbortScope();
  private readonly options: ToolWorkerOptions;
  private readonly capacity: CapacityNotices;
  /** Per tool: its queue-group subscription and this worker's own subject for it. */
  private subs: { tools: Map<string, Subscription[]>; other: Subscription[] } = {
    tools: new Map(),
    other: [],
  };
  private sharedOutcomesOpened = false;
  private service: ServiceHandle | undefined;
  private drained: Promise<void> | undefined;

  constructor(options: ToolWorkerOptions) {
    this.options = options;
    this.bus = options.bus;
    this.subjects = buildSubjects(options.prefix);
    this.workerId = options.workerId ?? `${hostname()}-${process.pid}-${randomBytes(3).toString('hex')}`;
    this.logger = (options.logger ?? createLogger('agentmesh-tool-worker')).child({
      worker_id: this.workerId,
    });
    for (const tool of options.tools) this.addTool(tool);
    this.admission = new Admission(
      this.workerId,
      Math.max(1, options.concurrency ?? DEFAULT_WORKER_CONCURRENCY),
    );
    const progressMs = Math.max(10, options.progressHeartbeatMs ?? 1000);
    this.executor = new Executor({
      workerId: this.workerId,
      logger: this.logger,
      progress: new ProgressHub(this.bus, this.workerId, progressMs, this.logger),
      limits: {
        artifactThresholdBytes: Math.max(
          256,
          options.artifactThresholdBytes ?? DEFAULT_ARTIFACT_THRESHOLD_BYTES,
        ),
        previewBytes: Math.max(64, options.previewBytes ?? 4096),
        maxOutputBytes: Math.max(256, options.maxOutputBytes ?? DEFAULT_MAX_OUTPUT_BYTES),
      },
    });
    this.onceGuard = new OnceGuard({
      workerId: this.workerId,
      logger: this.logger,
      executor: this.executor,
      draining: this.draining,
      ...(options.outcomeCache === undefined ? {} : { outcomeCache: options.outcomeCache }),
    });
    this.cancels = new RunCancels(this.subjects.prefix, this.logger);
    this.capacity = new CapacityNotices(this.bus, this.subjects, this.workerId, this.logger);
    if (options.role !== undefined) this.subjects.catalogRegisterAs(options.role);
    if (options.register ?? true)
      this.registration = new Registration({
        bus: this.bus,
        subjects: this.subjects,
        workerId: this.workerId,
        role: options.role,
        specs: () => this.specs,
        logger: this.logger,
        heartbeatMs: Math.max(50, options.heartbeatMs ?? 5000),
        lifecycle: this.lifecycle.signal,
      });
  }

  private addTool(tool: Tool<any, any>): void {
    if (this.tools.has(tool.name))
      throw new AgentMeshError(
        ErrorCode.Conflict,
        `tool "${tool.name}" is given twice to one worker: names must be unique`,
        { retryable: false, details: { name: tool.name } },
      );
    this.tools.set(tool.name, tool);
  }

  /** The specs this worker registers. */
  get specs(): ToolSpec[] {
    return [...this.tools.values()].map((t) => t.spec);
  }

  /** Calls running now. */
  get inFlight(): number {
    return this.admission.inFlight;
  }

  /** Live piscina threads (0 without CPU-bound tools). */
  get cpuThreads(): number {
    return this.executor.cpuPool?.liveThreads ?? 0;
  }

  /** Resolves with the catalog's answer once this worker is registered (never without registration). */
  whenRegistered(): Promise<CatalogRegisterReply> {
    return this.registration?.whenRegistered() ?? new Promise<CatalogRegisterReply>(() => undefined);
  }

  /** Opens the artifact store, subscribes every tool, and starts registering with the catalog. */
  async start(): Promise<void> {
    if (this.admission.state !== 'new')
      throw new AgentMeshError(ErrorCode.Conflict, `worker ${this.workerId} was already started`);
    this.admission.state = 'starting';
    try {
      await this.openResources();
    } catch (error) {
      this.admission.state = 'new';
      throw error;
    }
    this.subscribe();
    await this.startDaemonWatcher();
    this.service = await announceWorker(this.bus, this.workerId, this.tools.size, () => this.inFlight);
    this.admission.state = 'running';
    this.registration?.start();
    this.logger.info(
      { tools: [...this.tools.keys()], threads: this.executor.cpuPool?.threads ?? 0 },
      'tool worker serving',
    );
  }

  private async openResources(): Promise<void> {
    const blobs = await openArtifactStore(this.bus, this.options.artifacts ?? true);
    const tools = [...this.tools.values()];
    if (tools.some((t) => !t.spec.idempotent)) await this.openSharedOutcomes();
    const { threads, cpuQueueDepth } = this.options;
    const pool = tools.some((t) => t.cpu !== undefined)
      ? new CpuPool({
          ...(threads === undefined ? {} : { threads }),
          ...(cpuQueueDepth === undefined ? {} : { queueDepth: cpuQueueDepth }),
        })
      : undefined;
    this.executor.attach({ blobs, pool });
  }

  private async openSharedOutcomes(): Promise<void> {
    if (this.sharedOutcomesOpened) return;
    await this.onceGuard.open(this.bus, this.subjects.prefix, this.options.sharedOutcomes);
    this.sharedOutcomesOpened = true;
  }

  private subscribeTool(tool: Tool<any, any>): void {
    const invoke = this.capacity.subjectFor(tool.name);
    const shared = { invoke, byName: false };
    const byName = { invoke, byName: true };
    this.subs.tools.set(tool.name, [
      this.bus.subscribe(this.subjects.toolInvoke(tool.name), (msg) => this.onInvoke(tool, msg, shared), {
        queue: toolQueueGroup(tool.name),
      }),
      this.bus.subscribe(invoke, (msg) => this.onInvoke(tool, msg, byName)),
    ]);
  }

  /**
   * Adds and removes tools while the worker runs (an MCP server's `tools/list_changed`): added tools are served on
   * their `tool.invoke` subjects at once, removed ones stop being served (calls in flight finish), and the worker
   * registers its new tool set with the catalog. A tool given in both lists is replaced. Adding a name the worker
   * already serves, or a CPU-bound tool to a worker without a thread pool, is a `conflict` / `invalid_request`.
   */
  async updateTools(change: { add?: Tool<any, any>[]; remove?: string[] }): Promise<void> {
    const remove = new Set(change.remove ?? []);
    const add = change.add ?? [];
    for (const tool of add) {
      if (this.tools.has(tool.name) && !remove.has(tool.name))
        throw new AgentMeshError(ErrorCode.Conflict, `tool "${tool.name}" is served by this worker already`, {
          retryable: false,
          details: { name: tool.name },
        });
      if (tool.cpu !== undefined && this.executor.cpuPool === undefined)
        throw new AgentMeshError(
          ErrorCode.InvalidRequest,
          `tool "${tool.name}" is CPU-bound: add it when the worker starts (it has no thread pool)`,
          { retryable: false, details: { name: tool.name } },
        );
    }
    const running = this.admission.state === 'running';
    if (running && add.some((t) => !t.spec.idempotent)) await this.openSharedOutcomes();
    const drains: Promise<void>[] = [];
    for (const name of remove) {
      this.tools.delete(name);
      for (const sub of this.subs.tools.get(name) ?? []) drains.push(sub.drain());
      this.subs.tools.delete(name);
    }
    for (const tool of add) {
      this.addTool(tool);
      if (running) this.subscribeTool(tool);
    }
    await Promise.all(drains);
    this.logger.info({ added: add.map((t) => t.name), removed: [...remove] }, 'tool set changed');
    if (running) await this.registration?.registerAgain();
  }

  private async startDaemonWatcher(): Promise<void> {
    const root = this.options.watchRoot;
    if (root === undefined) return;
    this.daemonWatcher = new DaemonPathWatcher({
      bus: this.bus,
      prefix: this.subjects.prefix,
      root,
      logger: this.logger,
      ...(this.options.watchDebounceMs === undefined ? {} : { debounceMs: this.options.watchDebounceMs }),
    });
    await this.daemonWatcher.start();
  }

  private subscribe(): void {
    for (const tool of this.tools.values()) this.subscribeTool(tool);
    this.subs.other.push(
      this.bus.subscribe(this.subjects.allRunCancels, (msg) => this.cancels.onCancel(msg)),
    );
    if (this.options.artifacts === false) return;
    this.subs.other.push(
      serve({
        bus: this.bus,
        subject: this.subjects.artifactFetch,
        queue: 'artifacts.fetch',
        schema: ArtifactFetchSchema,
        what: 'artifact fetch request',
        logger: this.logger,
        handler: (req) =>
          new TenantArtifacts(this.executor.requireBlobs(), { tenant: req.identity.tenant }).read(req.ref, {
            offset: req.offset,
            maxBytes: Math.min(req.max_bytes, ARTIFACT_FETCH_MAX_BYTES, this.bus.maxPayload - 4096),
          }),
      }),
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
    const wasRunning = this.admission.state === 'running';
    this.admission.state = 'draining';
    const closed = new AgentMeshError(ErrorCode.Closed, `worker ${this.workerId} is draining`);
    this.lifecycle.abort(closed);
    this.draining.abort(closed);
    this.daemonWatcher?.stop();
    await Promise.all([...this.subs.tools.values()].flat().map((s) => s.drain()));
    if (wasRunning) await this.registration?.stop();
    await Promise.all(this.subs.other.map((s) => s.drain()));
    await this.executor.cpuPool
      ?.destroy()
      .catch((error: unknown) => this.logger.warn({ err: error }, 'thread pool stop failed'));
    await this.service?.stop();
    this.admission.state = 'stopped';
    this.logger.info('tool worker drained');
  }

  /**
   * Runs one invocation through the whole pipeline (validation, policy, artifacts) without the bus. This is what
   * each `tool.invoke` message gets; embedded callers may use it directly.
   */
  async execute(input: ToolInvocationInput | ToolInvocation): Promise<ToolOutcome> {
    return this.executeParsed(parseToolInvocation(input, 'tool invocation', ErrorCode.InvalidRequest, true));
  }

  private onInvoke(tool: Tool<any, any>, msg: BusMessage, route: CallRoute): Promise<void> | void {
    const refused = this.admission.admit(
      tool.name,
      tool.cpu === undefined ? undefined : this.executor.cpuPool,
      route,
    );
    if (refused !== undefined) return respondError(this.bus, msg, refused);
    return this.answerInvoke(tool, msg);
  }

  /**
   * Answers an admitted call and leaves admission once it is answered. Not an async function: an outcome known at once
   * is answered in this turn, and one that takes a while through one promise, not several.
   */
  private answerInvoke(tool: Tool<any, any>, msg: BusMessage): Promise<void> | void {
    let outcome: ToolOutcome | Promise<ToolOutcome> | undefined;
    try {
      outcome = this.invokeOutcome(tool, msg);
    } catch (error) {
      this.leave(tool);
      throw error;
    }
    if (!(outcome instanceof Promise)) return this.answered(tool, msg, outcome);
    return outcome.then(
      (made) => this.answered(tool, msg, made),
      (error: unknown) => {
        this.leave(tool);
        throw error;
      },
    );
  }

  /** The outcome of an admitted call, or undefined when its invocation was refused (and answered so). */
  private invokeOutcome(
    tool: Tool<any, any>,
    msg: BusMessage,
  ): ToolOutcome | Promise<ToolOutcome> | undefined {
    let invocation: ToolInvocation;
    try {
      const what = `invocation of ${tool.name}`;
      invocation = parseToolInvocation(msg.value ?? parseJson(msg.text(), what), what);
    } catch (error) {
      const payload = toErrorPayload(error);
      const callId = rawCallId(msg.data);
      if (callId !== undefined) payload.details = { ...payload.details, call_id: callId };
      respondError(this.bus, msg, payload);
      return undefined;
    }
    if (invocation.tool === tool.name)
      return traceToolExecution(msg.headers, invocation, this.workerId, () => this.executeParsed(invocation));
    return this.executor.errorOutcome(
      invocation,
      new AgentMeshError(
        ErrorCode.UnknownTool,
        `invocation for tool "${invocation.tool}" arrived on the subject of "${tool.name}"`,
        { retryable: false },
      ),
      1,
      0,
    );
  }

  private answered(tool: Tool<any, any>, msg: BusMessage, outcome: ToolOutcome | undefined): void {
    try {
      if (outcome !== undefined) this.respondOutcome(msg, outcome);
    } finally {
      this.leave(tool);
    }
  }

  /** Leaves admission (a CPU-bound call also its hold on the thread pool) and tells waiting callers of the room. */
  private leave(tool: Tool<any, any>): void {
    this.capacity.announce(this.admission.leave(tool.cpu === undefined ? undefined : this.executor.cpuPool));
  }

  /**
   * Answers a call with its outcome. A call handed over as a value (an in-process bus) is answered the same way (see
   * {@link handOverOutcome}), or as JSON text when the outcome cannot be.
   */
  private respondOutcome(msg: BusMessage, outcome: ToolOutcome): void {
    if (msg.value !== undefined && this.bus.respondValue !== undefined) {
      const handed = handOverOutcome(outcome, this.bus.maxPayload);
      if (handed !== undefined && this.bus.respondValue(msg, handed)) return;
    }
    const text = this.executor.outcomeJson(outcome);
    if (text === undefined) respondJson(this.bus, msg, outcome);
    else respondJsonText(this.bus, msg, text);
  }

  private executeParsed(invocation: ToolInvocation): ToolOutcome | Promise<ToolOutcome> {
    const tool = this.tools.get(invocation.tool);
    if (tool === undefined)
      return this.executor.errorOutcome(
        invocation,
        new AgentMeshError(
          ErrorCode.UnknownTool,
          `unknown tool "${invocation.tool}": worker ${this.workerId} does not serve it`,
          { retryable: false, details: { served: [...this.tools.keys()] } },
        ),
        1,
        0,
      );
    const call = this.cancels.open(invocation.run_id);
    if (invocation.idempotency_key === undefined || tool.spec.idempotent)
      return this.executor.run(tool, invocation, call);
    return this.runGuarded(tool, invocation, call);
  }

  private async runGuarded(
    tool: Tool<any, any>,
    invocation: ToolInvocation,
    call: RunCallScope,
  ): Promise<ToolOutcome> {
    try {
      return await this.onceGuard.run(tool, invocation, call);
    } finally {
      call.release();
    }
  }
}

function rawCallId(data: Uint8Array): string | undefined {
  try {
    const body = JSON.parse(new TextDecoder().decode(data)) as { call_id?: unknown };
    return typeof body.call_id === 'string' ? body.call_id : undefined;
  } catch {
    return undefined;
  }
}
