import { afterEach, describe, expect, it } from 'vitest';
import { AgentMeshError, ErrorCode } from '@agentmesh/protocol';
import { createProvider, type ModelRequest, type ProviderSettings } from '@agentmesh/planner';
import { startAnthropicServer } from './fixtures/llm/anthropic-server.js';
import { startOpenAiServer } from './fixtures/llm/openai-server.js';
import { startOpenAiResponsesServer } from './fixtures/llm/openai-responses-server.js';
import type { FakeLlmServer, FakeReply } from './fixtures/llm/common.js';
import { harness, type Harness } from './fixtures/llm/harness.js';

let h: Harness | undefined;
let server: FakeLlmServer | undefined;
afterEach(async () => {
  await h?.stop();
  await server?.close();
  h = undefined;
  server = undefined;
});

type Kind = 'openai' | 'anthropic' | 'openai-responses';
const MODELS: Record<Kind, string> = {
  openai: 'gpt-4o-mini',
  anthropic: 'claude-sonnet-4-6',
  'openai-responses': 'gpt-5-mini',
};

async function start(kind: Kind, replies: FakeReply[]): Promise<FakeLlmServer> {
  server =
    kind === 'openai'
      ? await startOpenAiServer(replies)
      : kind === 'anthropic'
        ? await startAnthropicServer(replies)
        : await startOpenAiResponsesServer(replies);
  return server;
}

function settings(kind: Kind, url: string, extra: Partial<ProviderSettings> = {}): ProviderSettings {
  return {
    ...(kind === 'anthropic'
      ? { anthropicApiKey: 'sk-ant-test', anthropicBaseUrl: url }
      : { openaiApiKey: 'sk-test', openaiBaseUrl: url }),
    env: {},
    retry: { baseMs: 20, capMs: 100 },
    ...extra,
  };
}

const request = (model: string): ModelRequest => ({
  model,
  system: 'be brief',
  messages: [{ role: 'user', content: 'hi' }],
  tools: [],
  parallelCalls: true,
  signal: new AbortController().signal,
});

async function failure(kind: Kind, replies: FakeReply[], extra: Partial<ProviderSettings> = {}) {
  const s = await start(kind, replies);
  const provider = createProvider({ provider: kind, model: MODELS[kind] }, settings(kind, s.url, extra));
  const error = await provider.complete(request(MODELS[kind])).then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(AgentMeshError);
  return { error: error as AgentMeshError, requests: s.requests.length };
}

describe.each(['openai', 'anthropic', 'openai-responses'] as const)('%s provider errors', (kind) => {
  it('429 with retry-after: rate_limited, retried no earlier than the server asked', async () => {
    const s = await start(kind, [
      { status: 429, error: 'slow down', headers: { 'retry-after': '1' } },
      { text: 'ok' },
    ]);
    h = harness([], { providers: settings(kind, s.url, { maxRetries: 2 }) });
    const { final } = await h.run({ task: 'hi', provider: kind, model: MODELS[kind] });
    expect(final).toMatchObject({ status: 'done', text: 'ok' });
    expect(s.arrivals).toHaveLength(2);
    // the backoff alone would wait about 20 ms; retry-after says 1 s
    expect(s.arrivals[1]! - s.arrivals[0]!).toBeGreaterThanOrEqual(1000);
  });

  it('a rate limit that outlasts the attempts ends with a clear, named error', async () => {
    const { error, requests } = await failure(
      kind,
      [
        { status: 429, error: 'slow down', headers: { 'retry-after-ms': '30' } },
        { status: 429, error: 'slow down', headers: { 'retry-after-ms': '30' } },
      ],
      { maxRetries: 1 },
    );
    expect(requests).toBe(2);
    expect(error).toMatchObject({ code: ErrorCode.RateLimited, retryable: true });
    expect(error.details).toMatchObject({ provider: kind, status: 429, retry_after_ms: 30, attempts: 2 });
    expect(error.message).toMatch(/rate limit reached \(HTTP 429\).*gave up after 2 attempts/);
  });

  it('overloaded (529 / 503) is retryable and retried', async () => {
    const status = kind === 'anthropic' ? 529 : 503;
    const s = await start(kind, [{ status, error: 'Overloaded' }, { text: 'back' }]);
    const provider = createProvider({ provider: kind, model: MODELS[kind] }, settings(kind, s.url));
    await expect(provider.complete(request(MODELS[kind]))).resolves.toMatchObject({ text: 'back' });
    expect(s.requests).toHaveLength(2);
    const { error } = await failure(kind, [{ status, error: 'Overloaded' }], { maxRetries: 0 });
    expect(error).toMatchObject({ code: ErrorCode.Overloaded, retryable: true });
  });

  it('context too long is named and not retried', async () => {
    const reply: FakeReply =
      kind === 'anthropic'
        ? { status: 400, error: 'prompt is too long: 210000 tokens > 200000 maximum' }
        : {
            status: 400,
            error: "This model's maximum context length is 128000 tokens.",
            errorCode: 'context_length_exceeded',
          };
    const { error, requests } = await failure(kind, [reply, { text: 'never' }]);
    expect(requests).toBe(1);
    expect(error).toMatchObject({ code: ErrorCode.ContextTooLong, retryable: false });
  });

  it('content filtered is named and not retried', async () => {
    const finish = kind === 'anthropic' ? 'refusal' : 'content_filter';
    const { error, requests } = await failure(kind, [{ text: 'partial', finish }, { text: 'never' }]);
    expect(requests).toBe(1);
    expect(error).toMatchObject({ code: ErrorCode.ContentFiltered, retryable: false });
    expect(error.message).toContain(finish);
  });
});

it('a failed run says what went wrong in run.completed', async () => {
  const s = await start('openai', [
    { status: 400, error: 'maximum context length is 8192 tokens', errorCode: 'context_length_exceeded' },
  ]);
  h = harness([], { providers: settings('openai', s.url) });
  const { final } = await h.run({ task: 'hi', provider: 'openai', model: 'gpt-4o-mini' });
  expect(final).toMatchObject({ type: 'run.completed', status: 'failed' });
  expect(final.type === 'run.completed' && final.reason).toMatch(/context_too_long/);
});
