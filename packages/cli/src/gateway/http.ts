import type { IncomingMessage, ServerResponse } from 'node:http';
import { ErrorCode, describeZodError, toErrorPayload, type Logger } from '@agentmesh/protocol';
import type { z } from 'zod';
import { HttpError } from '../console/guard.js';

export { HttpError };

/** The largest request body the gateway reads (1 MiB); a larger one is answered 413. */
export const MAX_BODY_BYTES = 1 << 20;

const ERROR_STATUS: Record<string, number> = {
  [ErrorCode.InvalidRequest]: 400,
  [ErrorCode.InvalidMessage]: 400,
  [ErrorCode.PermissionDenied]: 403,
  [ErrorCode.NotFound]: 404,
  [ErrorCode.Conflict]: 409,
  already_decided: 409,
  run_finished: 409,
  [ErrorCode.PayloadTooLarge]: 413,
  [ErrorCode.QuotaExceeded]: 429,
  [ErrorCode.NoResponders]: 503,
  [ErrorCode.Unavailable]: 503,
  [ErrorCode.JetStreamUnavailable]: 503,
  [ErrorCode.Timeout]: 504,
};

export function sendJson(res: ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, { 'content-type': 'application/json', 'cache-control': 'no-store' });
  res.end(JSON.stringify(body));
}

/**
 * Reads a JSON request body: over {@link MAX_BODY_BYTES} is 413 `payload_too_large` (reading stops there), a body
 * that does not parse is 400 `invalid_request` with the parser's message, an empty body is `{}`.
 */
export async function readJsonBody(req: IncomingMessage): Promise<unknown> {
  const declared = Number(req.headers['content-length'] ?? 0);
  if (declared > MAX_BODY_BYTES) throw tooLarge(declared);
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > MAX_BODY_BYTES) throw tooLarge(size);
    chunks.push(chunk);
  }
  const text = Buffer.concat(chunks).toString('utf8');
  if (text.trim() === '') return {};
  try {
    return JSON.parse(text);
  } catch (error) {
    throw new HttpError(
      400,
      `the request body is not valid JSON: ${(error as Error).message}`,
      ErrorCode.InvalidRequest,
    );
  }
}

function tooLarge(bytes: number): HttpError {
  return new HttpError(
    413,
    `the request body is ${bytes} bytes or more, above the limit of ${MAX_BODY_BYTES} bytes (1 MiB)`,
    ErrorCode.PayloadTooLarge,
  );
}

/** A JSON object body, or 400 naming what came instead. */
export async function readJsonObject(req: IncomingMessage): Promise<Record<string, unknown>> {
  const body = await readJsonBody(req);
  if (body === null || typeof body !== 'object' || Array.isArray(body))
    throw new HttpError(
      400,
      `the request body must be a JSON object, got ${body === null ? 'null' : Array.isArray(body) ? 'an array' : typeof body}`,
      ErrorCode.InvalidRequest,
    );
  return body as Record<string, unknown>;
}

/** Answers a failed request: an HttpError as it is, an AgentMeshError with the status its code maps to. */
export function sendError(res: ServerResponse, error: unknown, logger: Logger, path: string): void {
  if (res.headersSent) return void res.end();
  if (error instanceof HttpError)
    return sendJson(res, error.status, {
      error: { code: error.code, message: error.message, retryable: false },
    });
  const payload = toErrorPayload(error);
  const status = ERROR_STATUS[payload.code] ?? 500;
  if (status >= 500) logger.warn({ err: payload.message, path }, 'gateway request failed');
  sendJson(res, status, { error: payload });
}

/** `body` parsed by `schema`, or 400 `invalid_request` naming `what` and each field that does not validate. */
export function parseBody<T extends z.ZodType>(schema: T, body: unknown, what: string): z.infer<T> {
  const parsed = schema.safeParse(body);
  if (!parsed.success)
    throw new HttpError(400, `invalid ${what}: ${describeZodError(parsed.error)}`, ErrorCode.InvalidRequest);
  return parsed.data;
}
