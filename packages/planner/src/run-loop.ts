import {
  AgentMeshError,
  ArtifactFetchReplySchema,
  CatalogGetReplySchema,
  CatalogListReplySchema,
  CatalogSearchReplySchema,
  ErrorCode,
  fromProviderAlias,
  invokeTool,
  isToolName,
  matchesAnyToolPattern,
  requestJsonRetrying,
  type CatalogListReply,
  toErrorPayload,
  toProviderAlias,
  type Bus,
  type Identity,
  type Logger,
  type RunEventOf,
  type RunLimits,
  type RunRequest,
  type RunStatus,
  type SearchStrategy,
  type Subjects,
  type ToolOutcome,
  type ToolProgress,
  type ToolSpec,
} from '@agentmesh/protocol';
import type { z } from 'zod';
import type { ModelCapabilities } from './capabilities.js';
import type { RunEventSink } from './events.js';
import { ToolExposure } from './exposure.js';
import { LoopDetector, loopHint, loopRedirect, type LoopThresholds } from './loop-detector.js';
import {
  ArtifactFetchArgsSchema,
  ToolGetArgsSchema,
  ToolSearchArgsSchema,
  isMetaTool,
  type MetaToolName,
} from './meta-tools.js';
import type { Price, PriceTable } from './prices.js';
import type { ChatMessage, ChatToolCall, ModelProvider, ModelTurn, TokenUsage } from './providers/types.js';
import type { BatchCall, CheckpointHook, RunSnapshot, ToolBatch } from './run-state.js';
import { Semaphore, abortableDelay, capText } from './util.js';

/** Codes the loop puts on tool results it produced itself. */
export const LoopErrorCode = {
  LoopDetected: ErrorCode.LoopDetected,
  BudgetExhausted: ErrorCode.BudgetExhausted,
} as const;

export const DEFAULT_NUDGE =
  'You have not finished: there is no final answer yet. Continue the task, using your tools where they help, and ' +
  'reply with the final answer as text when the task is complete.';

export interface RunLoopDeps {
  bus: Bus;
  /** How long catalog and artifact requests ride out a restart before failing (default 30 s). */
  catalogRetryMs?: number;
  prefix: string;
  subjects: Subjects;
  plannerId: string;
  logger: Logger;
  provider: ModelProvider;
  capabilities: ModelCapabilities;
  prices: PriceTable;
  price: Price | undefined;
  sink: RunEventSink;
  /** Aborts on cancel and on the run timeout; `stopReason` says which. */
  signal: AbortSignal;
  stopReason: () => { status: 'cancelled' | 'timeout'; reason: string } | undefined;
  searchLimit: number;
  loopThresholds: LoopThresholds;
  nudge: string;
  checkpoint: CheckpointHook | undefined;
  /** Called after each single tool result inside a batch (durable runs store these too). */
  resultCheckpoint?: CheckpointHook | undefined;
  /** The catalog scope of this run. */
  scope: { allow?: string[]; deferred?: string[]; always?: string[] };
}

interface PreparedCall {
  index: number;
  call: ChatToolCall;
  name: string;
  args: unknown;
  problem?: AgentMeshError;
}

interface CallResult {
  content: string;
  isError: boolean;
  succeeded: boolean;
}

type CompletedEvent = RunEventOf<'run.completed'>;

/**
 * The agent loop of one run: model turn, tool dispatch, repeat, until a final status. All of its state lives in a
 * {@link RunSnapshot}, checkpointed after each model turn and each batch of tool results.
 */
export class RunLoop {
  private readonly exposure: ToolExposure;
  private readonly loopDetector: LoopDetector;
  private readonly identity: Identity;
  private readonly request: RunRequest;
  private readonly limits: RunLimits;
  private readonly log: Logger;
  private costWarned = false;

