import {
  matchesToolPattern,
  toErrorPayload,
  type Logger,
  type RunEvent,
  type RunRequest,
  type Subjects,
  type Backend,
  type Guardrails,
  type ToolSpec,
  retry,
} from '@agentmesh/protocol';
import { outputValidator } from '../output-schema.js';
import type { CapabilityTable, ModelCapabilities } from '../capabilities.js';
import { DEFAULT_LOOP_THRESHOLDS } from '../loop-detector.js';
import type { Price, PriceTable } from '../prices.js';
import {
  resolveProvider,
  type ProviderChoice,
  type ProviderClients,
  type ProviderSettings,
} from '../providers/index.js';
import type { CheckpointHook, RunSnapshot } from '../model/snapshot.js';
import type { ForkStart } from '../model/fork.js';
import { buildSystemPrompt, runSystemPrompt } from '../system-prompt.js';
import { withContextWindow } from '../providers/context-window.js';
import { configuredGuardrails, mergeGuardrails } from '../guardrail-rules.js';
import { runGuardrails, type RunGuardrails } from './guard.js';
import type { ActiveRun, ActiveRuns } from './active-runs.js';
import { RunContext, type RunEnvironment, type ToolScope } from './context.js';
import { RunEventSink, notice, runAccepted, runCompleted, runFailed, runStarted, warning } from './events.js';
import { DEFAULT_NUDGE, runLoop } from './loop.js';
import { CATALOG_RETRY_MS, ToolListCache, listToolNames, loadRunTools } from './meta-tools.js';
import {
  DEFAULT_SESSION_MAX_TOKENS,
  effectiveLimits,
  initialSnapshot,
  searchDefaults,
  toolScope,
  type PlannerDefaults,
} from './setup.js';
import { SetupLane } from './setup-lane.js';
import { lazyChild } from '../util.js';
import { startWarnings } from './warnings.js';
import type {
  EventPublisher,
  RunConversation,
  RunFeatures,
  RunHitl,
  RunKeeper,
  TranscriptStore,
} from './ports.js';

export type { RunHandle, RunKeeper } from './ports.js';
import type { RunResult } from '../model/result.js';
import type { RunTranscript } from '../model/transcript.js';

/** A transcript save rides out a restarting NATS server for this long. */
const TRANSCRIPT_SAVE_TIMEOUT_MS = 30_000;

/** How many runs are set up at once, and for how long one keeps its place (see {@link SetupLane}). */
const SETUP_LANE_WIDTH = 16;
const SETUP_LANE_HOLD_MS = 5;

export type { RunResult } from '../model/result.js';

export interface ExecuteOptions {
  signal?: AbortSignal;
  /** Every event of the run, in order, as it happens. */
  onEvent?: (event: RunEvent) => void;
}

export interface ExecutorConfig {
  bus: Backend;
  prefix: string;
  subjects: Subjects;
  plannerId: string;
  logger: Logger;
  providers: ProviderSettings;
  clients: ProviderClients;
  capabilities: CapabilityTable;
  prices: PriceTable;
  defaults: PlannerDefaults;
  catalogRetryMs: number | undefined;
  checkpoint: CheckpointHook | undefined;
  active: ActiveRuns;
  /** The run's event publisher; `tenant` is the run's tenant (`identity.tenant`). */
  publisher: (
    runId: string,
    options?: { onConflict?: () => void; tenant?: string | undefined },
  ) => EventPublisher;
  transcripts: () => TranscriptStore | undefined;
  /** The run's features behind the engine's ports (agent tools, approvals, skills, daemons): run-features.ts. */
  features: RunFeatures<RunContext>;
}

interface RunIo {
  runId: string;
  request: RunRequest;
  sink: RunEventSink;
  publisher: EventPublisher;
  keeper: RunKeeper;
  log: Logger;
  startedAt: string;
  choice?: ProviderChoice;
  snapshot?: RunSnapshot;
  session?: RunConversation;
  /** Where a fork starts (read from the original run before it is accepted). */
  fork?: ForkStart | undefined;
  /** Gives up the run's place in the setup lane (once its tools are loaded, or when it ends first). */
  leaveSetup: () => void;
  /** The configured guardrail rules and those the request added. */
  guardrails?: Guardrails;
}

