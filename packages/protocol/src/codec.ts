import type { z } from 'zod';
import { AgentMeshError, ErrorCode } from './errors.js';

const encoder = new TextEncoder();
const decoder = new TextDecoder();

export function encodeJson(value: unknown): Uint8Array {
  return encoder.encode(JSON.stringify(value));
}

export function decodeText(data: Uint8Array): string {
  return decoder.decode(data);
}

/** Parses JSON bytes; malformed JSON becomes an `invalid_message` error that says where it broke. */
export function parseJson(data: Uint8Array | string, what = 'message'): unknown {
  const text = typeof data === 'string' ? data : decoder.decode(data);
  try {
    return JSON.parse(text) as unknown;
  } catch (error) {
    throw new AgentMeshError(ErrorCode.InvalidMessage, `${what} is not valid JSON: ${(error as Error).message}`, {
      details: { bytes: text.length },
    });
  }
}

/** Formats zod issues as `path: problem` lines so the offending field is named. */
export function describeZodError(error: z.ZodError): string {
  return error.issues
    .slice(0, 8)
    .map((issue) => `${issue.path.length === 0 ? '(root)' : issue.path.join('.')}: ${issue.message}`)
    .join('; ');
}

/** Validates a value against a schema, throwing `code` with every offending field named. */
export function validate<S extends z.ZodType>(
  schema: S,
  value: unknown,
  what: string,
  code: string = ErrorCode.InvalidMessage,
): z.output<S> {
  const result = schema.safeParse(value);
  if (result.success) return result.data;
  throw new AgentMeshError(code, `invalid ${what}: ${describeZodError(result.error)}`, {
    details: {
      issues: result.error.issues.slice(0, 20).map((i) => ({ path: i.path.map(String), message: i.message })),
    },
  });
}

/** Parses JSON bytes and validates them in one step. */
export function decodeMessage<S extends z.ZodType>(
  schema: S,
  data: Uint8Array | string,
  what: string,
  code: string = ErrorCode.InvalidMessage,
): z.output<S> {
  const value = parseJson(data, what);
  return validate(schema, value, what, code);
}