  constructor(
    readonly state: RunSnapshot,
    specs: readonly ToolSpec[],
    private readonly deps: RunLoopDeps,
  ) {
    this.request = state.request;
    this.limits = state.limits;
    this.identity = state.request.identity ?? { tenant: 'default' };
    this.exposure = new ToolExposure({
      specs,
      mode: state.search.mode,
      nativeVariant: state.search.native_variant,
      maxTools: deps.capabilities.max_tools,
      budgetTokens: state.search.budget_tokens,
      state: state.exposure,
    });
    this.loopDetector = new LoopDetector(state.loop, deps.loopThresholds);
    this.log = deps.logger;
  }

  get toolExposure(): ToolExposure {
    return this.exposure;
  }

  async run(): Promise<CompletedEvent> {
    const { state, deps } = this;
    try {
      for (;;) {
        const stop = this.stopCheck();
        if (stop) return this.finish(stop.status, stop.reason);
        if (state.phase === 'tools') {
          const last = state.messages[state.messages.length - 1];
          const calls = last?.role === 'assistant' ? (last.tool_calls ?? []) : [];
          const outcome = await this.runTools(calls);
          state.phase = 'model';
          await this.checkpoint();
          const afterTools = this.stopCheck();
          if (afterTools) return this.finish(afterTools.status, afterTools.reason);
          if (outcome.budgetHit)
            return this.finish('budget_exhausted', `max_tool_calls (${this.limits.max_tool_calls}) reached`);
          if (outcome.stopAfter !== undefined)
            return this.finish('done', `stop_after_successful_tools: ${outcome.stopAfter} succeeded`);
          continue;
        }
        const budget = this.budgetCheck();
        if (budget) return this.finish('budget_exhausted', budget);
        const turn = await this.modelTurn();
        if (turn.tool_calls.length > 0) {
          state.nudges = 0;
          state.phase = 'tools';
          await this.checkpoint();
          continue;
        }
        const text = turn.text.trim();
        const required = this.request.require_successful_tools ?? [];
        const requiredMet =
          required.length === 0 || state.succeeded.some((n) => matchesAnyToolPattern(n, required));
        if (text !== '' && requiredMet) return this.finish('done', 'the model gave a final answer');
        state.nudges++;
        if (state.nudges > this.limits.max_nudges) {
          if (text !== '' && !requiredMet)
            return this.finish(
              'failed',
              `require_successful_tools: none of ${required.join(', ')} succeeded`,
            );
          return this.finish(
            'stuck',
            `${state.nudges} consecutive turns without a tool call or an answer (max_nudges ${this.limits.max_nudges})`,
          );
        }
        const nudge =
          text !== '' && !requiredMet
            ? `${deps.nudge} The task requires a successful call of one of: ${required.join(', ')}.`
            : deps.nudge;
        state.messages.push({ role: 'user', content: nudge });
        deps.sink.emit({
          type: 'run.notice',
          kind: 'nudge',
          message: nudge,
          details: { nudges: state.nudges },
        });
        await this.checkpoint();
      }
    } catch (error) {
      const stop = this.stopCheck();
      if (stop) return this.finish(stop.status, stop.reason);
      const payload = toErrorPayload(error);
      this.log.warn({ code: payload.code, err: payload.message }, 'run failed');
      deps.sink.emit({
        type: 'run.notice',
        kind: 'error',
        message: payload.message,
        details: { code: payload.code },
      });
      return this.finish('failed', `${payload.code}: ${payload.message}`);
    }
  }

  private stopCheck(): { status: RunStatus; reason: string } | undefined {
    return this.deps.signal.aborted
      ? (this.deps.stopReason() ?? { status: 'cancelled', reason: 'cancelled' })
      : undefined;
  }

  private budgetCheck(): string | undefined {
    const { state, limits } = this;
    if (state.iteration >= limits.max_iterations) return `max_iterations (${limits.max_iterations}) reached`;
    const tokens = state.usage.input_tokens + state.usage.output_tokens;
    if (limits.max_tokens !== undefined && tokens >= limits.max_tokens)
      return `max_tokens (${limits.max_tokens}) reached: ${tokens} tokens used`;
    if (limits.max_cost_usd !== undefined) {
      if (state.usage.cost_usd === undefined) {
        if (!this.costWarned) {
          this.costWarned = true;
          this.deps.sink.emit({
            type: 'run.notice',
            kind: 'cost_unknown',
            message: `no price is configured for ${this.deps.provider.kind} model ${this.deps.provider.model}: max_cost_usd cannot be enforced`,
          });
        }
      } else if (state.usage.cost_usd >= limits.max_cost_usd)
        return `max_cost_usd (${limits.max_cost_usd}) reached: $${state.usage.cost_usd.toFixed(6)} spent`;
    }
    return undefined;
  }