/**
 * Runs one accepted request to its final event: resolves the provider, loads the run's tools, builds the
 * {@link RunContext} and drives the agent loop, then saves the transcript and hands the ending to the run's keeper.
 */
export class RunExecutor {
  /** The catalog's last tool list per scope: runs of an unchanged catalog are not sent every spec again. */
  private readonly toolLists = new ToolListCache();
  private readonly setups = new SetupLane(SETUP_LANE_WIDTH, SETUP_LANE_HOLD_MS);

  constructor(private readonly config: ExecutorConfig) {}

  async run(
    request: RunRequest,
    runId: string,
    keeper: RunKeeper,
    options: ExecuteOptions = {},
  ): Promise<RunResult> {
    const started = performance.now();
    const log = lazyChild(this.config.logger, { run_id: runId });
    const publisher = this.config.publisher(runId, {
      tenant: request.identity?.tenant,
      onConflict: () =>
        keeper.giveUp?.(
          'the event log holds another event at a seq this planner wrote: handing the run over',
        ),
    });
    const resume = keeper.resume;
    const sink = new RunEventSink(runId, publisher.publish, {
      onEvent: options.onEvent,
      lastSeq: resume?.lastSeq,
      earlier: resume?.earlier,
    });
    const io: RunIo = {
      runId,
      request,
      sink,
      publisher,
      keeper,
      log,
      startedAt: resume?.snapshot?.started_at ?? new Date().toISOString(),
      leaveSetup: () => undefined,
    };
    let final: RunResult | undefined;
    try {
      final = await this.drive(io, options.signal);
      return final;
    } finally {
      io.leaveSetup();
      if (keeper.handedOff) {
        io.session?.stop();
        log.info('run handed to another planner: not finalized here');
      } else await this.finalize(io);
      const ending = final ?? sink.events[sink.events.length - 1];
      log.info(
        {
          status: ending?.type === 'run.completed' ? ending.status : 'failed',
          duration_ms: Math.round(performance.now() - started),
          tool_calls: io.snapshot?.tool_calls ?? 0,
          iterations: io.snapshot?.iteration ?? 0,
        },
        'run ended',
      );
    }
  }

  private async drive(io: RunIo, external: AbortSignal | undefined): Promise<RunResult> {
    const { request, sink, runId } = io;
    try {
      const forking = this.resolveRequest(io);
      if (forking !== undefined) await forking;
    } catch (error) {
      if (sink.lastSeq === 0) sink.emit(runAccepted(request));
      return sink.emit(runFailed(toErrorPayload(error)));
    }
    const fresh = sink.lastSeq === 0;
    if (fresh) {
      sink.emit(runAccepted(request, io.choice));
      // its append is sent on this microtask: the run's clock and links below wait until it is written
      await Promise.resolve();
    }
    const resumed =
      io.keeper.resume !== undefined &&
      io.keeper.resume.queued !== true &&
      (io.keeper.resume.lastSeq > 0 || io.keeper.resume.snapshot !== undefined);
    const checkpointed = io.keeper.resume?.snapshot?.limits;
    const effective = checkpointed
      ? { limits: checkpointed, clamped: [] }
      : effectiveLimits(this.config.defaults, request);
    const run = this.startActive(io, effective.limits.timeout_ms, external, fresh);
    try {
      // the run is cancellable (and fenced) while its acceptance is stored: it is in the active runs already
      if (fresh) {
        await this.acceptanceStored(io);
        run.startClock();
      }
      sink.emit(runStarted(this.config.plannerId, resumed, effective));
      io.leaveSetup = await this.setups.enter();
      const ctx = await this.prepare(io, run);
      const final = await runLoop(ctx);
      if (ctx.daemon && !io.keeper.handedOff)
        await ctx.daemon
          .close(runId)
          .catch((error: unknown) =>
            io.log.warn({ err: (error as Error).message }, 'trigger queue not removed'),
          );
      return final;
    } catch (error) {
      const e = toErrorPayload(error);
      io.log.warn({ code: e.code, err: e.message }, 'run failed before its loop');
      sink.emit(notice('error', e.message, { code: e.code }));
      const stop = run.stop;
      return sink.emit(
        runCompleted(stop?.status ?? 'failed', stop?.reason ?? `${e.code}: ${e.message}`, io.snapshot),
      );
    } finally {
      this.config.active.end(runId);
    }
  }

