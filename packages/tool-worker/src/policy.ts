import {
  AgentMeshError,
  ErrorCode,
  backoffDelay as sharedBackoffDelay,
  type RetryClass,
  type RetryPolicy,
} from '@agentmesh/protocol';

/** The package default policy: 4 attempts in all, 30 s per attempt, backoff 100 ms doubling up to 2 s, 20 % jitter. */
export const DEFAULT_RETRY_POLICY: Readonly<RetryPolicy> = Object.freeze({
  max_attempts: 4,
  timeout_ms: 30_000,
  retry_on: ['transient', 'timeout', '5xx'] as RetryClass[],
  backoff_ms: 100,
  max_backoff_ms: 2_000,
  jitter: 0.2,
});

/**
 * Resolves a partial policy field by field: each field left out falls through to the tool's value, then to the
 * package default. `timeoutMs` (the tool's `timeoutMs`) fills `timeout_ms` when the policy does not set it.
 */
export function resolvePolicy(partial: Partial<RetryPolicy> | undefined, timeoutMs?: number): RetryPolicy {
  const p = partial ?? {};
  const policy: RetryPolicy = {
    max_attempts: p.max_attempts ?? DEFAULT_RETRY_POLICY.max_attempts,
    timeout_ms: p.timeout_ms ?? timeoutMs ?? DEFAULT_RETRY_POLICY.timeout_ms,
    retry_on: [...(p.retry_on ?? DEFAULT_RETRY_POLICY.retry_on)],
    backoff_ms: p.backoff_ms ?? DEFAULT_RETRY_POLICY.backoff_ms,
    max_backoff_ms: p.max_backoff_ms ?? DEFAULT_RETRY_POLICY.max_backoff_ms,
    jitter: p.jitter ?? DEFAULT_RETRY_POLICY.jitter,
  };
  if (!Number.isInteger(policy.max_attempts) || policy.max_attempts < 1 || policy.max_attempts > 20)
    throw new AgentMeshError(
      ErrorCode.InvalidConfig,
      `retry.max_attempts must be an integer from 1 to 20, got ${policy.max_attempts}`,
    );
  if (!Number.isInteger(policy.timeout_ms) || policy.timeout_ms < 1)
    throw new AgentMeshError(
      ErrorCode.InvalidConfig,
      `timeout_ms must be a positive integer, got ${policy.timeout_ms}`,
    );
  if (policy.jitter < 0 || policy.jitter > 1)
    throw new AgentMeshError(
      ErrorCode.InvalidConfig,
      `retry.jitter must be between 0 and 1, got ${policy.jitter}`,
    );
  const classes: readonly string[] = ['transient', 'timeout', '5xx', 'permanent'];
  for (const c of policy.retry_on)
    if (!classes.includes(c))
      throw new AgentMeshError(
        ErrorCode.InvalidConfig,
        `retry.retry_on has unknown class "${c}" (use ${classes.join(', ')})`,
      );
  return policy;
}

/** The delay before attempt `attempt + 1` by a tool's policy: the shared {@link sharedBackoffDelay} formula. */
export function backoffDelay(
  policy: RetryPolicy,
  attempt: number,
  random: () => number = Math.random,
): number {
  return sharedBackoffDelay(
    attempt,
    { baseMs: policy.backoff_ms, capMs: policy.max_backoff_ms, jitter: policy.jitter },
    random,
  );
}

const TRANSIENT_NODE_CODES: ReadonlySet<string> = new Set([
  'ECONNRESET',
  'ECONNREFUSED',
  'ETIMEDOUT',
  'EAI_AGAIN',
  'EPIPE',
  'EBUSY',
  'EAGAIN',
]);

/** Which retry class a failure belongs to. Cancellation is never retried and has no class. */
export function classifyFailure(error: unknown): RetryClass | 'cancelled' {
  if (error instanceof AgentMeshError) {
    if (error.code === ErrorCode.Cancelled) return 'cancelled';
    if (error.code === ErrorCode.Timeout) return 'timeout';
    const status = error.details?.['status'];
    if (typeof status === 'number' && status >= 500 && status < 600) return '5xx';
    return error.retryable ? 'transient' : 'permanent';
  }
  if (typeof error === 'object' && error !== null) {
    const e = error as { status?: unknown; statusCode?: unknown; code?: unknown };
    const status =
      typeof e.status === 'number' ? e.status : typeof e.statusCode === 'number' ? e.statusCode : undefined;
    if (status !== undefined && status >= 500 && status < 600) return '5xx';
    if (typeof e.code === 'string' && TRANSIENT_NODE_CODES.has(e.code)) return 'transient';
  }
  return 'permanent';
}