  private async checkpoint(): Promise<void> {
    this.state.seq = this.deps.sink.lastSeq;
    if (this.deps.checkpoint) await this.deps.checkpoint(this.state);
  }

  private finish(status: RunStatus, reason: string): CompletedEvent {
    const { state } = this;
    state.phase = 'finished';
    state.status = status;
    state.reason = reason;
    const event = this.deps.sink.emit({
      type: 'run.completed',
      status,
      reason,
      text: state.last_text,
      iterations: state.iteration,
      tool_calls: state.tool_calls,
      usage: { ...state.usage },
      // models (issue 20): the run's cost whenever the model's price is known
      ...(state.usage.cost_usd === undefined ? {} : { cost_usd: state.usage.cost_usd }),
    });
    state.seq = event.seq;
    return event;
  }

  private async modelTurn(): Promise<ModelTurn> {
    const { state, deps } = this;
    state.iteration++;
    const turnTools = this.exposure.beginTurn();
    if (turnTools.evicted.length > 0)
      deps.sink.emit({
        type: 'run.notice',
        kind: 'tools_evicted',
        message: `promoted tools evicted to stay within the tool budget: ${turnTools.evicted.join(', ')}`,
        details: { evicted: turnTools.evicted },
      });
    deps.sink.emit({ type: 'llm.request', iteration: state.iteration, tools: turnTools.offered });
    const turn = await deps.provider.complete({
      model: deps.provider.model,
      system: state.system,
      messages: state.messages,
      tools: turnTools.tools,
      parallelCalls: deps.capabilities.parallel_calls,
      ...(state.search.mode === 'native' &&
      state.search.native_variant !== undefined &&
      this.exposure.hasDeferred
        ? { nativeSearch: state.search.native_variant }
        : {}),
      signal: deps.signal,
      // models (issue 20): thinking streams out as llm.delta events of kind reasoning
      onDelta: (d) => {
        if (d.kind === 'reasoning')
          deps.sink.emit({ type: 'llm.delta', iteration: state.iteration, kind: d.kind, text: d.text });
      },
    });
    const usage = turn.usage;
    state.usage.input_tokens += usage.input_tokens;
    state.usage.output_tokens += usage.output_tokens;
    addUsageDetails(state.usage, usage); // models (issue 20)
    const cost = deps.prices.cost(deps.price, usage);
    if (cost !== undefined) state.usage.cost_usd = (state.usage.cost_usd ?? 0) + cost;

    const seen = new Set<string>();
    const calls = turn.tool_calls.map((c, i) => {
      let id = c.id;
      if (id === '' || seen.has(id)) id = `call_${state.iteration}_${i + 1}`;
      seen.add(id);
      return { ...c, id };
    });
    turn.tool_calls = calls;
    if (turn.text.trim() !== '') state.last_text = turn.text;
    deps.sink.emit({
      type: 'llm.response',
      iteration: state.iteration,
      text: turn.text,
      tool_calls: calls.map((c) => ({
        id: c.id,
        name: canonicalName(c.name),
        arguments: parseArgs(c.arguments),
      })),
      usage: { ...usage, ...(cost === undefined ? {} : { cost_usd: cost }) },
    });
    for (const search of turn.native_searches ?? []) {
      this.exposure.surface(search.results);
      deps.sink.emit({
        type: 'tool.search',
        query: search.query,
        strategy: search.variant,
        results: search.results,
        native: true,
      });
    }
    const message: ChatMessage = {
      role: 'assistant',
      content: turn.text,
      ...(calls.length > 0 ? { tool_calls: calls } : {}),
      ...(turn.native ? { native: turn.native } : {}),
    };
    state.messages.push(message);
    return turn;
  }

