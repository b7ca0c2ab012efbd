import { AgentMeshError, ErrorCode } from './errors.js';
import { sleep } from './timing.js';

/** How long to wait between attempts: `baseMs` doubling per attempt up to `capMs`, spread by `jitter`. */
export interface BackoffOptions {
  /** The delay before the second attempt (default 100 ms). */
  baseMs?: number;
  /** The largest delay (default 2000 ms). */
  capMs?: number;
  /**
   * The fraction of each delay that is random, 0..1 (default 0.2): a delay `d` becomes a value in
   * `[d * (1 - jitter), d * (1 + jitter)]`, never above `capMs`.
   */
  jitter?: number;
}

export const DEFAULT_BACKOFF: Required<BackoffOptions> = { baseMs: 100, capMs: 2_000, jitter: 0.2 };

/**
 * The delay after failed attempt number `attempt` (1 for the first attempt). Deterministic when `random` returns a
 * constant; the one formula every retry in agentmesh uses.
 */
export function backoffDelay(
  attempt: number,
  options: BackoffOptions = {},
  random: () => number = Math.random,
): number {
  const baseMs = options.baseMs ?? DEFAULT_BACKOFF.baseMs;
  const capMs = options.capMs ?? DEFAULT_BACKOFF.capMs;
  const jitter = options.jitter ?? DEFAULT_BACKOFF.jitter;
  const exponent = Math.min(Math.max(0, attempt - 1), 30);
  const base = Math.min(capMs, baseMs * 2 ** exponent);
  const spread = base * jitter * (2 * random() - 1);
  return Math.max(0, Math.min(capMs, Math.round(base + spread)));
}

export interface RetryOptions extends BackoffOptions {
  /** Attempts in all, the first included (default: unlimited while the deadline allows). */
  attempts?: number;
  /** Give up once this much time has passed since the first attempt (default: no deadline). */
  timeoutMs?: number;
  /** Aborting stops at once: a pending delay ends and the abort reason is thrown as `cancelled`. */
  signal?: AbortSignal;
  /** Whether a failure may be retried (default: `AgentMeshError.from(error).retryable`). */
  retryable?: (error: AgentMeshError, attempt: number) => boolean;
  /** A delay the failure itself asks for (a server's retry-after), used instead of the backoff when larger. */
  delayHint?: (error: AgentMeshError) => number | undefined;
  /** Called before each wait, for logs and metrics. */
  onRetry?: (error: AgentMeshError, attempt: number, delayMs: number) => void;
  /**
   * Spends the delay before the next attempt (default: sleeps it). It may end early, when whatever failed says it
   * is ready again; an abort of `signal` must end it.
   */
  wait?: (delayMs: number, error: AgentMeshError, signal: AbortSignal | undefined) => Promise<void>;
}

/**
 * True for a failure of a client closed for good, read from the error and its causes: a bus that was closed
 * (`closed`), or a nats.js connection that is closed (its owner closed it, or it gave up reconnecting). No later
 * attempt through that client can go through, whatever `retryable` says.
 */
export function isClosedFailure(error: unknown): boolean {
  let e: unknown = error;
  for (let depth = 0; e instanceof Error && depth < 4; depth++, e = e.cause) {
    if (e instanceof AgentMeshError ? e.code === ErrorCode.Closed : e.name === 'ClosedConnectionError')
      return true;
  }
  return false;
}

/**
 * Runs `operation` until it succeeds, a failure is not retryable (a failure of a closed client never is:
 * {@link isClosedFailure}), attempts or the deadline run out, or the signal aborts. Failures are normalized to
 * {@link AgentMeshError}; the last one is thrown. The wait before the next attempt never runs past the deadline.
 */
export async function retry<T>(
  operation: (attempt: number) => Promise<T>,
  options: RetryOptions = {},
): Promise<T> {
  const started = Date.now();
  const deadline = options.timeoutMs === undefined ? Infinity : started + options.timeoutMs;
  const maxAttempts = options.attempts ?? Infinity;
  const retryable = options.retryable ?? ((e: AgentMeshError) => e.retryable);
  for (let attempt = 1; ; attempt++) {
    throwIfAborted(options.signal);
    try {
      return await operation(attempt);
    } catch (error) {
      const e = AgentMeshError.from(error);
      if (options.signal?.aborted) throw cancelled(options.signal, e);
      if (attempt >= maxAttempts || isClosedFailure(e) || !retryable(e, attempt)) throw e;
      const remaining = deadline - Date.now();
      if (remaining <= 0) throw e;
      const hinted = options.delayHint?.(e);
      const delay = Math.min(remaining, Math.max(backoffDelay(attempt, options), hinted ?? 0));
      options.onRetry?.(e, attempt, delay);
      await (options.wait === undefined
        ? sleep(delay, options.signal)
        : options.wait(delay, e, options.signal));
      if (options.signal?.aborted) throw cancelled(options.signal, e);
    }
  }
}

function throwIfAborted(signal: AbortSignal | undefined): void {
  if (signal?.aborted) throw cancelled(signal);
}

function cancelled(signal: AbortSignal, last?: AgentMeshError): AgentMeshError {
  const reason: unknown = signal.reason;
  if (reason instanceof AgentMeshError) return reason;
  const why = reason instanceof Error ? reason.message : typeof reason === 'string' ? reason : 'aborted';
  return new AgentMeshError(ErrorCode.Cancelled, `operation was cancelled: ${why}`, {
    retryable: false,
    ...(last === undefined ? {} : { cause: last }),
  });
}

/**
 * What NATS says when a request found no server, or a server or the connection was not there for a moment. A node
 * that restarts answers "jetstream is not enabled" until its JetStream is up again.
 */
const TRANSIENT_NATS =
  /\b(timeout|timed out|no responders|503|connection (closed|draining|refused|lost)|disconnect|jetstream is not enabled|temporarily unavailable|no suitable peers)/i;

/** The part of {@link TRANSIENT_NATS} that says no server took the request: it did nothing anywhere. */
const UNSENT_NATS = /\b(no responders|503|jetstream is not enabled)/i;

/**
 * True for a failure that a moment later may not happen again: a retryable AgentMeshError, or a raw NATS error of a
 * request that timed out, found no responder, or lost its connection (a node of the cluster restarting).
 */
export function isTransientFailure(error: unknown): boolean {
  if (error instanceof AgentMeshError) {
    if (error.retryable) return true;
    if (error.code !== ErrorCode.Internal) return false;
  }
  const message = error instanceof Error ? error.message : String(error);
  return TRANSIENT_NATS.test(message);
}

/**
 * True for a failure of a request that no server took (no responders, JetStream not up on the node yet), read from
 * the error or its cause: unlike a timeout, such a write surely did not land, so sending it again is safe.
 */
export function isUnsentFailure(error: unknown): boolean {
  if (!(error instanceof Error)) return false;
  return (
    UNSENT_NATS.test(error.message) || (error.cause instanceof Error && UNSENT_NATS.test(error.cause.message))
  );
}
