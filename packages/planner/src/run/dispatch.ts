import {
  AgentMeshError,
  ErrorCode,
  invokeTool,
  isToolName,
  matchesAnyToolPattern,
  retry,
  type ToolOutcome,
  type ToolProgress,
  type ToolSpec,
} from '@agentmesh/protocol';
import { loopHint, loopRedirect } from '../loop-detector.js';
import { isMetaTool } from '../meta-tool-specs.js';
import type { ChatToolCall } from '../providers/types.js';
import type { BatchCall, ToolBatch } from '../model/snapshot.js';
import { Semaphore, capText } from '../util.js';
import type { RunContext } from './context.js';
import { notice, toolCompleted, toolFailed, toolStarted } from './events.js';
import { runMeta } from './meta-tools.js';
import type { CallResult, PreparedCall } from './calls.js';

export type { CallResult, PreparedCall } from './calls.js';
import { canonicalName } from './turn.js';
import { guardTool } from './guard.js';

/** Codes the loop puts on tool results it produced itself. */
export const LoopErrorCode = {
  LoopDetected: ErrorCode.LoopDetected,
  BudgetExhausted: ErrorCode.BudgetExhausted,
} as const;

export interface BatchOutcome {
  budgetHit: boolean;
  stopAfter?: string;
}

const refusal = (code: string, message: string) => new AgentMeshError(code, message, { retryable: false });

/** Fail-closed checks of one call: a known name, offered this turn, arguments a JSON object. */
function prepareCall(ctx: RunContext, call: ChatToolCall, index: number): PreparedCall {
  const { exposure } = ctx;
  const name = canonicalName(call.name);
  const base = { index, call, name, args: undefined as unknown };
  if (!isMetaTool(name) && (!isToolName(name) || !exposure.isKnown(name)))
    return {
      ...base,
      problem: refusal(
        ErrorCode.UnknownTool,
        `unknown tool "${call.name}": no tool of that name is available to this run`,
      ),
    };
  if (!exposure.isCallable(name)) {
    const hint = !exposure.isDeferred(name)
      ? ''
      : exposure.state.pending.includes(name)
        ? ' It was just found by a search and becomes callable on your next turn.'
        : ' Find it with tool_search first; found tools become callable on the next turn.';
    return {
      ...base,
      problem: refusal(ErrorCode.ToolNotOffered, `tool "${call.name}" was not offered this turn.${hint}`),
    };
  }
  let args: unknown;
  try {
    args = call.arguments.trim() === '' ? {} : (JSON.parse(call.arguments) as unknown);
  } catch (error) {
    return {
      ...base,
      problem: refusal(
        ErrorCode.InvalidArguments,
        `malformed JSON arguments for tool "${call.name}": ${(error as Error).message}`,
      ),
    };
  }
  if (args === null || typeof args !== 'object' || Array.isArray(args))
    return {
      ...base,
      problem: refusal(ErrorCode.InvalidArguments, `arguments of tool "${call.name}" must be a JSON object`),
    };
  const rule = guardTool(ctx, name, args);
  if (rule !== undefined)
    return {
      ...base,
      args,
      problem: new AgentMeshError(
        ErrorCode.GuardrailBlocked,
        `call of tool "${name}" blocked by guardrail "${rule.name}": it was not executed`,
        { retryable: false, details: { rule: rule.name } },
      ),
    };
  return { ...base, args };
}

/**
 * Runs the calls of one response: fail-closed checks in order, then execution in parallel (bounded by
 * tool_concurrency), results appended in call order. The plan and each result are kept in `state.batch` and
 * checkpointed as they come, so a resumed run re-sends only the calls that have no result yet. A call that needs an
 * approval waits for the decision here (outside the concurrency bound) while the other calls run.
 */
export async function dispatchTools(ctx: RunContext, calls: readonly ChatToolCall[]): Promise<BatchOutcome> {
  const { state, limits } = ctx;
  const sentBefore = ctx.resumedInBatch;
  ctx.resumedInBatch = false;
  const prepared = calls.map((call, i) => prepareCall(ctx, call, i));
  const batch = (state.batch ??= planBatch(ctx, prepared));
  const gate = new Semaphore(limits.tool_concurrency);
  await Promise.all(
    prepared.map(async (p, i) => {
      const planned = batch.calls[i];
      if (planned === undefined || planned.result !== undefined || planned.plan !== 'run') return;
      const denied = isMetaTool(p.name) ? undefined : await ctx.env.hitl?.gate(ctx, p);
      let r: CallResult;
      if (denied !== undefined) r = denied;
      else {
        const release = await gate.acquire();
        try {
          r =
            isMetaTool(p.name) || ctx.env.tools?.handles(p.name) === true
              ? await runMeta(ctx, p, p.name)
              : await runRemote(ctx, p, sentBefore);
        } finally {
          release();
        }
      }
      const verdict = planned.verdict ?? { action: 'ok', count: 1 };
      if (verdict.action === 'warn')
        r = { ...r, content: `${r.content}\n\n${loopHint(p.call.name, verdict.count)}` };
      else if (verdict.action === 'block')
        r = { ...r, content: loopRedirect(p.call.name, verdict.count, true), isError: true };
      planned.result = { content: r.content, is_error: r.isError, succeeded: r.succeeded };
      await ctx.resultCheckpoint();
    }),
  );
  return appendResults(ctx, prepared, batch);
}