  private prepare(calls: readonly ChatToolCall[]): PreparedCall[] {
    return calls.map((call, index) => {
      const name = canonicalName(call.name);
      const base = { index, call, name, args: undefined as unknown };
      if (!isMetaTool(name) && (!isToolName(name) || !this.exposure.isKnown(name)))
        return {
          ...base,
          problem: new AgentMeshError(
            ErrorCode.UnknownTool,
            `unknown tool "${call.name}": no tool of that name is available to this run`,
            { retryable: false },
          ),
        };
      if (!this.exposure.isCallable(name)) {
        const hint = this.exposure.isDeferred(name)
          ? this.exposure.state.pending.includes(name)
            ? ' It was just found by a search and becomes callable on your next turn.'
            : ' Find it with tool_search first; found tools become callable on the next turn.'
          : '';
        return {
          ...base,
          problem: new AgentMeshError(
            ErrorCode.ToolNotOffered,
            `tool "${call.name}" was not offered this turn.${hint}`,
            {
              retryable: false,
            },
          ),
        };
      }
      let args: unknown;
      try {
        args = call.arguments.trim() === '' ? {} : (JSON.parse(call.arguments) as unknown);
      } catch (error) {
        return {
          ...base,
          problem: new AgentMeshError(
            ErrorCode.InvalidArguments,
            `malformed JSON arguments for tool "${call.name}": ${(error as Error).message}`,
            { retryable: false },
          ),
        };
      }
      if (args === null || typeof args !== 'object' || Array.isArray(args))
        return {
          ...base,
          problem: new AgentMeshError(
            ErrorCode.InvalidArguments,
            `arguments of tool "${call.name}" must be a JSON object`,
            {
              retryable: false,
            },
          ),
        };
      return { ...base, args };
    });
  }

  /**
   * Runs the calls of one response: fail-closed checks in order, then execution in parallel, results in order. The
   * plan and each result are kept in `state.batch` and checkpointed as they come, so a resumed run re-sends only the
   * calls that have no result yet.
   */
  private async runTools(
    calls: readonly ChatToolCall[],
  ): Promise<{ budgetHit: boolean; stopAfter?: string }> {
    const { state, limits } = this;
    const prepared = this.prepare(calls);
    const batch = (state.batch ??= this.planBatch(prepared));
    const gate = new Semaphore(limits.tool_concurrency);
    const pending: Promise<void>[] = [];
    prepared.forEach((p, i) => {
      const planned = batch.calls[i];
      if (planned === undefined || planned.result !== undefined || planned.plan !== 'run') return;
      const verdict = planned.verdict ?? { action: 'ok', count: 1 };
      pending.push(
        (async () => {
          const release = await gate.acquire();
          let r: CallResult;
          try {
            r = isMetaTool(p.name) ? await this.runMeta(p, p.name) : await this.runRemote(p);
          } finally {
            release();
          }
          if (verdict.action === 'warn')
            r = { ...r, content: `${r.content}\n\n${loopHint(p.call.name, verdict.count)}` };
          else if (verdict.action === 'block')
            r = { ...r, content: loopRedirect(p.call.name, verdict.count, true), isError: true };
          planned.result = { content: r.content, is_error: r.isError, succeeded: r.succeeded };
          if (!this.deps.signal.aborted && this.deps.resultCheckpoint !== undefined) {
            this.state.seq = this.deps.sink.lastSeq;
            await this.deps.resultCheckpoint(this.state);
          }
        })(),
      );
    });
    await Promise.all(pending);
    let stopAfter: string | undefined;
    const stopList = this.request.stop_after_successful_tools ?? [];
    prepared.forEach((p, i) => {
      const r = batch.calls[i]?.result ?? {
        content: 'error (internal): the call has no result',
        is_error: true,
        succeeded: false,
      };
      state.messages.push({
        role: 'tool',
        call_id: p.call.id,
        name: p.call.name,
        content: capText(r.content, limits.max_output_bytes),
        is_error: r.is_error,
      });
      if (r.succeeded) {
        if (!state.succeeded.includes(p.name)) state.succeeded.push(p.name);
        if (stopAfter === undefined && matchesAnyToolPattern(p.name, stopList)) stopAfter = p.name;
      }
    });
    const budgetHit = batch.budget_hit;
    state.batch = undefined;
    return { budgetHit, ...(stopAfter === undefined ? {} : { stopAfter }) };
  }

