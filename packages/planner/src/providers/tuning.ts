import { createHash } from 'node:crypto';
import type { ModelRequest, TokenUsage } from './types.js';

export type ReasoningEffort = 'minimal' | 'low' | 'medium' | 'high';

/** Per-model knobs every provider understands (each ignores what its API has no field for). */
export interface ModelTuning {
  maxOutputTokens?: number;
  temperature?: number;
  /** OpenAI reasoning effort. */
  reasoningEffort?: ReasoningEffort;
  /** Anthropic extended thinking budget (tokens). */
  thinkingBudget?: number;
  /** Prompt caching hints on the wire (Anthropic cache_control, OpenAI prompt_cache_key); default true. */
  promptCaching?: boolean;
  /** Overrides the capability table's parallel tool calls. */
  parallelCalls?: boolean;
}

/** A stable key for the request's fixed prefix (system prompt and tool names), for OpenAI's prompt cache routing. */
export function promptCacheKey(request: ModelRequest): string {
  const hash = createHash('sha256').update(request.system);
  for (const t of request.tools) hash.update('\u0000').update(t.name);
  return `agentmesh-${hash.digest('hex').slice(0, 24)}`;
}

/** Usage with the optional counts present only when the provider reported them (non-zero). */
export function usageOf(
  input: number,
  output: number,
  extra: { cacheRead?: number | null; cacheWrite?: number | null; reasoning?: number | null } = {},
): TokenUsage {
  return {
    input_tokens: input,
    output_tokens: output,
    ...(extra.cacheRead ? { cache_read_tokens: extra.cacheRead } : {}),
    ...(extra.cacheWrite ? { cache_write_tokens: extra.cacheWrite } : {}),
    ...(extra.reasoning ? { reasoning_tokens: extra.reasoning } : {}),
  };
}
