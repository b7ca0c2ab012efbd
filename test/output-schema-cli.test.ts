import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { RunEventSchema } from '@agentmesh/protocol';
import { runAgentmesh } from './helpers/cli.js';

describe('agentmesh run --output-schema', () => {
  const dir = mkdtempSync(join(tmpdir(), 'am-output-schema-'));
  const schema = join(dir, 'schema.json');
  writeFileSync(
    schema,
    JSON.stringify({ type: 'object', properties: { sum: { type: 'number' } }, required: ['sum'] }),
  );
  const script = join(dir, 'script.json');
  writeFileSync(script, JSON.stringify([{ text: '{"sum": 5}' }]));

  it('puts the validated answer in run.completed.output', async () => {
    const r = await runAgentmesh(['run', '--script', script, '--output-schema', schema, '--json', 'add']);
    expect(r.code).toBe(0);
    const last = RunEventSchema.parse(JSON.parse(r.stdout.trim().split('\n').at(-1)!));
    expect(last).toMatchObject({ type: 'run.completed', status: 'done', output: { sum: 5 } });
  });

  it('exits 2 naming the file when it is not a JSON object', async () => {
    const bad = join(dir, 'bad.json');
    writeFileSync(bad, '[1, 2]');
    const r = await runAgentmesh(['run', '--script', script, '--output-schema', bad, 'add']);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('bad.json');
  });

  it('refuses a schema with a catastrophic-backtracking pattern before running, naming output_schema', async () => {
    const redos = join(dir, 'redos.json');
    writeFileSync(redos, JSON.stringify({ type: 'string', pattern: '^(a+)+$' }));
    const letters = join(dir, 'letters.json');
    writeFileSync(letters, JSON.stringify([{ text: JSON.stringify('a'.repeat(40) + '!') }]));
    const r = await runAgentmesh(['run', '--script', letters, '--output-schema', redos, 'spell']);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/output_schema: keyword "pattern" at # is refused/);
  });
});

describe('examples/subagents.json', () => {
  it('runs two child agents with the scripted provider, no key needed', async () => {
    const r = await runAgentmesh([
      'run',
      '--script',
      'examples/subagents.json',
      '--tools',
      'agent,math',
      '--json',
      'Compute 2+3 and 4*5 with two child agents',
    ]);
    expect(r.code).toBe(0);
    const events = r.stdout
      .trim()
      .split('\n')
      .map((line) => RunEventSchema.parse(JSON.parse(line)));
    expect(
      events.filter((e) => e.type === 'agent.completed').map((e) => e.type === 'agent.completed' && e.status),
    ).toEqual(['done', 'done']);
    const results = events.flatMap((e) => (e.type === 'tool.completed' ? [e.preview] : []));
    expect(results.sort()).toEqual(['2 + 3 = 5', '{"product":20}']);
    const last = events.at(-1)!;
    expect(last).toMatchObject({ type: 'run.completed', status: 'done', tool_calls: 4 });
    expect(last.type === 'run.completed' && last.usage.children).toHaveLength(2);
  });
});
