import { Ajv2020, type ErrorObject } from 'ajv/dist/2020.js';
import { AgentMeshError, ErrorCode } from './errors.js';
import {
  OUTPUT_SCHEMA_COST_KEYWORD,
  prepareOutputSchema,
  type PreparedOutputSchema,
  type SubschemaCost,
} from './output-schema.js';

/**
 * The most work one validation of an answer may take, in steps: one per subschema applied, plus the enum, const,
 * required and property entries it checks, the members or length of the value it looks at, and n²/2 for a
 * `uniqueItems` of non-scalar items. An answer past it fails with `invalid_output` instead of blocking the planner.
 */
export const OUTPUT_SCHEMA_MAX_STEPS = 1_000_000;
/** Compiled output schemas a process keeps (each in its own ajv), the least recently used dropped first. */
export const OUTPUT_VALIDATOR_CACHE_SIZE = 128;
/** The most schema text (characters, summed over the kept schemas) the compiled-schema cache holds. */
export const OUTPUT_VALIDATOR_CACHE_BYTES = 2 * 1024 * 1024;

/** Validates an answer: undefined when it matches, else ajv's errors. Throws `invalid_output` past the step budget. */
export type OutputValidator = (value: unknown) => readonly ErrorObject[] | undefined;

const validators = new Map<string, OutputValidator>();
let cachedBytes = 0;
let metaChecker: Ajv2020 | undefined;

class OverBudget extends Error {}

/**
 * The validator of an `output_schema`, after {@link prepareOutputSchema}'s checks. Each schema is compiled in an ajv
 * of its own, so no `$id`, anchor or cached schema is shared between runs or tenants; compiled validators are kept
 * by the schema's canonical text, at most {@link OUTPUT_VALIDATOR_CACHE_SIZE} of them and
 * {@link OUTPUT_VALIDATOR_CACHE_BYTES} of text. A schema that is not valid JSON
 * Schema (draft 2020-12) is `invalid_request` naming `output_schema`.
 */
export function compileOutputSchema(schema: Record<string, unknown>): OutputValidator {
  const prepared = prepareOutputSchema(schema);
  const cached = validators.get(prepared.text);
  if (cached !== undefined) {
    validators.delete(prepared.text);
    validators.set(prepared.text, cached);
    return cached;
  }
  const validator = compileIsolated(prepared);
  keep(prepared.text, validator);
  return validator;
}

function keep(text: string, validator: OutputValidator): void {
  for (const oldest of validators.keys()) {
    if (
      validators.size < OUTPUT_VALIDATOR_CACHE_SIZE &&
      cachedBytes + text.length <= OUTPUT_VALIDATOR_CACHE_BYTES
    )
      break;
    validators.delete(oldest);
    cachedBytes -= oldest.length;
  }
  validators.set(text, validator);
  cachedBytes += text.length;
}

function compileIsolated(prepared: PreparedOutputSchema): OutputValidator {
  metaChecker ??= new Ajv2020({ strict: false, logger: false, validateFormats: false });
  if (!metaChecker.validateSchema(prepared.schema))
    throw notJsonSchema(metaChecker.errorsText(metaChecker.errors, { dataVar: 'output_schema' }));
  let left = 0;
  const ajv = new Ajv2020({
    allErrors: true,
    strict: false,
    logger: false,
    meta: false,
    validateSchema: false,
    validateFormats: false,
  });
  ajv.addKeyword({
    keyword: OUTPUT_SCHEMA_COST_KEYWORD,
    errors: false,
    validate: (cost: SubschemaCost, data: unknown) => {
      left -= stepsOf(cost, data);
      if (left < 0) throw new OverBudget();
      return true;
    },
  });
  let validate: ReturnType<Ajv2020['compile']>;
  try {
    validate = ajv.compile(prepared.schema);
  } catch (error) {
    throw notJsonSchema(error instanceof Error ? error.message : String(error));
  }
  return (value) => {
    left = OUTPUT_SCHEMA_MAX_STEPS;
    try {
      return validate(value) ? undefined : (validate.errors ?? []);
    } catch (error) {
      throw tooCostly(error);
    }
  };
}

function stepsOf(cost: SubschemaCost, data: unknown): number {
  if (Array.isArray(data)) return cost.w + data.length + (cost.u === 1 ? (data.length * data.length) / 2 : 0);
  if (typeof data === 'object' && data !== null) return cost.w + Object.keys(data).length;
  if (typeof data === 'string' && cost.s === 1) return cost.w + data.length;
  return cost.w;
}

function notJsonSchema(reason: string): AgentMeshError {
  return new AgentMeshError(ErrorCode.InvalidRequest, `output_schema is not a valid JSON Schema: ${reason}`, {
    retryable: false,
    details: { field: 'output_schema' },
  });
}

function tooCostly(error: unknown): AgentMeshError {
  const message =
    error instanceof OverBudget
      ? `validating the answer against output_schema takes more than OUTPUT_SCHEMA_MAX_STEPS (${OUTPUT_SCHEMA_MAX_STEPS}) steps`
      : error instanceof RangeError
        ? 'validating the answer against output_schema recursed too deep (a $ref that never consumes the answer, or an answer nested too deep)'
        : `validating the answer against output_schema failed: ${String(error)}`;
  return new AgentMeshError(ErrorCode.InvalidOutput, message, {
    retryable: false,
    cause: error,
    details: { field: 'output_schema', limit: OUTPUT_SCHEMA_MAX_STEPS },
  });
}
