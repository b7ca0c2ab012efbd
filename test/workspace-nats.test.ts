import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { connectBus, invokeTool, silentLogger, type Backend, type ToolOutcome } from '@agentmesh/protocol';
import { ToolWorker, createWorkspacePack, type WorkspacePack } from '@agentmesh/tool-worker';

const natsUrl = inject('natsUrl');
const prefix = `ws${process.pid}x${Date.now().toString(36)}`;

let bus: Backend;
let worker: ToolWorker;
let pack: WorkspacePack;
let base: string;
let root: string;
let canary: string;
const secret = `CANARY-${process.pid}-${Date.now()}`;
let seq = 0;

function call(tool: string, args: unknown, tenant = 'acme'): Promise<ToolOutcome> {
  seq++;
  return invokeTool(
    bus,
    { call_id: `wsn-${seq}`, run_id: `run-wsn-${seq}`, tool, arguments: args, identity: { tenant } },
    { prefix, timeoutMs: 20_000 },
  );
}

function ok(outcome: ToolOutcome): any {
  expect(outcome.is_error, JSON.stringify(outcome.error)).toBe(false);
  return outcome.output;
}

beforeAll(async () => {
  base = realpathSync(mkdtempSync(join(tmpdir(), 'agentmesh-ws-nats-')));
  root = join(base, 'ws');
  mkdirSync(join(root, 'src'), { recursive: true });
  mkdirSync(join(base, 'outside'));
  canary = join(base, 'outside', 'canary.txt');
  writeFileSync(canary, secret);
  writeFileSync(join(root, 'src', 'a.ts'), 'export const answer = 42;\n');
  execFileSync('git', ['init', '-q'], { cwd: root, stdio: 'ignore' });
  execFileSync('git', ['add', '.'], { cwd: root, stdio: 'ignore' });
  execFileSync(
    'git',
    ['-c', 'user.name=t', '-c', 'user.email=t@example.com', 'commit', '-q', '-m', 'over nats'],
    { cwd: root, stdio: 'ignore' },
  );
  bus = await connectBus({ natsUrl });
  pack = createWorkspacePack({
    root,
    allow_argv_prefixes: [['echo'], ['node', '-e']],
    max_running_commands: 64,
  });
  worker = new ToolWorker({ bus, tools: pack.tools, prefix, logger: silentLogger(), register: false });
  await worker.start();
});

afterAll(async () => {
  await worker?.drain();
  await pack?.close();
  await bus?.close();
  rmSync(base, { recursive: true, force: true });
});

describe('the workspace pack through a ToolWorker over NATS', () => {
  it('serves every tool of the pack', async () => {
    expect(
      ok(await call('fs.write_file', { path: 'notes/n.txt', content: 'hello over nats', create_dirs: true })),
    ).toMatchObject({ created: true });
    expect(ok(await call('fs.read_file', { path: 'notes/n.txt' }))).toMatchObject({
      content: 'hello over nats',
    });
    expect(ok(await call('fs.list_files', { path: 'notes' })).entries).toEqual([
      { path: 'notes/n.txt', type: 'file', size: 15 },
    ]);
    expect(ok(await call('fs.search_files', { query: 'answer' })).matches).toEqual([
      { path: 'src/a.ts', line: 1, column: 14, text: 'export const answer = 42;' },
    ]);
    const run = ok(
      await call('shell.run_command', {
        argv: ['node', '-e', 'console.log("ran"); setTimeout(() => console.log("done"), 300)'],
        background_after_ms: 50,
      }),
    );
    expect(run.status).toBe('running');
    let text = '';
    let page = { eof: false, next_offset: 0 } as { eof: boolean; next_offset: number; data?: string };
    for (let i = 0; i < 50 && !page.eof; i++) {
      page = ok(
        await call('shell.read_command_output', {
          handle: run.handle,
          offset: page.next_offset,
          wait_ms: 5000,
        }),
      );
      text += page.data;
    }
    expect(page).toMatchObject({ eof: true, exit_code: 0 });
    expect(text).toBe('ran\ndone\n');
    expect(ok(await call('git.inspect', { subcommand: 'log', args: ['--format=%s'] })).stdout).toBe(
      'over nats\n',
    );
  });

  it('returns boundary refusals as error outcomes and never touches the canary', async () => {
    const refusals: [string, unknown, string][] = [
      ['fs.read_file', { path: '../outside/canary.txt' }, 'permission_denied'],
      ['fs.write_file', { path: canary, content: 'pwned' }, 'permission_denied'],
      ['shell.run_command', { argv: ['cat', canary] }, 'permission_denied'],
      ['git.inspect', { subcommand: 'push' }, 'invalid_arguments'],
      ['shell.read_command_output', { handle: 'cmd_missing' }, 'not_found'],
    ];
    for (const [tool, args, code] of refusals) {
      const outcome = await call(tool, args);
      expect(outcome).toMatchObject({ is_error: true, error: { code } });
      expect(outcome.preview.length).toBeGreaterThan(0);
      expect(JSON.stringify(outcome)).not.toContain(secret);
    }
    expect(readFileSync(canary, 'utf8')).toBe(secret);
  });

  it('keeps command handles to their tenant across the bus', async () => {
    const run = ok(await call('shell.run_command', { argv: ['echo', 'tenant-a'] }, 'tenant-a'));
    expect(ok(await call('shell.read_command_output', { handle: run.handle }, 'tenant-a'))).toMatchObject({
      data: 'tenant-a\n',
    });
    expect(await call('shell.read_command_output', { handle: run.handle }, 'tenant-b')).toMatchObject({
      is_error: true,
      error: { code: 'not_found' },
    });
  });

  it('serves 100 concurrent calls across the pack with no cross-talk', async () => {
    const ids = Array.from({ length: 100 }, (_, i) => i);
    await Promise.all(
      ids
        .map((i) => call('fs.write_file', { path: `many/m${i}.txt`, content: `m-${i}`, create_dirs: true }))
        .map(async (p) => ok(await p)),
    );
    const outcomes = await Promise.all(
      ids.map((i) => {
        switch (i % 4) {
          case 0:
            return call('fs.read_file', { path: `many/m${i}.txt` });
          case 1:
            return call('fs.search_files', { query: `m-${i}`, path: 'many', include: [`m${i}.txt`] });
          case 2:
            return call('shell.run_command', { argv: ['echo', `m-${i}`] });
          default:
            return call('fs.list_files', { path: 'many', max_entries: 5000 });
        }
      }),
    );
    ids.forEach((i) => {
      const out = ok(outcomes[i]!);
      if (i % 4 === 0) expect(out.content).toBe(`m-${i}`);
      if (i % 4 === 1) expect(out.matches.map((m: { path: string }) => m.path)).toEqual([`many/m${i}.txt`]);
      if (i % 4 === 2) expect(out.stdout).toBe(`m-${i}\n`);
      if (i % 4 === 3) expect(out.entries).toHaveLength(100);
    });
  });
});
