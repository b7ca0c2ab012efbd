/** Guardrail rules (docs/guardrails.md): `guardrails:` in the configuration and a RunRequest's `guardrails`. */
import { z } from 'zod';
import { AgentMeshError } from '../errors.js';
import { TOOL_PATTERN_MAX_LENGTH } from '../names.js';
import { MAX_REGEX_LENGTH, compileSafeRegex } from '../safe-regex.js';
import { ProviderKindSchema } from './common.js';
import { ScriptedTurnSchema } from './scripted.js';

/** The stages a rule applies at. */
export const GUARDRAIL_STAGES = ['input', 'output', 'tools'] as const;
export type GuardrailStage = (typeof GUARDRAIL_STAGES)[number];
/** Rules per stage at most, in one configuration or one request. */
export const GUARDRAIL_RULES_MAX = 64;

const RuleNameSchema = z
  .string()
  .min(1, 'a rule name must not be empty')
  .max(64, 'a rule name must be at most 64 characters')
  .regex(/^[A-Za-z0-9._-]+$/, 'a rule name may only contain A-Z a-z 0-9 . _ -');

/** RegExp flags a rule may set: `i`, `m`, `s`, `u`, each once (`g` and `y` are the matcher's own). */
const FlagsSchema = z
  .string()
  .regex(/^[imsu]*$/, 'flags may only hold i, m, s and u')
  .refine((f) => new Set(f).size === f.length, 'flags may name each flag once');

const PatternSchema = z.string().max(MAX_REGEX_LENGTH);

/** A judge model: the provider and model asked, and what it is told. */
const judgeFields = {
  provider: ProviderKindSchema.optional(),
  model: z.string().min(1).optional(),
  base_url: z.string().url().optional(),
  /** What the judge is told to look for (a default prompt otherwise). */
  prompt: z.string().min(1).max(4000).optional(),
  /** The judge's answers, for the scripted provider (demos, tests). */
  script: z.array(ScriptedTurnSchema).min(1).optional(),
};

type Issue = z.core.$RefinementCtx;

/** Refuses a pattern that is unsafe (backtracking), does not compile, or matches the empty text. */
function checkPattern(pattern: string, flags: string | undefined, key: string, ctx: Issue): void {
  try {
    const re = compileSafeRegex(pattern, { field: key, ...(flags === undefined ? {} : { flags }) });
    if (re.test(''))
      ctx.addIssue({ code: 'custom', path: [key], message: 'the pattern matches the empty text' });
  } catch (error) {
    if (!(error instanceof AgentMeshError)) throw error;
    ctx.addIssue({ code: 'custom', path: [key], message: error.message });
  }
}

function textRule<const A extends readonly [string, ...string[]]>(actions: A, stage: 'input' | 'output') {
  return z
    .object({
      name: RuleNameSchema,
      type: z.enum(['regex', 'model']).default('regex'),
      pattern: PatternSchema.optional(),
      flags: FlagsSchema.optional(),
      action: z.enum(actions),
      /** A model rule of the input stage judges before the turn instead of beside it. */
      blocking: z.boolean().optional(),
      ...judgeFields,
    })
    .strict()
    .superRefine((rule, ctx) => {
      const issue = (key: string, message: string) => ctx.addIssue({ code: 'custom', path: [key], message });
      if (rule.type === 'model') {
        if (rule.pattern !== undefined) issue('pattern', 'a model rule has no pattern: its judge decides');
        if (rule.action !== 'block') issue('action', 'a model rule can only block');
        if (rule.blocking !== undefined && stage === 'output')
          issue(
            'blocking',
            'blocking applies to input rules: an output judge always sees the whole turn first',
          );
        return;
      }
      for (const key of ['provider', 'model', 'base_url', 'prompt', 'script', 'blocking'] as const)
        if (rule[key] !== undefined) issue(key, `${key} belongs to a rule of type model`);
      if (rule.pattern === undefined) issue('pattern', 'a regex rule needs a pattern');
      else checkPattern(rule.pattern, rule.flags, 'pattern', ctx);
    });
}

export const InputGuardrailSchema = textRule(['block'], 'input');
export const OutputGuardrailSchema = textRule(['block', 'redact'], 'output');

export const ToolGuardrailSchema = z
  .object({
    name: RuleNameSchema,
    /** The tool names the rule applies to: a name, a namespace prefix or a glob, as in `tools:` allow-lists. */
    tool: z.string().min(1).max(TOOL_PATTERN_MAX_LENGTH),
    /** A regex over the call's arguments as canonical JSON (sorted keys); absent: every call of the tool. */
    args_pattern: PatternSchema.optional(),
    flags: FlagsSchema.optional(),
    action: z.enum(['block']),
  })
  .strict()
  .superRefine((rule, ctx) => {
    if (rule.args_pattern !== undefined) checkPattern(rule.args_pattern, rule.flags, 'args_pattern', ctx);
  });

const ruleList = <S extends z.ZodType<{ name: string }>>(rule: S) =>
  z
    .array(rule)
    .max(GUARDRAIL_RULES_MAX, `at most ${GUARDRAIL_RULES_MAX} rules per stage`)
    .superRefine((rules, ctx) => {
      const seen = new Set<string>();
      rules.forEach((r, i) => {
        if (seen.has(r.name))
          ctx.addIssue({ code: 'custom', path: [i, 'name'], message: `rule name "${r.name}" is used twice` });
        seen.add(r.name);
      });
    });

/** Rules per stage; an unknown stage, action or key is refused, and so is an unsafe or empty-matching regex. */
export const GuardrailsSchema = z
  .object({
    input: ruleList(InputGuardrailSchema).optional(),
    output: ruleList(OutputGuardrailSchema).optional(),
    tools: ruleList(ToolGuardrailSchema).optional(),
  })
  .strict();

export type Guardrails = z.infer<typeof GuardrailsSchema>;
/** Rules as written (`type` may be left out: `regex`). */
export type GuardrailsInput = z.input<typeof GuardrailsSchema>;
export type InputGuardrail = z.infer<typeof InputGuardrailSchema>;
export type OutputGuardrail = z.infer<typeof OutputGuardrailSchema>;
export type ToolGuardrail = z.infer<typeof ToolGuardrailSchema>;
