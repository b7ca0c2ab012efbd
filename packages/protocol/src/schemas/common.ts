/** Identifiers, identity, errors, providers, limits and usage: the parts every message shares. */
import { z } from 'zod';
import { TOOL_PATTERN_LIST_MAX, TOOL_PATTERN_MAX_LENGTH, toolNameProblem } from '../names.js';
import { RUN_ID_PATTERN } from '../subjects.js';

export const ToolNameSchema = z.string().superRefine((name, ctx) => {
  const problem = toolNameProblem(name);
  if (problem !== undefined) ctx.addIssue({ code: 'custom', message: problem });
});

const toolPattern = z
  .string()
  .max(TOOL_PATTERN_MAX_LENGTH, `a tool pattern must be at most ${TOOL_PATTERN_MAX_LENGTH} characters`);
const toolPatternList = (entry: z.ZodString) =>
  z
    .array(entry)
    .max(TOOL_PATTERN_LIST_MAX, `a list of tool patterns must hold at most ${TOOL_PATTERN_LIST_MAX} entries`);

/**
 * A list of tool-name patterns (names, namespace prefixes, globs) as a request carries them: at most
 * {@link TOOL_PATTERN_LIST_MAX} entries of at most {@link TOOL_PATTERN_MAX_LENGTH} characters.
 */
export const ToolPatternListSchema = toolPatternList(toolPattern);
/** {@link ToolPatternListSchema} whose entries must not be empty. */
export const NonEmptyToolPatternListSchema = toolPatternList(toolPattern.min(1));

export const RunIdSchema = z
  .string()
  .regex(RUN_ID_PATTERN, 'run id must be 1-128 characters of letters, digits, "_" or "-"');

export const IdentitySchema = z
  .object({
    tenant: z.string().min(1).max(128).default('default'),
    user: z.string().max(256).optional(),
    session: z.string().max(256).optional(),
  })
  .strict();
export type Identity = z.infer<typeof IdentitySchema>;

export const ErrorPayloadSchema: z.ZodType<{
  code: string;
  message: string;
  retryable: boolean;
  details?: Record<string, unknown> | undefined;
  cause?: unknown;
}> = z.object({
  code: z.string(),
  message: z.string(),
  retryable: z.boolean(),
  details: z.record(z.string(), z.unknown()).optional(),
  cause: z.lazy(() => ErrorPayloadSchema).optional(),
});

export const ProviderKindSchema = z.enum([
  'openai',
  'anthropic',
  'openai-compatible',
  'scripted',
  'openai-responses',
  'openrouter',
  'ollama',
  'vllm',
  'lmstudio',
  'groq',
  'together',
  'deepseek',
  'huggingface',
]);
export type ProviderKind = z.infer<typeof ProviderKindSchema>;
export const ToolSearchStrategySchema = z.enum(['off', 'bm25', 'regex', 'hybrid']);
export type ToolSearchStrategy = z.infer<typeof ToolSearchStrategySchema>;
export const SearchStrategySchema = z.enum(['bm25', 'regex', 'hybrid']);
export type SearchStrategy = z.infer<typeof SearchStrategySchema>;

/** The bounds of each run limit (the schema's own range; a planner's configured values are tighter ceilings). */
const runLimitFields = {
  max_iterations: z.number().int().min(1).max(10_000),
  max_tool_calls: z.number().int().min(0).max(100_000),
  timeout_ms: z.number().int().min(1).max(86_400_000),
  max_output_bytes: z
    .number()
    .int()
    .min(256)
    .max(16 * 1024 * 1024),
  max_nudges: z.number().int().min(0).max(100),
  tool_concurrency: z.number().int().min(1).max(256),
  max_tokens: z.number().int().min(1),
  max_cost_usd: z.number().min(0),
};

export const RunLimitsSchema = z
  .object({
    max_iterations: runLimitFields.max_iterations.default(12),
    max_tool_calls: runLimitFields.max_tool_calls.default(64),
    timeout_ms: runLimitFields.timeout_ms.default(300_000),
    max_output_bytes: runLimitFields.max_output_bytes.default(65_536),
    max_nudges: runLimitFields.max_nudges.default(2),
    tool_concurrency: runLimitFields.tool_concurrency.default(16),
    max_tokens: runLimitFields.max_tokens.optional(),
    max_cost_usd: runLimitFields.max_cost_usd.optional(),
  })
  .strict();
export type RunLimits = z.infer<typeof RunLimitsSchema>;

/**
 * Limits as a run request or a configuration file gives them: any subset, nothing filled in. A run's effective
 * limits are the planner's configured ones, each lowered (never raised) by the request's.
 */
export const PartialRunLimitsSchema = z.object(runLimitFields).partial().strict();
export type PartialRunLimits = z.infer<typeof PartialRunLimitsSchema>;

/** One call a model asked for, as the provider reported it (name is canonical when it could be mapped). */
export const ToolCallSchema = z.object({
  id: z.string(),
  name: z.string(),
  arguments: z.unknown(),
});
export type ToolCall = z.infer<typeof ToolCallSchema>;

export const UsageSchema = z.object({
  input_tokens: z.number().int().min(0),
  output_tokens: z.number().int().min(0),
  cost_usd: z.number().min(0).optional(),
  /** Input tokens served from the provider's prompt cache (part of input_tokens). */
  cache_read_tokens: z.number().int().min(0).optional(),
  /** Input tokens written to the provider's prompt cache (part of input_tokens). */
  cache_write_tokens: z.number().int().min(0).optional(),
  /** Output tokens spent on reasoning (part of output_tokens). */
  reasoning_tokens: z.number().int().min(0).optional(),
  /** On a parent's run.completed: each child run's own usage (already included in the totals above). */
  children: z
    .array(
      z.object({
        run_id: z.string(),
        call_id: z.string(),
        status: z.string(),
        input_tokens: z.number().int().min(0),
        output_tokens: z.number().int().min(0),
        cost_usd: z.number().min(0).optional(),
        tool_calls: z.number().int().min(0).optional(),
      }),
    )
    .optional(),
});
export type Usage = z.infer<typeof UsageSchema>;

export const ArtifactRefSchema = z.object({
  ref: z.string(),
  mime: z.string(),
  size: z.number().int().min(0),
});
export type ArtifactRef = z.infer<typeof ArtifactRefSchema>;