function appendResults(ctx: RunContext, prepared: readonly PreparedCall[], batch: ToolBatch): BatchOutcome {
  const { state, limits } = ctx;
  let stopAfter: string | undefined;
  const stopList = ctx.request.stop_after_successful_tools ?? [];
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
  state.batch = undefined;
  return { budgetHit: batch.budget_hit, ...(stopAfter === undefined ? {} : { stopAfter }) };
}

/** Decides each call of a batch once (refusals answered now, loop verdicts, the tool call budget). */
function planBatch(ctx: RunContext, prepared: readonly PreparedCall[]): ToolBatch {
  const batch: ToolBatch = { calls: [], budget_hit: false };
  for (const p of prepared) batch.calls.push(planCall(ctx, p, batch));
  return batch;
}

/**
 * One call's plan: refused (a problem found while preparing it, a loop of identical calls, the tool call budget used
 * up, which `batch` then records) or run, with its loop verdict.
 */
function planCall(ctx: RunContext, p: PreparedCall, batch: ToolBatch): BatchCall {
  const { state, sink, limits } = ctx;
  if (p.problem) {
    if (p.problem.code === ErrorCode.GuardrailBlocked)
      sink.emit({
        type: 'guardrail.tripped',
        rule: String(p.problem.details?.['rule']),
        stage: 'tools',
        action: 'block',
        call_id: p.call.id,
      });
    return refusedCall(ctx, p, p.problem);
  }
  const verdict = ctx.loopDetector.observe(p.name, p.args);
  const loopDetails = { call_id: p.call.id, name: p.name, count: verdict.count, action: verdict.action };
  if (verdict.action === 'skip') {
    sink.emit(
      notice(
        'loop_detected',
        `${p.name} called ${verdict.count} times in a row with identical arguments: not executed`,
        loopDetails,
      ),
    );
    return refusedCall(
      ctx,
      p,
      refusal(LoopErrorCode.LoopDetected, loopRedirect(p.call.name, verdict.count, false)),
    );
  }
  if (state.tool_calls >= limits.max_tool_calls) {
    batch.budget_hit = true;
    const why = `not executed: this run's tool call budget (max_tool_calls ${limits.max_tool_calls}) is used up`;
    return refusedCall(ctx, p, refusal(LoopErrorCode.BudgetExhausted, why));
  }
  state.tool_calls++;
  if (verdict.action === 'block')
    sink.emit(
      notice(
        'loop_detected',
        `${p.name} called ${verdict.count} times in a row with identical arguments: result replaced by a redirect`,
        loopDetails,
      ),
    );
  return {
    call_id: p.call.id,
    plan: 'run',
    verdict: { action: verdict.action === 'run' ? 'ok' : verdict.action, count: verdict.count },
  };
}

function refusedCall(ctx: RunContext, p: PreparedCall, error: AgentMeshError): BatchCall {
  const r = refuse(ctx, p, error);
  return {
    call_id: p.call.id,
    plan: 'refused',
    result: { content: r.content, is_error: true, succeeded: false },
  };
}

/** A call that is never executed: an error result for the model and a tool.failed event from the planner. */
function refuse(ctx: RunContext, p: PreparedCall, error: AgentMeshError): CallResult {
  ctx.sink.emit(
    toolFailed({ call_id: p.call.id, name: p.name, worker_id: ctx.env.plannerId, elapsed_ms: 0 }, error),
  );
  return { content: `error (${error.code}): ${error.message}`, isError: true, succeeded: false };
}

/**
 * The idempotency key of one attempt of a call. Attempt 1 keeps the key a resumed run re-sends; each planner-level
 * retry gets a fresh one (`#2`, `#3`, ...), so a worker runs it again instead of replaying the first attempt's
 * cached error.
 */
export function attemptKey(runId: string, iteration: number, callId: string, attempt: number): string {
  const key = `${runId}:${iteration}:${callId}`;
  return attempt <= 1 ? key : `${key}#${attempt}`;
}

interface Dispatched {
  outcome?: ToolOutcome | undefined;
  failure?: AgentMeshError | undefined;
  attempts: number;
}

/** May the planner send this call again after `code`? Never once a non-idempotent tool may have run. */
function mayRetry(spec: ToolSpec | undefined, code: string, retryable: boolean | undefined): boolean {
  if (code === ErrorCode.WorkerLost && spec?.idempotent !== true) return false;
  return retryable === true;
}

