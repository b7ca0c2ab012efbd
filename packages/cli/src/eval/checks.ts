import { createContext, Script } from 'node:vm';
import { z } from 'zod';
import {
  AgentMeshError,
  ErrorCode,
  compileOutputSchema,
  compileSafeRegex,
  matchesToolPattern,
  RunStatusSchema,
  type RunRequest,
  type RunStatus,
  type Usage,
} from '@agentmesh/protocol';

const patterns = z.union([z.string().min(1).max(256), z.array(z.string().min(1).max(256)).min(1).max(64)]);

/** The `expect` field of a case: every check it names must hold for the case to pass. */
export const ExpectSchema = z
  .object({
    contains: z.union([z.string(), z.array(z.string()).min(1).max(64)]).optional(),
    equals: z.string().optional(),
    regex: z.string().optional(),
    json_schema: z.record(z.string(), z.unknown()).optional(),
    tool_called: patterns.optional(),
    tool_not_called: patterns.optional(),
    max_tool_calls: z.number().int().min(0).optional(),
    max_turns: z.number().int().min(1).optional(),
    status: RunStatusSchema.default('done'),
    max_cost_usd: z.number().min(0).optional(),
  })
  .strict();
export type Expect = z.infer<typeof ExpectSchema>;

/** How long one `regex` check may run on a final text before the case fails (a second line of defence). */
export const REGEX_TIMEOUT_MS = 1000;

/** What a case's run came to: the facts every check reads. */
export interface CaseOutcome {
  run_id: string;
  /** The run's final status; a run that ended with `run.failed` is `failed`. */
  status: RunStatus;
  text: string;
  /** run.completed.output (the validated answer of a run with output_schema). */
  output?: unknown;
  error?: { code: string; message: string };
  turns: number;
  tool_calls: number;
  /** Canonical names of the tools the model called, in order. */
  tools_called: string[];
  usage: Usage;
  cost_usd?: number;
  planner_id?: string;
  duration_ms: number;
}

/** One check: undefined when it holds, else why not. */
type Check = (outcome: CaseOutcome) => string | undefined;

/** A case's checks, compiled once when the dataset loads. */
export interface CompiledChecks {
  run(outcome: CaseOutcome): string[];
}

/**
 * Compiles `expect` into checks. A `regex` must pass the protocol's safe-regex check and then runs with a time limit;
 * a `json_schema` goes through the same hardened validator as `output_schema`. Throws `invalid_request` naming the
 * check when one cannot be compiled.
 */
export function compileChecks(expect: Expect, request: Pick<RunRequest, 'output_schema'>): CompiledChecks {
  const checks: Check[] = [statusCheck(expect.status)];
  if (expect.contains !== undefined) checks.push(containsCheck(toList(expect.contains)));
  if (expect.equals !== undefined) checks.push(equalsCheck(expect.equals));
  if (expect.regex !== undefined) checks.push(regexCheck(expect.regex));
  if (expect.json_schema !== undefined)
    checks.push(jsonSchemaCheck(expect.json_schema, request.output_schema !== undefined));
  if (expect.tool_called !== undefined) checks.push(toolCalledCheck(toList(expect.tool_called)));
  if (expect.tool_not_called !== undefined) checks.push(toolNotCalledCheck(toList(expect.tool_not_called)));
  if (expect.max_tool_calls !== undefined) checks.push(maxToolCallsCheck(expect.max_tool_calls));
  if (expect.max_turns !== undefined) checks.push(maxTurnsCheck(expect.max_turns));
  if (expect.max_cost_usd !== undefined) checks.push(maxCostCheck(expect.max_cost_usd));
  return {
    run: (outcome) => checks.flatMap((check) => check(outcome) ?? []),
  };
}

function toList(value: string | string[]): string[] {
  return Array.isArray(value) ? value : [value];
}

/** A hostile text, shortened and JSON-quoted for a reason line. */
export function quote(text: string, max = 120): string {
  return JSON.stringify(text.length > max ? `${text.slice(0, max)}...` : text);
}

function statusCheck(expected: RunStatus): Check {
  return (o) => {
    if (o.status === expected) return undefined;
    const why = o.error ? ` (${o.error.code}: ${o.error.message})` : '';
    return `status: expected ${expected}, got ${o.status}${why}`;
  };
}

function containsCheck(needles: string[]): Check {
  return (o) => {
    const missing = needles.filter((n) => !o.text.includes(n));
    return missing.length === 0
      ? undefined
      : `contains: the final text lacks ${missing.map((m) => quote(m)).join(', ')}; it is ${quote(o.text)}`;
  };
}

