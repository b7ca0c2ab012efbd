import { z } from 'zod';
import { AgentMeshError, ErrorCode } from './errors.js';

/** The largest `output_schema` accepted: bytes of its JSON text. */
export const OUTPUT_SCHEMA_MAX_BYTES = 64 * 1024;
/** The deepest `output_schema` accepted: nesting of JSON objects and arrays, the schema object itself being 1. */
export const OUTPUT_SCHEMA_MAX_DEPTH = 32;
/**
 * Keywords an `output_schema` may not use anywhere: each runs a regular expression of the request's choosing on the
 * answer, and one such as `^(a+)+$` takes hours on a 40-character answer (no linear-time regex engine is available).
 * `format: "regex"` is refused too.
 */
export const OUTPUT_SCHEMA_REFUSED_KEYWORDS: readonly string[] = ['pattern', 'patternProperties'];

/**
 * The keyword each subschema of a {@link PreparedOutputSchema} carries: the work applying it costs, for the step
 * budget of the validator (`w`: base steps, `s`: plus the string's length, `u`: plus n²/2 for `uniqueItems`).
 */
export const OUTPUT_SCHEMA_COST_KEYWORD = 'x-agentmesh-cost';
export interface SubschemaCost {
  w: number;
  s?: 1;
  u?: 1;
}

/** Why an `output_schema` is refused; `path` is a JSON Pointer into the schema (`#` is its root). */
export interface OutputSchemaRefusal {
  reason: 'refused_keyword' | 'remote_ref' | 'nested_resource' | 'too_deep' | 'too_large';
  message: string;
  path: string;
  keyword?: string;
  limit?: number;
}

/** A checked `output_schema`: a copy with sorted keys, root `$id`/`$schema` dropped and costs set; `text` keys it. */
export interface PreparedOutputSchema {
  schema: Record<string, unknown>;
  text: string;
}

const REF_KEYWORDS: ReadonlySet<string> = new Set(['$ref', '$dynamicRef', '$recursiveRef']);
const RESOURCE_KEYWORDS: ReadonlySet<string> = new Set(['$id', '$schema']);
const DATA_KEYWORDS: ReadonlySet<string> = new Set([
  'enum',
  'const',
  'default',
  'examples',
  'required',
  'dependentRequired',
  'title',
  'description',
  '$comment',
]);
const CHECKED_DATA: ReadonlySet<string> = new Set(['enum', 'const', 'required', 'dependentRequired']);
const SCHEMA_MAPS: ReadonlySet<string> = new Set([
  'properties',
  '$defs',
  'definitions',
  'dependentSchemas',
  'dependencies',
]);
const STRING_LENGTH_KEYWORDS: ReadonlySet<string> = new Set(['minLength', 'maxLength']);

class Refused extends Error {
  constructor(readonly refusal: OutputSchemaRefusal) {
    super(refusal.message);
  }
}

/**
 * Checks an `output_schema` against the limits every planner and client applies (size, depth, refused keywords,
 * references outside the schema, `$id`/`$schema` below the root) and returns the copy planners compile. One
 * function for every way a schema arrives: RunRequest, agent.run / agent.spawn, the CLI. Throws `invalid_request`
 * naming `output_schema`, the keyword, its path and the limit.
 */
export function prepareOutputSchema(schema: Record<string, unknown>): PreparedOutputSchema {
  const outcome = inspectOutputSchema(schema);
  if ('refusal' in outcome) {
    const { message, ...details } = outcome.refusal;
    throw new AgentMeshError(ErrorCode.InvalidRequest, `output_schema: ${message}`, {
      retryable: false,
      details: { field: 'output_schema', ...details },
    });
  }
  return outcome;
}

/** {@link prepareOutputSchema} without the throw: what is wrong with the schema, or undefined. */
export function outputSchemaRefusal(schema: Record<string, unknown>): OutputSchemaRefusal | undefined {
  const outcome = inspectOutputSchema(schema);
  return 'refusal' in outcome ? outcome.refusal : undefined;
}

/** `output_schema` of a RunRequest or of agent.run / agent.spawn: a JSON Schema object within the limits above. */
export const OutputSchemaSchema = z.record(z.string(), z.unknown()).superRefine((schema, ctx) => {
  const refusal = outputSchemaRefusal(schema);
  if (refusal !== undefined) ctx.addIssue({ code: 'custom', message: refusal.message });
});

function inspectOutputSchema(
  schema: Record<string, unknown>,
): PreparedOutputSchema | { refusal: OutputSchemaRefusal } {
  try {
    const prepared = subschema(schema, []) as Record<string, unknown>;
    const bytes = Buffer.byteLength(JSON.stringify(schema));
    if (bytes > OUTPUT_SCHEMA_MAX_BYTES)
      refuse(
        'too_large',
        [],
        `the schema is ${bytes} bytes, more than OUTPUT_SCHEMA_MAX_BYTES (${OUTPUT_SCHEMA_MAX_BYTES})`,
        { limit: OUTPUT_SCHEMA_MAX_BYTES },
      );
    return { schema: prepared, text: JSON.stringify(prepared) };
  } catch (error) {
    if (error instanceof Refused) return { refusal: error.refusal };
    throw error;
  }
}

