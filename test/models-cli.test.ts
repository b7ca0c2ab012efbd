import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { RunEventSchema } from '@agentmesh/protocol';
import { startOpenAiResponsesServer } from './fixtures/llm/openai-responses-server.js';
import type { FakeLlmServer } from './fixtures/llm/common.js';
import { cleanEnv, runAgentmesh } from './helpers/cli.js';

let server: FakeLlmServer | undefined;
afterEach(async () => {
  await server?.close();
  server = undefined;
});

describe('agentmesh run with models: aliases and --tool-protocol text', () => {
  it('resolves --model fast from the configuration and calls tools through fenced blocks', async () => {
    server = await startOpenAiResponsesServer([
      { text: '```tool_call\n{"name": "math.calc", "arguments": {"lhs": 2, "rhs": 3, "op": "add"}}\n```' },
      { text: '2 + 3 = 5' },
    ]);
    const dir = mkdtempSync(join(tmpdir(), 'agentmesh-models-'));
    const config = join(dir, 'agentmesh.yaml');
    writeFileSync(
      config,
      'models:\n  fast: "openai-responses:gpt-4.1-mini"\n  smart: { model: "anthropic:claude-sonnet-4-6" }\n',
    );
    const r = await runAgentmesh(
      ['run', '--config', config, '--model', 'fast', '--tool-protocol', 'text', '--json', 'add 2 and 3'],
      { env: cleanEnv({ OPENAI_API_KEY: 'sk-test', OPENAI_BASE_URL: server.url }), timeoutMs: 60_000 },
    );
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    const events = r.stdout
      .trim()
      .split('\n')
      .map((line) => RunEventSchema.parse(JSON.parse(line)));
    expect(events[0]).toMatchObject({
      type: 'run.accepted',
      provider: 'openai-responses',
      model: 'gpt-4.1-mini',
    });
    expect(events.find((e) => e.type === 'tool.completed')).toMatchObject({
      name: 'math.calc',
      preview: '{"result":5}',
    });
    expect(events.at(-1)).toMatchObject({ type: 'run.completed', status: 'done', text: '2 + 3 = 5' });
    expect(server.requests[0]!['tools']).toBeUndefined();
    expect(server.requests[0]!['instructions']).toContain('## math.calc');
  });

  it('exits 2 naming the key of a bad models: entry', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'agentmesh-models-'));
    const config = join(dir, 'agentmesh.yaml');
    writeFileSync(config, 'models:\n  fast: { model: "openai:gpt-4.1-mini", temprature: 0.2 }\n');
    const r = await runAgentmesh(['run', '--config', config, '--script', 'examples/add.json', 'x'], {
      env: cleanEnv(),
    });
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/models.*temprature/s);
  });
});
