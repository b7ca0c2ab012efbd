import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createWorkspacePack, type WorkspacePack } from './tools.js';

/** Every tool of the pack serves 100 concurrent calls with distinct inputs, and each call gets its own answer. */

const N = 100;
const ids = Array.from({ length: N }, (_, i) => i);
let root: string;
let pack: WorkspacePack;

const invoke = (name: string, args: unknown, i: number) => {
  const tool = pack.tools.find((t) => t.name === name);
  if (!tool) throw new Error(name);
  return tool.invoke(args, {
    runId: `run-${i}`,
    callId: `call-${i}`,
    identity: { tenant: `t${i % 7}` },
  }) as Promise<any>;
};

beforeAll(() => {
  root = realpathSync(mkdtempSync(join(tmpdir(), 'agentmesh-ws-conc-')));
  for (const i of ids) {
    mkdirSync(join(root, `d${i}`));
    writeFileSync(join(root, `d${i}`, `f${i}.txt`), `token-${i}-${'x'.repeat(i)}\n`);
  }
  execFileSync('git', ['init', '-q'], { cwd: root, stdio: 'ignore' });
  execFileSync('git', ['add', '.'], { cwd: root, stdio: 'ignore' });
  execFileSync(
    'git',
    ['-c', 'user.name=t', '-c', 'user.email=t@example.com', 'commit', '-q', '-m', 'files'],
    { cwd: root, stdio: 'ignore' },
  );
  pack = createWorkspacePack({
    root,
    allow_argv_prefixes: [['echo'], ['cat']],
    max_running_commands: N + 10,
    max_kept_handles: 4 * N,
  });
});
afterAll(async () => {
  await pack.close();
  rmSync(root, { recursive: true, force: true });
});

describe('100 concurrent calls per tool, no cross-talk', () => {
  it('fs.read_file', async () => {
    const out = await Promise.all(ids.map((i) => invoke('fs.read_file', { path: `d${i}/f${i}.txt` }, i)));
    ids.forEach((i) =>
      expect(out[i]).toMatchObject({ path: `d${i}/f${i}.txt`, content: `token-${i}-${'x'.repeat(i)}\n` }),
    );
  });

  it('fs.write_file', async () => {
    const out = await Promise.all(
      ids.map((i) =>
        invoke('fs.write_file', { path: `w/w${i}.txt`, content: `written-${i}`, create_dirs: true }, i),
      ),
    );
    ids.forEach((i) => {
      expect(out[i]).toMatchObject({ path: `w/w${i}.txt`, bytes_written: `written-${i}`.length });
      expect(readFileSync(join(root, 'w', `w${i}.txt`), 'utf8')).toBe(`written-${i}`);
    });
  });

  it('fs.list_files', async () => {
    const out = await Promise.all(ids.map((i) => invoke('fs.list_files', { path: `d${i}` }, i)));
    ids.forEach((i) =>
      expect(out[i].entries).toEqual([
        { path: `d${i}/f${i}.txt`, type: 'file', size: `token-${i}-`.length + i + 1 },
      ]),
    );
  });

  it('fs.search_files', async () => {
    const out = await Promise.all(
      ids.map((i) =>
        invoke('fs.search_files', { query: `token-${i}-`, path: '.', include: ['d*/*.txt'] }, i),
      ),
    );
    ids.forEach((i) =>
      expect(out[i].matches.map((m: { path: string }) => m.path)).toEqual([`d${i}/f${i}.txt`]),
    );
  });

  it('shell.run_command', async () => {
    const out = await Promise.all(
      ids.map((i) => invoke('shell.run_command', { argv: ['cat', `f${i}.txt`], cwd: `d${i}` }, i)),
    );
    ids.forEach((i) =>
      expect(out[i]).toMatchObject({ exit_code: 0, stdout: `token-${i}-${'x'.repeat(i)}\n` }),
    );
    expect(new Set(out.map((o) => o.handle)).size).toBe(N);
  });

  it('shell.read_command_output', async () => {
    const started = await Promise.all(
      ids.map((i) => invoke('shell.run_command', { argv: ['echo', `echo-${i}`] }, i)),
    );
    const out = await Promise.all(
      ids.map((i) => invoke('shell.read_command_output', { handle: started[i].handle, wait_ms: 1000 }, i)),
    );
    ids.forEach((i) => expect(out[i]).toMatchObject({ data: `echo-${i}\n`, eof: true }));
  });

  it('git.inspect', async () => {
    const out = await Promise.all(
      ids.map((i) => invoke('git.inspect', { subcommand: 'show', args: [`HEAD:d${i}/f${i}.txt`] }, i)),
    );
    ids.forEach((i) =>
      expect(out[i]).toMatchObject({ exit_code: 0, stdout: `token-${i}-${'x'.repeat(i)}\n` }),
    );
  });
});
