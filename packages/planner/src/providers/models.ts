import { z } from 'zod';
import {
  AgentMeshError,
  ErrorCode,
  ProviderKindSchema,
  validate,
  type ProviderKind,
} from '@agentmesh/protocol';
import type { ModelTuning } from './tuning.js';

/** One entry of `models:` in the configuration: an alias (`fast: "openai:gpt-4.1-mini"`) with optional overrides. */
export const ModelEntrySchema = z
  .object({
    /** `provider:model` (or a bare model id for the default provider). */
    model: z.string().min(1).optional(),
    max_output_tokens: z.number().int().min(1).optional(),
    temperature: z.number().min(0).max(2).optional(),
    tool_protocol: z.enum(['native', 'text']).optional(),
    parallel_tool_calls: z.boolean().optional(),
    context_window: z.number().int().min(1).optional(),
    reasoning_effort: z.enum(['minimal', 'low', 'medium', 'high']).optional(),
    thinking_budget_tokens: z.number().int().min(1024).optional(),
    prompt_caching: z.boolean().optional(),
  })
  .strict();
export type ModelEntry = z.infer<typeof ModelEntrySchema>;

/**
 * `models:`: keys are aliases or tiers (`fast`, `smart`) or `provider:model` ids; values are a `provider:model`
 * string or an entry with overrides. An entry keyed by a model id holds that model's overrides.
 */
export const ModelsConfigSchema = z.record(z.string().min(1), z.union([z.string().min(1), ModelEntrySchema]));
export type ModelsConfig = z.infer<typeof ModelsConfigSchema>;

export function parseModelsConfig(raw: unknown): ModelsConfig {
  return validate(ModelsConfigSchema, raw, 'models', ErrorCode.InvalidConfig);
}

/** Splits `provider:model` (the model may itself hold colons, like `ollama:llama3.2:3b`). */
export function splitModelSpec(spec: string): { provider?: ProviderKind; model: string } {
  const colon = spec.indexOf(':');
  if (colon > 0) {
    const provider = ProviderKindSchema.safeParse(spec.slice(0, colon));
    if (provider.success) return { provider: provider.data, model: spec.slice(colon + 1) };
  }
  return { model: spec };
}

/** What an alias or a model's own entry resolves to. */
export interface ModelResolution {
  provider?: ProviderKind;
  model: string;
  overrides: ModelEntry;
}

/** Follows aliases (at most a few hops, so a cycle is an error) and collects overrides, nearest first. */
export function resolveModelName(name: string, models: ModelsConfig = {}): ModelResolution {
  let current = name;
  let provider: ProviderKind | undefined;
  const overrides: ModelEntry = {};
  for (let hop = 0; hop < 8; hop++) {
    const raw = Object.hasOwn(models, current) ? models[current] : undefined;
    if (raw === undefined) {
      const split = splitModelSpec(current);
      return { provider: provider ?? split.provider, model: split.model, overrides };
    }
    const entry: ModelEntry = typeof raw === 'string' ? { model: raw } : raw;
    for (const [k, v] of Object.entries(entry))
      if (k !== 'model' && !(k in overrides)) (overrides as Record<string, unknown>)[k] = v;
    if (entry.model === undefined || entry.model === current) {
      const split = splitModelSpec(current);
      return { provider: provider ?? split.provider, model: split.model, overrides };
    }
    current = entry.model;
    provider ??= splitModelSpec(current).provider;
  }
  throw new AgentMeshError(ErrorCode.InvalidConfig, `models: alias "${name}" does not resolve (a cycle?)`, {
    retryable: false,
  });
}

/** The overrides of one model, as provider options. */
export function tuningOf(entry: ModelEntry): ModelTuning {
  return {
    ...(entry.max_output_tokens === undefined ? {} : { maxOutputTokens: entry.max_output_tokens }),
    ...(entry.temperature === undefined ? {} : { temperature: entry.temperature }),
    ...(entry.reasoning_effort === undefined ? {} : { reasoningEffort: entry.reasoning_effort }),
    ...(entry.thinking_budget_tokens === undefined ? {} : { thinkingBudget: entry.thinking_budget_tokens }),
    ...(entry.prompt_caching === undefined ? {} : { promptCaching: entry.prompt_caching }),
    ...(entry.parallel_tool_calls === undefined ? {} : { parallelCalls: entry.parallel_tool_calls }),
  };
}
