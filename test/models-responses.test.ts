import { afterEach, describe, expect, it } from 'vitest';
import type { ProviderSettings } from '@agentmesh/planner';
import { startOpenAiResponsesServer } from './fixtures/llm/openai-responses-server.js';
import type { FakeLlmServer, ReplySource } from './fixtures/llm/common.js';
import { checkSequence, harness, ofType, type Harness } from './fixtures/llm/harness.js';
import { calcTool, sha256Tool } from './fixtures/llm/mesh.js';

let h: Harness | undefined;
let server: FakeLlmServer | undefined;
afterEach(async () => {
  await h?.stop();
  await server?.close();
  h = undefined;
  server = undefined;
});

async function setup(stream: boolean, replies: ReplySource, extra: Partial<ProviderSettings> = {}) {
  server = await startOpenAiResponsesServer(replies);
  h = harness([calcTool, sha256Tool], {
    providers: {
      openaiApiKey: 'sk-test',
      openaiBaseUrl: server.url,
      maxRetries: 0,
      stream,
      env: {},
      ...extra,
    },
  });
  return { server, h };
}

describe.each([true, false])('openai-responses provider (stream: %s) through the real SDK', (stream) => {
  it('runs parallel function calls statelessly, passing reasoning items back with their encrypted content', async () => {
    const { server, h } = await setup(
      stream,
      [
        {
          reasoning: 'I should add and multiply.',
          text: 'Computing.',
          tool_calls: [
            { id: 'call_a', name: 'math__calc', arguments: { lhs: 2, rhs: 3, op: 'add' } },
            { id: 'call_b', name: 'math__calc', arguments: { lhs: 4, rhs: 5, op: 'mul' } },
          ],
          usage: { input_tokens: 200, output_tokens: 60, cache_read_tokens: 128, reasoning_tokens: 40 },
        },
        {
          text: 'The answers are 5 and 20.',
          usage: { input_tokens: 300, output_tokens: 10, cache_read_tokens: 256 },
        },
      ],
      // an alias with a per-model override: reasoning effort
      { models: { smart: { model: 'openai-responses:gpt-5-mini', reasoning_effort: 'low' } } },
    );
    const { final, events } = await h.run({ task: '2+3 and 4*5?', model: 'smart' });
    checkSequence(events);
    expect(final).toMatchObject({ type: 'run.completed', status: 'done', text: 'The answers are 5 and 20.' });
    expect(ofType(events, 'run.accepted')[0]).toMatchObject({
      provider: 'openai-responses',
      model: 'gpt-5-mini',
    });
    expect(ofType(events, 'tool.completed').map((e) => [e.call_id, e.preview])).toEqual([
      ['call_a', '5'],
      ['call_b', '20'],
    ]);
    const [first, second] = server.requests as [Record<string, any>, Record<string, any>];
    expect(first).toMatchObject({
      model: 'gpt-5-mini',
      store: false,
      parallel_tool_calls: true,
      reasoning: { effort: 'low', summary: 'auto' },
      include: ['reasoning.encrypted_content'],
    });
    expect(Boolean(first['stream'])).toBe(stream);
    expect(first['previous_response_id']).toBeUndefined();
    expect(typeof first['instructions']).toBe('string');
    expect(first['tools'].map((t: any) => t.type)).toEqual(first['tools'].map(() => 'function'));
    expect(first['tools'].find((t: any) => t.name === 'math__calc')).toMatchObject({
      parameters: { type: 'object' },
      strict: false,
    });
    expect(first['input']).toEqual([{ type: 'message', role: 'user', content: '2+3 and 4*5?' }]);
    // the second turn carries the whole transcript: the reasoning item (encrypted), both calls, both outputs
    expect(second['input'].map((i: any) => i.type)).toEqual([
      'message',
      'reasoning',
      'message',
      'function_call',
      'function_call',
      'function_call_output',
      'function_call_output',
    ]);
    expect(second['input'][1]).toMatchObject({
      id: 'rs_1',
      encrypted_content: expect.stringMatching(/^enc:1:/),
    });
    expect(second['input'].slice(5)).toEqual([
      { type: 'function_call_output', call_id: 'call_a', output: '5' },
      { type: 'function_call_output', call_id: 'call_b', output: '20' },
    ]);
    // the same stable prefix routes to the same prompt cache
    expect(first['prompt_cache_key']).toMatch(/^agentmesh-[0-9a-f]{24}$/);
    expect(second['prompt_cache_key']).toBe(first['prompt_cache_key']);
    // usage with cache and reasoning counts; reasoning never in the text
    expect(ofType(events, 'llm.response')[0]!.usage).toMatchObject({
      input_tokens: 200,
      output_tokens: 60,
      cache_read_tokens: 128,
      reasoning_tokens: 40,
    });
    expect(final.type === 'run.completed' && final.usage).toMatchObject({
      input_tokens: 500,
      output_tokens: 70,
      cache_read_tokens: 384,
      reasoning_tokens: 40,
    });
    const reasoning = ofType(events, 'llm.delta').filter((d) => d.kind === 'reasoning');
    if (stream) {
      expect(reasoning.every((d) => d.kind === 'reasoning' && d.iteration === 1)).toBe(true);
      expect(reasoning.map((d) => d.text).join('')).toBe('I should add and multiply.');
    } else expect(reasoning).toEqual([]);
    expect(ofType(events, 'llm.response').map((e) => e.text)).toEqual([
      'Computing.',
      'The answers are 5 and 20.',
    ]);
    // gpt-5-mini list prices: $0.25 input, $0.025 cached input, $2 output per million tokens
    const expected = ((500 - 384) * 0.25 + 384 * 0.025 + 70 * 2) / 1e6;
    expect(final.type === 'run.completed' && final.cost_usd).toBeCloseTo(expected, 12);
  });

  it('without reasoning sends no include and keeps no native items', async () => {
    const { server, h } = await setup(stream, [
      { tool_calls: [{ id: 'c1', name: 'crypto__sha256', arguments: { text: 'alpha' } }] },
      { text: 'done' },
    ]);
    const { final } = await h.run({ task: 'hash', provider: 'openai-responses', model: 'gpt-4.1-mini' });
    expect(final).toMatchObject({ status: 'done', text: 'done' });
    expect(server.requests[0]!['include']).toBeUndefined();
    expect(server.requests[1]!['input'].map((i: any) => i.type)).toEqual([
      'message',
      'function_call',
      'function_call_output',
    ]);
  });
});

