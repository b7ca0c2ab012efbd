import { AgentMeshError, ErrorCode, isAbortError } from '@agentmesh/protocol';

interface SdkError {
  status?: number;
  name?: string;
  message?: string;
  code?: string | null;
  type?: string;
  error?: { type?: string; code?: string; error?: { type?: string } };
  headers?: Headers | Record<string, string | undefined>;
}

const CONTEXT_TOO_LONG =
  /context[_ ]length|context window|prompt is too long|maximum context|too many (input )?tokens|input is too long/i;
const CONTENT_FILTERED = /content[_ ]filter|content management policy|flagged by|safety system/i;

/** The server's `retry-after-ms` / `retry-after` (seconds or an HTTP date) in milliseconds, when it sent one. */
export function retryAfterMs(headers: SdkError['headers'], now = Date.now()): number | undefined {
  if (headers === undefined) return undefined;
  const get = (name: string): string | undefined =>
    typeof (headers as Headers).get === 'function'
      ? ((headers as Headers).get(name) ?? undefined)
      : (headers as Record<string, string | undefined>)[name];
  const ms = Number(get('retry-after-ms'));
  if (Number.isFinite(ms) && ms >= 0 && get('retry-after-ms') !== undefined) return ms;
  const raw = get('retry-after');
  if (raw === undefined || raw.trim() === '') return undefined;
  const seconds = Number(raw);
  if (Number.isFinite(seconds)) return Math.max(0, seconds * 1000);
  const date = Date.parse(raw);
  return Number.isNaN(date) ? undefined : Math.max(0, date - now);
}

/**
 * Maps an SDK failure to an AgentMeshError: aborts become `cancelled`; 429 `rate_limited` (retryable, with
 * `details.retry_after_ms`), 529/503 `overloaded` (retryable), a prompt over the context window
 * `context_too_long` and a filtered prompt `content_filtered` (neither retryable); other HTTP failures
 * `provider_error`.
 */
export function providerError(provider: string, error: unknown, signal?: AbortSignal): AgentMeshError {
  if (error instanceof AgentMeshError) return error;
  const e = error as SdkError;
  if (signal?.aborted || isAbortError(error) || e.name === 'APIUserAbortError')
    return new AgentMeshError(ErrorCode.Cancelled, `${provider} request was aborted`, { cause: error });
  const status = typeof e.status === 'number' ? e.status : undefined;
  const message = e.message ?? String(error);
  const kind = `${e.type ?? ''} ${e.code ?? ''} ${e.error?.type ?? ''} ${e.error?.code ?? ''} ${e.error?.error?.type ?? ''}`;
  const details: Record<string, unknown> = { provider, ...(status === undefined ? {} : { status }) };
  const named = (code: ErrorCode, what: string, retryable: boolean) =>
    new AgentMeshError(code, `${provider} ${what} (HTTP ${status}): ${message}`, {
      retryable,
      cause: error,
      details,
    });
  if (status === 429) {
    const wait = retryAfterMs(e.headers);
    if (wait !== undefined) details['retry_after_ms'] = wait;
    return named(ErrorCode.RateLimited, 'rate limit reached', true);
  }
  if (status === 529 || status === 503 || /overloaded/i.test(kind))
    return named(ErrorCode.Overloaded, 'is overloaded', true);
  if (status !== undefined && status >= 400 && status < 500) {
    if (CONTEXT_TOO_LONG.test(kind) || CONTEXT_TOO_LONG.test(message))
      return named(ErrorCode.ContextTooLong, 'rejected a prompt longer than the context window', false);
    if (CONTENT_FILTERED.test(kind) || CONTENT_FILTERED.test(message))
      return named(ErrorCode.ContentFiltered, 'content filter rejected the request', false);
  }
  const retryable =
    status === undefined || status === 408 || status === 409 || status === 429 || status >= 500;
  return new AgentMeshError(
    ErrorCode.ProviderError,
    `${provider} request failed${status === undefined ? '' : ` with HTTP ${status}`}: ${message}`,
    { retryable, cause: error, details },
  );
}

/** A response the provider's content filter cut off (finish reason `content_filter`, stop reason `refusal`). */
export function contentFilteredError(provider: string, reason: string): AgentMeshError {
  return new AgentMeshError(
    ErrorCode.ContentFiltered,
    `${provider} stopped the response: its content filter fired (${reason})`,
    { retryable: false, details: { provider, reason } },
  );
}

/** JSON Schema keys some providers reject at the top level of a tool's parameters. */
export function providerSchema(schema: Record<string, unknown>): Record<string, unknown> {
  const { $schema: _ignored, ...rest } = schema;
  if (rest['type'] === undefined) rest['type'] = 'object';
  return rest;
}
