import type { ErrorObject } from 'ajv/dist/2020.js';
import { AgentMeshError, ErrorCode, compileOutputSchema, type OutputValidator } from '@agentmesh/protocol';

/** A JSON Schema object a run's final answer must satisfy (RunRequest `output_schema`). */
export type OutputSchema = Record<string, unknown>;

const compiled = new WeakMap<OutputSchema, OutputValidator>();

/**
 * The validator of a run's output_schema (checked and compiled once per schema object, see
 * {@link compileOutputSchema}); a schema that is refused or does not compile is `invalid_request`.
 */
export function outputValidator(schema: OutputSchema): OutputValidator {
  let validate = compiled.get(schema);
  if (validate === undefined) {
    validate = compileOutputSchema(schema);
    compiled.set(schema, validate);
  }
  return validate;
}

export type OutputCheck = { ok: true; value: unknown } | { ok: false; problems: string[] };

/**
 * Parses a model's final text as JSON (a fenced ```json block is accepted too) and validates it against the
 * schema; the problems name the path and what is wrong, for a repair turn. An answer too costly to validate
 * throws `invalid_output`.
 */
export function checkOutput(text: string, schema: OutputSchema): OutputCheck {
  let value: unknown;
  try {
    value = JSON.parse(stripFence(text));
  } catch (error) {
    return { ok: false, problems: [`the answer is not JSON: ${(error as Error).message}`] };
  }
  const errors = outputValidator(schema)(value);
  if (errors === undefined) return { ok: true, value };
  return { ok: false, problems: errors.slice(0, 20).map(describe) };
}

/** The user message of the one repair turn a run gets when its answer does not match the schema. */
export function repairMessage(problems: readonly string[]): string {
  return (
    'Your final answer does not match the required JSON Schema:\n' +
    problems.map((p) => `- ${p}`).join('\n') +
    '\nReply again with only the corrected JSON value.'
  );
}

/** The error a run ends `failed` with when the repaired answer still does not match. */
export function invalidOutputError(problems: readonly string[]): AgentMeshError {
  return new AgentMeshError(
    ErrorCode.InvalidOutput,
    `the final answer does not match output_schema: ${problems.join('; ')}`,
    { retryable: false, details: { problems } },
  );
}

/**
 * Whether OpenAI's strict structured outputs accept the schema as it is: every object lists all its properties as
 * required and forbids additional ones, at every depth. When not, the schema is sent with `strict: false`.
 */
export function allowsStrictMode(schema: unknown): boolean {
  if (Array.isArray(schema)) return schema.every(allowsStrictMode);
  if (typeof schema !== 'object' || schema === null) return true;
  const s = schema as Record<string, unknown>;
  if (s['type'] === 'object' || s['properties'] !== undefined) {
    const props = (s['properties'] ?? {}) as Record<string, unknown>;
    const required = Array.isArray(s['required']) ? (s['required'] as unknown[]) : [];
    if (s['additionalProperties'] !== false) return false;
    if (Object.keys(props).some((k) => !required.includes(k))) return false;
  }
  return Object.entries(s).every(
    ([k, v]) => k === 'required' || k === 'enum' || k === 'const' || allowsStrictMode(v),
  );
}

function stripFence(text: string): string {
  const trimmed = text.trim();
  const fenced = /^```(?:json)?\s*\n([\s\S]*?)\n?```$/.exec(trimmed);
  return fenced ? fenced[1]! : trimmed;
}

function describe(error: ErrorObject): string {
  const at = error.instancePath === '' ? 'the value' : error.instancePath;
  const extra =
    error.keyword === 'additionalProperties'
      ? ` (${String((error.params as { additionalProperty?: string }).additionalProperty)})`
      : error.keyword === 'required'
        ? ''
        : '';
  return `${at} ${error.message ?? error.keyword}${extra}`;
}
