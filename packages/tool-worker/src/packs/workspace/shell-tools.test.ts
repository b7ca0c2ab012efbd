import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createWorkspacePack, type WorkspacePack } from './tools.js';

let root: string;
let pack: WorkspacePack;
const packs: WorkspacePack[] = [];
function make(options: Parameters<typeof createWorkspacePack>[0]): WorkspacePack {
  const p = createWorkspacePack(options);
  packs.push(p);
  return p;
}
const invoke = (name: string, args: unknown, p: WorkspacePack = pack, ctx: Record<string, unknown> = {}) => {
  const tool = p.tools.find((t) => t.name === name);
  if (!tool) throw new Error(name);
  return tool.invoke(args, ctx) as Promise<any>;
};

beforeAll(() => {
  root = realpathSync(mkdtempSync(join(tmpdir(), 'agentmesh-ws-sh-')));
  mkdirSync(join(root, 'src'));
  writeFileSync(join(root, 'src', 'a.txt'), 'one\ntwo\n');
  pack = make({
    root,
    allow_argv_prefixes: [['ls'], ['cat'], ['pwd'], ['echo'], ['node', '-e'], ['sleep'], ['false']],
    max_output_bytes: 1000,
  });
  const g = (...args: string[]) =>
    execFileSync('git', ['-c', 'user.name=t', '-c', 'user.email=t@example.com', ...args], {
      cwd: root,
      stdio: 'ignore',
      env: { PATH: process.env['PATH'] ?? '/usr/bin:/bin', HOME: '/nonexistent' },
    });
  g('init', '-q');
  g('add', 'src/a.txt');
  g('commit', '-q', '-m', 'first commit');
  writeFileSync(join(root, 'src', 'a.txt'), 'one\ntwo\nthree\n');
});
afterAll(async () => {
  for (const p of packs) await p.close();
  rmSync(root, { recursive: true, force: true });
});

