import type { ProviderKind } from '@agentmesh/protocol';

/** An OpenAI-compatible service the planner knows how to reach. */
export interface ProviderPreset {
  /** Base URL of its Chat Completions API; `--base-url` or a configured base URL overrides it. */
  baseUrl: string;
  /** The environment variable holding its key; `undefined` for local servers that need none. */
  keyVariable: string | undefined;
  /** A run without the key fails up front (hosted services); local servers take it when it is set. */
  keyRequired: boolean;
  /** A model to use when the run names none. */
  defaultModel: string;
  /** The server handles several tool calls per response (otherwise the planner asks for one at a time). */
  parallelCalls: boolean;
  /** The server answers `stream_options.include_usage` (otherwise usage comes only without streaming). */
  streamUsage: boolean;
}

export type PresetName = Exclude<
  ProviderKind,
  'openai' | 'anthropic' | 'openai-compatible' | 'scripted' | 'openai-responses'
>;

/** Provider presets (`--provider ollama`): base URL, key variable and quirks. See docs/models.md. */
export const PROVIDER_PRESETS: Readonly<Record<PresetName, ProviderPreset>> = {
  openrouter: {
    baseUrl: 'https://openrouter.ai/api/v1',
    keyVariable: 'OPENROUTER_API_KEY',
    keyRequired: true,
    defaultModel: 'openai/gpt-4o-mini',
    parallelCalls: true,
    streamUsage: true,
  },
  ollama: {
    baseUrl: 'http://localhost:11434/v1',
    keyVariable: undefined,
    keyRequired: false,
    defaultModel: 'llama3.2',
    parallelCalls: false,
    streamUsage: true,
  },
  vllm: {
    baseUrl: 'http://localhost:8000/v1',
    keyVariable: 'VLLM_API_KEY',
    keyRequired: false,
    defaultModel: 'Qwen/Qwen2.5-7B-Instruct',
    parallelCalls: true,
    streamUsage: true,
  },
  lmstudio: {
    baseUrl: 'http://localhost:1234/v1',
    keyVariable: undefined,
    keyRequired: false,
    defaultModel: 'qwen2.5-7b-instruct',
    parallelCalls: false,
    streamUsage: false,
  },
  groq: {
    baseUrl: 'https://api.groq.com/openai/v1',
    keyVariable: 'GROQ_API_KEY',
    keyRequired: true,
    defaultModel: 'llama-3.3-70b-versatile',
    parallelCalls: true,
    streamUsage: true,
  },
  together: {
    baseUrl: 'https://api.together.xyz/v1',
    keyVariable: 'TOGETHER_API_KEY',
    keyRequired: true,
    defaultModel: 'meta-llama/Llama-3.3-70B-Instruct-Turbo',
    parallelCalls: true,
    streamUsage: true,
  },
  deepseek: {
    baseUrl: 'https://api.deepseek.com/v1',
    keyVariable: 'DEEPSEEK_API_KEY',
    keyRequired: true,
    defaultModel: 'deepseek-chat',
    parallelCalls: true,
    streamUsage: true,
  },
  huggingface: {
    baseUrl: 'https://router.huggingface.co/v1',
    keyVariable: 'HF_TOKEN',
    keyRequired: true,
    defaultModel: 'meta-llama/Llama-3.1-8B-Instruct',
    parallelCalls: false,
    streamUsage: true,
  },
};

export function isPreset(kind: ProviderKind): kind is PresetName {
  return Object.hasOwn(PROVIDER_PRESETS, kind);
}
