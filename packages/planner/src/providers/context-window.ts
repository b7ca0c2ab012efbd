import { AgentMeshError, ErrorCode } from '@agentmesh/protocol';
import { estimateTranscriptTokens } from '../compaction.js';
import type { ModelProvider, ModelRequest } from './types.js';

/** The estimated input tokens of a request (characters / 4): system prompt, tool list and conversation. */
export function estimateRequestTokens(request: Pick<ModelRequest, 'system' | 'messages' | 'tools'>): number {
  const tools = request.tools.reduce(
    (n, t) => n + t.name.length + t.description.length + JSON.stringify(t.input_schema).length,
    0,
  );
  return Math.ceil((request.system.length + tools) / 4) + estimateTranscriptTokens(request.messages);
}

/**
 * Holds a provider to a model's `context_window` (per-model override in `models:`): a request estimated above it
 * fails at once with `context_too_long` (not retryable) instead of being sent and refused by the provider.
 */
export function withContextWindow(provider: ModelProvider, contextWindow: number | undefined): ModelProvider {
  if (contextWindow === undefined) return provider;
  return {
    kind: provider.kind,
    model: provider.model,
    complete: (request) => {
      const tokens = estimateRequestTokens(request);
      if (tokens > contextWindow)
        return Promise.reject(
          new AgentMeshError(
            ErrorCode.ContextTooLong,
            `the request to ${provider.kind} model ${provider.model} is about ${tokens} tokens, over its context_window of ${contextWindow}`,
            { retryable: false, details: { estimated_tokens: tokens, context_window: contextWindow } },
          ),
        );
      return provider.complete(request);
    },
  };
}