  /** Decides each call of a batch once (refusals answered now, loop verdicts, the tool call budget). */
  private planBatch(prepared: readonly PreparedCall[]): ToolBatch {
    const { state, deps, limits } = this;
    const batch: ToolBatch = { calls: [], budget_hit: false };
    const refused = (p: PreparedCall, error: AgentMeshError): BatchCall => {
      const r = this.refuse(p, error);
      return {
        call_id: p.call.id,
        plan: 'refused',
        result: { content: r.content, is_error: r.isError, succeeded: r.succeeded },
      };
    };
    for (const p of prepared) {
      if (p.problem) {
        batch.calls.push(refused(p, p.problem));
        continue;
      }
      const verdict = this.loopDetector.observe(p.name, p.args);
      if (verdict.action === 'skip') {
        deps.sink.emit({
          type: 'run.notice',
          kind: 'loop_detected',
          message: `${p.name} called ${verdict.count} times in a row with identical arguments: not executed`,
          details: { call_id: p.call.id, name: p.name, count: verdict.count, action: 'skip' },
        });
        batch.calls.push(
          refused(
            p,
            new AgentMeshError(LoopErrorCode.LoopDetected, loopRedirect(p.call.name, verdict.count, false), {
              retryable: false,
            }),
          ),
        );
        continue;
      }
      if (state.tool_calls >= limits.max_tool_calls) {
        batch.budget_hit = true;
        batch.calls.push(
          refused(
            p,
            new AgentMeshError(
              LoopErrorCode.BudgetExhausted,
              `not executed: this run's tool call budget (max_tool_calls ${limits.max_tool_calls}) is used up`,
              { retryable: false },
            ),
          ),
        );
        continue;
      }
      state.tool_calls++;
      if (verdict.action === 'block')
        deps.sink.emit({
          type: 'run.notice',
          kind: 'loop_detected',
          message: `${p.name} called ${verdict.count} times in a row with identical arguments: result replaced by a redirect`,
          details: { call_id: p.call.id, name: p.name, count: verdict.count, action: 'block' },
        });
      batch.calls.push({
        call_id: p.call.id,
        plan: 'run',
        verdict: { action: verdict.action === 'run' ? 'ok' : verdict.action, count: verdict.count },
      });
    }
    return batch;
  }

  /** A call that is never executed: an error result for the model and a tool.failed event from the planner. */
  private refuse(p: PreparedCall, error: AgentMeshError): CallResult {
    this.deps.sink.emit({
      type: 'tool.failed',
      call_id: p.call.id,
      name: p.name,
      worker_id: this.deps.plannerId,
      elapsed_ms: 0,
      is_error: true,
      error: { code: error.code, message: error.message, retryable: error.retryable },
      preview: error.message,
    });
    return { content: `error (${error.code}): ${error.message}`, isError: true, succeeded: false };
  }