/** Sends a call to the workers, re-sending it up to `tool_retries` times after a retryable failure. */
async function invokeWithRetries(
  ctx: RunContext,
  p: PreparedCall,
  onProgress: (progress: ToolProgress) => void,
  sentBefore: boolean,
): Promise<Dispatched> {
  const { state, env, limits } = ctx;
  const spec = ctx.exposure.spec(p.name);
  const retries = ctx.request.tool_retries ?? 0;
  const perAttempt = spec ? spec.timeout_ms * Math.max(1, spec.retry.max_attempts) + 5_000 : 60_000;
  const result: Dispatched = { attempts: 0 };
  let failedOutcome: AgentMeshError | undefined;
  try {
    result.outcome = await retry(
      async (attempt) => {
        result.attempts = attempt;
        result.outcome = undefined;
        const outcome = await invokeTool(
          env.bus,
          {
            call_id: p.call.id,
            tool: p.name,
            arguments: p.args,
            run_id: state.run_id,
            identity: ctx.identity,
            attempt,
            idempotency_key: attemptKey(state.run_id, state.iteration, p.call.id, attempt),
            max_output_bytes: limits.max_output_bytes,
            ...(spec ? { timeout_ms: spec.timeout_ms } : {}),
          },
          {
            prefix: env.prefix,
            timeoutMs: perAttempt,
            signal: ctx.signal,
            onProgress,
            idempotent: spec?.idempotent ?? false,
            sentBefore,
          },
        );
        const error = outcome.is_error ? outcome.error : undefined;
        if (error === undefined || !mayRetry(spec, error.code, error.retryable) || attempt > retries)
          return outcome;
        result.outcome = outcome;
        failedOutcome = new AgentMeshError(error.code, error.message, { retryable: true });
        throw failedOutcome;
      },
      {
        attempts: retries + 1,
        signal: ctx.signal,
        retryable: (e) => e === failedOutcome || mayRetry(spec, e.code, e.retryable),
      },
    );
  } catch (error) {
    if (result.outcome === undefined) result.failure = AgentMeshError.from(error);
  }
  return result;
}

/**
 * Runs a call on a worker: tool.started when a worker takes it, then exactly one tool.completed or tool.failed.
 * `sentBefore`: a resumed run sends the call again, and the planner that was lost may have sent it.
 */
async function runRemote(ctx: RunContext, p: PreparedCall, sentBefore: boolean): Promise<CallResult> {
  const { sink } = ctx;
  const started = performance.now();
  let startedBy: string | undefined;
  const emitStarted = (workerId: string) => {
    if (startedBy !== undefined) return;
    startedBy = workerId;
    sink.emit(toolStarted(p.call.id, p.name, workerId));
  };
  const onProgress = (progress: ToolProgress) => {
    if (progress.call_id !== p.call.id || progress.kind === 'heartbeat') return;
    emitStarted(progress.worker_id);
    if (progress.kind === 'progress')
      sink.emit({
        type: 'tool.progress',
        call_id: p.call.id,
        name: p.name,
        worker_id: progress.worker_id,
        ...(progress.message === undefined ? {} : { message: progress.message }),
        ...(progress.data === undefined ? {} : { data: progress.data }),
      });
  };
  const { outcome, failure, attempts } = await invokeWithRetries(ctx, p, onProgress, sentBefore);
  if (outcome !== undefined) {
    emitStarted(outcome.worker_id);
    return reportOutcome(ctx, p, outcome, Math.max(attempts, outcome.attempts));
  }
  let error = failure ?? new AgentMeshError(ErrorCode.Internal, 'tool call ended without an outcome');
  const stop = ctx.stopCheck();
  if (stop !== undefined)
    error = new AgentMeshError(
      stop.status === 'timeout' ? ErrorCode.Timeout : ErrorCode.Cancelled,
      `tool call aborted: ${stop.reason}`,
    );
  const workerId = startedBy ?? ctx.env.plannerId;
  emitStarted(workerId);
  const elapsed = Math.round((performance.now() - started) * 1000) / 1000;
  sink.emit(
    toolFailed(
      { call_id: p.call.id, name: p.name, worker_id: workerId, elapsed_ms: elapsed, attempts },
      error,
    ),
  );
  return { content: `error (${error.code}): ${error.message}`, isError: true, succeeded: false };
}

function reportOutcome(ctx: RunContext, p: PreparedCall, outcome: ToolOutcome, attempts: number): CallResult {
  if (outcome.artifact) ctx.exposure.noteArtifact();
  const artifactNote = outcome.artifact
    ? `\n[full output stored as artifact ref=${outcome.artifact.ref} (${outcome.artifact.mime}, ${outcome.artifact.size} bytes); read more with artifact_fetch]`
    : '';
  const fields = {
    call_id: p.call.id,
    name: p.name,
    worker_id: outcome.worker_id,
    elapsed_ms: outcome.elapsed_ms,
    preview: outcome.preview,
    artifact: outcome.artifact,
    attempts,
  };
  if (!outcome.is_error) {
    ctx.sink.emit(toolCompleted(fields));
    return { content: outcome.preview + artifactNote, isError: false, succeeded: true };
  }
  const error = outcome.error ?? { code: ErrorCode.ToolError, message: outcome.preview, retryable: false };
  ctx.sink.emit(toolFailed(fields, error));
  return {
    content: (outcome.preview || `error (${error.code}): ${error.message}`) + artifactNote,
    isError: true,
    succeeded: false,
  };
}