  /**
   * What a request names, resolved before the run is accepted: its output schema compiles, its guardrails merge with
   * the configured ones, its provider and system prompt resolve, and a fork finds its parent. Throws what is wrong;
   * returns a promise only for a fork, so that a run that is not one is accepted within the turn it began.
   */
  private resolveRequest(io: RunIo): Promise<void> | undefined {
    const { request } = io;
    const { defaults } = this.config;
    if (request.output_schema !== undefined) outputValidator(request.output_schema);
    io.guardrails = mergeGuardrails(configuredGuardrails(defaults.guardrails), request.guardrails);
    io.choice = resolveProvider(request, this.config.providers);
    runSystemPrompt(defaults.system, request.system, defaults.system_prompt_override);
    if (request.fork === undefined || io.keeper.resume?.snapshot !== undefined) return undefined;
    return this.config.features.fork(request).then((fork) => {
      io.fork = fork;
    });
  }

  /** Enters the run in the active runs, with its deadline, and lets its keeper fence or cancel it. */
  private startActive(
    io: RunIo,
    timeoutMs: number,
    external: AbortSignal | undefined,
    fresh: boolean,
  ): ActiveRun {
    const { runId, sink } = io;
    const deadline = Date.parse(io.startedAt) + timeoutMs;
    const run = this.config.active.start(runId, timeoutMs, deadline, external, fresh);
    io.keeper.attach({
      fence: (error) => {
        sink.fence();
        io.publisher.close();
        run.controller.abort(error);
      },
      cancel: (reason) => this.config.active.cancel(runId, reason),
    });
    return run;
  }

  /**
   * On a durable event log a new run is set up only once its `run.accepted` is stored: the submitter hears the
   * acceptance before the run's setup (its tool list, `run.started`, the first model turn) takes the event loop, and
   * the process handles the I/O that came in meanwhile (other deliveries, acknowledgements) before that setup too.
   */
  private async acceptanceStored(io: RunIo): Promise<void> {
    if (!this.config.bus.durable) return;
    await io.publisher.flush();
    await new Promise<void>((resolve) => setImmediate(resolve));
  }

  /** Builds the run's context: its snapshot (new or resumed), its tools, its system prompt; warns at run start. */
  private async prepare(io: RunIo, run: ActiveRun): Promise<RunContext> {
    const { config } = this;
    const { request, runId } = io;
    const choice = io.choice!;
    const resumed = io.keeper.resume?.snapshot;
    const snapshot = (io.snapshot =
      resumed ??
      initialSnapshot(
        { request, runId, plannerId: config.plannerId, choice, startedAt: io.startedAt, fork: io.fork },
        config.defaults,
        config.capabilities,
      ));
    snapshot.planner_id = config.plannerId;
    const caps = config.capabilities.resolve(choice.kind, choice.model);
    const scope = toolScope(config.defaults, request);
    const specs = await this.loadTools(io, scope, run.controller.signal, resumed === undefined);
    io.leaveSetup();
    specs.push(...config.features.offeredTools(request));
    const toolProtocol = choice.toolProtocol ?? caps.tool_protocol;
    const offered = offeredTools(io, specs, caps.native_tools || toolProtocol === 'text');
    const search = searchDefaults(config.defaults);
    const env = this.environment(io, {
      caps,
      scope,
      searchLimit: search.limit ?? 10,
      toolProtocol,
      warnUnpriced: resumed === undefined,
    });
    const ctx = new RunContext(snapshot, offered, env, {
      sink: io.sink,
      signal: run.controller.signal,
      stopReason: () => run.stop,
    });
    ctx.resumedInBatch = resumed?.phase === 'tools';
    ctx.exposure.promote(io.fork?.found ?? []);
    ctx.exposure.surface(io.fork?.surfaced ?? []);
    await this.joinSession(io, ctx, resumed === undefined);
    if (resumed === undefined && env.guardrails !== undefined)
      snapshot.guard_checked = snapshot.messages.length - 1;
    await this.attachSkillsAndDaemon(io, ctx, resumed === undefined);
    if (resumed === undefined)
      snapshot.system = buildSystemPrompt({
        system: runSystemPrompt(
          config.defaults.system,
          request.system,
          config.defaults.system_prompt_override,
        ),
        toolSearch: snapshot.search.mode === 'client' && ctx.exposure.hasDeferred,
        ...(search.include_stub_listing && snapshot.search.mode === 'client'
          ? { stubs: ctx.exposure.stubs() }
          : {}),
      });
    else
      io.log.info(
        { phase: snapshot.phase, iteration: snapshot.iteration, seq: io.sink.lastSeq },
        'run resumed',
      );
    return ctx;
  }

