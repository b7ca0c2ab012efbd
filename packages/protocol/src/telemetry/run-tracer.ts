import { createHash } from 'node:crypto';
import { ROOT_CONTEXT, TraceFlags, trace, type Context, type Span } from '@opentelemetry/api';
import type { BusHeaders, RequestOptions } from '../bus/types.js';
import type { RunEvent } from '../schemas.js';
import { NOOP_METRICS, actorMetrics } from './metrics.js';
import { extractTraceContext, injectTraceHeaders } from './propagation.js';
import {
  SpanAttr,
  contextWithSpan,
  endModelCallSpan,
  endSpan,
  startCatalogSearchSpan,
  startModelCallSpan,
  startRunSpan,
  startToolCallSpan,
} from './spans.js';
import { tracingActive } from './tracing-state.js';

interface RunTrace {
  span: Span | undefined;
  ctx: Context;
  provider: string;
  model: string;
  startedMs: number | undefined;
  modelSpan: Span | undefined;
  modelStartedMs: number;
  tools: Map<string, { span: Span; name: string; startedMs: number }>;
}

const MAX_REMEMBERED = 10_000;
const runs = new Map<string, RunTrace>();
const submitted = new Map<string, Context>();

/**
 * The trace a run belongs to when its submitter sent no `traceparent`: derived from the run id, so the planner
 * that resumes a run after a failover continues the same trace.
 */
export function runTraceContext(runId: string): Context {
  const digest = createHash('sha256').update(`agentmesh-run:${runId}`).digest('hex');
  return trace.setSpanContext(ROOT_CONTEXT, {
    traceId: digest.slice(0, 32),
    spanId: digest.slice(32, 48),
    traceFlags: TraceFlags.SAMPLED,
    isRemote: true,
  });
}

/** The trace id of a run without a submitter context (see {@link runTraceContext}). */
export function runTraceId(runId: string): string {
  return trace.getSpanContext(runTraceContext(runId))!.traceId;
}

type HeaderSource = BusHeaders | { keys(): string[]; get(key: string): string } | undefined;

function plainHeaders(headers: HeaderSource): BusHeaders | undefined {
  if (headers === undefined) return undefined;
  if (typeof headers.keys !== 'function') return headers as BusHeaders;
  const source = headers as { keys(): string[]; get(key: string): string };
  const out: BusHeaders = {};
  for (const key of source.keys()) out[key] = source.get(key);
  return out;
}

/**
 * Planner hook at intake: remembers the submitter's trace context (the RunRequest's `traceparent` header) so the
 * run's span becomes its child. A no-op while no tracer provider is registered.
 */
export function rememberRunTraceContext(runId: string, headers: HeaderSource): void {
  if (!tracingActive()) return;
  const plain = plainHeaders(headers);
  if (plain === undefined) return;
  const ctx = extractTraceContext(plain);
  if (trace.getSpanContext(ctx) === undefined) return;
  if (submitted.size >= MAX_REMEMBERED) submitted.delete(submitted.keys().next().value!);
  submitted.set(runId, ctx);
}

function canonical(name: string): string {
  return name.replaceAll('__', '.');
}

function traceFor(event: RunEvent): RunTrace {
  let run = runs.get(event.run_id);
  if (run === undefined) {
    run = {
      span: undefined,
      ctx: ROOT_CONTEXT,
      provider: 'unknown',
      model: 'unknown',
      startedMs: undefined,
      modelSpan: undefined,
      modelStartedMs: 0,
      tools: new Map(),
    };
    if (runs.size >= MAX_REMEMBERED) runs.delete(runs.keys().next().value!);
    runs.set(event.run_id, run);
  }
  return run;
}

function endOpenTools(run: RunTrace): void {
  for (const call of run.tools.values()) call.span.end();
  run.tools.clear();
}

function startRun(run: RunTrace, event: RunEvent & { type: 'run.started' }): void {
  run.startedMs = Date.parse(event.ts);
  actorMetrics().runStarted();
  actorMetrics().runsInFlight(1);
  if (!tracingActive()) return;
  const parent = submitted.get(event.run_id) ?? runTraceContext(event.run_id);
  submitted.delete(event.run_id);
  run.span = startRunSpan({ runId: event.run_id, parent });
  if (event.resumed) run.span.setAttribute('agentmesh.run.resumed', true);
  run.span.setAttribute('agentmesh.planner.id', event.planner_id);
  run.ctx = contextWithSpan(run.span, parent);
}

function endModel(run: RunTrace, event: RunEvent & { type: 'llm.response' }): void {
  const durationSeconds = run.modelStartedMs ? (Date.now() - run.modelStartedMs) / 1000 : undefined;
  actorMetrics().modelCall({
    provider: run.provider,
    model: run.model,
    inputTokens: event.usage.input_tokens,
    outputTokens: event.usage.output_tokens,
    durationSeconds,
  });
  if (run.modelSpan === undefined) return;
  endModelCallSpan(run.modelSpan, {
    inputTokens: event.usage.input_tokens,
    outputTokens: event.usage.output_tokens,
    finishReasons: [event.tool_calls.length > 0 ? 'tool_calls' : 'stop'],
  });
  run.modelSpan = undefined;
  const startedMs = Date.now();
  for (const call of event.tool_calls) {
    const name = canonical(call.name);
    const span = startToolCallSpan({ name, callId: call.id, side: 'client', parent: run.ctx });
    run.tools.set(call.id, { span, name, startedMs });
  }
}

