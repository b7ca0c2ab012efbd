import { describe, expect, it } from 'vitest';
import type { ModelProvider, ModelRequest } from './types.js';
import { estimateRequestTokens, withContextWindow } from './context-window.js';

const inner: ModelProvider = {
  kind: 'openai-compatible',
  model: 'small',
  complete: async () => ({ text: 'ok', tool_calls: [], usage: { input_tokens: 1, output_tokens: 1 } }),
};

const request = (chars: number): ModelRequest => ({
  model: 'small',
  system: 'be brief',
  messages: [{ role: 'user', content: 'x'.repeat(chars) }],
  tools: [],
  parallelCalls: true,
  signal: new AbortController().signal,
});

describe('withContextWindow', () => {
  it('sends a request that fits and refuses one over the window with context_too_long', async () => {
    const provider = withContextWindow(inner, 100);
    await expect(provider.complete(request(200))).resolves.toMatchObject({ text: 'ok' });
    const error = await provider.complete(request(1_000)).catch((e: unknown) => e);
    expect(error).toMatchObject({ code: 'context_too_long', retryable: false });
    expect((error as Error).message).toMatch(/over its context_window of 100/);
    expect(estimateRequestTokens(request(1_000))).toBeGreaterThan(250);
  });

  it('leaves a provider without a window as it is', () => {
    expect(withContextWindow(inner, undefined)).toBe(inner);
  });
});
