import {
  SpanKind,
  SpanStatusCode,
  context,
  trace,
  type Attributes,
  type Context,
  type Span,
  type Tracer,
} from '@opentelemetry/api';
import { AgentMeshError } from '../errors.js';

/** The instrumentation scope every agentmesh span is recorded under. */
export const TRACER_NAME = '@agentmesh/protocol';

/** The tracer of the globally registered provider (a no-op until an SDK registers one). */
export function agentmeshTracer(): Tracer {
  return trace.getTracer(TRACER_NAME, '0.1.0');
}

/** Attribute names used by agentmesh spans (GenAI semantic conventions where they exist). */
export const SpanAttr = {
  RunId: 'agentmesh.run.id',
  Tenant: 'agentmesh.tenant',
  Session: 'agentmesh.session',
  Status: 'agentmesh.run.status',
  WorkerId: 'agentmesh.worker.id',
  ErrorCode: 'error.type',
  Operation: 'gen_ai.operation.name',
  Provider: 'gen_ai.provider.name',
  RequestModel: 'gen_ai.request.model',
  ResponseModel: 'gen_ai.response.model',
  InputTokens: 'gen_ai.usage.input_tokens',
  OutputTokens: 'gen_ai.usage.output_tokens',
  FinishReasons: 'gen_ai.response.finish_reasons',
  ToolName: 'gen_ai.tool.name',
  ToolCallId: 'gen_ai.tool.call.id',
  ToolType: 'gen_ai.tool.type',
  SearchQuery: 'agentmesh.catalog.search.query',
  SearchStrategy: 'agentmesh.catalog.search.strategy',
  SearchResults: 'agentmesh.catalog.search.results',
} as const;

function start(name: string, kind: SpanKind, attributes: Attributes, parent?: Context): Span {
  return agentmeshTracer().startSpan(name, { kind, attributes }, parent ?? context.active());
}

function defined(attributes: Record<string, string | number | string[] | undefined>): Attributes {
  const out: Attributes = {};
  for (const [k, v] of Object.entries(attributes)) if (v !== undefined) out[k] = v;
  return out;
}

export interface RunSpanOptions {
  runId: string;
  tenant?: string | undefined;
  session?: string | undefined;
  /** The submitter's context (from the RunRequest's headers), or a resumed run's stored context. */
  parent?: Context;
}

/** The `run` span: the root of a run's trace, or a child of the submitter's context. */
export function startRunSpan(options: RunSpanOptions): Span {
  return start(
    'run',
    SpanKind.SERVER,
    defined({
      [SpanAttr.RunId]: options.runId,
      [SpanAttr.Tenant]: options.tenant,
      [SpanAttr.Session]: options.session,
    }),
    options.parent,
  );
}

export interface ModelCallSpanOptions {
  provider: string;
  model: string;
  /** `chat` unless the provider call is something else (GenAI `gen_ai.operation.name`). */
  operation?: string;
  parent?: Context;
}

/** A model call span named `<operation> <model>` after the GenAI semantic conventions. */
export function startModelCallSpan(options: ModelCallSpanOptions): Span {
  const operation = options.operation ?? 'chat';
  return start(
    `${operation} ${options.model}`,
    SpanKind.CLIENT,
    {
      [SpanAttr.Operation]: operation,
      [SpanAttr.Provider]: options.provider,
      [SpanAttr.RequestModel]: options.model,
    },
    options.parent,
  );
}

export interface ModelCallResult {
  inputTokens?: number | undefined;
  outputTokens?: number | undefined;
  finishReasons?: string[] | undefined;
  responseModel?: string | undefined;
}

/** Records a model call's usage and finish reasons and ends its span. */
export function endModelCallSpan(span: Span, result: ModelCallResult): void {
  if (span.isRecording())
    span.setAttributes(
      defined({
        [SpanAttr.InputTokens]: result.inputTokens,
        [SpanAttr.OutputTokens]: result.outputTokens,
        [SpanAttr.FinishReasons]: result.finishReasons,
        [SpanAttr.ResponseModel]: result.responseModel,
      }),
    );
  span.end();
}

export interface ToolCallSpanOptions {
  name: string;
  callId: string;
  /** `client` in the planner (the caller), `server` in the worker that executes the call. */
  side: 'client' | 'server';
  workerId?: string | undefined;
  parent?: Context;
}

/** An `execute_tool <name>` span with `gen_ai.tool.name` and `gen_ai.tool.call.id`. */
export function startToolCallSpan(options: ToolCallSpanOptions): Span {
  return start(
    `execute_tool ${options.name}`,
    options.side === 'client' ? SpanKind.CLIENT : SpanKind.SERVER,
    defined({
      [SpanAttr.Operation]: 'execute_tool',
      [SpanAttr.ToolName]: options.name,
      [SpanAttr.ToolCallId]: options.callId,
      [SpanAttr.ToolType]: 'function',
      [SpanAttr.WorkerId]: options.workerId,
    }),
    options.parent,
  );
}

export interface CatalogSearchSpanOptions {
  query: string;
  strategy: string;
  side?: 'client' | 'server';
  parent?: Context;
  /** Epoch ms when the search began (default now). */
  startTime?: number;
}

/** A `catalog.search` span, client side in the planner and server side in the catalog. */
export function startCatalogSearchSpan(options: CatalogSearchSpanOptions): Span {
  return agentmeshTracer().startSpan(
    'catalog.search',
    {
      kind: options.side === 'client' ? SpanKind.CLIENT : SpanKind.SERVER,
      attributes: { [SpanAttr.SearchQuery]: options.query, [SpanAttr.SearchStrategy]: options.strategy },
      ...(options.startTime === undefined ? {} : { startTime: options.startTime }),
    },
    options.parent ?? context.active(),
  );
}

function isErrorPayload(error: unknown): error is { code: string; message: string } {
  return (
    error !== null &&
    typeof error === 'object' &&
    !(error instanceof Error) &&
    typeof (error as { code?: unknown }).code === 'string' &&
    typeof (error as { message?: unknown }).message === 'string'
  );
}

/**
 * Marks a span failed: status ERROR with the message, `error.type` set to the error code (an AgentMeshError, an
 * error payload `{code, message}`, or anything thrown), the exception recorded.
 */
export function recordSpanError(span: Span, error: unknown): void {
  if (!span.isRecording()) return;
  const e = isErrorPayload(error)
    ? new AgentMeshError(error.code, error.message)
    : AgentMeshError.from(error);
  span.setStatus({ code: SpanStatusCode.ERROR, message: e.message });
  span.setAttribute(SpanAttr.ErrorCode, e.code);
  span.recordException({ name: e.name, message: e.message, code: e.code });
}

/** Ends a span, marking it failed first when `error` is given. */
export function endSpan(span: Span, error?: unknown): void {
  if (error !== undefined) recordSpanError(span, error);
  span.end();
}

/**
 * Runs `fn` inside a span made active for its duration (so bus requests it makes carry the span as parent); the
 * span ends when `fn` settles and records its error.
 */
export async function inSpan<T>(span: Span, fn: (span: Span) => Promise<T>): Promise<T> {
  try {
    const value = await context.with(trace.setSpan(context.active(), span), () => fn(span));
    span.end();
    return value;
  } catch (error) {
    endSpan(span, error);
    throw error;
  }
}

/** A context holding `span` as the active span (a parent for child spans and for injected headers). */
export function contextWithSpan(span: Span, parent: Context = context.active()): Context {
  return trace.setSpan(parent, span);
}
