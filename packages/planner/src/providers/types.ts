import type { ProviderKind } from '@agentmesh/protocol';
import type { ChatMessage, ChatToolCall, NativeSearchVariant } from '../model/chat.js';

export type { ChatMessage, ChatToolCall, NativeSearchVariant } from '../model/chat.js';

/** A tool as offered to a model; `name` is canonical (providers send the alias). */
export interface ModelTool {
  name: string;
  description: string;
  input_schema: Record<string, unknown>;
  /** Native deferred loading: sent but hidden until the provider's own search surfaces it. */
  defer_loading?: boolean;
}

export interface ModelRequest {
  model: string;
  system: string;
  messages: readonly ChatMessage[];
  tools: readonly ModelTool[];
  parallelCalls: boolean;
  /** Provider-side tool search over the `defer_loading` tools. */
  nativeSearch?: NativeSearchVariant;
  signal: AbortSignal;
  /** Streamed pieces of the response as they arrive (`reasoning` never ends up in the final text). */
  onDelta?: (delta: ModelDelta) => void;
  /** The 0-based index of this model turn within its run (a session's earlier turns do not count). */
  turn?: number;
  /** The run's output_schema: the final answer must be JSON matching it (sent natively where the wire allows). */
  outputSchema?: Record<string, unknown> | undefined;
}

/** The name of the forced tool that carries a structured answer where the wire has no response format (Anthropic). */
export const FINAL_ANSWER_TOOL = 'final_answer';

/** One streamed piece of a response. */
export interface ModelDelta {
  kind: 'text' | 'reasoning';
  text: string;
}

export interface TokenUsage {
  /** All input tokens, cached ones included. */
  input_tokens: number;
  /** All output tokens, reasoning included. */
  output_tokens: number;
  /** Input tokens read from the prompt cache (part of input_tokens). */
  cache_read_tokens?: number;
  /** Input tokens written to the prompt cache (part of input_tokens). */
  cache_write_tokens?: number;
  /** Output tokens spent on reasoning (part of output_tokens). */
  reasoning_tokens?: number;
}

/** A provider-side tool search that happened inside one response. */
export interface NativeSearchRecord {
  query: string;
  variant: NativeSearchVariant;
  /** Canonical names of the tools it surfaced. */
  results: string[];
}

/** One model response, normalized. */
export interface ModelTurn {
  text: string;
  tool_calls: ChatToolCall[];
  usage: TokenUsage;
  stop_reason?: string;
  native_searches?: NativeSearchRecord[];
  /** Raw provider blocks to keep in the conversation (see {@link ChatMessage}). */
  native?: { provider: ProviderKind; blocks: unknown[] };
}

/** A chat model the planner can drive. One instance may serve many runs at once. */
export interface ModelProvider {
  readonly kind: ProviderKind;
  readonly model: string;
  complete(request: ModelRequest): Promise<ModelTurn>;
}