  /**
   * The run's skills (a new run starts with its session's active ones and warns of forced skills nobody has) and its
   * daemon's trigger queue, which a resumed run picks up where it was.
   */
  private async attachSkillsAndDaemon(io: RunIo, ctx: RunContext, fresh: boolean): Promise<void> {
    const { features } = this.config;
    const snapshot = ctx.state;
    ctx.skills = features.skills(io.request, snapshot, fresh ? io.session?.activeSkills : undefined);
    ctx.daemon = await features.daemon(io.request, snapshot);
    if (!fresh && io.keeper.resume !== undefined) ctx.daemon?.resumed(ctx, io.keeper.resume);
    if (fresh)
      for (const problem of ctx.skills?.unknownForced() ?? [])
        io.sink.emit(warning('unknown_skill', problem));
  }

  /** A run with a session waits for the session's lock, then (when new) starts from its earlier transcript. */
  private async joinSession(io: RunIo, ctx: RunContext, fresh: boolean): Promise<void> {
    io.session = await this.config.features.session(
      io.request,
      { tenant: ctx.identity.tenant, runId: io.runId },
      ctx.signal,
    );
    if (io.session === undefined || !fresh) return;
    const earlier = await io.session.startingMessages({
      maxTokens: this.config.defaults.sessions?.max_tokens ?? DEFAULT_SESSION_MAX_TOKENS,
      provider: ctx.env.provider,
      sink: io.sink,
      signal: ctx.signal,
      log: io.log,
    });
    ctx.state.messages = [...earlier, ...ctx.state.messages];
  }

  /** The model's price; a new run whose model has none starts with a `run.warning`. */
  private priceOrWarn(io: RunIo, warn: boolean): Price | undefined {
    const choice = io.choice!;
    const price = this.config.prices.priceOf(choice.kind, choice.model);
    if (price === undefined && warn)
      io.sink.emit({
        type: 'run.warning',
        code: 'price_unknown',
        message: `no price is known for ${choice.kind} model ${choice.model}: the run's cost is not counted (add it under prices: in the configuration)`,
      });
    return price;
  }

  private environment(
    io: RunIo,
    settings: {
      caps: ModelCapabilities;
      scope: ToolScope;
      searchLimit: number;
      toolProtocol: ModelCapabilities['tool_protocol'];
      warnUnpriced: boolean;
    },
  ): RunEnvironment {
    const { config } = this;
    const choice = io.choice!;
    return {
      bus: config.bus,
      prefix: config.prefix,
      subjects: config.subjects,
      plannerId: config.plannerId,
      logger: io.log,
      provider: withContextWindow(
        config.clients.create(choice, { toolProtocol: settings.toolProtocol }),
        choice.contextWindow,
      ),
      capabilities: settings.caps,
      prices: config.prices,
      price: this.priceOrWarn(io, settings.warnUnpriced),
      catalogRetryMs: config.catalogRetryMs ?? CATALOG_RETRY_MS,
      searchLimit: settings.searchLimit,
      loopThresholds: { ...DEFAULT_LOOP_THRESHOLDS, ...config.defaults.loop_detect },
      nudge: config.defaults.nudge ?? DEFAULT_NUDGE,
      scope: settings.scope,
      subagents: config.defaults.subagents,
      ...io.keeper.checkpoints(io.publisher.flush, config.checkpoint),
      hitl: this.hitl(io),
      tools: config.features.tools(),
      quota: config.features.quota?.(io.request),
      guardrails: this.guardrails(io),
    };
  }

