import { afterEach, describe, expect, it } from 'vitest';
import { PriceTable, resolveProvider, type ProviderSettings } from '@agentmesh/planner';
import { startAnthropicServer } from './fixtures/llm/anthropic-server.js';
import { startOpenAiServer } from './fixtures/llm/openai-server.js';
import type { FakeLlmServer, ReplySource } from './fixtures/llm/common.js';
import { checkSequence, harness, ofType, type Harness } from './fixtures/llm/harness.js';
import { calcTool } from './fixtures/llm/mesh.js';

let h: Harness | undefined;
let server: FakeLlmServer | undefined;
afterEach(async () => {
  await h?.stop();
  await server?.close();
  h = undefined;
  server = undefined;
});

async function anthropic(stream: boolean, replies: ReplySource, extra: Partial<ProviderSettings> = {}) {
  server = await startAnthropicServer(replies);
  h = harness([calcTool], {
    providers: {
      anthropicApiKey: 'sk-ant-test',
      anthropicBaseUrl: server.url,
      maxRetries: 0,
      stream,
      env: {},
      ...extra,
    },
  });
  return { server, h };
}

const CALC = { id: 'toolu_1', name: 'math__calc', arguments: { lhs: 2, rhs: 3, op: 'add' } };

describe.each([true, false])('anthropic (stream: %s): prompt caching, thinking, cost', (stream) => {
  it('marks system, tools and the transcript prefix with cache_control and counts cached tokens', async () => {
    const { server, h } = await anthropic(stream, [
      { tool_calls: [CALC], usage: { input_tokens: 1000, output_tokens: 50, cache_write_tokens: 800 } },
      {
        text: '5',
        usage: { input_tokens: 1100, output_tokens: 10, cache_read_tokens: 800, cache_write_tokens: 250 },
      },
    ]);
    const { final, events } = await h.run({ task: '2+3', provider: 'anthropic', model: 'claude-sonnet-4-6' });
    checkSequence(events);
    const [first, second] = server.requests as [Record<string, any>, Record<string, any>];
    expect(first['system']).toEqual([
      { type: 'text', text: expect.any(String), cache_control: { type: 'ephemeral' } },
    ]);
    const tools = first['tools'] as Record<string, unknown>[];
    expect(tools[tools.length - 1]!['cache_control']).toEqual({ type: 'ephemeral' });
    expect(tools.slice(0, -1).every((t) => t['cache_control'] === undefined)).toBe(true);
    // the breakpoint moves to the end of the transcript each turn, and only one message carries it
    const marked = (body: Record<string, any>) =>
      body['messages'].flatMap((m: any, i: number) =>
        m.content.flatMap((b: any) => (b.cache_control ? [[i, b.type]] : [])),
      );
    expect(marked(first)).toEqual([[0, 'text']]);
    expect(marked(second)).toEqual([[2, 'tool_result']]);
    const usage = final.type === 'run.completed' ? final.usage : undefined;
    expect(usage).toMatchObject({
      input_tokens: 2100,
      output_tokens: 60,
      cache_read_tokens: 800,
      cache_write_tokens: 1050,
    });
    // Sonnet 4: $3 input, $0.30 cache read, $3.75 cache write, $15 output per million tokens
    const expected = ((2100 - 800 - 1050) * 3 + 800 * 0.3 + 1050 * 3.75 + 60 * 15) / 1e6;
    expect(final.type === 'run.completed' && final.cost_usd).toBeCloseTo(expected, 12);
    expect(ofType(events, 'run.warning')).toEqual([]);
  });

  it('extended thinking: budget on the wire, reasoning deltas apart from the text, signed blocks sent back', async () => {
    const { server, h } = await anthropic(
      stream,
      [
        { reasoning: 'Two plus three.', tool_calls: [CALC] },
        { reasoning: 'The tool said 5.', text: 'It is 5.' },
      ],
      {
        models: {
          deep: { model: 'anthropic:claude-sonnet-4-6', thinking_budget_tokens: 2048, prompt_caching: false },
        },
      },
    );
    const { final, events } = await h.run({ task: '2+3', model: 'deep' });
    expect(final).toMatchObject({ status: 'done', text: 'It is 5.' });
    const [first, second] = server.requests as [Record<string, any>, Record<string, any>];
    expect(first['thinking']).toEqual({ type: 'enabled', budget_tokens: 2048 });
    expect(first['max_tokens']).toBeGreaterThan(2048);
    expect(typeof first['system']).toBe('string');
    expect(JSON.stringify(first)).not.toContain('cache_control');
    expect(second['messages'][1]).toEqual({
      role: 'assistant',
      content: [
        { type: 'thinking', thinking: 'Two plus three.', signature: 'sig-1-15' },
        { type: 'tool_use', id: 'toolu_1', name: 'math__calc', input: { lhs: 2, rhs: 3, op: 'add' } },
      ],
    });
    const deltas = ofType(events, 'llm.delta');
    if (stream)
      expect(deltas.map((d) => [d.iteration, d.kind])).toEqual(
        expect.arrayContaining([
          [1, 'reasoning'],
          [2, 'reasoning'],
        ]),
      );
    if (stream)
      expect(
        deltas
          .filter((d) => d.iteration === 2 && d.kind === 'reasoning')
          .map((d) => d.text)
          .join(''),
      ).toBe('The tool said 5.');
    else expect(deltas).toEqual([]);
    expect(ofType(events, 'llm.response').map((e) => e.text)).toEqual(['', 'It is 5.']);
  });
});

