import type { ProviderKind } from '@agentmesh/protocol';

/** One tool call as the model produced it: `name` as the model spelled it, `arguments` as raw JSON text. */
export interface ChatToolCall {
  id: string;
  name: string;
  arguments: string;
}

/**
 * The provider-neutral conversation. It is plain JSON so a run can be checkpointed, stored in its transcript and
 * replayed; providers translate it to their wire format on every call.
 */
export type ChatMessage =
  | { role: 'user'; content: string }
  | {
      role: 'assistant';
      content: string;
      tool_calls?: ChatToolCall[];
      /** Provider-native content blocks to send back verbatim (Anthropic server tool search blocks). */
      native?: { provider: ProviderKind; blocks: unknown[] };
    }
  | { role: 'tool'; call_id: string; name: string; content: string; is_error: boolean };

/** Anthropic's server tool search variants, or OpenAI Responses' hosted `tool_search`. */
export type NativeSearchVariant = 'bm25' | 'regex' | 'hosted';
