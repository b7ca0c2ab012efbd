import { afterEach, describe, expect, it } from 'vitest';
import { ErrorCode } from '@agentmesh/protocol';
import { MALFORMED_CALL_NAME, parseToolBlocks } from '@agentmesh/planner';
import { startOpenAiServer } from './fixtures/llm/openai-server.js';
import type { FakeLlmServer, FakeReply } from './fixtures/llm/common.js';
import { checkSequence, harness, ofType, type Harness } from './fixtures/llm/harness.js';
import { calcTool, sha256Tool, type FakeTool } from './fixtures/llm/mesh.js';

let h: Harness | undefined;
let server: FakeLlmServer | undefined;
afterEach(async () => {
  await h?.stop();
  await server?.close();
  h = undefined;
  server = undefined;
});

const hashTool: FakeTool = { ...sha256Tool, spec: { ...sha256Tool.spec, loading: 'always' } };
const ALPHA_SHA256 = '8ed3f6ad685b959ead7022518e1af76cd816f8e8ec7ccdda1ed4018e8f2223f8';

const block = (body: string) => '```tool_call\n' + body + '\n```';

/** A model that never emits native tool calls (and rejects requests that carry tools, like a model without them). */
function textOnlyModel(turns: string[], rejectTools: string | undefined) {
  return (body: Record<string, any>, index: number): FakeReply => {
    if (body['tools'] !== undefined)
      return rejectTools === undefined
        ? { status: 500, error: 'this stand-in must never be sent tools' }
        : { status: 400, error: rejectTools };
    return { text: turns[index - (rejectTools === undefined ? 0 : 1)] ?? 'out of turns' };
  };
}

const TURNS = [
  [
    'I will hash and add.',
    block('{"name": "crypto.sha256", "arguments": {"text": "alpha"}}'),
    block('{"name": "math.calc", "arguments": {"lhs": 2, "rhs": 3, "op": "add"}}'),
    block('{"name": "math.calc", "arguments": {lhs: 1}}'),
    block('this is not json at all'),
  ].join('\n\n'),
  'The hash is 8ed3... and the sum is 5.',
];