  /** The run's rules, compiled, and a judge that asks each `type: model` rule's own model. */
  private guardrails(io: RunIo): RunGuardrails | undefined {
    const { providers, clients } = this.config;
    return runGuardrails(io.guardrails, ({ provider, model, base_url, script }) =>
      clients.create(resolveProvider({ provider, model, base_url, script }, providers)),
    );
  }

  private hitl(io: RunIo): RunHitl<RunContext> | undefined {
    const keeper = io.keeper;
    return this.config.features.hitl(io.request, async (waiting) => {
      try {
        await keeper.setWaiting?.(waiting);
      } catch (error) {
        io.log.warn({ err: (error as Error).message, waiting }, 'could not record the waiting state');
      }
    });
  }

  /** The run's tools from the catalog; a new run also warns when no tool, or no tool of an allow-list entry, exists. */
  private async loadTools(
    io: RunIo,
    scope: ToolScope,
    signal: AbortSignal,
    warn: boolean,
  ): Promise<ToolSpec[]> {
    const { bus, subjects, catalogRetryMs } = this.config;
    try {
      const specs = await loadRunTools(bus, subjects, scope, {
        signal,
        retryForMs: catalogRetryMs,
        cache: this.toolLists,
      });
      if (!warn) return specs;
      const unmatched = (scope.allow ?? []).filter(
        (entry) =>
          !specs.some((s) => matchesToolPattern(s.name, entry)) &&
          !this.config.features.matchesPlannerTool(entry),
      );
      if (specs.length > 0 && unmatched.length === 0) return specs;
      const known =
        scope.allow === undefined
          ? []
          : await listToolNames(bus, subjects, { signal, retryForMs: catalogRetryMs });
      for (const w of startWarnings(known, unmatched)) io.sink.emit(w);
      return specs;
    } catch (error) {
      if (!signal.aborted) throw error;
      return [];
    }
  }

  private async finalize(io: RunIo): Promise<void> {
    const { sink, log } = io;
    const last = sink.events[sink.events.length - 1];
    const status = last?.type === 'run.completed' ? last.status : 'failed';
    const endedAt = new Date().toISOString();
    const store = this.config.transcripts();
    await Promise.all([
      io.publisher.flush(),
      store === undefined
        ? undefined
        : retry(() => store.save(transcriptOf(io, this.config.plannerId, status, endedAt)), {
            timeoutMs: TRANSCRIPT_SAVE_TIMEOUT_MS,
            retryable: () => true,
          }).catch((error: unknown) => log.warn({ err: (error as Error).message }, 'transcript not saved')),
    ]);
    await io.session
      ?.finish(
        io.runId,
        io.snapshot?.messages ?? [],
        io.snapshot?.skills?.active.map((a) => a.name),
      )
      .catch((error: unknown) => log.warn({ err: (error as Error).message }, 'session not saved'));
    await io.keeper
      .finish(status, endedAt)
      .catch((error: unknown) => log.warn({ err: (error as Error).message }, 'run record not updated'));
  }
}

/** The run's tools, offered to a model that can call them; none (with a notice) to one that has no tool calls. */
function offeredTools(io: RunIo, specs: ToolSpec[], canCall: boolean): ToolSpec[] {
  if (canCall) return specs;
  if (specs.length > 0)
    io.sink.emit(
      notice(
        'no_native_tools',
        `the capability table says ${io.choice!.kind} model ${io.choice!.model} has no native tool calls: no tools are offered`,
      ),
    );
  return [];
}

/** What is kept of a finished run: its request, provider, prompt, messages and events, and how it ended. */
function transcriptOf(
  io: RunIo,
  plannerId: string,
  status: RunTranscript['status'],
  endedAt: string,
): RunTranscript {
  const events = io.sink.events;
  const last = events[events.length - 1];
  return {
    version: 1,
    run_id: io.runId,
    planner_id: plannerId,
    request: io.request,
    provider: io.choice?.kind,
    model: io.choice?.model,
    system: io.snapshot?.system,
    status,
    reason:
      last?.type === 'run.completed'
        ? last.reason
        : last?.type === 'run.failed'
          ? last.error.message
          : undefined,
    started_at: io.startedAt,
    ended_at: endedAt,
    messages: io.snapshot?.messages ?? [],
    events,
  };
}
