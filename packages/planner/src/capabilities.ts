import { z } from 'zod';
import { ErrorCode, ProviderKindSchema, validate, type ProviderKind } from '@agentmesh/protocol';
import { modelGlobMatches } from './util.js';

/** One row of the capability table: what a provider's models matching `model` (a glob) can do. */
export const CapabilityRuleSchema = z
  .object({
    provider: ProviderKindSchema,
    /** Glob over the lowercased model id: `*` matches any run of characters. */
    model: z.string().min(1),
    /** Native tool-call wire format. */
    native_tools: z.boolean().optional(),
    /** Native tool search variants, preferred first (Anthropic: bm25, regex). Empty: client-side search only. */
    tool_search: z.array(z.enum(['bm25', 'regex', 'hosted'])).optional(),
    /** Several tool calls in one response. */
    parallel_calls: z.boolean().optional(),
    /** The most tools one request may carry. */
    max_tools: z.number().int().min(1).optional(),
    /** `text`: tools are rendered into the prompt and called with fenced ```tool_call blocks (docs/models.md). */
    tool_protocol: z.enum(['native', 'text']).optional(),
  })
  .strict();
export type CapabilityRule = z.infer<typeof CapabilityRuleSchema>;

export interface ModelCapabilities {
  native_tools: boolean;
  tool_search: ('bm25' | 'regex' | 'hosted')[];
  parallel_calls: boolean;
  max_tools: number;
  /** Set when a rule names it; otherwise the run's (or native). */
  tool_protocol?: 'native' | 'text';
}

const ANTHROPIC_NATIVE_SEARCH = [
  'claude-opus-4-5*',
  'claude-opus-4-6*',
  'claude-opus-4-7*',
  'claude-opus-4-8*',
  'claude-sonnet-4-5*',
  'claude-sonnet-4-6*',
  'claude-haiku-4-5*',
  'claude-sonnet-5*',
  'claude-opus-5*',
  'claude-haiku-5*',
  'claude-fable-5*',
  'claude-mythos-*',
];

/** The shipped table. Rules from configuration are consulted first; the first matching rule wins field by field. */
export const DEFAULT_CAPABILITY_RULES: readonly CapabilityRule[] = [
  ...ANTHROPIC_NATIVE_SEARCH.map((model) => ({
    provider: 'anthropic' as const,
    model,
    native_tools: true,
    tool_search: ['bm25' as const, 'regex' as const],
    parallel_calls: true,
    max_tools: 512,
  })),
  {
    provider: 'anthropic',
    model: '*',
    native_tools: true,
    tool_search: [],
    parallel_calls: true,
    max_tools: 128,
  },
  {
    provider: 'openai',
    model: '*',
    native_tools: true,
    tool_search: [],
    parallel_calls: true,
    max_tools: 128,
  },
  {
    provider: 'openai-compatible',
    model: '*',
    native_tools: true,
    tool_search: [],
    parallel_calls: true,
    max_tools: 128,
  },
  // the Responses API's hosted tool_search over defer_loading functions
  ...['gpt-5.4*', 'gpt-5.5*'].map((model) => ({
    provider: 'openai-responses' as const,
    model,
    native_tools: true,
    tool_search: ['hosted' as const],
    parallel_calls: true,
    max_tools: 512,
  })),
  {
    provider: 'openai-responses',
    model: '*',
    native_tools: true,
    tool_search: [],
    parallel_calls: true,
    max_tools: 128,
  },
  // Ollama models that answer "does not support tools" (the provider also falls back to text at run time)
  ...['gemma2*', 'gemma3*', 'llama2*', 'phi3*', 'deepseek-r1*', 'mistral:7b-instruct-v0.1*'].map((model) => ({
    provider: 'ollama' as const,
    model,
    native_tools: false,
    tool_protocol: 'text' as const,
  })),
  ...(
    ['openrouter', 'ollama', 'vllm', 'lmstudio', 'groq', 'together', 'deepseek', 'huggingface'] as const
  ).map((provider) => ({
    provider,
    model: '*',
    native_tools: true,
    tool_search: [],
    parallel_calls: !['ollama', 'lmstudio', 'huggingface'].includes(provider),
    max_tools: 128,
  })),
  {
    provider: 'scripted',
    model: '*',
    native_tools: true,
    tool_search: [],
    parallel_calls: true,
    max_tools: 1024,
  },
];

const FALLBACK: ModelCapabilities = {
  native_tools: true,
  tool_search: [],
  parallel_calls: true,
  max_tools: 128,
};

/** Validates configuration rows (`capabilities:` in agentmesh.yaml); errors name the row and field. */
export function parseCapabilityRules(raw: unknown): CapabilityRule[] {
  return validate(z.array(CapabilityRuleSchema), raw, 'capabilities', ErrorCode.InvalidConfig);
}

/** Looks up what a provider/model pair supports. */
export class CapabilityTable {
  private readonly rules: readonly CapabilityRule[];
  constructor(overrides: readonly CapabilityRule[] = []) {
    this.rules = [...parseCapabilityRules(overrides), ...DEFAULT_CAPABILITY_RULES];
  }

  resolve(provider: ProviderKind, model: string): ModelCapabilities {
    const out: Partial<ModelCapabilities> = {};
    for (const rule of this.rules) {
      if (rule.provider !== provider || !modelGlobMatches(rule.model, model)) continue;
      out.native_tools ??= rule.native_tools;
      out.tool_search ??= rule.tool_search;
      out.parallel_calls ??= rule.parallel_calls;
      out.max_tools ??= rule.max_tools;
      out.tool_protocol ??= rule.tool_protocol;
    }
    return {
      native_tools: out.native_tools ?? FALLBACK.native_tools,
      tool_search: out.tool_search ?? FALLBACK.tool_search,
      parallel_calls: out.parallel_calls ?? FALLBACK.parallel_calls,
      max_tools: out.max_tools ?? FALLBACK.max_tools,
      ...(out.tool_protocol === undefined ? {} : { tool_protocol: out.tool_protocol }),
    };
  }
}
