import type { Logger } from 'pino';
import type { z } from 'zod';
import type { Bus, BusHeaders, BusMessage, RequestOptions, Subscription } from './bus/types.js';
import { decodeMessage, encodeJson, parseJson, validate } from './codec.js';
import { AgentMeshError, ErrorCode, toErrorPayload, type ErrorPayload } from './errors.js';
import { Header } from './envelope.js';
import { ErrorPayloadSchema } from './schemas.js';
import { retry } from './retry.js';

/** Header value marking a reply whose body is `{ "error": ErrorPayload }`. */
export const ERROR_STATUS = 'error';

export interface ServeOptions<S extends z.ZodType, R> {
  bus: Bus;
  subject: string;
  schema: S;
  /** What the message is, for error messages ("catalog search request"). */
  what: string;
  queue?: string;
  logger?: Logger;
  /** Reject bodies larger than this before parsing (default: the bus limit). */
  maxBytes?: number;
  handler: (body: z.output<S>, msg: BusMessage) => Promise<R> | R;
  /** Set to false when the handler answers by itself (default true). */
  reply?: boolean;
}

/**
 * Serves a request/reply subject with the agentmesh conventions: the body is parsed and validated (the error names
 * the field), the handler's result is the JSON reply, any failure is answered as `{ error }` with the
 * `am-status: error` header and logged. A bad message never takes the actor down.
 */
export function serve<S extends z.ZodType, R>(options: ServeOptions<S, R>): Subscription {
  const { bus, subject, schema, what, logger } = options;
  const maxBytes = options.maxBytes ?? bus.maxPayload;
  const handle = async (msg: BusMessage): Promise<void> => {
    try {
      if (msg.data.length > maxBytes)
        throw new AgentMeshError(
          ErrorCode.PayloadTooLarge,
          `${what} of ${msg.data.length} bytes exceeds the limit of ${maxBytes} bytes`,
          { retryable: false, details: { size: msg.data.length, max_bytes: maxBytes } },
        );
      const body = decodeMessage(schema, msg.text(), what);
      const result = await options.handler(body, msg);
      if (options.reply !== false && msg.reply !== undefined) respondJson(bus, msg, result);
    } catch (error) {
      const payload = toErrorPayload(error);
      const level = payload.code === ErrorCode.Internal ? 'error' : 'warn';
      logger?.[level]({ subject: msg.subject, code: payload.code, err: payload.message }, `${what} failed`);
      respondError(bus, msg, payload);
    }
  };
  return bus.subscribe(subject, handle, options.queue === undefined ? {} : { queue: options.queue });
}

/** Replies with a JSON body; a reply that is too large becomes a `payload_too_large` error reply. */
export function respondJson(bus: Bus, msg: BusMessage, value: unknown, headers?: BusHeaders): void {
  respondJsonText(bus, msg, JSON.stringify(value ?? null), headers);
}

/** {@link respondJson} of a value whose JSON text the caller made itself (it must be valid JSON). */
export function respondJsonText(bus: Bus, msg: BusMessage, text: string, headers?: BusHeaders): void {
  // at most 3 bytes a UTF-16 unit: a reply that short is counted once, by the bus as it encodes it
  const size = text.length * 3 <= bus.maxPayload ? 0 : Buffer.byteLength(text, 'utf8');
  if (size > bus.maxPayload) {
    respondError(bus, msg, {
      code: ErrorCode.PayloadTooLarge,
      message: `reply of ${size} bytes exceeds the bus limit of ${bus.maxPayload} bytes`,
      retryable: false,
    });
    return;
  }
  bus.respond(msg, text, headers === undefined ? undefined : { headers });
}

export function respondError(bus: Bus, msg: BusMessage, error: ErrorPayload | unknown): void {
  const payload = isErrorPayload(error) ? error : toErrorPayload(error);
  try {
    bus.respond(msg, JSON.stringify({ error: payload }), { headers: { [Header.Status]: ERROR_STATUS } });
  } catch {
    // the connection is gone or the reply subject is invalid: nothing left to tell
  }
}

/** A plain error payload; an Error (whose message JSON leaves out) goes through {@link toErrorPayload} instead. */
function isErrorPayload(value: unknown): value is ErrorPayload {
  return !(value instanceof Error) && ErrorPayloadSchema.safeParse(value).success;
}

/** If a reply carries an agentmesh error, revives and throws it. */
export function throwIfErrorReply(msg: BusMessage): void {
  if (msg.headers?.[Header.Status] !== ERROR_STATUS) return;
  const body = parseJson(msg.text(), 'error reply') as { error?: unknown };
  const parsed = ErrorPayloadSchema.safeParse(body.error);
  if (!parsed.success) throw new AgentMeshError(ErrorCode.Internal, 'malformed error reply');
  throw AgentMeshError.fromPayload(parsed.data as ErrorPayload);
}

/** Checks a decoded reply, returning it in its output form or throwing an error that names the offending field. */
export type ReplyCheck<S extends z.ZodType> = (value: unknown, what: string) => z.output<S>;

export interface JsonRequestOptions<S extends z.ZodType> extends RequestOptions {
  what?: string;
  /** Checks the reply instead of `replySchema` alone: a {@link fastValidator} of it, for replies on hot paths. */
  check?: ReplyCheck<S>;
}

/** Sends a JSON request and validates the JSON reply; error replies are thrown as {@link AgentMeshError}. */
export async function requestJson<S extends z.ZodType>(
  bus: Bus,
  subject: string,
  body: unknown,
  replySchema: S,
  options: JsonRequestOptions<S> = {},
): Promise<z.output<S>> {
  const msg = await bus.request(subject, encodeJson(body), options);
  throwIfErrorReply(msg);
  const value = parseJson(msg.text(), options.what ?? `reply from ${subject}`);
  return options.check === undefined
    ? validate(replySchema, value, `reply from ${subject}`)
    : options.check(value, `reply from ${subject}`);
}

export function publishJson(bus: Bus, subject: string, value: unknown, headers?: BusHeaders): void {
  bus.publish(subject, encodeJson(value), headers === undefined ? {} : { headers });
}

export interface RetryingRequestOptions<S extends z.ZodType = z.ZodType> extends JsonRequestOptions<S> {
  /** Keep retrying retryable failures (no responders, timeouts, a reconnecting server) for this long. */
  retryForMs: number;
}

/**
 * {@link requestJson} that rides out a restarting server or a replica coming up: retryable failures are retried
 * through {@link retry} (50 ms doubling to 1 s, half of it jitter) until `retryForMs` has passed or the signal aborts.
 */
export function requestJsonRetrying<S extends z.ZodType>(
  bus: Bus,
  subject: string,
  body: unknown,
  replySchema: S,
  options: RetryingRequestOptions<S>,
): Promise<z.output<S>> {
  return retry(() => requestJson(bus, subject, body, replySchema, options), {
    timeoutMs: options.retryForMs,
    baseMs: 50,
    capMs: 1_000,
    jitter: 0.5,
    ...(options.signal === undefined ? {} : { signal: options.signal }),
  });
}
