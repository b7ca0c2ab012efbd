import { execFileSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  realpathSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AgentMeshError } from '@agentmesh/protocol';
import { foldedGlob, planCommand } from './command-plan.js';
import { createWorkspaceRuntime } from './runtime.js';
import { createWorkspacePack, type WorkspacePack } from './tools.js';
import type { WorkspaceOptions } from './options.js';

/**
 * The default allow-list of shell.run_command must not run code, write files or print what the fs tools hide: an
 * argv corpus that must be refused, the git fsmonitor attack in a real repository, and recursive searches that
 * must skip sensitive names and protected folders.
 */

let base: string;
let ws: string;
let secret: string;
let pack: WorkspacePack;
const packs: WorkspacePack[] = [];

function git(cwd: string, ...args: string[]): string {
  return execFileSync(
    'git',
    ['-c', 'user.name=t', '-c', 'user.email=t@example.com', '-c', 'init.defaultBranch=main', ...args],
    {
      cwd,
      encoding: 'utf8',
      env: { PATH: process.env['PATH'] ?? '/usr/bin:/bin', HOME: '/nonexistent', GIT_CONFIG_NOSYSTEM: '1' },
    },
  );
}

function makePack(options: Partial<WorkspaceOptions> = {}): WorkspacePack {
  const p = createWorkspacePack({ root: ws, protected: ['private'], denylist: ['*.sqlite'], ...options });
  packs.push(p);
  return p;
}

function run(
  argv: string[],
  p: WorkspacePack = pack,
  cwd = '.',
): Promise<{ stdout: string; stderr: string; exit_code: number }> {
  const tool = p.tools.find((t) => t.name === 'shell.run_command');
  if (tool === undefined) throw new Error('shell.run_command missing');
  return tool.invoke({ argv, cwd }, { signal: new AbortController().signal }) as Promise<{
    stdout: string;
    stderr: string;
    exit_code: number;
  }>;
}

/** Everything an attack could change: the files in the workspace (but .git's own bookkeeping) and the repository config. */
function state(): string {
  const names = readdirSync(ws).sort().join(',');
  return `${names}\n${readFileSync(join(ws, 'a.txt'), 'utf8')}\n${readFileSync(join(ws, '.git', 'config'), 'utf8')}`;
}

beforeAll(() => {
  base = realpathSync(mkdtempSync(join(tmpdir(), 'agentmesh-ws-opt-')));
  ws = join(base, 'ws');
  secret = `SECRET-${randomUUID()}`;
  mkdirSync(join(ws, 'src'), { recursive: true });
  mkdirSync(join(ws, '.agentmesh'));
  mkdirSync(join(ws, 'private'));
  mkdirSync(join(ws, 'keys'));
  mkdirSync(join(ws, 'config'));
  writeFileSync(join(ws, 'a.txt'), 'hello\n');
  writeFileSync(join(ws, 'src', 'x.ts'), 'export const x = 1;\n');
  writeFileSync(join(ws, '.env'), `OPENAI_API_KEY=${secret}\n`);
  writeFileSync(join(ws, 'config', '.Env.local'), secret);
  writeFileSync(join(ws, 'keys', 'server.PEM'), secret);
  writeFileSync(join(ws, 'ID_ED25519'), secret);
  writeFileSync(join(ws, 'db.SQLITE'), secret);
  writeFileSync(join(ws, '.agentmesh', 'state.json'), secret);
  writeFileSync(join(ws, 'private', 'notes.txt'), secret);
  git(ws, 'init', '-q');
  git(ws, 'add', 'a.txt', 'src/x.ts', '.env', 'private/notes.txt');
  git(ws, 'commit', '-q', '-m', 'init');
  pack = makePack();
});

afterAll(async () => {
  for (const p of packs) await p.close();
  rmSync(base, { recursive: true, force: true });
});

interface RefusedCase {
  argv: string[];
  rule: string;
  /** Allow-list for the case; the default allow-list when absent. */
  allow?: string[][];
}

