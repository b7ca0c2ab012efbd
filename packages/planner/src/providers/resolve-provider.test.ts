import { describe, expect, it } from 'vitest';
import { resolveProvider } from './index.js';

describe('resolveProvider', () => {
  const env = { OPENAI_API_KEY: 'sk-planner-secret' };

  it("never sends the planner's OpenAI key to a base URL chosen by the run", () => {
    const choice = resolveProvider(
      { provider: 'openai-compatible', base_url: 'http://attacker.example/v1' },
      { env },
    );
    expect(choice).toMatchObject({ kind: 'openai-compatible', baseUrl: 'http://attacker.example/v1' });
    expect((choice as { apiKey?: string }).apiKey).toBeUndefined();
  });

  it('uses the key with the base URL the planner was configured with', () => {
    const choice = resolveProvider(
      { provider: 'openai-compatible', base_url: 'http://ollama:11434/v1' },
      { env, baseUrl: 'http://ollama:11434/v1' },
    );
    expect((choice as { apiKey?: string }).apiKey).toBe('sk-planner-secret');
  });

  it('says how to configure a provider when there is none', () => {
    expect(() => resolveProvider({}, { env: {} })).toThrow(/OPENAI_API_KEY.*ANTHROPIC_API_KEY.*--script/s);
  });
});