/**
 * A checked copy of the subschema at `trail` (the keys leading to it; its depth is their count plus one), with
 * sorted keys and its cost set. `trail` is a stack the walk pushes to and pops from.
 */
function subschema(value: unknown, trail: string[]): unknown {
  if (typeof value !== 'object' || value === null) return value;
  within(trail);
  if (Array.isArray(value))
    return value.map((item, i) => nested(trail, String(i), () => subschema(item, trail)));
  const node = value as Record<string, unknown>;
  const root = trail.length === 0;
  const out: Record<string, unknown> = {};
  const cost: SubschemaCost = { w: 1 };
  for (const key of Object.keys(node).sort()) {
    const item = node[key];
    refuseKeyword(key, item, trail);
    if (root && RESOURCE_KEYWORDS.has(key)) continue;
    if (DATA_KEYWORDS.has(key)) {
      const nodes = nested(trail, key, () => dataNodes(item, trail));
      if (CHECKED_DATA.has(key)) cost.w += nodes;
      put(out, key, item);
    } else if (SCHEMA_MAPS.has(key) && isRecord(item)) {
      if (key === 'properties') cost.w += Object.keys(item).length;
      put(
        out,
        key,
        nested(trail, key, () => schemaMap(item, trail)),
      );
    } else
      put(
        out,
        key,
        nested(trail, key, () => subschema(item, trail)),
      );
    if (STRING_LENGTH_KEYWORDS.has(key)) cost.s = 1;
  }
  if (node['uniqueItems'] === true && !scalarItems(node['items'])) cost.u = 1;
  out[OUTPUT_SCHEMA_COST_KEYWORD] = cost;
  return out;
}

/** A map of names to subschemas (`properties`, `$defs`...): the names are not keywords. */
function schemaMap(map: Record<string, unknown>, trail: string[]): Record<string, unknown> {
  within(trail);
  const out: Record<string, unknown> = {};
  for (const name of Object.keys(map).sort())
    put(
      out,
      name,
      nested(trail, name, () => subschema(map[name], trail)),
    );
  return out;
}

/** Sets an own member, `__proto__` (a property name JSON may carry) included. */
function put(out: Record<string, unknown>, key: string, value: unknown): void {
  if (key === '__proto__')
    Object.defineProperty(out, key, { value, enumerable: true, writable: true, configurable: true });
  else out[key] = value;
}

function nested<T>(trail: string[], key: string, walk: () => T): T {
  trail.push(key);
  try {
    return walk();
  } finally {
    trail.pop();
  }
}

function refuseKeyword(key: string, value: unknown, trail: string[]): void {
  if (OUTPUT_SCHEMA_REFUSED_KEYWORDS.includes(key) || (key === 'format' && value === 'regex'))
    refuse(
      'refused_keyword',
      trail,
      `keyword ${key === 'format' ? '"format": "regex"' : `"${key}"`} at ${pointer(trail)} is refused: it runs a ` +
        'regular expression of the request on the answer, which can take hours (no linear-time regex engine is available)',
      { keyword: key },
    );
  if (REF_KEYWORDS.has(key) && (typeof value !== 'string' || !value.startsWith('#')))
    refuse(
      'remote_ref',
      trail,
      `"${key}": ${JSON.stringify(value)} at ${pointer(trail)} is refused: only references inside the schema ` +
        '(starting with "#") are allowed',
      { keyword: key },
    );
  if (trail.length > 0 && RESOURCE_KEYWORDS.has(key))
    refuse(
      'nested_resource',
      trail,
      `"${key}" at ${pointer(trail)} is refused: only the root may carry $id or $schema (both are ignored there)`,
      { keyword: key },
    );
}

function dataNodes(value: unknown, trail: string[]): number {
  if (typeof value !== 'object' || value === null) return 1;
  within(trail);
  let nodes = 1;
  for (const [key, item] of Object.entries(value)) nodes += nested(trail, key, () => dataNodes(item, trail));
  return nodes;
}

function within(trail: string[]): void {
  if (trail.length >= OUTPUT_SCHEMA_MAX_DEPTH)
    refuse(
      'too_deep',
      trail,
      `the schema is nested deeper than OUTPUT_SCHEMA_MAX_DEPTH (${OUTPUT_SCHEMA_MAX_DEPTH} levels of objects and ` +
        `arrays) at ${pointer(trail)}`,
      { limit: OUTPUT_SCHEMA_MAX_DEPTH },
    );
}

/** Whether ajv checks `uniqueItems` in linear time: items of declared scalar types only. */
function scalarItems(items: unknown): boolean {
  if (!isRecord(items)) return false;
  const type = items['type'];
  const types = typeof type === 'string' ? [type] : Array.isArray(type) ? type : [];
  return types.length > 0 && types.every((t) => t !== 'object' && t !== 'array');
}

function refuse(
  reason: OutputSchemaRefusal['reason'],
  trail: readonly string[],
  message: string,
  extra: { keyword?: string; limit?: number },
): never {
  throw new Refused({ reason, message, path: pointer(trail), ...extra });
}

/** The JSON Pointer (as a URI fragment, `#` alone for the root) of the keys in `trail`. */
function pointer(trail: readonly string[]): string {
  return ['#', ...trail.map((key) => key.replaceAll('~', '~0').replaceAll('/', '~1'))].join('/');
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
