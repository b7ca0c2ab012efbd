import { randomUUID } from 'node:crypto';
import type { z } from 'zod';
import { ErrorCode, type AgentMeshError } from './errors.js';
import type { Bus } from './bus/types.js';
import { retry } from './retry.js';
import { requestJson } from './rpc.js';

/** The failures after which a control request is sent again: nobody answered it. */
const UNANSWERED: ReadonlySet<string> = new Set([ErrorCode.Timeout, ErrorCode.NoResponders]);

/** A fresh client request id for a control message (`rq_` and a UUID). */
export function newRequestId(): string {
  return `rq_${randomUUID()}`;
}

export interface ControlRequestOptions {
  /** The command's deadline: every attempt and wait fits in it (default 10 000 ms). */
  timeoutMs?: number;
  /** How long one attempt waits for its reply (default a third of the deadline, 500..3 000 ms). */
  attemptTimeoutMs?: number;
  signal?: AbortSignal;
  what?: string;
  /** Called before each new attempt, with the failure that caused it. */
  onRetry?: (error: AgentMeshError, attempt: number, delayMs: number) => void;
}

/** What a client's control sender takes: where to send (prefix, tenant API) and the retry terms. */
export interface ControlSendOptions extends Omit<ControlRequestOptions, 'what'> {
  prefix?: string;
  /** Send through the tenant API of this tenant (`<prefix>.tenant.<tenant>.runs.<run_id>.<verb>`). */
  tenant?: string | undefined;
}

/** A control request's reply and the attempts it took. */
export interface ControlOutcome<T> {
  reply: T;
  attempts: number;
}

/**
 * Sends a control request (its body carries a `request_id`) and sends it again, the same body, when no planner
 * answered (`timeout`, `no_responders`), with backoff through {@link retry}, until the deadline. The
 * server answers a repeat of a request that landed with its first outcome, so sending again is safe.
 */
export async function requestControl<S extends z.ZodType>(
  bus: Bus,
  subject: string,
  body: { request_id?: string | undefined },
  replySchema: S,
  options: ControlRequestOptions = {},
): Promise<ControlOutcome<z.output<S>>> {
  const deadlineMs = options.timeoutMs ?? 10_000;
  const attemptMs = options.attemptTimeoutMs ?? Math.max(500, Math.min(3_000, Math.floor(deadlineMs / 3)));
  const started = Date.now();
  let attempts = 0;
  const reply = await retry(
    (attempt) => {
      attempts = attempt;
      const left = deadlineMs - (Date.now() - started);
      return requestJson(bus, subject, body, replySchema, {
        timeoutMs: Math.max(1, Math.min(attemptMs, left)),
        ...(options.what === undefined ? {} : { what: options.what }),
        ...(options.signal === undefined ? {} : { signal: options.signal }),
      });
    },
    {
      timeoutMs: deadlineMs,
      retryable: (error) => UNANSWERED.has(error.code),
      baseMs: 100,
      capMs: 1_000,
      ...(options.signal === undefined ? {} : { signal: options.signal }),
      ...(options.onRetry === undefined ? {} : { onRetry: options.onRetry }),
    },
  );
  return { reply, attempts };
}
