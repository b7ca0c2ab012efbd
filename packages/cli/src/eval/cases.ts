import { z } from 'zod';
import {
  AgentMeshError,
  ErrorCode,
  RunRequestSchema,
  validate,
  type RunRequestInput,
} from '@agentmesh/protocol';
import { compileChecks, ExpectSchema, type CompiledChecks, type Expect } from './checks.js';

/** The longest case id accepted (it names the case in every report). */
export const CASE_ID_MAX_LENGTH = 128;
/** The most lines one dataset may hold: a larger file is a usage error, not a slow surprise. */
export const MAX_CASES = 10_000;

const CaseHeadSchema = z.object({
  id: z
    .string()
    .min(1, 'id must be a non-empty string')
    .max(CASE_ID_MAX_LENGTH, `id must be at most ${CASE_ID_MAX_LENGTH} characters`),
  expect: ExpectSchema,
});

/** One case of a dataset: the run to start, what must hold of it, and where it came from. */
export interface EvalCase {
  id: string;
  line: number;
  request: RunRequestInput;
  expect: Expect;
  checks: CompiledChecks;
}

/** A line that is not a case, with why. */
export interface LineError {
  line: number;
  message: string;
}

export interface Dataset {
  cases: EvalCase[];
  errors: LineError[];
}

/**
 * Reads a JSONL dataset: each non-blank line is a RunRequest plus `id` (the case's name) and `expect`. A line that
 * is not valid JSON, breaks the schema, repeats an id, or holds a check that cannot be compiled safely (an unsafe
 * regex, a refused JSON Schema) becomes a {@link LineError} naming its line; the other lines still load.
 */
export function parseDataset(text: string): Dataset {
  const lines = text.split(/\r?\n/);
  const cases: EvalCase[] = [];
  const errors: LineError[] = [];
  const seen = new Map<string, number>();
  lines.forEach((raw, index) => {
    if (raw.trim() === '') return;
    const line = index + 1;
    try {
      const parsed = parseLine(raw, line);
      const first = seen.get(parsed.id);
      if (first !== undefined) throw lineError(`id "${parsed.id}" is already used on line ${first}`);
      seen.set(parsed.id, line);
      cases.push(parsed);
    } catch (error) {
      errors.push({ line, message: AgentMeshError.from(error).message });
    }
  });
  if (cases.length + errors.length > MAX_CASES)
    throw new AgentMeshError(
      ErrorCode.InvalidRequest,
      `the dataset holds ${cases.length + errors.length} lines; the limit is ${MAX_CASES}`,
      { details: { usage: true, limit: MAX_CASES } },
    );
  return { cases, errors };
}

function lineError(message: string): AgentMeshError {
  return new AgentMeshError(ErrorCode.InvalidRequest, message);
}

function parseLine(raw: string, line: number): EvalCase {
  let value: unknown;
  try {
    value = JSON.parse(raw);
  } catch (error) {
    throw lineError(`not valid JSON (${(error as Error).message})`);
  }
  if (value === null || typeof value !== 'object' || Array.isArray(value))
    throw lineError('a case must be a JSON object: a RunRequest plus "id" and "expect"');
  const { id, expect, ...rest } = value as Record<string, unknown>;
  const head = validate(CaseHeadSchema, { id, expect }, 'case', ErrorCode.InvalidRequest);
  const request = validate(RunRequestSchema, rest, 'run request', ErrorCode.InvalidRequest);
  return {
    id: head.id,
    line,
    request: rest as RunRequestInput,
    expect: head.expect,
    checks: compileChecks(head.expect, request),
  };
}