describe('openai-responses hosted tool search', () => {
  it('sends deferred functions with defer_loading and the tool_search tool, and reports the search', async () => {
    const { server, h } = await setup(true, [
      {
        serverBlocks: [
          {
            type: 'tool_search_call',
            id: 'ts_1',
            call_id: null,
            execution: 'server',
            arguments: { query: 'sha256 hash' },
            status: 'completed',
          },
          {
            type: 'tool_search_output',
            id: 'tso_1',
            call_id: null,
            execution: 'server',
            status: 'completed',
            tools: [
              { type: 'function', name: 'crypto__sha256', parameters: { type: 'object' }, strict: false },
            ],
          },
        ],
        tool_calls: [{ id: 'call_h', name: 'crypto__sha256', arguments: { text: 'alpha' } }],
      },
      { text: 'hashed' },
    ]);
    const { final, events } = await h.run({
      task: 'hash alpha',
      provider: 'openai-responses',
      model: 'gpt-5.4-mini',
    });
    expect(final).toMatchObject({ status: 'done', text: 'hashed' });
    const first = server.requests[0]!;
    const tools = first['tools'] as Record<string, unknown>[];
    expect(tools).toContainEqual({ type: 'tool_search' });
    expect(tools.find((t) => t['name'] === 'crypto__sha256')).toMatchObject({ defer_loading: true });
    expect(tools.find((t) => t['name'] === 'math__calc')!['defer_loading']).toBeUndefined();
    expect(tools.map((t) => t['name'])).not.toContain('tool_search');
    expect(ofType(events, 'tool.search')).toEqual([
      expect.objectContaining({
        query: 'sha256 hash',
        strategy: 'hosted',
        results: ['crypto.sha256'],
        native: true,
      }),
    ]);
    expect(ofType(events, 'tool.completed').map((e) => e.name)).toEqual(['crypto.sha256']);
    expect(server.requests[1]!['input'].map((i: any) => i.type)).toEqual([
      'message',
      'tool_search_call',
      'tool_search_output',
      'function_call',
      'function_call_output',
    ]);
  });

  it('falls back to client-side search for a model without hosted search', async () => {
    const { server, h } = await setup(true, [{ text: 'no tools needed' }]);
    const { final } = await h.run({ task: 'hi', provider: 'openai-responses', model: 'gpt-5-mini' });
    expect(final).toMatchObject({ status: 'done' });
    const names = (server.requests[0]!['tools'] as Record<string, unknown>[]).map(
      (t) => t['name'] ?? t['type'],
    );
    expect(names).toContain('tool_search');
    expect(names).not.toContain('crypto__sha256');
    expect(JSON.stringify(server.requests[0]!['tools'])).not.toContain('defer_loading');
  });
});