  private async runRemote(p: PreparedCall): Promise<CallResult> {
    const { deps, state, limits } = this;
    const spec = this.exposure.spec(p.name);
    const started = performance.now();
    let startedBy: string | undefined;
    const emitStarted = (workerId: string) => {
      if (startedBy !== undefined) return;
      startedBy = workerId;
      deps.sink.emit({ type: 'tool.started', call_id: p.call.id, name: p.name, worker_id: workerId });
    };
    const onProgress = (progress: ToolProgress) => {
      if (progress.call_id !== p.call.id) return;
      if (progress.kind === 'started') emitStarted(progress.worker_id);
      else if (progress.kind === 'progress') {
        emitStarted(progress.worker_id);
        deps.sink.emit({
          type: 'tool.progress',
          call_id: p.call.id,
          name: p.name,
          worker_id: progress.worker_id,
          ...(progress.message === undefined ? {} : { message: progress.message }),
          ...(progress.data === undefined ? {} : { data: progress.data }),
        });
      }
    };
    const retries = this.request.tool_retries ?? 0;
    const perAttempt = spec ? spec.timeout_ms * Math.max(1, spec.retry.max_attempts) + 5_000 : 60_000;
    let outcome: ToolOutcome | undefined;
    let failure: AgentMeshError | undefined;
    let attempts = 0;
    for (let attempt = 1; attempt <= retries + 1; attempt++) {
      attempts = attempt;
      outcome = undefined;
      failure = undefined;
      try {
        outcome = await invokeTool(
          deps.bus,
          {
            call_id: p.call.id,
            tool: p.name,
            arguments: p.args,
            run_id: state.run_id,
            identity: this.identity,
            attempt,
            idempotency_key: `${state.run_id}:${state.iteration}:${p.call.id}`,
            max_output_bytes: limits.max_output_bytes,
            ...(spec ? { timeout_ms: spec.timeout_ms } : {}),
          },
          {
            prefix: deps.prefix,
            timeoutMs: perAttempt,
            signal: deps.signal,
            onProgress,
            idempotent: spec?.idempotent ?? false,
          },
        );
      } catch (error) {
        failure = AgentMeshError.from(error);
      }
      if (deps.signal.aborted) break;
      const retryable = failure
        ? failure.retryable
        : outcome?.is_error === true && outcome.error?.retryable === true;
      if (!retryable || attempt > retries) break;
      await abortableDelay(Math.min(2_000, 100 * 2 ** (attempt - 1)), deps.signal).catch(() => undefined);
      if (deps.signal.aborted) break;
    }
    const elapsed = Math.round((performance.now() - started) * 1000) / 1000;
    if (deps.signal.aborted && outcome === undefined) {
      const stop = this.stopCheck();
      failure = new AgentMeshError(
        stop?.status === 'timeout' ? ErrorCode.Timeout : ErrorCode.Cancelled,
        `tool call aborted: ${stop?.reason ?? 'run stopped'}`,
      );
    }
    if (outcome !== undefined) {
      emitStarted(outcome.worker_id);
      const totalAttempts = Math.max(attempts, outcome.attempts);
      if (outcome.artifact) this.exposure.noteArtifact();
      const artifactNote = outcome.artifact
        ? `\n[full output stored as artifact ref=${outcome.artifact.ref} (${outcome.artifact.mime}, ${outcome.artifact.size} bytes); read more with artifact_fetch]`
        : '';
      if (!outcome.is_error) {
        deps.sink.emit({
          type: 'tool.completed',
          call_id: p.call.id,
          name: p.name,
          worker_id: outcome.worker_id,
          elapsed_ms: outcome.elapsed_ms,
          is_error: false,
          preview: outcome.preview,
          ...(outcome.artifact ? { artifact: outcome.artifact } : {}),
          attempts: totalAttempts,
        });
        return { content: outcome.preview + artifactNote, isError: false, succeeded: true };
      }
      const error = outcome.error ?? {
        code: ErrorCode.ToolError,
        message: outcome.preview,
        retryable: false,
      };
      deps.sink.emit({
        type: 'tool.failed',
        call_id: p.call.id,
        name: p.name,
        worker_id: outcome.worker_id,
        elapsed_ms: outcome.elapsed_ms,
        is_error: true,
        error: { code: error.code, message: error.message, retryable: error.retryable },
        preview: outcome.preview,
        ...(outcome.artifact ? { artifact: outcome.artifact } : {}),
        attempts: totalAttempts,
      });
      return {
        content: (outcome.preview || `error (${error.code}): ${error.message}`) + artifactNote,
        isError: true,
        succeeded: false,
      };
    }
    const error = failure ?? new AgentMeshError(ErrorCode.Internal, 'tool call ended without an outcome');
    const workerId = startedBy ?? deps.plannerId;
    emitStarted(workerId);
    deps.sink.emit({
      type: 'tool.failed',
      call_id: p.call.id,
      name: p.name,
      worker_id: workerId,
      elapsed_ms: elapsed,
      is_error: true,
      error: { code: error.code, message: error.message, retryable: error.retryable },
      preview: error.message,
      attempts,
    });
    return { content: `error (${error.code}): ${error.message}`, isError: true, succeeded: false };
  }

