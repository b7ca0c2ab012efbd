import { Ajv2020, type ErrorObject, type ValidateFunction } from 'ajv/dist/2020.js';
import { z } from 'zod';
import { AgentMeshError, ErrorCode, describeZodError } from '@agentmesh/protocol';

export type JsonSchema = Record<string, unknown>;

/** An ajv of its own for each tool schema: a `$id` one tool's schema carries never clashes with another's. */
function ajv(): Ajv2020 {
  return new Ajv2020({
    allErrors: true,
    strict: false,
    logger: false,
    validateFormats: false,
    validateSchema: false,
  });
}

/**
 * Derives the JSON Schema (draft 2020-12) a model sees from a zod schema. `io` picks the input side (what a caller
 * may send, defaults optional) or the output side. Fails with `invalid_config` when zod cannot express the schema.
 */
export function toJsonSchema(schema: z.ZodType, io: 'input' | 'output', what: string): JsonSchema {
  try {
    return z.toJSONSchema(schema, { target: 'draft-2020-12', io, unrepresentable: 'throw' }) as JsonSchema;
  } catch (error) {
    throw new AgentMeshError(
      ErrorCode.InvalidConfig,
      `${what} cannot be expressed as JSON Schema: ${(error as Error).message}`,
      { retryable: false, cause: error },
    );
  }
}

let schemaCompiles = 0;

/**
 * How many tool schemas {@link compileJsonSchema} has compiled in this process, for tests (message checks count in
 * the protocol's `jsonSchemaCompiles`).
 */
export function toolSchemaCompiles(): number {
  return schemaCompiles;
}

/** Compiles a JSON Schema once, alone in its ajv; the returned check is reused for every call. */
export function compileJsonSchema(schema: JsonSchema, what: string): ValidateFunction {
  schemaCompiles++;
  const { $schema: _ignored, ...body } = schema;
  try {
    return ajv().compile(body);
  } catch (error) {
    throw new AgentMeshError(
      ErrorCode.InvalidConfig,
      `${what} does not compile: ${(error as Error).message}`,
      {
        retryable: false,
        cause: error,
      },
    );
  }
}

/**
 * {@link compileJsonSchema} put off until the check is first asked for: a worker or CLI run defines every tool of its
 * packs and calls few of them, and ajv takes milliseconds a schema (more for the first). What makes a schema derived
 * from zod fail to compile is a regex the `u` flag ajv uses refuses: that is tried now, so such a tool still fails
 * with `invalid_config` where it is defined. A JSON Schema keyword ajv refuses (only a `.meta()` override can put one
 * there) fails with the same error at the first check.
 */
export function deferredJsonSchema(schema: JsonSchema, what: string): () => ValidateFunction {
  assertPatternsCompile(schema, what, 0);
  let check: ValidateFunction | undefined;
  return () => (check ??= compileJsonSchema(schema, what));
}

const SUBSCHEMA: ReadonlySet<string> = new Set([
  'additionalProperties',
  'items',
  'contains',
  'not',
  'if',
  'then',
  'else',
  'propertyNames',
  'unevaluatedProperties',
  'unevaluatedItems',
]);
const SUBSCHEMA_LISTS: ReadonlySet<string> = new Set(['prefixItems', 'anyOf', 'oneOf', 'allOf']);
const SUBSCHEMA_MAPS: ReadonlySet<string> = new Set([
  'properties',
  'patternProperties',
  '$defs',
  'definitions',
  'dependentSchemas',
]);

/**
 * Compiles every `pattern` and `patternProperties` key of a schema and its subschemas as ajv will (`u` flag), throwing
 * as it would. Only schema positions are walked: a `default` or `const` value holding a "pattern" key is data.
 */
function assertPatternsCompile(schema: unknown, what: string, depth: number): void {
  if (typeof schema !== 'object' || schema === null || Array.isArray(schema) || depth > 64) return;
  for (const [key, value] of Object.entries(schema)) {
    if (key === 'pattern' && typeof value === 'string') tryPattern(value, what);
    else if (SUBSCHEMA.has(key)) assertPatternsCompile(value, what, depth + 1);
    else if (SUBSCHEMA_LISTS.has(key) && Array.isArray(value))
      for (const item of value) assertPatternsCompile(item, what, depth + 1);
    else if (SUBSCHEMA_MAPS.has(key) && typeof value === 'object' && value !== null)
      for (const [name, sub] of Object.entries(value)) {
        if (key === 'patternProperties') tryPattern(name, what);
        assertPatternsCompile(sub, what, depth + 1);
      }
  }
}

function tryPattern(pattern: string, what: string): void {
  try {
    new RegExp(pattern, 'u');
  } catch (error) {
    throw new AgentMeshError(
      ErrorCode.InvalidConfig,
      `${what} does not compile: ${(error as Error).message}`,
      { retryable: false, cause: error },
    );
  }
}

function describeAjvErrors(errors: ErrorObject[] | null | undefined): string {
  return (errors ?? [])
    .slice(0, 8)
    .map((e) => {
      const path = e.instancePath === '' ? '' : e.instancePath.slice(1).replaceAll('/', '.');
      const missing =
        e.keyword === 'required' ? String((e.params as { missingProperty?: unknown }).missingProperty) : '';
      const field = [path, missing].filter((p) => p !== '').join('.');
      const allowed =
        e.keyword === 'enum'
          ? ` (${((e.params as { allowedValues?: unknown[] }).allowedValues ?? []).join(', ')})`
          : '';
      return `${field === '' ? '(root)' : field}: ${e.message ?? e.keyword}${allowed}`;
    })
    .join('; ');
}