/** argv that must be refused under the default allow-list (or the broader prefix named), with the rule that fires. */
const REFUSED: readonly RefusedCase[] = [
  {
    argv: ['git', 'log', '-1', '--format=[core]%n\tfsmonitor=touch PWNED_GIT', '--output=.git/config'],
    rule: 'git_option',
  },
  { argv: ['git', 'diff', '--output=a.txt'], rule: 'git_option' },
  { argv: ['git', 'diff', '--output', 'a.txt'], rule: 'git_option' },
  { argv: ['git', 'log', '--outp=a.txt'], rule: 'git_option' },
  { argv: ['git', 'show', '--out=a.txt'], rule: 'git_option' },
  { argv: ['git', 'log', '-p', '--no-ext-diff', '--ext-diff'], rule: 'git_option' },
  { argv: ['git', 'diff', '--textconv'], rule: 'git_option' },
  { argv: ['git', 'diff', '--no-index', 'a.txt', 'src/x.ts'], rule: 'git_option' },
  { argv: ['git', 'log', '--git-dir=.git'], rule: 'git_option' },
  { argv: ['git', 'status', '--work-tree=src'], rule: 'git_option' },
  { argv: ['git', 'log', '--exec-path=src'], rule: 'git_option' },
  { argv: ['git', 'log', '--open-files-in-pager=touch'], rule: 'git_option' },
  { argv: ['git', 'log', '-O.git/config'], rule: 'git_option' },
  { argv: ['git', 'log', '-pO', 'a.txt'], rule: 'git_option' },
  { argv: ['git', 'log', '-o', 'a.txt'], rule: 'git_option' },
  { argv: ['git', 'show', 'HEAD:.env'], rule: 'sensitive_name' },
  { argv: ['git', 'log', '-L1,1:.env'], rule: 'sensitive_name' },
  { argv: ['git', 'log', '--', '.env'], rule: 'sensitive_name' },
  { argv: ['git', '-c', 'core.fsmonitor=touch PWNED', 'status'], rule: 'argv_not_allowed' },
  { argv: ['git', '-c', 'core.fsmonitor=touch PWNED', 'status'], rule: 'git_option', allow: [['git']] },
  { argv: ['git', '--exec-path=src', 'status'], rule: 'git_option', allow: [['git']] },
  { argv: ['git', '-C', 'src', 'status'], rule: 'git_option', allow: [['git']] },
  { argv: ['git', '--config-env=core.pager=PATH', 'log'], rule: 'git_option', allow: [['git']] },
  { argv: ['git', 'fetch', '--upload-pack=touch PWNED', 'origin'], rule: 'git_option', allow: [['git']] },
  { argv: ['git', 'fetch', '--upl=touch PWNED', 'origin'], rule: 'git_option', allow: [['git']] },
  { argv: ['GIT_CONFIG_PARAMETERS=core.fsmonitor=touch', 'git', 'status'], rule: 'argv_not_allowed' },
  { argv: ['rg', '--pre', 'sh', 'x'], rule: 'command_option' },
  { argv: ['rg', '--pre=sh', 'x'], rule: 'command_option' },
  { argv: ['rg', '--pre-glob=*', 'x'], rule: 'command_option' },
  { argv: ['rg', '-uuu', 'x'], rule: 'command_option' },
  { argv: ['rg', '-iu', 'x'], rule: 'command_option' },
  { argv: ['rg', '--hidden', 'x'], rule: 'command_option' },
  { argv: ['rg', '--no-ignore', 'x'], rule: 'command_option' },
  { argv: ['rg', '-z', 'x'], rule: 'command_option' },
  { argv: ['rg', '--search-zip', 'x'], rule: 'command_option' },
  { argv: ['rg', '--hostname-bin=touch', 'x'], rule: 'command_option' },
  { argv: ['rg', '--replace=y', 'x'], rule: 'command_option' },
  { argv: ['rg', '-g', '--pre=sh', 'x'], rule: 'command_option' },
  { argv: ['grep', '--fil=a.txt', 'x'], rule: 'command_option' },
  { argv: ['grep', '-rX', 'x', '.'], rule: 'command_option' },
  { argv: ['grep', '-e', '--exclude-from=a.txt', '-r', '.'], rule: 'command_option' },
  { argv: ['grep', '--color', 'x', '-f'], rule: 'command_option' },
  { argv: ['grep', '-rf.env', '-o', '.'], rule: 'command_option' },
  { argv: ['rg', '-if.env', 'x'], rule: 'command_option' },
  { argv: ['ls', '--hid=x'], rule: 'command_option' },
  { argv: ['ls', '-lH', 'src'], rule: 'command_option' },
  { argv: ['wc', '--files0-from=a.txt'], rule: 'command_option' },
  { argv: ['file', '-C', '-m', 'a.txt'], rule: 'command_option' },
  { argv: ['file', '-z', 'a.txt'], rule: 'command_option' },
  { argv: ['head', '--lin=1', 'a.txt'], rule: 'command_option' },
  { argv: ['tail', '--pid'], rule: 'command_option' },
  {
    argv: ['node', '--version', '-e', 'require("fs").writeFileSync("PWNED_NODE", "")'],
    rule: 'command_option',
  },
  { argv: ['npm', '--version', 'exec', 'touch', 'PWNED_NPM'], rule: 'command_option' },
  { argv: ['find', '.', '-exec', 'touch', 'PWNED_FIND', '+'], rule: 'command_option', allow: [['find']] },
  { argv: ['find', '--', '.', '-delete'], rule: 'command_option', allow: [['find']] },
  { argv: ['find', '.', '-fprint', 'a.txt'], rule: 'command_option', allow: [['find']] },
  { argv: ['find', '.', '-execdir', 'touch', 'PWNED_FIND', '+'], rule: 'command_option', allow: [['find']] },
];