describe('text tool protocol', () => {
  it('renders tools into the prompt, runs parallel fenced calls, and fails malformed blocks closed', async () => {
    server = await startOpenAiServer(textOnlyModel(TURNS, undefined));
    h = harness([calcTool, hashTool], {
      providers: { baseUrl: server.url, maxRetries: 0, env: {} },
    });
    const { final, events } = await h.run({
      task: 'hash alpha and add 2+3',
      provider: 'openai-compatible',
      model: 'plain-model',
      tool_protocol: 'text',
    });
    checkSequence(events);
    expect(final).toMatchObject({ status: 'done', text: 'The hash is 8ed3... and the sum is 5.' });
    const [first, second] = server.requests as [Record<string, any>, Record<string, any>];
    expect(first['tools']).toBeUndefined();
    const system = first['messages'][0];
    expect(system.role).toBe('system');
    expect(system.content).toContain('## crypto.sha256');
    expect(system.content).toContain('## math.calc');
    expect(system.content).toContain('"required":["lhs","rhs","op"]');
    expect(system.content).toContain('```tool_call');
    // the two good calls ran (in parallel, one batch); the malformed ones never reached a worker
    expect(h.mesh.invocations.map((i) => i.tool).sort()).toEqual(['crypto.sha256', 'math.calc']);
    expect(
      ofType(events, 'tool.completed')
        .map((e) => [e.name, e.preview])
        .sort(),
    ).toEqual([
      ['crypto.sha256', ALPHA_SHA256],
      ['math.calc', '5'],
    ]);
    expect(ofType(events, 'tool.failed').map((e) => [e.name, e.error.code])).toEqual([
      ['math.calc', ErrorCode.InvalidArguments],
      [MALFORMED_CALL_NAME, ErrorCode.UnknownTool],
    ]);
    expect(ofType(events, 'llm.response')[0]!.text).toBe('I will hash and add.');
    // the reply and results go back as text: the calls as blocks, the results in one user message naming each call
    const messages = second['messages'] as { role: string; content: string }[];
    expect(messages.map((m) => m.role)).toEqual(['system', 'user', 'assistant', 'user']);
    expect(messages[2]!.content).toContain(block('{"name":"crypto.sha256","arguments":{"text":"alpha"}}'));
    const results = messages[3]!.content;
    expect(results).toMatch(/^Tool results:/);
    expect(results).toContain(`[text_1_1] crypto.sha256:\n${ALPHA_SHA256}`);
    expect(results).toContain('[text_1_2] math.calc:\n5');
    expect(results).toMatch(/\[text_1_3\] math\.calc \(error\):\n.*malformed JSON arguments/);
    expect(results).toMatch(/\[text_1_4\] malformed_tool_call \(error\):\n.*unknown tool/);
  });

  it('streams no text deltas: the streamed text holds the tool call blocks, the turn text comes with the response', async () => {
    server = await startOpenAiServer(textOnlyModel(TURNS, undefined));
    h = harness([calcTool, hashTool], {
      providers: { baseUrl: server.url, maxRetries: 0, stream: true, env: {} },
    });
    const { final, events } = await h.run({
      task: 'hash alpha and add 2+3',
      provider: 'openai-compatible',
      model: 'plain-model',
      tool_protocol: 'text',
    });
    expect(final).toMatchObject({ status: 'done' });
    expect(server.requests[0]!['stream']).toBe(true);
    expect(ofType(events, 'llm.delta')).toEqual([]);
    expect(ofType(events, 'llm.response')[0]!.text).toBe('I will hash and add.');
  });

  it('the ollama preset falls back to text when the server says the model does not support tools', async () => {
    server = await startOpenAiServer(
      textOnlyModel(
        [block('{"name": "math.calc", "arguments": {"lhs": 6, "rhs": 7, "op": "mul"}}'), '42'],
        'registry.ollama.ai/library/gemma:2b does not support tools',
      ),
    );
    h = harness([calcTool], { providers: { baseUrl: server.url, maxRetries: 0, env: {} } });
    const { final, events } = await h.run({ task: '6*7', provider: 'ollama', model: 'gemma:2b' });
    expect(final).toMatchObject({ status: 'done', text: '42' });
    expect(ofType(events, 'tool.completed').map((e) => e.preview)).toEqual(['42']);
    expect(server.requests.map((r) => r['tools'] === undefined)).toEqual([false, true, true]);
    expect(server.requests[0]!['parallel_tool_calls']).toBe(false);
  });

  it('parses blocks: several, prose kept, names read from broken JSON', () => {
    const parsed = parseToolBlocks(
      `a\n${block('{"name":"x.y","arguments":{"k":1}}')}\nb\n${block('{"name": "z.w", "arguments": }')}\n${block('[1]')}`,
      't',
    );
    expect(parsed.text).toBe('a\n\nb');
    expect(parsed.calls).toEqual([
      { id: 't_1', name: 'x.y', arguments: '{"k":1}' },
      { id: 't_2', name: 'z.w', arguments: '{"name": "z.w", "arguments": }' },
      { id: 't_3', name: MALFORMED_CALL_NAME, arguments: 'not a {"name", "arguments"} object: [1]' },
    ]);
  });
});

describe('text tool protocol on a model with native tool search', () => {
  it('searches client-side: the tool_search meta-tool is in the prompt and nothing goes on the wire', async () => {
    const { startAnthropicServer } = await import('./fixtures/llm/anthropic-server.js');
    server = await startAnthropicServer([{ text: 'nothing to do' }]);
    h = harness([calcTool, sha256Tool], {
      providers: { anthropicApiKey: 'k', anthropicBaseUrl: server.url, maxRetries: 0, env: {} },
    });
    const { final } = await h.run({
      task: 'hi',
      provider: 'anthropic',
      model: 'claude-sonnet-4-6',
      tool_protocol: 'text',
    });
    expect(final).toMatchObject({ status: 'done' });
    const body = server.requests[0]!;
    expect(body['tools']).toBeUndefined();
    const system = body['system'][0].text as string;
    expect(system).toContain('## tool_search');
    expect(system).toContain('## math.calc');
    expect(system).not.toContain('## crypto.sha256');
  });
});