describe('openai chat completions: prompt_cache_key, cached and reasoning tokens, reasoning_content', () => {
  it('sends a stable prompt_cache_key and prices cached and reasoning tokens', async () => {
    server = await startOpenAiServer([
      {
        reasoning: 'hmm',
        tool_calls: [{ id: 'c1', name: 'math__calc', arguments: { lhs: 1, rhs: 1, op: 'add' } }],
        usage: { input_tokens: 2000, output_tokens: 300, cache_read_tokens: 1024, reasoning_tokens: 256 },
      },
      { text: '2', usage: { input_tokens: 2100, output_tokens: 5, cache_read_tokens: 2048 } },
    ]);
    h = harness([calcTool], {
      providers: {
        openaiApiKey: 'sk',
        openaiBaseUrl: server.url,
        maxRetries: 0,
        env: {},
        tuning: { reasoningEffort: 'high' },
      },
    });
    const { final, events } = await h.run({ task: '1+1', provider: 'openai', model: 'o4-mini' });
    const [first, second] = server.requests as [Record<string, any>, Record<string, any>];
    expect(first['prompt_cache_key']).toMatch(/^agentmesh-/);
    expect(second['prompt_cache_key']).toBe(first['prompt_cache_key']);
    expect(first['reasoning_effort']).toBe('high');
    expect(
      ofType(events, 'llm.delta')
        .filter((d) => d.kind === 'reasoning')
        .map((d) => d.text)
        .join(''),
    ).toBe('hmm');
    expect(final.type === 'run.completed' && final.usage).toMatchObject({
      cache_read_tokens: 3072,
      reasoning_tokens: 256,
    });
    // o4-mini: $1.10 input, $0.275 cached, $4.40 output (reasoning billed as output)
    const expected = ((4100 - 3072) * 1.1 + 3072 * 0.275 + 305 * 4.4) / 1e6;
    expect(final.type === 'run.completed' && final.cost_usd).toBeCloseTo(expected, 12);
  });

  it('a compatible server gets no prompt_cache_key; an unpriced model gets one run.warning and no cost', async () => {
    server = await startOpenAiServer([{ text: 'hi' }]);
    h = harness([], { providers: { baseUrl: server.url, maxRetries: 0, env: {} } });
    const { final, events } = await h.run({
      task: 'hi',
      provider: 'openai-compatible',
      model: 'my-local-model',
    });
    expect(server.requests[0]!['prompt_cache_key']).toBeUndefined();
    expect(ofType(events, 'run.warning').filter((w) => w.code !== 'no_tools')).toEqual([
      expect.objectContaining({ code: 'price_unknown', message: expect.stringContaining('my-local-model') }),
    ]);
    expect(final).toMatchObject({ status: 'done' });
    expect(final.type === 'run.completed' && 'cost_usd' in final).toBe(false);
  });
});

describe('context_window override', () => {
  it('a request over the model context_window fails with context_too_long and never reaches the server', async () => {
    server = await startOpenAiServer([{ text: 'hi' }]);
    h = harness([], {
      providers: {
        baseUrl: server.url,
        maxRetries: 0,
        env: {},
        models: { tiny: { model: 'openai-compatible:tiny-model', context_window: 20 } },
      },
    });
    const { final } = await h.run({
      task: 'a task that is long enough to pass twenty tokens '.repeat(4),
      model: 'tiny',
    });
    expect(final).toMatchObject({ type: 'run.completed', status: 'failed' });
    expect(final.type === 'run.completed' && final.reason).toMatch(/context_too_long|context_window of 20/);
    expect(server.requests).toHaveLength(0);
  });
});