describe('shell.run_command', () => {
  it('runs argv in a cwd inside the workspace and returns exit code and output', async () => {
    const out = await invoke('shell.run_command', { argv: ['pwd'], cwd: 'src' });
    expect(out).toMatchObject({
      status: 'exited',
      exit_code: 0,
      stdout: `${join(root, 'src')}\n`,
      stderr: '',
    });
    const failed = await invoke('shell.run_command', { argv: ['cat', 'missing.txt'] });
    expect(failed.exit_code).not.toBe(0);
    expect(failed.stderr).toMatch(/missing\.txt/);
  });

  it('answers not_found for a program that does not exist', async () => {
    const p = make({ root, allow_argv_prefixes: [['no-such-program-agentmesh']] });
    await expect(
      invoke('shell.run_command', { argv: ['no-such-program-agentmesh'] }, p),
    ).rejects.toMatchObject({ code: 'not_found', message: expect.stringMatching(/PATH/) });
  });

  it('caps inline output with a notice, and the handle pages the whole of it', async () => {
    const out = await invoke('shell.run_command', {
      argv: ['node', '-e', 'process.stdout.write("a".repeat(5000) + "END")'],
    });
    expect(out.stdout_bytes).toBe(5003);
    expect(out.stdout).toHaveLength(1000);
    expect(out.stdout.endsWith('END')).toBe(true);
    expect(out.notice).toMatch(/shell\.read_command_output/);
    const page = await invoke('shell.read_command_output', {
      handle: out.handle,
      offset: 0,
      max_bytes: 4000,
    });
    expect(page).toMatchObject({
      offset: 0,
      next_offset: 4000,
      total_bytes: 5003,
      eof: false,
      status: 'exited',
    });
    const rest = await invoke('shell.read_command_output', { handle: out.handle, offset: page.next_offset });
    expect(rest).toMatchObject({ data: 'a'.repeat(1000) + 'END', eof: true });
    const tail = await invoke('shell.read_command_output', { handle: out.handle, tail: true, max_bytes: 3 });
    expect(tail.data).toBe('END');
  });

  it('backgrounds a long command and lets it be read until it ends', async () => {
    const script = 'console.log("started"); setTimeout(() => console.log("finished"), 400)';
    const out = await invoke('shell.run_command', { argv: ['node', '-e', script], background_after_ms: 150 });
    expect(out.status).toBe('running');
    expect(out.exit_code).toBeNull();
    let offset = 0;
    let text = '';
    for (let i = 0; i < 50; i++) {
      const page = await invoke('shell.read_command_output', { handle: out.handle, offset, wait_ms: 2000 });
      text += page.data;
      offset = page.next_offset;
      if (page.eof) {
        expect(page).toMatchObject({ status: 'exited', exit_code: 0 });
        break;
      }
    }
    expect(text).toBe('started\nfinished\n');
  });

  it('kills a command at its timeout', async () => {
    const out = await invoke('shell.run_command', { argv: ['sleep', '30'], timeout_ms: 200 });
    expect(out).toMatchObject({ status: 'timed_out', notice: expect.stringMatching(/time limit/) });
  });

  it('kills the command when the call is cancelled', async () => {
    const controller = new AbortController();
    const pending = invoke('shell.run_command', { argv: ['sleep', '30'] }, pack, {
      signal: controller.signal,
    });
    setTimeout(() => controller.abort(), 100);
    await expect(pending).rejects.toMatchObject({ code: 'cancelled' });
  });

  it('keeps handles per tenant: another tenant cannot read them', async () => {
    const out = await invoke('shell.run_command', { argv: ['echo', 'mine'] }, pack, {
      identity: { tenant: 'acme' },
    });
    expect(
      await invoke('shell.read_command_output', { handle: out.handle }, pack, {
        identity: { tenant: 'acme' },
      }),
    ).toMatchObject({ data: 'mine\n' });
    await expect(
      invoke('shell.read_command_output', { handle: out.handle }, pack, { identity: { tenant: 'other' } }),
    ).rejects.toMatchObject({ code: 'not_found' });
    await expect(invoke('shell.read_command_output', { handle: 'cmd_nope' })).rejects.toMatchObject({
      code: 'not_found',
    });
  });

  it('answers busy beyond the running-command limit', async () => {
    const p = make({ root, allow_argv_prefixes: [['sleep']], max_running_commands: 1 });
    const first = await invoke('shell.run_command', { argv: ['sleep', '5'], background_after_ms: 0 }, p);
    expect(first.status).toBe('running');
    await expect(invoke('shell.run_command', { argv: ['sleep', '5'] }, p)).rejects.toMatchObject({
      code: 'busy',
      retryable: true,
    });
    await p.close();
  });

  it('runs a shell string only when allowed, and asks the confirmation hook first', async () => {
    const asked: string[] = [];
    const p = make({
      root,
      allow_shell: true,
      confirm: async (r) => (asked.push(r.tool), r.summary.includes('echo')),
    });
    expect(await invoke('shell.run_command', { command: 'echo a && echo b' }, p)).toMatchObject({
      stdout: 'a\nb\n',
    });
    await expect(invoke('shell.run_command', { command: 'ls' }, p)).rejects.toMatchObject({
      code: 'permission_denied',
      details: { rule: 'declined' },
    });
    expect(asked).toEqual(['shell.run_command', 'shell.run_command']);
    await expect(invoke('shell.run_command', { argv: ['ls'], command: 'ls' }, p)).rejects.toMatchObject({
      code: 'invalid_arguments',
    });
  });
});

describe('git.inspect', () => {
  it('runs status, log, diff, show and blame', async () => {
    expect((await invoke('git.inspect', { subcommand: 'status', args: ['--short'] })).stdout).toMatch(
      /M src\/a\.txt/,
    );
    expect((await invoke('git.inspect', { subcommand: 'log', args: ['--oneline', '-n1'] })).stdout).toMatch(
      /first commit/,
    );
    expect((await invoke('git.inspect', { subcommand: 'diff', paths: ['src/a.txt'] })).stdout).toMatch(
      /\+three/,
    );
    expect((await invoke('git.inspect', { subcommand: 'show', args: ['--stat', 'HEAD'] })).stdout).toMatch(
      /src\/a\.txt/,
    );
    expect((await invoke('git.inspect', { subcommand: 'blame', paths: ['src/a.txt'] })).stdout).toMatch(
      /one/,
    );
  });

  it('leaves the repository untouched (no index refresh or lock)', async () => {
    const before = execFileSync('git', ['rev-parse', 'HEAD'], { cwd: root, encoding: 'utf8' });
    await invoke('git.inspect', { subcommand: 'status' });
    expect(execFileSync('git', ['rev-parse', 'HEAD'], { cwd: root, encoding: 'utf8' })).toBe(before);
  });
});
