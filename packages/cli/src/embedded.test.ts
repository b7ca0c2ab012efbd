import { mkdtempSync, existsSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { silentLogger, type RunEvent } from '@agentmesh/protocol';
import { startEmbedded } from './embedded.js';

function terminal(answer: string) {
  const stdin = Object.assign(new PassThrough(), { isTTY: true });
  const prompts: string[] = [];
  stdin.end(`${answer}\n`);
  return {
    io: { stdin, stdout: { write: () => undefined }, stderr: { write: (t: string) => void prompts.push(t) } },
    prompts,
  };
}

const writeScript = [
  {
    tool_calls: [
      { name: 'fs.write_file', arguments: { path: 'notes.txt', content: 'hello', mode: 'create' } },
    ],
  },
  { text: 'done' },
];

describe('embedded mesh asks before tools that write when run interactively', () => {
  it.each([
    ['y', true],
    ['n', false],
  ])('answer %s: the write %s', async (answer, written) => {
    const root = mkdtempSync(join(tmpdir(), 'agentmesh-confirm-'));
    const { io, prompts } = terminal(answer);
    const mesh = await startEmbedded({
      config: {},
      logger: silentLogger(),
      workspace: root,
      io,
      askBeforeWrites: true,
    });
    try {
      const events: RunEvent[] = [];
      const final = await mesh.planner.execute(
        { task: 'write', script: writeScript },
        { onEvent: (e) => events.push(e) },
      );
      expect(final).toMatchObject({ type: 'run.completed', status: 'done' });
      expect(prompts.join('')).toMatch(
        /fs\.write_file wants to write 5 bytes to notes\.txt .*Allow\? \[y\/N\]/,
      );
      expect(existsSync(join(root, 'notes.txt'))).toBe(written);
      if (written) expect(readFileSync(join(root, 'notes.txt'), 'utf8')).toBe('hello');
      const toolEvent = events.find((e) => e.type === 'tool.completed' || e.type === 'tool.failed');
      expect(toolEvent && 'is_error' in toolEvent && toolEvent.is_error).toBe(!written);
    } finally {
      await mesh.stop();
    }
  });
});

describe('embedded approvals: one answer per call, no terminal denies', () => {
  it('two writes in one turn get two prompts; "y" then "n" writes exactly the first', async () => {
    const root = mkdtempSync(join(tmpdir(), 'agentmesh-confirm-'));
    const stdin = Object.assign(new PassThrough(), { isTTY: true });
    const prompts: string[] = [];
    const io = {
      stdin,
      stdout: { write: () => undefined },
      stderr: {
        write: (t: string) => {
          prompts.push(t);
          stdin.write(prompts.length === 1 ? 'y\n' : 'n\n');
        },
      },
    };
    const mesh = await startEmbedded({
      config: {},
      logger: silentLogger(),
      workspace: root,
      io,
      askBeforeWrites: true,
    });
    try {
      const final = await mesh.planner.execute({
        task: 'write two',
        limits: { tool_concurrency: 2 },
        script: [
          {
            tool_calls: [
              { name: 'fs.write_file', arguments: { path: 'one.txt', content: '1', mode: 'create' } },
              { name: 'fs.write_file', arguments: { path: 'two.txt', content: '2', mode: 'create' } },
            ],
          },
          { text: 'done' },
        ],
      });
      expect(final).toMatchObject({ type: 'run.completed', status: 'done' });
      expect(prompts).toHaveLength(2);
      expect([existsSync(join(root, 'one.txt')), existsSync(join(root, 'two.txt'))].sort()).toEqual([
        false,
        true,
      ]);
    } finally {
      await mesh.stop();
    }
  });

  it('without a terminal and without --yes a write is denied, naming --yes and agentmesh runs approve', async () => {
    const root = mkdtempSync(join(tmpdir(), 'agentmesh-confirm-'));
    const { io } = terminal('');
    const mesh = await startEmbedded({
      config: {},
      logger: silentLogger(),
      workspace: root,
      io,
      denyWrites: true,
    });
    try {
      const events: RunEvent[] = [];
      await mesh.planner.execute({ task: 'write', script: writeScript }, { onEvent: (e) => events.push(e) });
      const failed = events.find((e) => e.type === 'tool.failed');
      expect(failed?.type === 'tool.failed' && failed.error.message).toMatch(/--yes.*agentmesh runs approve/);
      expect(existsSync(join(root, 'notes.txt'))).toBe(false);
    } finally {
      await mesh.stop();
    }
  });
});