  private async runMeta(p: PreparedCall, name: MetaToolName): Promise<CallResult> {
    const { deps } = this;
    const started = performance.now();
    deps.sink.emit({ type: 'tool.started', call_id: p.call.id, name, worker_id: deps.plannerId });
    let content: string;
    try {
      content =
        name === 'tool_search'
          ? await this.toolSearch(parseMetaArgs(ToolSearchArgsSchema, p.args, name))
          : name === 'tool_get'
            ? await this.toolGet(parseMetaArgs(ToolGetArgsSchema, p.args, name))
            : await this.artifactFetch(parseMetaArgs(ArtifactFetchArgsSchema, p.args, name));
    } catch (error) {
      const e = AgentMeshError.from(error);
      deps.sink.emit({
        type: 'tool.failed',
        call_id: p.call.id,
        name,
        worker_id: deps.plannerId,
        elapsed_ms: Math.round(performance.now() - started),
        is_error: true,
        error: { code: e.code, message: e.message, retryable: e.retryable },
        preview: e.message,
      });
      return { content: `error (${e.code}): ${e.message}`, isError: true, succeeded: false };
    }
    deps.sink.emit({
      type: 'tool.completed',
      call_id: p.call.id,
      name,
      worker_id: deps.plannerId,
      elapsed_ms: Math.round((performance.now() - started) * 1000) / 1000,
      is_error: false,
      preview: content.length > 512 ? `${content.slice(0, 509)}...` : content,
      attempts: 1,
    });
    return { content, isError: false, succeeded: true };
  }

  private catalogOptions() {
    return {
      timeoutMs: 5_000,
      retryForMs: this.deps.catalogRetryMs ?? CATALOG_RETRY_MS,
      signal: this.deps.signal,
    };
  }

  private async toolSearch(args: z.infer<typeof ToolSearchArgsSchema>): Promise<string> {
    const { deps, state } = this;
    const strategy = (state.search.strategy === 'off' ? 'bm25' : state.search.strategy) as SearchStrategy;
    const reply = await requestJsonRetrying(
      deps.bus,
      deps.subjects.catalogSearch,
      {
        ...deps.scope,
        query: args.query,
        strategy,
        limit: args.limit ?? deps.searchLimit,
        deferred_only: true,
      },
      CatalogSearchReplySchema,
      this.catalogOptions(),
    );
    const found: { name: string; description: string }[] = [];
    for (const r of reply.results) {
      if (!this.exposure.spec(r.name)) await this.learn(r.name);
      if (this.exposure.isDeferred(r.name)) found.push({ name: r.name, description: r.description });
    }
    this.exposure.promote(found.map((f) => f.name));
    deps.sink.emit({
      type: 'tool.search',
      query: args.query,
      strategy: reply.strategy,
      results: found.map((f) => f.name),
      native: false,
    });
    if (found.length === 0) return JSON.stringify({ tools: [], note: 'No tools matched. Try other words.' });
    return JSON.stringify({
      tools: found.map((f) => ({ name: toProviderAlias(f.name), description: f.description })),
      note: 'These tools become callable on your next turn.',
    });
  }

  private async learn(name: string): Promise<ToolSpec | undefined> {
    try {
      const reply = await requestJsonRetrying(
        this.deps.bus,
        this.deps.subjects.catalogGet,
        { ...this.deps.scope, name },
        CatalogGetReplySchema,
        this.catalogOptions(),
      );
      this.exposure.learn([reply.tool]);
      return reply.tool;
    } catch (error) {
      if (error instanceof AgentMeshError && error.code === ErrorCode.NotFound) return undefined;
      throw error;
    }
  }

