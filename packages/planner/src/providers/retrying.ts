import { AgentMeshError, retry } from '@agentmesh/protocol';
import type { ModelProvider, ModelRequest, ModelTurn } from './types.js';

export interface ProviderRetryOptions {
  /** Attempts in all, the first included (default 3). */
  attempts?: number;
  /** First backoff delay (default 500 ms); a larger retry-after from the server wins. */
  baseMs?: number;
  /** Largest backoff delay (default 20 s). */
  capMs?: number;
  /** A retry-after longer than this is not waited for: the error is final (default 60 s). */
  maxRetryAfterMs?: number;
  onRetry?: (error: AgentMeshError, attempt: number, delayMs: number) => void;
}

/**
 * Retries a provider's retryable failures (`rate_limited`, `overloaded`, 5xx, connection errors) with the one
 * `retry()` helper, waiting at least the server's retry-after. A response that already streamed a delta is not
 * retried (its text was shown).
 */
export class RetryingProvider implements ModelProvider {
  constructor(
    private readonly inner: ModelProvider,
    private readonly options: ProviderRetryOptions = {},
  ) {}

  get kind(): ModelProvider['kind'] {
    return this.inner.kind;
  }

  get model(): string {
    return this.inner.model;
  }

  async complete(request: ModelRequest): Promise<ModelTurn> {
    let streamed = false;
    const onDelta = request.onDelta;
    const attempt: ModelRequest = onDelta
      ? {
          ...request,
          onDelta: (d) => {
            streamed = true;
            onDelta(d);
          },
        }
      : request;
    const attempts = this.options.attempts ?? 3;
    const maxWait = this.options.maxRetryAfterMs ?? 60_000;
    let tries = 0;
    try {
      return await retry(
        () => {
          tries++;
          return this.inner.complete(attempt);
        },
        {
          attempts,
          baseMs: this.options.baseMs ?? 500,
          capMs: this.options.capMs ?? 20_000,
          signal: request.signal,
          retryable: (e) => e.retryable && !streamed && (retryAfter(e) ?? 0) <= maxWait,
          delayHint: retryAfter,
          ...(this.options.onRetry ? { onRetry: this.options.onRetry } : {}),
        },
      );
    } catch (error) {
      const e = AgentMeshError.from(error);
      if (tries <= 1 || !e.retryable) throw e;
      throw new AgentMeshError(e.code, `${e.message} (gave up after ${tries} attempts)`, {
        retryable: e.retryable,
        cause: e,
        details: { ...e.details, attempts: tries },
      });
    }
  }
}

function retryAfter(e: AgentMeshError): number | undefined {
  const ms = e.details?.['retry_after_ms'];
  return typeof ms === 'number' ? ms : undefined;
}
