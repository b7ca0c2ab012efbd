import {
  AgentMeshError,
  ErrorCode,
  matchesToolPattern,
  maxMatchLength,
  GuardrailsSchema,
  validate,
  type GuardrailStage,
  type Guardrails,
  type GuardrailsInput,
  type InputGuardrail,
  type OutputGuardrail,
} from '@agentmesh/protocol';
import { stableStringify } from './util.js';

/**
 * The most characters a streamed text holds back for a rule whose matches may be longer (an unbounded quantifier):
 * a match whose start needs more than this many characters to be recognised may be published before it is known.
 */
export const GUARDRAIL_HOLD_MAX_CHARS = 256;

/** A regex rule of the input or output stage, compiled. */
export interface TextRule {
  name: string;
  stage: 'input' | 'output';
  action: 'block' | 'redact';
  /** The pattern with the `g` flag (for scanning); never shared between scans at once. */
  scan: RegExp;
  /** The pattern without `g` (for a yes/no test). */
  test: RegExp;
  /** Characters a stream holds back so that no match can still start in what it publishes. */
  hold: number;
}

/** A rule of `type: model`: a judge model decides. */
export interface JudgeRule {
  name: string;
  stage: 'input' | 'output';
  /** An input judge that decides before the turn instead of beside it. */
  blocking: boolean;
  rule: InputGuardrail | OutputGuardrail;
}

export interface ToolRule {
  name: string;
  tool: string;
  args: RegExp | undefined;
}

/** One run's rules, compiled: the configured ones and those its request added. */
export interface GuardrailSet {
  input: TextRule[];
  output: TextRule[];
  tools: ToolRule[];
  judges: JudgeRule[];
  readonly empty: boolean;
}

/** What a rule did. */
export interface Tripped {
  rule: string;
  stage: GuardrailStage;
  action: 'block' | 'redact';
}

const parsedConfig = new WeakMap<object, Guardrails>();

/**
 * Configured rules, validated once per configuration object (a planner embedded in code may hand them over
 * unparsed): a bad rule is `invalid_config` naming its key.
 */
export function configuredGuardrails(configured: GuardrailsInput | undefined): Guardrails | undefined {
  if (configured === undefined) return undefined;
  let parsed = parsedConfig.get(configured);
  if (parsed === undefined) {
    parsed = validate(GuardrailsSchema, configured, 'guardrails', ErrorCode.InvalidConfig);
    parsedConfig.set(configured, parsed);
  }
  return parsed;
}

/**
 * The rules of a run: the configured ones first, then the request's, which can only add. A request rule that reuses
 * a configured rule's name is refused (`invalid_request` naming it), so it cannot shadow or replace one.
 */
export function mergeGuardrails(
  configured: Guardrails | undefined,
  requested: Guardrails | undefined,
): Guardrails {
  const merged: Guardrails = {};
  for (const stage of ['input', 'output', 'tools'] as const) {
    const own = configured?.[stage] ?? [];
    const added = requested?.[stage] ?? [];
    added.forEach((rule, i) => {
      if (own.some((r) => r.name === rule.name))
        throw new AgentMeshError(
          ErrorCode.InvalidRequest,
          `guardrails.${stage}[${i}].name: "${rule.name}" is a configured rule; a request can only add rules under new names`,
          { details: { field: `guardrails.${stage}[${i}].name`, value: rule.name } },
        );
    });
    if (own.length + added.length > 0) (merged as Record<string, unknown>)[stage] = [...own, ...added];
  }
  return merged;
}

function textRule(rule: InputGuardrail | OutputGuardrail, stage: 'input' | 'output'): TextRule {
  const pattern = rule.pattern ?? '';
  const flags = rule.flags ?? '';
  return {
    name: rule.name,
    stage,
    action: rule.action,
    scan: new RegExp(pattern, `${flags}g`),
    test: new RegExp(pattern, flags),
    hold: Math.min(maxMatchLength(pattern, flags), GUARDRAIL_HOLD_MAX_CHARS),
  };
}

/** Compiles validated rules (GuardrailsSchema has refused unsafe patterns already). */
export function compileGuardrails(g: Guardrails): GuardrailSet {
  const set: Omit<GuardrailSet, 'empty'> = { input: [], output: [], tools: [], judges: [] };
  for (const stage of ['input', 'output'] as const)
    for (const rule of g[stage] ?? []) {
      if (rule.type === 'model')
        set.judges.push({ name: rule.name, stage, blocking: rule.blocking === true, rule });
      else set[stage].push(textRule(rule, stage));
    }
  for (const rule of g.tools ?? [])
    set.tools.push({
      name: rule.name,
      tool: rule.tool,
      args: rule.args_pattern === undefined ? undefined : new RegExp(rule.args_pattern, rule.flags ?? ''),
    });
  const empty = set.input.length + set.output.length + set.tools.length + set.judges.length === 0;
  return { ...set, empty };
}

/** The first input rule that matches the text. */
export function inputMatch(set: GuardrailSet, text: string): TextRule | undefined {
  return set.input.find((rule) => rule.test.test(text));
}

/** The first tool rule that matches the call: its name by glob, its arguments (canonical JSON) by regex. */
export function toolMatch(set: GuardrailSet, name: string, args: unknown): ToolRule | undefined {
  if (set.tools.length === 0) return undefined;
  const json = stableStringify(args);
  return set.tools.find(
    (rule) => matchesToolPattern(name, rule.tool) && (rule.args === undefined || rule.args.test(json)),
  );
}

/** The error a run ends with when a rule blocks it. */
export function tripwireError(rule: string, stage: GuardrailStage, why?: string): AgentMeshError {
  return new AgentMeshError(
    ErrorCode.GuardrailTripwire,
    `guardrail "${rule}" (${stage}) stopped the run${why === undefined ? '' : `: ${why}`}`,
    { retryable: false, details: { rule, stage } },
  );
}
