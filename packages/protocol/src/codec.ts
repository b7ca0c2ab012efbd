import { z } from 'zod';
import { AgentMeshError, ErrorCode } from './errors.js';
import { jsonSchemaCheck, type CompileDeferral } from './json-schema-check.js';

export type { CompileDeferral } from './json-schema-check.js';

const encoder = new TextEncoder();
/** Node's own UTF-8 decoder, which skips the argument checks TextDecoder runs on every call. */
const utf8Slice = (
  Buffer.prototype as unknown as { utf8Slice(this: Uint8Array, start: number, end: number): string }
).utf8Slice;

export function encodeJson(value: unknown): Uint8Array {
  return encoder.encode(JSON.stringify(value));
}

/** UTF-8 bytes as text, as TextDecoder gives it: malformed sequences become U+FFFD and a leading BOM is dropped. */
export function decodeText(data: Uint8Array): string {
  const text = utf8Slice.call(data, 0, data.length);
  return text.charCodeAt(0) === 0xfeff ? text.slice(1) : text;
}

/** Parses JSON bytes; malformed JSON becomes an `invalid_message` error that says where it broke. */
export function parseJson(data: Uint8Array | string, what = 'message'): unknown {
  const text = typeof data === 'string' ? data : decodeText(data);
  try {
    return JSON.parse(text) as unknown;
  } catch (error) {
    throw new AgentMeshError(
      ErrorCode.InvalidMessage,
      `${what} is not valid JSON: ${(error as Error).message}`,
      {
        details: { bytes: text.length },
      },
    );
  }
}

/** What {@link jsonCopy} returns for a value it does not copy. */
export const NOT_COPIED: unique symbol = Symbol('not copied');

const MAX_COPY_DEPTH = 64;

/**
 * A deep copy of plain JSON data, equal to `JSON.parse(JSON.stringify(value))` but without the text in between: what
 * an in-process bus is handed instead of a message body to encode and decode. It gives up, returning
 * {@link NOT_COPIED} (send the JSON text instead, which applies JSON's own rules or throws its own error), on
 * anything JSON would convert or reject: a `toJSON` method (Dates), a class instance, a typed array, a non-finite
 * number, a bigint, an array hole or `undefined` element, a `__proto__` key, an inherited enumerable key, nesting
 * deeper than 64 (cycles), or a body whose encoded size could exceed `maxBytes` (an upper bound is kept: 6 bytes per
 * string character, enough for any escape). Object members JSON leaves out (`undefined`, functions, symbols) are
 * left out here too.
 */
export function jsonCopy(value: unknown, maxBytes: number): unknown {
  return jsonCopyWithin(value, { left: maxBytes });
}

/**
 * {@link jsonCopy} of one part of a message, counting against the bytes the whole may still take: `budget.left` goes
 * down by the part's bound, and a part that takes it below zero is not copied.
 */
export function jsonCopyWithin(value: unknown, budget: { left: number }): unknown {
  const state = { left: budget.left, inherited: hasInheritedKeys() };
  const copy = copyJson(value, state, 0);
  budget.left = state.left;
  return state.left < 0 ? NOT_COPIED : copy;
}

const NO_KEYS = Object.freeze({});

/** Whether plain objects inherit enumerable keys (someone added one to `Object.prototype`), which JSON leaves out. */
function hasInheritedKeys(): boolean {
  for (const _ in NO_KEYS) return true;
  return false;
}

/** How a copy goes: the bytes the value may still take, and whether `for...in` may meet inherited keys. */
interface JsonCopy {
  left: number;
  readonly inherited: boolean;
}

function copyJson(value: unknown, state: JsonCopy, depth: number): unknown {
  switch (typeof value) {
    case 'string':
      state.left -= 6 * value.length + 2;
      return state.left < 0 ? NOT_COPIED : value;
    case 'number':
      state.left -= 24;
      return state.left < 0 || !Number.isFinite(value) ? NOT_COPIED : value + 0; // -0 becomes 0, as in JSON
    case 'boolean':
      state.left -= 5;
      return state.left < 0 ? NOT_COPIED : value;
    case 'object':
      if (value === null) {
        state.left -= 4;
        return state.left < 0 ? NOT_COPIED : null;
      }
      if (depth >= MAX_COPY_DEPTH) return NOT_COPIED;
      return Array.isArray(value)
        ? copyJsonArray(value as unknown[], state, depth + 1)
        : copyJsonObject(value, state, depth + 1);
    default:
      return NOT_COPIED;
  }
}

