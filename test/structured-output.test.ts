import { afterEach, describe, expect, it } from 'vitest';
import type { ProviderSettings } from '@agentmesh/planner';
import { startAnthropicServer } from './fixtures/llm/anthropic-server.js';
import { startOpenAiServer } from './fixtures/llm/openai-server.js';
import { startOpenAiResponsesServer } from './fixtures/llm/openai-responses-server.js';
import type { FakeLlmServer, FakeReply } from './fixtures/llm/common.js';
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

type Kind = 'openai' | 'anthropic' | 'openai-responses';
const MODELS: Record<Kind, string> = {
  openai: 'gpt-4o-mini',
  anthropic: 'claude-sonnet-4-6',
  'openai-responses': 'gpt-5-mini',
};

/** Strict-compatible: every property required, no additional ones. */
const STRICT_SCHEMA = {
  type: 'object',
  properties: { sum: { type: 'number' }, note: { type: 'string' } },
  required: ['sum', 'note'],
  additionalProperties: false,
};
/** Not strict-compatible: `note` is optional. */
const LOOSE_SCHEMA = {
  type: 'object',
  properties: { sum: { type: 'number' }, note: { type: 'string' } },
  required: ['sum'],
};

async function setup(kind: Kind, replies: FakeReply[]): Promise<{ server: FakeLlmServer; h: Harness }> {
  server =
    kind === 'openai'
      ? await startOpenAiServer(replies)
      : kind === 'anthropic'
        ? await startAnthropicServer(replies)
        : await startOpenAiResponsesServer(replies);
  const providers: ProviderSettings = {
    ...(kind === 'anthropic'
      ? { anthropicApiKey: 'sk-ant-test', anthropicBaseUrl: server.url }
      : { openaiApiKey: 'sk-test', openaiBaseUrl: server.url }),
    maxRetries: 0,
    env: {},
  };
  h = harness([calcTool], { providers });
  return { server, h };
}

/** How each wire carries an answer: text on OpenAI's, a call of the forced answer tool on Anthropic's. */
function answer(kind: Kind, value: unknown): FakeReply {
  return kind === 'anthropic'
    ? {
        tool_calls: [
          { id: 'toolu_final', name: 'final_answer', arguments: value as Record<string, unknown> },
        ],
      }
    : { text: JSON.stringify(value) };
}

describe.each(['openai', 'openai-responses', 'anthropic'] as const)('structured output on %s', (kind) => {
  it('sends the schema on the wire and puts the validated value in run.completed.output', async () => {
    const { server, h } = await setup(kind, [
      { tool_calls: [{ id: 'c1', name: 'math__calc', arguments: { lhs: 2, rhs: 3, op: 'add' } }] },
      answer(kind, { sum: 5, note: 'added' }),
    ]);
    const { final, events } = await h.run({
      task: 'add 2 and 3',
      provider: kind,
      model: MODELS[kind],
      output_schema: STRICT_SCHEMA,
    });
    checkSequence(events);
    expect(final).toMatchObject({ type: 'run.completed', status: 'done', output: { sum: 5, note: 'added' } });
    const body = server.requests[0]!;
    if (kind === 'openai')
      expect(body['response_format']).toEqual({
        type: 'json_schema',
        json_schema: { name: 'final_answer', schema: STRICT_SCHEMA, strict: true },
      });
    else if (kind === 'openai-responses')
      expect(body['text']).toEqual({
        format: { type: 'json_schema', name: 'final_answer', schema: STRICT_SCHEMA, strict: true },
      });
    else {
      const tool = (body['tools'] as { name: string; input_schema: unknown }[]).find(
        (t) => t.name === 'final_answer',
      );
      expect(tool?.input_schema).toEqual(STRICT_SCHEMA);
      // other tools are offered too, so the model must call some tool: the answer or a real one
      expect(body['tool_choice']).toMatchObject({ type: 'any' });
      // the answer tool never reaches the workers
      expect(ofType(events, 'tool.started').map((e) => e.name)).toEqual(['math.calc']);
    }
  });

  it('gives one repair turn naming the problems, then accepts the corrected answer', async () => {
    const { server, h } = await setup(kind, [answer(kind, { total: 5 }), answer(kind, { sum: 5 })]);
    const { final, events } = await h.run({
      task: 'add 2 and 3',
      provider: kind,
      model: MODELS[kind],
      tools: [],
      output_schema: LOOSE_SCHEMA,
    });
    expect(final).toMatchObject({ status: 'done', output: { sum: 5 } });
    expect(server.requests).toHaveLength(2);
    if (kind === 'openai') expect(server.requests[0]!['response_format'].json_schema.strict).toBe(false);
    if (kind === 'anthropic')
      expect(server.requests[0]!['tool_choice']).toMatchObject({ type: 'tool', name: 'final_answer' });
    const repair = ofType(events, 'run.notice').find((n) => n.kind === 'output_repair');
    expect(repair?.message).toMatch(/must have required property 'sum'/);
    expect(JSON.stringify(server.requests[1])).toContain('does not match the required JSON Schema');
  });

  it('ends failed with invalid_output when the repaired answer still does not match', async () => {
    const { server, h } = await setup(kind, [answer(kind, { total: 5 }), answer(kind, { sum: 'five' })]);
    const { final, events } = await h.run({
      task: 'add 2 and 3',
      provider: kind,
      model: MODELS[kind],
      tools: [],
      output_schema: LOOSE_SCHEMA,
    });
    expect(final).toMatchObject({ type: 'run.completed', status: 'failed' });
    expect(final.type === 'run.completed' && final.reason).toMatch(/^invalid_output: .*\/sum must be number/);
    expect(final).not.toHaveProperty('output');
    expect(ofType(events, 'run.notice').some((n) => n.details?.['code'] === 'invalid_output')).toBe(true);
    expect(server.requests).toHaveLength(2);
  });
});