describe('price table', () => {
  const prices = new PriceTable({
    'groq:my-model*': { input_per_mtok: 1, output_per_mtok: 2, reasoning_per_mtok: 3 },
  });
  it('prices cache reads, cache writes and reasoning apart, each defaulting to the plain price', () => {
    const usage = {
      input_tokens: 1_000_000,
      output_tokens: 1_000_000,
      cache_read_tokens: 400_000,
      reasoning_tokens: 500_000,
    };
    expect(prices.cost(prices.priceOf('groq', 'my-model-1'), usage)).toBeCloseTo(
      0.6 + 0.4 + 0.5 * 2 + 0.5 * 3,
      12,
    );
    expect(
      prices.cost(prices.priceOf('anthropic', 'claude-haiku-4-5'), {
        input_tokens: 1_000_000,
        output_tokens: 0,
        cache_write_tokens: 1_000_000,
      }),
    ).toBeCloseTo(1.25, 12);
    expect(prices.priceOf('deepseek', 'deepseek-chat')).toMatchObject({
      as_of: expect.stringMatching(/^\d{4}-\d\d-\d\d$/),
    });
    expect(prices.priceOf('ollama', 'llama3.2')).toMatchObject({ input_per_mtok: 0, output_per_mtok: 0 });
    expect(prices.priceOf('openai-responses', 'gpt-5-mini')).toEqual(prices.priceOf('openai', 'gpt-5-mini'));
  });
});

describe('presets and models: aliases', () => {
  const env = { GROQ_API_KEY: 'gsk-test', OPENAI_API_KEY: 'sk-test' };
  it('resolves presets to their base URL and key, and refuses a preset without its key', () => {
    expect(resolveProvider({ provider: 'groq' }, { env })).toMatchObject({
      kind: 'groq',
      model: 'llama-3.3-70b-versatile',
      baseUrl: 'https://api.groq.com/openai/v1',
      apiKey: 'gsk-test',
    });
    expect(resolveProvider({ provider: 'ollama' }, { env })).toMatchObject({
      baseUrl: 'http://localhost:11434/v1',
      apiKey: undefined,
    });
    expect(() => resolveProvider({ provider: 'deepseek' }, { env })).toThrow(/DEEPSEEK_API_KEY/);
    // a local server's key is optional
    expect(resolveProvider({ provider: 'vllm' }, { env })).toMatchObject({
      baseUrl: 'http://localhost:8000/v1',
      apiKey: undefined,
    });
    // a base URL the run chose (from provider.allowed_base_urls) never receives the configured key
    expect(
      resolveProvider(
        { provider: 'groq', base_url: 'http://elsewhere.example/v1' },
        { env, allowedBaseUrls: ['http://elsewhere.example/v1'] },
      ).apiKey,
    ).toBeUndefined();
  });

  it('resolves aliases, tiers and per-model overrides', () => {
    const settings: ProviderSettings = {
      env,
      model: 'fast',
      models: {
        fast: 'openai:gpt-4.1-mini',
        smart: { model: 'anthropic:claude-sonnet-4-6', temperature: 0.2 },
        'openai:gpt-4.1-mini': { max_output_tokens: 512, parallel_tool_calls: false },
        local: { model: 'ollama:llama3.2:3b', tool_protocol: 'text', context_window: 8192 },
      },
    };
    expect(resolveProvider({}, settings)).toMatchObject({
      kind: 'openai',
      model: 'gpt-4.1-mini',
      tuning: { maxOutputTokens: 512, parallelCalls: false },
    });
    expect(() => resolveProvider({ model: 'smart' }, settings)).toThrow(/ANTHROPIC_API_KEY/);
    expect(resolveProvider({ model: 'smart' }, { ...settings, anthropicApiKey: 'k' })).toMatchObject({
      kind: 'anthropic',
      model: 'claude-sonnet-4-6',
      tuning: { temperature: 0.2 },
    });
    expect(resolveProvider({ model: 'local' }, settings)).toMatchObject({
      kind: 'ollama',
      model: 'llama3.2:3b',
      toolProtocol: 'text',
      contextWindow: 8192,
    });
    expect(resolveProvider({ model: 'local', tool_protocol: 'native' }, settings).toolProtocol).toBe(
      'native',
    );
    expect(() => resolveProvider({ model: 'a' }, { env, models: { a: 'b', b: 'a' } })).toThrow(
      /does not resolve/,
    );
  });
});
