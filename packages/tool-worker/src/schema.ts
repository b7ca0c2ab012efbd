import { Ajv2020, type ErrorObject, type ValidateFunction } from 'ajv/dist/2020.js';
import { z } from 'zod';
import { AgentMeshError, ErrorCode, describeZodError } from '@agentmesh/protocol';

export type JsonSchema = Record<string, unknown>;

let compiler: Ajv2020 | undefined;
function ajv(): Ajv2020 {
  compiler ??= new Ajv2020({
    allErrors: true,
    strict: false,
    logger: false,
    validateFormats: false,
    validateSchema: false,
  });
  return compiler;
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

/** Compiles a JSON Schema once; the returned check is reused for every call. */
export function compileJsonSchema(schema: JsonSchema, what: string): ValidateFunction {
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
 * Checks a value with the compiled JSON Schema (fail closed), then parses it with zod for defaults, transforms and
 * refinements JSON Schema cannot carry. Either failure throws `code` naming the offending fields.
 */
export function checkValue<T>(
  value: unknown,
  check: ValidateFunction,
  schema: z.ZodType<T>,
  code: string,
  what: string,
): T {
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
