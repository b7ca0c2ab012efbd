/**
 * Issue 38, `agentmesh runs fork` without NATS: a run kept in the data dir by one process is forked by another,
 * which reads the original's transcript from the same data dir.
 */
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { RunEvent } from '@agentmesh/protocol';
import { cleanEnv, runAgentmesh } from './helpers/cli.js';

const dir = mkdtempSync(join(tmpdir(), 'agentmesh-fork-embedded-'));
const dataDir = join(dir, 'data');
const file = (name: string, value: unknown) => {
  const path = join(dir, name);
  writeFileSync(path, JSON.stringify(value));
  return path;
};
const calc = (lhs: number, rhs: number) => ({ name: 'math.calc', arguments: { lhs, rhs, op: 'add' } });
const lines = (stdout: string) =>
  stdout
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as RunEvent);
const agentmesh = (args: string[]) =>
  runAgentmesh([...args, '--data-dir', dataDir], { env: cleanEnv(), cwd: dir, timeoutMs: 90_000 });

describe('agentmesh runs fork, embedded with --data-dir', () => {
  it('a second process forks a run the first one kept in the data dir', async () => {
    const first = await agentmesh([
      'run',
      '--script',
      file('orig.json', [{ tool_calls: [calc(1, 2)] }, { tool_calls: [calc(3, 3)] }, { text: 'six' }]),
      '--id',
      'emb-orig',
      '--json',
      'add 1 and 2, then 3',
    ]);
    expect(first.code).toBe(0);
    const original = lines(first.stdout);
    const seq = original.find((e) => e.type === 'llm.request' && e.iteration === 2)!.seq - 1;
    const fork = await agentmesh([
      'runs',
      'fork',
      'emb-orig',
      '--at',
      String(seq),
      '--script',
      file('fork.json', [{ text: 'forked: three' }]),
      '--id',
      'emb-fork',
      '--json',
    ]);
    expect(fork.stderr).toBe('');
    expect(fork.code).toBe(0);
    const events = lines(fork.stdout);
    expect(events[0]).toMatchObject({ type: 'run.accepted', forked_from: { run_id: 'emb-orig', seq } });
    expect(events.filter((e) => e.type === 'llm.request')).toHaveLength(1);
    expect(events.some((e) => e.type === 'tool.started')).toBe(false);
    expect(events.at(-1)).toMatchObject({ type: 'run.completed', status: 'done', text: 'forked: three' });
    const stored = JSON.parse(
      readFileSync(join(dataDir, 'runs', 'transcripts', 'emb-fork.json'), 'utf8'),
    ) as {
      json: { messages: { role: string; content: string }[] };
    };
    expect(stored.json.messages.map((m) => m.role)).toEqual(['user', 'assistant', 'tool', 'assistant']);
    expect(stored.json.messages[2]!.content).toContain('3');
  }, 180_000);

  it('names what is wrong: a seq inside a turn, a run the data dir does not have', async () => {
    const inside = await agentmesh(['runs', 'fork', 'emb-orig', '--at', '4', '--id', 'emb-inside']);
    expect(inside.code).toBe(1);
    expect(inside.stdout).toContain('tool calls had not all finished');
    const missing = await agentmesh(['runs', 'fork', 'emb-nope', '--at', '2']);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toContain('run emb-nope has no stored transcript');
  }, 180_000);
});
