import { describe, expect, it } from 'vitest';
import { ErrorCode } from '@agentmesh/protocol';
import { ProviderClients, resolveProvider } from './index.js';

describe('resolveProvider', () => {
  const env = { OPENAI_API_KEY: 'sk-planner-secret' };

  it('reads the environment only for what the run needs: a scripted run reads none of it', () => {
    const read: string[] = [];
    const watched = new Proxy(
      { OPENAI_API_KEY: 'sk-x', ANTHROPIC_API_KEY: 'ak-x' } as Record<string, string | undefined>,
      { get: (target, key: string) => (read.push(key), target[key]) },
    );
    expect(resolveProvider({ script: [{ text: 'ok' }] }, { env: watched })).toMatchObject({
      kind: 'scripted',
    });
    expect(read).toEqual([]);
    expect(resolveProvider({}, { env: watched })).toMatchObject({ kind: 'openai', apiKey: 'sk-x' });
    expect(resolveProvider({ provider: 'anthropic' }, { env: watched })).toMatchObject({
      kind: 'anthropic',
      apiKey: 'ak-x',
    });
  });

  it("never sends the planner's OpenAI key to a base URL a run chose from provider.allowed_base_urls", () => {
    const choice = resolveProvider(
      { provider: 'openai-compatible', base_url: 'http://attacker.example/v1' },
      { env, allowedBaseUrls: ['http://attacker.example/v1'] },
    );
    expect(choice).toMatchObject({ kind: 'openai-compatible', baseUrl: 'http://attacker.example/v1' });
    expect((choice as { apiKey?: string }).apiKey).toBeUndefined();
  });

  it('refuses a base URL that is neither configured nor allowed, naming it (permission_denied)', () => {
    for (const request of [
      { provider: 'openai-compatible' as const, base_url: 'http://attacker.example/v1' },
      { base_url: 'http://169.254.169.254/latest' },
      { provider: 'groq' as const, base_url: 'http://elsewhere.example/v1' },
    ])
      expect(() => resolveProvider(request, { env, allowedBaseUrls: ['http://other.example/v1'] })).toThrow(
        expect.objectContaining({
          code: ErrorCode.PermissionDenied,
          message: expect.stringContaining(request.base_url) as unknown,
          details: { field: 'base_url', base_url: request.base_url },
        }),
      );
  });

  it('accepts the configured base URL and allowed ones, a trailing slash apart', () => {
    const settings = { env, baseUrl: 'http://ollama:11434/v1', allowedBaseUrls: ['http://vllm:8000/v1/'] };
    expect(resolveProvider({ base_url: 'http://ollama:11434/v1/' }, settings).baseUrl).toBe(
      'http://ollama:11434/v1/',
    );
    expect(resolveProvider({ base_url: 'http://vllm:8000/v1' }, settings).baseUrl).toBe(
      'http://vllm:8000/v1',
    );
  });

  it('uses the key with the base URL the planner was configured with', () => {
    const choice = resolveProvider(
      { provider: 'openai-compatible', base_url: 'http://ollama:11434/v1' },
      { env, baseUrl: 'http://ollama:11434/v1' },
    );
    expect((choice as { apiKey?: string }).apiKey).toBe('sk-planner-secret');
  });

  it('says how to configure a provider when there is none', () => {
    expect(() => resolveProvider({}, { env: {} })).toThrow(/OPENAI_API_KEY/);
  });
});

describe('ProviderClients', () => {
  it('keeps at most maxClients SDK clients, however many base URLs runs name', () => {
    const allowed = Array.from({ length: 50 }, (_, i) => `http://model-${i}.example/v1`);
    const settings = { env: {}, allowedBaseUrls: allowed, maxClients: 4 };
    const clients = new ProviderClients(settings);
    for (const base_url of allowed) clients.create(resolveProvider({ base_url }, settings));
    expect(clients.size).toBe(4);
  });

  it('reuses the client of a base URL still in the cache', () => {
    const settings = { env: {}, baseUrl: 'http://ollama:11434/v1', maxRetries: 0 };
    const clients = new ProviderClients(settings);
    const choice = resolveProvider({}, settings);
    const first = clients.create(choice) as unknown as { client: unknown };
    const second = clients.create(choice) as unknown as { client: unknown };
    expect(clients.size).toBe(1);
    expect(first.client).toBeDefined();
    expect(second.client).toBe(first.client);
  });
});
