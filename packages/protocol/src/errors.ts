/**
 * The error model shared by every actor. One class, {@link AgentMeshError}, carries a stable `code`, whether the
 * failed operation may be retried, structured `details` and an optional `cause`. It serializes to a plain
 * {@link ErrorPayload} that crosses the bus and is revived as the same class with the same fields.
 */

export const ErrorCode = {
  InvalidRequest: 'invalid_request',
  InvalidMessage: 'invalid_message',
  InvalidArguments: 'invalid_arguments',
  InvalidOutput: 'invalid_output',
  InvalidToolName: 'invalid_tool_name',
  InvalidConfig: 'invalid_config',
  UnknownTool: 'unknown_tool',
  ToolNotOffered: 'tool_not_offered',
  ToolError: 'tool_error',
  PayloadTooLarge: 'payload_too_large',
  Timeout: 'timeout',
  Cancelled: 'cancelled',
  NoResponders: 'no_responders',
  Busy: 'busy',
  WorkerLost: 'worker_lost',
  Conflict: 'conflict',
  NotFound: 'not_found',
  PermissionDenied: 'permission_denied',
  Unavailable: 'unavailable',
  JetStreamUnavailable: 'jetstream_unavailable',
  ProviderError: 'provider_error',
  /** A repeated identical tool call the planner blocked or skipped. */
  LoopDetected: 'loop_detected',
  /** A run limit (tool calls, tokens, cost) refused more work. */
  BudgetExhausted: 'budget_exhausted',
  Closed: 'closed',
  Internal: 'internal',
  /** The tool exists but cannot run right now (its MCP server is reconnecting); retry shortly. */
  ToolUnavailable: 'tool_unavailable',
  /** An MCP server answered with a protocol error (not a tool result with isError). */
  McpError: 'mcp_error',
  /** The provider said 429: retryable, after its retry-after when it gives one. */
  RateLimited: 'rate_limited',
  /** The provider is overloaded (Anthropic 529, 503): retryable. */
  Overloaded: 'overloaded',
  /** The request does not fit the model's context window: not retryable as is. */
  ContextTooLong: 'context_too_long',
  /** The provider's content filter stopped the response: not retryable. */
  ContentFiltered: 'content_filtered',
  /** A daemon's trigger queue is at its capacity. */
  QueueFull: 'queue_full',
  /** An operator's limit refused more (a daemon's pending triggers, a KV bucket's max_bytes): retryable later. */
  QuotaExceeded: 'quota_exceeded',
  /** A guardrail rule stopped the run (an input or output rule with action block, or a model judge). */
  GuardrailTripwire: 'guardrail_tripwire',
  /** A guardrail tool rule refused one call: the model gets the error, no worker sees the call. */
  GuardrailBlocked: 'guardrail_blocked',
} as const;
export type ErrorCode = (typeof ErrorCode)[keyof typeof ErrorCode];

/** The wire form of an error. `code` is an open string so newer actors can add codes. */
export interface ErrorPayload {
  code: string;
  message: string;
  retryable: boolean;
  details?: Record<string, unknown> | undefined;
  cause?: ErrorPayload | undefined;
}

export interface AgentMeshErrorOptions {
  retryable?: boolean;
  details?: Record<string, unknown>;
  cause?: unknown;
}

const RETRYABLE_BY_DEFAULT: ReadonlySet<string> = new Set([
  ErrorCode.Timeout,
  ErrorCode.NoResponders,
  ErrorCode.Busy,
  ErrorCode.Unavailable,
  ErrorCode.WorkerLost,
  ErrorCode.ToolUnavailable,
]);

/** The one error class of agentmesh. */
export class AgentMeshError extends Error {
  override readonly name = 'AgentMeshError';
  readonly code: string;
  readonly retryable: boolean;
  readonly details: Record<string, unknown> | undefined;

  constructor(code: string, message: string, options: AgentMeshErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.code = code;
    this.retryable = options.retryable ?? RETRYABLE_BY_DEFAULT.has(code);
    this.details = options.details;
  }

  /** Serializes this error (and its cause chain, up to a small depth) for the bus. */
  toPayload(): ErrorPayload {
    return toErrorPayload(this);
  }

  /** Revives an error that crossed the bus. */
  static fromPayload(payload: ErrorPayload): AgentMeshError {
    return new AgentMeshError(payload.code, payload.message, {
      retryable: payload.retryable,
      ...(payload.details === undefined ? {} : { details: payload.details }),
      ...(payload.cause === undefined ? {} : { cause: AgentMeshError.fromPayload(payload.cause) }),
    });
  }

  /** Wraps anything thrown into an AgentMeshError, keeping an existing one as is. */
  static from(error: unknown, code: string = ErrorCode.Internal): AgentMeshError {
    if (error instanceof AgentMeshError) return error;
    if (isAbortError(error))
      return new AgentMeshError(ErrorCode.Cancelled, 'operation was cancelled', { cause: error });
    const message = error instanceof Error ? error.message : String(error);
    return new AgentMeshError(code, message, { cause: error });
  }
}

const MAX_CAUSE_DEPTH = 4;

/** Serializes any thrown value into an {@link ErrorPayload}. */
export function toErrorPayload(error: unknown, depth = 0): ErrorPayload {
  const e = error instanceof AgentMeshError ? error : AgentMeshError.from(error);
  const payload: ErrorPayload = { code: e.code, message: e.message, retryable: e.retryable };
  if (e.details !== undefined) payload.details = e.details;
  if (e.cause !== undefined && depth < MAX_CAUSE_DEPTH) {
    const cause = e.cause;
    payload.cause =
      cause instanceof AgentMeshError
        ? toErrorPayload(cause, depth + 1)
        : {
            code: ErrorCode.Internal,
            message: cause instanceof Error ? cause.message : String(cause),
            retryable: false,
          };
  }
  return payload;
}

export function isAbortError(error: unknown): boolean {
  return (
    error instanceof Error &&
    (error.name === 'AbortError' || (error as { code?: unknown }).code === 'ABORT_ERR')
  );
}

export function isAgentMeshError(error: unknown, code?: string): error is AgentMeshError {
  return error instanceof AgentMeshError && (code === undefined || error.code === code);
}