function copyJsonArray(array: unknown[], state: JsonCopy, depth: number): unknown {
  if (Object.getPrototypeOf(array) !== Array.prototype) return NOT_COPIED;
  const length = array.length;
  state.left -= 2 + length;
  if (state.left < 0) return NOT_COPIED;
  const copy = new Array<unknown>(length);
  for (let i = 0; i < length; i++) {
    if (!(i in array)) return NOT_COPIED;
    const item = copyJson(array[i], state, depth);
    if (item === NOT_COPIED) return NOT_COPIED;
    copy[i] = item;
  }
  return copy;
}

function copyJsonObject(object: object, state: JsonCopy, depth: number): unknown {
  const proto: unknown = Object.getPrototypeOf(object);
  if ((proto !== Object.prototype && proto !== null) || 'toJSON' in object) return NOT_COPIED;
  // built member by member from an empty object, not spread from the original: copies that share its shape and
  // then gain members get shapes of their own, which costs whatever reads them later more than the spread saves
  const copy: Record<string, unknown> = {};
  let left = state.left - 2;
  for (const key in object) {
    const member = (object as Record<string, unknown>)[key];
    let item: unknown = member;
    switch (typeof member) {
      case 'string':
        left -= 6 * member.length + 2;
        break;
      case 'number':
        if (!Number.isFinite(member)) return NOT_COPIED;
        item = member + 0;
        left -= 24;
        break;
      case 'boolean':
        left -= 5;
        break;
      case 'object':
        if (member === null) {
          left -= 4;
          break;
        }
        state.left = left;
        item = copyJson(member, state, depth);
        if (item === NOT_COPIED) return NOT_COPIED;
        left = state.left;
        break;
      case 'bigint':
        return NOT_COPIED;
      default:
        continue; // undefined, a function or a symbol: left out, as JSON does
    }
    if (key === '__proto__' || (state.inherited && !Object.hasOwn(object, key))) return NOT_COPIED;
    left -= 6 * key.length + 4;
    copy[key] = item;
  }
  state.left = left;
  return left < 0 ? NOT_COPIED : copy;
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

/**
 * How many units of work (calls, unless the caller weighs its values) a {@link fastValidator} hands to zod before it
 * compiles its ajv check: zod parses one message in about 10 us, ajv compiles a message schema in 10-40 ms, so a
 * short-lived process (a CLI run, a test) never compiles, while a long-lived one compiles within its first few dozen
 * messages. Zod decides meanwhile, so the answers are the same either way.
 */
export const FAST_CHECK_COMPILE_AFTER = 32;

/**
 * An ajv check compiled (once, on first use) from the JSON Schema of a zod schema's output side: it passes only values
 * already in the output form (every default present, no unknown key). Zod refinements are not in the JSON Schema, so
 * callers check them themselves. A schema JSON Schema cannot express gives a check that always fails. With
 * `deferral` it is compiled later and answers false until then: only for a caller that has a fallback for false.
 */
export function outputCheck(schema: z.ZodType, deferral?: CompileDeferral): (value: unknown) => boolean {
  return jsonSchemaCheck(schema, 'output', deferral);
}

/**
 * {@link outputCheck} for the input side of a zod schema: fields with a default may be absent. A value that passes is
 * one zod would accept (refinements aside), though zod would still fill in its defaults.
 */
export function inputCheck(schema: z.ZodType, deferral?: CompileDeferral): (value: unknown) => boolean {
  return jsonSchemaCheck(schema, 'input', deferral);
}

/**
 * {@link validate} for hot paths: a JSON-decoded value that passes {@link outputCheck} (and `refine`, for the zod
 * refinements JSON Schema cannot carry) is returned as it is; anything else goes through zod, which fills defaults,
 * strips unknown keys or throws naming the offending fields. The check is compiled after
 * {@link FAST_CHECK_COMPILE_AFTER} calls, or that many units of `weight` (say, one per item a request carries).
 */
export function fastValidator<S extends z.ZodType>(
  schema: S,
  refine?: (value: z.output<S>) => boolean,
  weight?: (value: unknown) => number,
): (value: unknown, what: string, code?: string) => z.output<S> {
  const check = outputCheck(schema, { after: FAST_CHECK_COMPILE_AFTER, weight });
  return (value, what, code = ErrorCode.InvalidMessage) =>
    check(value) && (refine === undefined || refine(value as z.output<S>))
      ? (value as z.output<S>)
      : validate(schema, value, what, code);
}

/** How many items `value[key]` holds when it is an array (0 otherwise): a {@link fastValidator} weight for any value. */
export function itemCount(value: unknown, key: string): number {
  if (typeof value !== 'object' || value === null) return 0;
  const items = (value as Record<string, unknown>)[key];
  return Array.isArray(items) ? items.length : 0;
}