/**
 * Checks a value: one that passes `pass` (a check that only accepts values already in zod's output form) is returned
 * as it is; anything else goes through the compiled JSON Schema (fail closed), then zod for defaults, transforms and
 * refinements JSON Schema cannot carry. Either failure throws `code` naming the offending fields.
 */
export function checkValue<T>(
  value: unknown,
  compiled: () => ValidateFunction,
  schema: z.ZodType<T>,
  code: string,
  what: string,
  pass?: (value: unknown) => boolean,
): T {
  if (pass?.(value) === true) return value as T;
  const check = compiled();
  if (!check(value))
    throw new AgentMeshError(code, `invalid ${what}: ${describeAjvErrors(check.errors)}`, {
      retryable: false,
      details: {
        issues: (check.errors ?? []).slice(0, 20).map((e) => ({ path: e.instancePath, message: e.message })),
      },
    });
  const parsed = schema.safeParse(value);
  if (!parsed.success)
    throw new AgentMeshError(code, `invalid ${what}: ${describeZodError(parsed.error)}`, {
      retryable: false,
      details: {
        issues: parsed.error.issues
          .slice(0, 20)
          .map((i) => ({ path: i.path.map(String), message: i.message })),
      },
    });
  return parsed.data;
}

let exact: Ajv2020 | undefined;
let identityCompiles = 0;

/** How many identity checks this process has compiled, for tests. */
export function identityCheckCompiles(): number {
  return identityCompiles;
}

/**
 * How many values an identity check hands straight to its fallback before it compiles: ajv takes milliseconds to
 * compile one, the fallback tens of microseconds a value, and a short-lived worker or CLI run may never call the tool.
 */
export const IDENTITY_COMPILE_AFTER = 32;

/**
 * A check that passes exactly the values zod would return unchanged: it exists only when every part of the schema is
 * one JSON Schema renders faithfully (no refinement, transform, string format other than a flagless regex, readonly,
 * lazy, union of objects...). Values it rejects still go through zod. Undefined when there is none. It answers false
 * for its first `compileAfter` values, then compiles (once) and checks.
 */
export function identityCheck(
  schema: z.ZodType,
  compileAfter = IDENTITY_COMPILE_AFTER,
): ((value: unknown) => boolean) | undefined {
  if (!isExact(schema, new Set())) return undefined;
  let check: ((value: unknown) => unknown) | undefined;
  let asked = 0;
  return (value) => {
    if (check === undefined) {
      if (++asked <= compileAfter) return false;
      check = compileIdentityCheck(schema);
    }
    return check(value) === true;
  };
}

function compileIdentityCheck(schema: z.ZodType): (value: unknown) => unknown {
  identityCompiles++;
  try {
    const { $schema: _ignored, ...json } = z.toJSONSchema(schema, {
      target: 'draft-2020-12',
      io: 'output',
      unrepresentable: 'throw',
    });
    exact ??= new Ajv2020({
      strict: false,
      strictNumbers: true,
      unicode: false,
      unicodeRegExp: false,
      logger: false,
      validateFormats: false,
      validateSchema: false,
    });
    return exact.compile(json);
  } catch {
    return () => false;
  }
}

interface ZodNode {
  _zod: { def: Record<string, unknown> & { type: string; checks?: { _zod: { def: ZodCheckDef } }[] } };
}
interface ZodCheckDef {
  check: string;
  format?: string;
  pattern?: RegExp;
}

const EXACT_CHECKS: ReadonlySet<string> = new Set([
  'less_than',
  'greater_than',
  'multiple_of',
  'max_length',
  'min_length',
  'length_equals',
]);
const EXACT_NUMBER_FORMATS: ReadonlySet<string> = new Set(['safeint', 'int32', 'uint32']);
const LEAVES: ReadonlySet<string> = new Set([
  'string',
  'number',
  'boolean',
  'null',
  'literal',
  'enum',
  'unknown',
  'any',
]);

function isExact(schema: unknown, seen: Set<unknown>, inUnion = false): boolean {
  const node = schema as ZodNode;
  const def = node?._zod?.def;
  if (def === undefined || seen.has(schema)) return false;
  seen.add(schema);
  for (const c of def.checks ?? []) {
    const cd = c._zod.def;
    if (EXACT_CHECKS.has(cd.check)) continue;
    if (cd.check === 'number_format' && EXACT_NUMBER_FORMATS.has(cd.format ?? '')) continue;
    if (cd.check === 'string_format' && cd.format === 'regex' && cd.pattern?.flags === '') continue;
    return false;
  }
  const child = (s: unknown, union = inUnion) => isExact(s, seen, union);
  switch (def.type) {
    case 'object': {
      if (inUnion) return false;
      const shape = def['shape'] as Record<string, unknown>;
      const catchall = def['catchall'] as ZodNode | undefined;
      if (catchall !== undefined && catchall._zod.def.type !== 'never' && !child(catchall)) return false;
      return Object.values(shape).every((s) => child(s));
    }
    case 'array':
      return !inUnion && child(def['element']);
    case 'record': {
      const key = def['keyType'] as ZodNode;
      return (
        !inUnion &&
        key._zod.def.type === 'string' &&
        (key._zod.def.checks ?? []).length === 0 &&
        child(def['valueType'])
      );
    }
    case 'union':
      return (def['options'] as unknown[]).every((s) => child(s, true));
    case 'optional':
    case 'nullable':
      return child(def['innerType']);
    case 'default':
      return !inUnion && child(def['innerType']);
    default:
      return LEAVES.has(def.type);
  }
}