function equalsCheck(expected: string): Check {
  return (o) =>
    o.text.trim() === expected.trim()
      ? undefined
      : `equals: expected ${quote(expected)}, got ${quote(o.text)}`;
}

function regexCheck(pattern: string): Check {
  const regex = compileSafeRegex(pattern, { field: 'expect.regex' });
  return (o) => {
    const matched = testWithTimeout(regex, o.text);
    if (matched === true) return undefined;
    if (matched === 'timeout')
      return `regex: /${pattern}/ took longer than ${REGEX_TIMEOUT_MS} ms on the final text`;
    return `regex: /${pattern}/ does not match the final text ${quote(o.text)}`;
  };
}

let regexContext: { sandbox: Record<string, unknown>; script: Script } | undefined;

/** RegExp#test under a time limit: a pattern the safe-regex check let through still cannot hang the eval. */
function testWithTimeout(regex: RegExp, text: string): boolean | 'timeout' {
  regexContext ??= {
    sandbox: createContext({}),
    script: new Script('regex.test(text)'),
  };
  const { sandbox, script } = regexContext;
  sandbox['regex'] = regex;
  sandbox['text'] = text;
  try {
    return script.runInContext(sandbox, { timeout: REGEX_TIMEOUT_MS }) === true;
  } catch (error) {
    if ((error as { code?: string }).code === 'ERR_SCRIPT_EXECUTION_TIMEOUT') return 'timeout';
    throw error;
  } finally {
    sandbox['text'] = undefined;
    regex.lastIndex = 0;
  }
}

function jsonSchemaCheck(schema: Record<string, unknown>, structured: boolean): Check {
  let validator: ReturnType<typeof compileOutputSchema>;
  try {
    validator = compileOutputSchema(schema);
  } catch (error) {
    throw new AgentMeshError(
      ErrorCode.InvalidRequest,
      `expect.json_schema: ${(error as Error).message.replace(/^output_schema:? ?/, '')}`,
      { details: { field: 'expect.json_schema' } },
    );
  }
  return (o) => {
    let value = o.output;
    if (value === undefined) {
      if (structured) return 'json_schema: the run has no structured output';
      try {
        value = JSON.parse(o.text);
      } catch {
        return `json_schema: the final text is not JSON: ${quote(o.text)}`;
      }
    }
    try {
      const errors = validator(value);
      if (errors === undefined) return undefined;
      const first = errors
        .slice(0, 3)
        .map((e) => `${e.instancePath || '/'} ${e.message ?? 'is invalid'}`)
        .join('; ');
      return `json_schema: the output does not match: ${first}`;
    } catch (error) {
      return `json_schema: ${(error as Error).message}`;
    }
  };
}

function toolCalledCheck(patterns: string[]): Check {
  return (o) => {
    const missing = patterns.filter((p) => !o.tools_called.some((name) => matchesToolPattern(name, p)));
    return missing.length === 0
      ? undefined
      : `tool_called: no call of ${missing.map((m) => quote(m)).join(', ')} (called: ${calledList(o)})`;
  };
}

function toolNotCalledCheck(patterns: string[]): Check {
  return (o) => {
    const hits = o.tools_called.filter((name) => patterns.some((p) => matchesToolPattern(name, p)));
    return hits.length === 0
      ? undefined
      : `tool_not_called: ${[...new Set(hits)].map((h) => quote(h)).join(', ')} was called`;
  };
}

function calledList(o: CaseOutcome): string {
  return o.tools_called.length === 0 ? 'none' : [...new Set(o.tools_called)].map((n) => quote(n)).join(', ');
}

function maxToolCallsCheck(max: number): Check {
  return (o) =>
    o.tool_calls <= max ? undefined : `max_tool_calls: ${o.tool_calls} tool calls, at most ${max} expected`;
}

function maxTurnsCheck(max: number): Check {
  return (o) => (o.turns <= max ? undefined : `max_turns: ${o.turns} model turns, at most ${max} expected`);
}

function maxCostCheck(max: number): Check {
  return (o) => {
    if (o.cost_usd === undefined)
      return `max_cost_usd: the run's cost is unknown (no price for its model), so it cannot be held to ${max} USD`;
    return o.cost_usd <= max
      ? undefined
      : `max_cost_usd: the run cost ${o.cost_usd} USD, at most ${max} expected`;
  };
}