  private async toolGet(args: z.infer<typeof ToolGetArgsSchema>): Promise<string> {
    const name = canonicalName(args.name);
    if (!isToolName(name))
      throw new AgentMeshError(ErrorCode.InvalidArguments, `"${args.name}" is not a tool name`, {
        retryable: false,
      });
    const spec = this.exposure.spec(name) ?? (await this.learn(name));
    if (spec === undefined)
      throw new AgentMeshError(ErrorCode.NotFound, `no tool named "${args.name}" is available to this run`, {
        retryable: false,
      });
    const queued = this.exposure.promote([name]).length > 0 || this.exposure.state.pending.includes(name);
    return JSON.stringify({
      name: toProviderAlias(spec.name),
      description: spec.description,
      input_schema: spec.input_schema,
      callable: this.exposure.isCallable(name) ? 'now' : queued ? 'from your next turn' : 'no',
    });
  }

  private async artifactFetch(args: z.infer<typeof ArtifactFetchArgsSchema>): Promise<string> {
    const reply = await requestJsonRetrying(
      this.deps.bus,
      this.deps.subjects.artifactFetch,
      {
        ref: args.ref,
        offset: args.offset ?? 0,
        max_bytes: args.max_bytes ?? 65_536,
        identity: this.identity,
      },
      ArtifactFetchReplySchema,
      this.catalogOptions(),
    );
    return JSON.stringify(reply);
  }
}

/** models (issue 20): adds the cache and reasoning token counts of one response to the run's usage. */
function addUsageDetails(total: RunSnapshot['usage'], turn: TokenUsage): void {
  for (const key of ['cache_read_tokens', 'cache_write_tokens', 'reasoning_tokens'] as const) {
    const n = turn[key];
    if (n) total[key] = (total[key] ?? 0) + n;
  }
}

/** Maps a provider alias (`fs__read_file`) back to the canonical name; meta-tools and canonical names pass as is. */
export function canonicalName(name: string): string {
  return name.includes('__') ? fromProviderAlias(name) : name;
}

/** Arguments for events: the parsed object when the JSON is valid, the raw text otherwise. */
function parseArgs(raw: string): unknown {
  if (raw.trim() === '') return {};
  try {
    return JSON.parse(raw) as unknown;
  } catch {
    return raw;
  }
}

function parseMetaArgs<S extends z.ZodType>(schema: S, args: unknown, name: string): z.output<S> {
  const r = schema.safeParse(args);
  if (r.success) return r.data;
  const issues = r.error.issues.map((i) => `${i.path.join('.') || '(root)'}: ${i.message}`).join('; ');
  throw new AgentMeshError(ErrorCode.InvalidArguments, `invalid arguments for ${name}: ${issues}`, {
    retryable: false,
  });
}

/** How long a run waits for the catalog (or an artifact server) to answer through a restart or failover. */
const CATALOG_RETRY_MS = 30_000;

/** Loads the run's tools from the catalog (specs within the allow-list, loading resolved for this run). */
export async function loadRunTools(
  bus: Bus,
  subjects: Subjects,
  scope: { allow?: string[]; deferred?: string[]; always?: string[] },
  signal: AbortSignal,
  retryForMs: number = CATALOG_RETRY_MS,
): Promise<ToolSpec[]> {
  try {
    const specs: ToolSpec[] = [];
    for (let offset: number | undefined = 0; offset !== undefined;) {
      const reply: CatalogListReply = await requestJsonRetrying(
        bus,
        subjects.catalogList,
        { ...scope, full: true, ...(offset > 0 ? { offset } : {}) },
        CatalogListReplySchema,
        { timeoutMs: 5_000, retryForMs, signal },
      );
      specs.push(...(reply.specs ?? []));
      offset = reply.next_offset;
    }
    return specs;
  } catch (error) {
    const e = AgentMeshError.from(error);
    if (e.code === ErrorCode.NoResponders || e.code === ErrorCode.Timeout)
      throw new AgentMeshError(
        ErrorCode.Unavailable,
        `no catalog answered on ${subjects.catalogList} (${e.code}): start one ("agentmesh catalog") or run embedded`,
        { cause: e },
      );
    throw e;
  }
}