/**
 * A `catalog.search` span for a `tool.search` event: a child of the model's open `tool_search` call (ended with
 * it), timed from that call's start, else an instant child of the run.
 */
function searched(run: RunTrace, event: RunEvent & { type: 'tool.search' }): void {
  if (run.span === undefined) return;
  let parent = run.ctx;
  let startTime: number | undefined;
  for (const [callId, call] of run.tools) {
    if (call.name !== 'tool_search') continue;
    run.tools.delete(callId);
    parent = contextWithSpan(call.span, run.ctx);
    startTime = call.startedMs;
    call.span.end();
    break;
  }
  const span = startCatalogSearchSpan({
    query: event.query,
    strategy: event.strategy,
    side: 'client',
    parent,
    ...(startTime === undefined ? {} : { startTime }),
  });
  span.setAttribute(SpanAttr.SearchResults, event.results.length);
  span.end();
}

function endTool(run: RunTrace, event: RunEvent & { type: 'tool.completed' | 'tool.failed' }): void {
  const outcome =
    event.type === 'tool.failed' ? (event.error.code ?? 'error') : event.is_error ? 'error' : 'ok';
  actorMetrics().toolCall({ tool: event.name, outcome, durationSeconds: event.elapsed_ms / 1000 });
  const span = run.tools.get(event.call_id)?.span;
  if (span === undefined) return;
  run.tools.delete(event.call_id);
  span.setAttribute(SpanAttr.WorkerId, event.worker_id);
  if (event.type === 'tool.failed') endSpan(span, event.error);
  else if (event.is_error) endSpan(span, { code: 'tool_error', message: event.preview });
  else span.end();
}

function endRun(run: RunTrace, event: RunEvent & { type: 'run.completed' | 'run.failed' }): void {
  runs.delete(event.run_id);
  const status = event.type === 'run.completed' ? event.status : 'failed';
  if (run.startedMs !== undefined) {
    actorMetrics().runFinished(status, Math.max(0, (Date.parse(event.ts) - run.startedMs) / 1000));
    actorMetrics().runsInFlight(-1);
  }
  endOpenTools(run);
  run.modelSpan?.end();
  if (run.span === undefined) return;
  run.span.setAttribute(SpanAttr.Status, status);
  if (event.type === 'run.failed') endSpan(run.span, event.error);
  else if (status !== 'done')
    endSpan(run.span, { code: status, message: event.reason ?? `run ended ${status}` });
  else run.span.end();
}

/**
 * Planner hook: every run event a planner emits passes here once. It keeps the planner's metrics (runs, model
 * calls and tokens, tool calls by outcome) and, with a tracer provider registered, the `run`, model call
 * (`chat <model>`), client `execute_tool <name>` and `catalog.search` spans, timed by the events themselves.
 */
export function observeRunEvent(event: RunEvent): void {
  if (actorMetrics() === NOOP_METRICS && !tracingActive()) return;
  const run = traceFor(event);
  switch (event.type) {
    case 'run.accepted':
      run.provider = event.provider ?? run.provider;
      run.model = event.model ?? run.model;
      return;
    case 'run.started':
      return startRun(run, event);
    case 'llm.request':
      endOpenTools(run);
      run.modelStartedMs = Date.now();
      if (run.span !== undefined)
        run.modelSpan = startModelCallSpan({ provider: run.provider, model: run.model, parent: run.ctx });
      return;
    case 'llm.response':
      return endModel(run, event);
    case 'tool.search':
      return searched(run, event);
    case 'tool.completed':
    case 'tool.failed':
      return endTool(run, event);
    case 'run.completed':
    case 'run.failed':
      return endRun(run, event);
    default:
      return;
  }
}

/**
 * Tool client hook: the trace headers for a tool call's request (its client span, else its run span), or
 * `undefined` when nothing is traced.
 */
export function toolCallTraceHeaders(runId: string | undefined, callId: string): BusHeaders | undefined {
  if (runId === undefined || runs.size === 0) return undefined;
  const run = runs.get(runId);
  if (run?.span === undefined) return undefined;
  const span = run.tools.get(callId)?.span;
  return injectTraceHeaders(undefined, span ? contextWithSpan(span, run.ctx) : run.ctx);
}

/** Tool client hook: `options` with the call's trace headers added (the same object when nothing is traced). */
export function withToolCallTraceHeaders(
  options: RequestOptions,
  invocation: { run_id?: string | undefined; call_id: string },
): RequestOptions {
  const headers = toolCallTraceHeaders(invocation.run_id, invocation.call_id);
  return headers === undefined ? options : { ...options, headers: { ...options.headers, ...headers } };
}

/** Forgets every run being traced (tests). */
export function resetRunTraces(): void {
  runs.clear();
  submitted.clear();
}