describe('structured output, provider independent', () => {
  it('on the text tool protocol puts the schema in the prompt instead of forcing a JSON response', async () => {
    const { server, h } = await setup('openai', [
      { text: '```tool_call\n{"name": "math.calc", "arguments": {"lhs": 2, "rhs": 3, "op": "add"}}\n```' },
      { text: '{"sum": 5, "note": "added"}' },
    ]);
    const { final } = await h.run({
      task: 'add 2 and 3',
      provider: 'openai',
      model: MODELS.openai,
      tool_protocol: 'text',
      output_schema: STRICT_SCHEMA,
    });
    expect(final).toMatchObject({ status: 'done', output: { sum: 5, note: 'added' } });
    expect(server.requests[0]!['response_format']).toBeUndefined();
    expect(JSON.stringify(server.requests[0]!['messages'][0])).toContain('matching this JSON Schema');
  });

  it('accepts a fenced JSON answer from the scripted provider', async () => {
    h = harness([calcTool]);
    const { final } = await h.run({
      task: 'x',
      script: [{ text: '```json\n{"sum": 1}\n```' }],
      output_schema: LOOSE_SCHEMA,
    });
    expect(final).toMatchObject({ status: 'done', output: { sum: 1 } });
  });

  it('refuses a schema ajv cannot compile with run.failed invalid_request', async () => {
    h = harness([calcTool]);
    const { final } = await h.run({
      task: 'x',
      script: [{ text: '{}' }],
      output_schema: { type: 'object', properties: { a: { type: 'no-such-type' } } },
    });
    expect(final).toMatchObject({ type: 'run.failed', error: { code: 'invalid_request' } });
    expect(final.type === 'run.failed' && final.error.message).toMatch(/output_schema/);
  });

  it('refuses a catastrophic-backtracking pattern within 100 ms instead of blocking the planner', async () => {
    h = harness([calcTool]);
    const started = performance.now();
    const { final } = await h.run({
      task: 'x',
      script: [{ text: JSON.stringify('a'.repeat(40) + '!') }],
      output_schema: { type: 'string', pattern: '^(a+)+$' },
    });
    expect(performance.now() - started).toBeLessThan(100);
    expect(final).toMatchObject({ type: 'run.failed', error: { code: 'invalid_request' } });
    expect(final.type === 'run.failed' && final.error.message).toMatch(
      /output_schema: keyword "pattern" at #/,
    );
  });

  it('validates two runs whose schemas share an $id each against its own schema', async () => {
    h = harness([calcTool]);
    const $id = 'https://tenant-a.example/answer.json';
    const first = await h.run({
      task: 'x',
      script: [{ text: '{"sum": 1}' }],
      output_schema: { $id, type: 'object', properties: { sum: { type: 'number' } }, required: ['sum'] },
    });
    expect(first.final).toMatchObject({ status: 'done', output: { sum: 1 } });
    const second = await h.run({
      task: 'x',
      script: [{ text: '{"name": "b"}' }],
      output_schema: { $id, type: 'object', properties: { name: { type: 'string' } }, required: ['name'] },
    });
    expect(second.final).toMatchObject({ status: 'done', output: { name: 'b' } });
  });

  it('ends failed with invalid_output when validating the answer would take past the step budget', async () => {
    h = harness([calcTool]);
    const $defs: Record<string, unknown> = { a40: { type: 'string' } };
    for (let i = 0; i < 40; i++)
      $defs[`a${i}`] = { allOf: [{ $ref: `#/$defs/a${i + 1}` }, { $ref: `#/$defs/a${i + 1}` }] };
    const { final } = await h.run({
      task: 'x',
      script: [{ text: '"x"' }],
      output_schema: { $defs, $ref: '#/$defs/a0' },
    });
    expect(final).toMatchObject({ type: 'run.completed', status: 'failed' });
    expect(final.type === 'run.completed' && final.reason).toMatch(
      /^invalid_output: .*OUTPUT_SCHEMA_MAX_STEPS/,
    );
  });
});