describe('shell.run_command refuses options that write files, run programs or widen what is read', () => {
  it('has at least 50 cases', () => {
    expect(REFUSED.length).toBeGreaterThanOrEqual(50);
  });

  it.each(REFUSED.map((c) => ({ ...c, name: JSON.stringify(c.argv) })))(
    '$name',
    async ({ argv, rule, allow }) => {
      const before = state();
      const p = allow === undefined ? pack : makePack({ allow_argv_prefixes: allow });
      const outcome = await run(argv, p).then(
        (value) => ({ ok: true as const, value }),
        (error: unknown) => ({ ok: false as const, error }),
      );
      expect(outcome.ok, `expected a refusal, got ${JSON.stringify(outcome)}`).toBe(false);
      const error = (outcome as { error: unknown }).error as AgentMeshError;
      expect(error).toBeInstanceOf(AgentMeshError);
      expect(error.code).toBe('permission_denied');
      expect(error.details?.['rule'], error.message).toBe(rule);
      expect(state()).toBe(before);
    },
  );
});

describe('the git fsmonitor attack', () => {
  it('cannot write .git/config, and git status runs no hook', async () => {
    const config = readFileSync(join(ws, '.git', 'config'), 'utf8');
    await expect(
      run(['git', 'log', '-1', '--format=[core]%n\tfsmonitor=touch PWNED_GIT', '--output=.git/config']),
    ).rejects.toMatchObject({ code: 'permission_denied', details: { rule: 'git_option' } });
    const status = await run(['git', 'status']);
    expect(status.exit_code).toBe(0);
    expect(readFileSync(join(ws, '.git', 'config'), 'utf8')).toBe(config);
    expect(existsSync(join(ws, 'PWNED_GIT'))).toBe(false);
  });

  it('runs no fsmonitor hook or external diff that a repository config already names', async () => {
    const repo = join(base, 'seeded');
    mkdirSync(repo);
    git(repo, 'init', '-q');
    writeFileSync(join(repo, 'f.txt'), 'one\n');
    git(repo, 'add', 'f.txt');
    git(repo, 'commit', '-q', '-m', 'one');
    writeFileSync(join(repo, 'f.txt'), 'two\n');
    const configPath = join(repo, '.git', 'config');
    const clean = readFileSync(configPath, 'utf8');
    writeFileSync(
      configPath,
      `${clean}[core]\n\tfsmonitor = touch PWNED_GIT\n[diff]\n\texternal = touch PWNED_DIFF\n`,
    );
    git(repo, 'status');
    expect(existsSync(join(repo, 'PWNED_GIT')), 'the seeded hook runs under plain git').toBe(true);
    rmSync(join(repo, 'PWNED_GIT'));
    const seeded = createWorkspacePack({ root: repo });
    packs.push(seeded);
    expect((await run(['git', 'status'], seeded)).stdout).toMatch(/f\.txt/);
    expect((await run(['git', 'diff'], seeded)).stdout).toMatch(/\+two/);
    expect(readdirSync(repo).filter((n) => n.startsWith('PWNED'))).toEqual([]);
  });
});

describe('recursive reads skip what the fs tools hide', () => {
  it('grep -r prints no sensitive file or protected folder, even when asked to include them', async () => {
    for (const argv of [
      ['grep', '-r', secret, '.'],
      ['grep', '-rn', '--include=.*', '--include=*', secret, '.'],
      ['grep', '-r', '-e', secret, '--', 'keys', 'config'],
      ['grep', '-d', 'recurse', secret, '.'],
    ]) {
      const out = await run(argv);
      expect(out.stdout, JSON.stringify(argv)).toBe('');
      expect(out.exit_code, JSON.stringify(argv)).toBe(1);
    }
    expect((await run(['grep', '-rn', 'hello', '.'])).stdout).toMatch(/^\.\/a\.txt:1:hello$/m);
  });

  it('ls -laR lists no sensitive name or protected folder', async () => {
    const out = await run(['ls', '-laR', '--ignore=.git']);
    expect(out.exit_code).toBe(0);
    expect(out.stdout).toMatch(/a\.txt/);
    expect(out.stdout).toMatch(/x\.ts/);
    for (const hidden of [
      '.env',
      '.Env.local',
      'server.PEM',
      'ID_ED25519',
      'db.SQLITE',
      '.agentmesh',
      'state.json',
      'private',
    ]) {
      expect(out.stdout).not.toContain(hidden);
    }
  });

  it('git log -p and git show leave sensitive and protected files out, from any folder', async () => {
    for (const [argv, cwd] of [
      [['git', 'log', '-p'], '.'],
      [['git', 'show', 'HEAD'], '.'],
      [['git', 'log', '-p'], 'src'],
      [['git', 'log', '-p', '--', ':(top)private', ':(top,icase).ENV'], 'src'],
    ] as const) {
      const out = await run([...argv], pack, cwd);
      expect(out.exit_code, out.stderr).toBe(0);
      expect(out.stdout).not.toContain(secret);
    }
    expect((await run(['git', 'log', '-p'])).stdout).toContain('export const x');
  });

  it("rg gets exclusion globs after the caller's own, and no config file", async () => {
    const runtime = createWorkspaceRuntime({ root: ws, protected: ['private'] });
    const { args } = await planCommand(runtime, ['rg', '-n', '-g', '.env', 'x', '--', 'src'], []);
    const end = args.indexOf('--');
    expect(args.slice(0, 4)).toEqual(['-n', '-g', '.env', 'x']);
    expect(args.slice(end)).toEqual(['--', 'src']);
    const added = args.slice(4, end);
    expect(added).toContain('--no-config');
    for (const glob of [
      '!.[eE][nN][vV]*',
      '!*.[pP][eE][mM]',
      '!.[aA][gG][eE][nN][tT][mM][eE][sS][hH]',
      '!private'.replace(/[a-z]/g, (c) => `[${c}${c.toUpperCase()}]`),
    ]) {
      expect(added).toContain(`--iglob=${glob}`);
    }
  });
});

describe('what the default allow-list still does', () => {
  it('runs the everyday forms', async () => {
    expect((await run(['git', 'log', '--oneline', '-n', '1'])).stdout).toMatch(/init/);
    expect((await run(['git', 'log', '-L1,1:a.txt'])).stdout).toMatch(/\+hello/);
    writeFileSync(join(ws, 'a.txt'), 'hello\nworld\n');
    expect((await run(['git', 'diff', 'a.txt'])).stdout).toMatch(/\+world/);
    expect((await run(['git', 'diff', '--stat', '--', 'a.txt'])).stdout).toMatch(/a\.txt/);
    expect((await run(['git', 'status', '--short'], pack, 'src')).stdout).toMatch(/M \.\.\/a\.txt/);
    git(ws, 'checkout', '-q', '--', 'a.txt');
    expect((await run(['head', '-n', '1', 'a.txt'])).stdout).toBe('hello\n');
    expect((await run(['tail', '-1', 'a.txt'])).stdout).toBe('hello\n');
    expect((await run(['wc', '-l', 'a.txt'])).stdout).toMatch(/^1 a\.txt/);
    expect((await run(['cat', '-n', 'a.txt'])).stdout).toMatch(/1\thello/);
    expect((await run(['grep', '-c', 'hello', 'a.txt'])).stdout).toBe('1\n');
    expect((await run(['ls', '-la', 'src'])).stdout).toMatch(/x\.ts/);
    expect((await run(['echo', '--output=x', '-c'])).stdout).toBe('--output=x -c\n');
    expect((await run(['node', '--version'])).stdout).toMatch(/^v\d+/);
  });

  it('folds denylist globs into case-insensitive shell patterns that never hide less', () => {
    expect(foldedGlob('.env*')).toBe('.[eE][nN][vV]*');
    expect(foldedGlob('secrets.{yml,yaml}')).toBe('[sS][eE][cC][rR][eE][tT][sS].*');
    expect(foldedGlob('id_[rd]sa**')).toBe('[iI][dD]_?[sS][aA]*');
  });
});
